"""A loopback OpenAI-compatible chat-completions server for the end-to-end
test and the benchmark: binds 127.0.0.1 only, records every request body,
and answers at once, streaming (SSE chunks, a usage chunk, `[DONE]`) when
asked to, as Hermes always does for its main loop.

What it answers, from the request:
* `max_tokens` or `max_completion_tokens` below 16: HTTP 400, as real APIs
  refuse a cap too small for any answer (OpenClaw sends 1 when tool schemas
  fill its window);
* a request without tools that is not streamed: a summary call — `lossless`'s
  (its system prompt says so; it came through the plugin's reverse
  `complete`) gets `ENGINE_SUMMARY`, Hermes's built-in compressor's a fixed
  summary;
* the turn's user message says `TOOLS n`: `n` rounds of one `read_file`
  call each (of `tool_path`), then the answer;
* it says `CALL <tool>` and the request offers `<tool>`: one call of it
  (arguments `tool_args[<tool>]`, else `{"text": <the question>}`), then
  the answer;
* otherwise the answer: `answer to "<the question>": ` padded with
  `pad` characters of prose, so a session grows quickly.
Each answer carries reasoning (`reasoning_content`), as thinking models do.
"""

from __future__ import annotations

import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Optional

PROSE = "the quick brown fox jumps over the lazy dog "
SUMMARY = "## Goal\nfake summary of the earlier turns\n## Progress\nnothing important"
ENGINE_SUMMARY = "fake engine summary of the earlier turns"
ENGINE_SUMMARY_PROMPT = "You summarize conversation history for ctxbox's"
"""How the system prompt of an engine's summary request begins (`lossless`'s)."""
MIN_OUTPUT_TOKENS = 16
"""The smallest output cap the fake model accepts."""


class FakeModel:
    """The server, running in a thread; `close()` stops it."""

    def __init__(self, pad: int = 0, tool_path: str = "/dev/null") -> None:
        self.pad = pad
        self.tool_path = tool_path
        self.tool_args: dict[str, dict] = {}
        """The arguments of a `CALL <tool>`, by tool."""
        self.tool_calls = 0
        """How many of its streamed answers were tool calls."""
        self.requests: list[dict] = []
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True, name="fake-model")
        self._thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def chat_requests(self) -> list[dict]:
        """The streamed main-loop requests, in order."""
        with self._lock:
            return [request for request in self.requests if request.get("stream")]

    def engine_summary_requests(self) -> list[dict]:
        """The summary requests an engine made (through the plugin)."""
        with self._lock:
            return [request for request in self.requests if is_engine_summary(request)]

    def answer(self, body: dict) -> dict:
        """`{"content": text}`, `{"tool": name, "args": json}` or
        `{"refuse": why}` for a request."""
        with self._lock:
            self.requests.append(body)
            index = len(self.requests)
        messages = body.get("messages") or []
        for cap in ("max_tokens", "max_completion_tokens"):
            if isinstance(body.get(cap), int) and body[cap] < MIN_OUTPUT_TOKENS:
                return {"refuse": f"{cap} must be at least {MIN_OUTPUT_TOKENS}, got {body[cap]}"}
        if not body.get("stream") and not body.get("tools"):
            return {"content": ENGINE_SUMMARY if is_engine_summary(body) else SUMMARY}
        question, tool_results = "", 0
        for message in messages:
            if message.get("role") == "user":
                question, tool_results = _text(message.get("content")), 0
            elif message.get("role") == "tool":
                tool_results += 1
        decided = self._decide(body, index, question, tool_results)
        if "tool" in decided and body.get("stream"):
            with self._lock:
                self.tool_calls += 1
        return decided

    def _decide(self, body: dict, index: int, question: str, tool_results: int) -> dict:
        named = re.search(r"CALL (\S+)", question)
        offered = {tool.get("function", {}).get("name") for tool in body.get("tools") or []}
        if named and named.group(1) in offered and tool_results == 0:
            args = self.tool_args.get(named.group(1), {"text": question})
            return {"tool": named.group(1), "args": json.dumps(args), "id": f"call_{index}"}
        wanted = re.search(r"TOOLS (\d+)", question)
        if wanted and tool_results < int(wanted.group(1)) and body.get("tools"):
            return {"tool": "read_file", "args": json.dumps({"path": self.tool_path}), "id": f"call_{index}"}
        asked = question.rsplit("\n\n", 1)[-1][:80]  # a note may precede the question
        return {"content": f'answer to "{asked}": ' + (PROSE * (self.pad // len(PROSE) + 1))[: self.pad]}


def _handler(model: FakeModel) -> type:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args) -> None:
            pass

        def do_GET(self) -> None:
            # 404 everywhere but the model list: a 200 on /api/v1/models
            # would make Hermes treat the server as LM Studio.
            if self.path.rstrip("/") in ("/v1/models", "/models"):
                self._json(200, {"object": "list", "data": [{"id": "fake-model", "object": "model"}]})
            else:
                self._json(404, {"error": {"message": "not found"}})

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length)
            if self.path.rstrip("/") not in ("/v1/chat/completions", "/chat/completions"):
                self._json(404, {"error": {"message": f"not found: {self.path}"}})
                return
            body = json.loads(raw or b"{}")
            decided = model.answer(body)
            if "refuse" in decided:
                self._json(400, {"error": {"message": decided["refuse"], "type": "invalid_request_error"}})
                return
            prompt_tokens = max(1, len(json.dumps(body.get("messages", []))) // 4)
            usage = {"prompt_tokens": prompt_tokens, "completion_tokens": 7, "total_tokens": prompt_tokens + 7}
            if "tool" in decided:
                call = {"id": decided["id"], "type": "function",
                        "function": {"name": decided["tool"], "arguments": decided["args"]}}
                message, finish = {"role": "assistant", "content": None, "tool_calls": [call]}, "tool_calls"
            else:
                message, finish = {"role": "assistant", "content": decided["content"]}, "stop"
            message["reasoning_content"] = "thinking it over (fake)"
            if not body.get("stream"):
                self._json(200, {"id": "chatcmpl-fake", "object": "chat.completion", "created": 0,
                                 "model": body.get("model", "fake-model"),
                                 "choices": [{"index": 0, "message": message, "finish_reason": finish}],
                                 "usage": usage})
                return
            self._stream(body.get("model", "fake-model"), message, finish, usage)

        def _stream(self, model_name: str, message: dict, finish: str, usage: dict) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-cache")
            self.send_header("Connection", "close")
            self.end_headers()
            base = {"id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": 0, "model": model_name}

            def chunk(delta: Optional[dict] = None, finish_reason: Optional[str] = None, **extra) -> None:
                choices = [] if delta is None else [{"index": 0, "delta": delta, "finish_reason": finish_reason}]
                event = {**base, "choices": choices, **extra}
                self.wfile.write(b"data: " + json.dumps(event).encode() + b"\n\n")

            chunk({"role": "assistant", "content": ""})
            chunk({"reasoning_content": message["reasoning_content"]})
            if message.get("tool_calls"):
                chunk({"tool_calls": [{**message["tool_calls"][0], "index": 0}]})
            else:
                content = message["content"]
                for at in range(0, len(content), 400):
                    chunk({"content": content[at:at + 400]})
            chunk({}, finish)
            chunk(None, usage=usage)
            self.wfile.write(b"data: [DONE]\n\n")
            self.wfile.flush()
            self.close_connection = True

        def _json(self, status: int, body: dict) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    return Handler


def is_engine_summary(request: dict) -> bool:
    """Whether `request` is an engine's summary request."""
    return any(message.get("role") == "system" and _text(message.get("content")).startswith(ENGINE_SUMMARY_PROMPT)
               for message in request.get("messages") or [])


def _text(content) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(part.get("text", "") for part in content if isinstance(part, dict))
    return ""
