"""Hermes's messages and the protocol's.

Hermes holds OpenAI chat-completions dicts (`role`, `content` as a string or
a multimodal list, `tool_calls`, `tool_call_id`, reasoning fields and its own
`_`-prefixed bookkeeping); `ctxbox serve` reads OpenClaw's `AgentMessage`
objects. `to_openclaw` gives the engine an accurate view of each message
(text, reasoning as thinking, images, tool calls and results paired by id)
and carries the whole Hermes message in its `hermes` field, which the server
keeps byte-for-byte; `from_openclaw` gives that message back unchanged. A
message an engine made up has no `hermes` field: it is rebuilt from its
OpenClaw fields, and notes and summaries become `_ctxbox_note` messages
(placed in the transcript by `prompt.py`).
"""

from __future__ import annotations

import copy
import hashlib
import json
from typing import Any, Optional

HERMES_FIELD = "hermes"
"""The OpenClaw-side field carrying the original Hermes message."""

NOTE_KEY = "_ctxbox_note"
"""Marks a message an engine inserted (a note, a summary): its value is the
engine's kind of message. Hermes strips `_`-prefixed keys before requests
leave the process, so the model never sees it."""

VOLATILE_KEYS = frozenset({"_db_persisted"})
"""Hermes bookkeeping that changes after a message is written (its session
store stamps `_db_persisted`). Left out of what is sent and compared, and
never returned from compression, as Hermes's own compressor does."""

_STOP_REASONS = {"tool_calls": "toolUse", "function_call": "toolUse", "length": "length"}
_FINISH_REASONS = {"toolUse": "tool_calls", "length": "length"}


def to_openclaw(message: dict, tool_ids: Optional[dict[str, str]] = None) -> dict:
    """The OpenClaw message for a Hermes message. `tool_ids` (kept per
    session) maps every id a tool call goes by (`id`, `call_id`) to the one
    the engine sees, so a result naming either is paired with its call."""
    return convert(message, tool_ids)[0]


def convert(message: dict, tool_ids: Optional[dict[str, str]] = None) -> tuple[dict, str]:
    """`to_openclaw`, and the message's `hermes_digest`, from one
    serialization of it."""
    text = _serialized(message)
    original = json.loads(text)
    role = original.get("role")
    content = original.get("content")
    if NOTE_KEY in original:
        converted: dict = _custom(str(original[NOTE_KEY]), content)
    elif role == "user":
        converted = {"role": "user", "content": _blocks(content)}
    elif role == "assistant":
        converted = _assistant(original, tool_ids if tool_ids is not None else {})
    elif role == "tool":
        call_id = str(original.get("tool_call_id") or "")
        converted = {
            "role": "toolResult",
            "toolCallId": (tool_ids or {}).get(call_id, call_id),
            "toolName": str(original.get("tool_name") or original.get("name") or ""),
            "content": _blocks(content),
            "isError": False,
        }
    else:
        # `system`, `developer` and roles Hermes may add: a hidden custom
        # message, so the engine still counts it.
        converted = _custom(f"hermes-{role or 'message'}", content)
    converted[HERMES_FIELD] = original
    return converted, _fingerprint(text)


def from_openclaw(message: dict) -> dict:
    """The Hermes message for an OpenClaw message: the carried original when
    there is one (a fresh copy), else one rebuilt from the OpenClaw fields."""
    carried = message.get(HERMES_FIELD)
    if isinstance(carried, dict):
        return copy.deepcopy(carried)
    role = message.get("role")
    if role == "user":
        return {"role": "user", "content": _parts(message.get("content"))}
    if role == "assistant":
        return _hermes_assistant(message)
    if role == "toolResult":
        name = str(message.get("toolName") or "")
        return {
            "role": "tool",
            "tool_call_id": str(message.get("toolCallId") or ""),
            "name": name,
            "tool_name": name,
            "content": _parts(message.get("content")),
        }
    return {"role": "user", "content": _note_text(message), NOTE_KEY: _note_kind(message)}


def text_of(content: Any) -> str:
    """The text of a content value (a string, or the text parts of a list)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = []
        for part in content:
            if isinstance(part, str):
                texts.append(part)
            elif isinstance(part, dict) and isinstance(part.get("text"), str):
                texts.append(part["text"])
        return "\n".join(texts)
    return json.dumps(content, ensure_ascii=False)


def call_ids(tool_call: dict) -> set[str]:
    """Every id a result may name this tool call by."""
    return {str(tool_call[key]) for key in ("id", "call_id") if tool_call.get(key)}


def hermes_digest(message: dict) -> str:
    """A short fingerprint of a Hermes message, its volatile keys left out."""
    return _fingerprint(_serialized(message))


# -- Hermes to OpenClaw -------------------------------------------------------


def _serialized(message: dict) -> str:
    """`message` as JSON without its volatile keys (values JSON cannot hold
    become strings)."""
    stable = {key: value for key, value in message.items() if key not in VOLATILE_KEYS}
    return json.dumps(stable, ensure_ascii=False, default=str)


def _fingerprint(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:24]


def _canonical_call_id(tool_call: dict) -> str:
    """The id a tool call's results are paired by (`call_id`, else `id`), as
    Hermes itself resolves it."""
    return str(tool_call.get("call_id") or tool_call.get("id") or "")


def _assistant(original: dict, tool_ids: dict[str, str]) -> dict:
    blocks: list[dict] = []
    thinking = _reasoning_text(original)
    if thinking:
        blocks.append({"type": "thinking", "thinking": thinking})
    text = text_of(original.get("content"))
    if text:
        blocks.append({"type": "text", "text": text})
    for tool_call in original.get("tool_calls") or []:
        if not isinstance(tool_call, dict):
            continue
        canonical = _canonical_call_id(tool_call)
        for alias in call_ids(tool_call):
            tool_ids[alias] = canonical
        function = tool_call.get("function") if isinstance(tool_call.get("function"), dict) else {}
        blocks.append({
            "type": "toolCall",
            "id": canonical,
            "name": str(function.get("name") or ""),
            "arguments": _arguments(function.get("arguments")),
        })
    stop = _STOP_REASONS.get(str(original.get("finish_reason")), "stop")
    if original.get("tool_calls") and stop == "stop":
        stop = "toolUse"
    return {"role": "assistant", "content": blocks, "stopReason": stop}


def _reasoning_text(message: dict) -> str:
    """The reasoning the model wrote: `reasoning_content` when the provider
    sent it, else Hermes's own `reasoning` copy."""
    for key in ("reasoning_content", "reasoning"):
        value = message.get(key)
        if isinstance(value, str) and value.strip():
            return value
    return ""


def _arguments(arguments: Any) -> Any:
    """Tool-call arguments as JSON: Hermes keeps them as a JSON string."""
    if isinstance(arguments, str):
        try:
            return json.loads(arguments)
        except ValueError:
            return arguments
    return {} if arguments is None else arguments


def _custom(kind: str, content: Any) -> dict:
    return {"role": "custom", "customType": kind, "content": _blocks(content), "display": False}


def _blocks(content: Any) -> Any:
    """OpenClaw content (a string or blocks) for OpenAI content."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return json.dumps(content, ensure_ascii=False)
    return [_block(part) for part in content]


def _block(part: Any) -> dict:
    if isinstance(part, str):
        return {"type": "text", "text": part}
    if not isinstance(part, dict):
        return {"type": "text", "text": json.dumps(part, ensure_ascii=False)}
    kind = str(part.get("type") or "")
    if kind in ("text", "input_text", "output_text"):
        return {"type": "text", "text": str(part.get("text") or "")}
    if "image" in kind:
        return _image_block(part)
    # Audio, files and parts OpenAI may add: an unknown block, which the
    # engine's view leaves out (the message itself is carried whole).
    return {"type": kind or "unknown"}


def _image_block(part: dict) -> dict:
    image = part.get("image_url", part.get("url", ""))
    url = str(image.get("url") or "") if isinstance(image, dict) else str(image or "")
    if url.startswith("data:") and ";base64," in url:
        mime, data = url[5:].split(";base64,", 1)
        return {"type": "image", "data": data, "mimeType": mime}
    # A remote image: the engine counts it as an image all the same.
    return {"type": "image", "data": "", "mimeType": "", "url": url}


# -- OpenClaw to Hermes -------------------------------------------------------


def _note_text(message: dict) -> str:
    """What an engine-made message says, as plain text."""
    role = message.get("role")
    if role in ("compactionSummary", "branchSummary"):
        return str(message.get("summary") or "")
    if role == "bashExecution":
        text = f"Ran `{message.get('command', '')}`\n```\n{message.get('output', '')}\n```"
        code = message.get("exitCode")
        return text + (f"\n\nCommand exited with code {code}" if code not in (None, 0) else "")
    if "content" in message:
        return text_of(message.get("content"))
    return json.dumps(message, ensure_ascii=False)


def _hermes_assistant(message: dict) -> dict:
    texts: list[str] = []
    thinking: list[str] = []
    tool_calls: list[dict] = []
    for block in message.get("content") or []:
        if not isinstance(block, dict):
            continue
        kind = block.get("type")
        if kind == "text":
            texts.append(str(block.get("text") or ""))
        elif kind == "thinking":
            thinking.append(str(block.get("thinking") or ""))
        elif kind == "toolCall":
            arguments = block.get("arguments")
            tool_calls.append({
                "id": str(block.get("id") or ""),
                "call_id": str(block.get("id") or ""),
                "type": "function",
                "function": {
                    "name": str(block.get("name") or ""),
                    "arguments": arguments if isinstance(arguments, str)
                    else json.dumps(arguments if arguments is not None else {}, ensure_ascii=False),
                },
            })
    rebuilt: dict = {
        "role": "assistant",
        "content": "\n".join(texts),
        "reasoning": "\n".join(thinking) or None,
        "finish_reason": _FINISH_REASONS.get(str(message.get("stopReason")), "stop"),
    }
    if tool_calls:
        rebuilt["tool_calls"] = tool_calls
    return rebuilt


def _parts(content: Any) -> Any:
    """OpenAI content for OpenClaw content: a string when it is all text."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return json.dumps(content, ensure_ascii=False)
    if all(isinstance(block, dict) and block.get("type") == "text" for block in content):
        return "\n".join(str(block.get("text") or "") for block in content)
    parts = []
    for block in content:
        if not isinstance(block, dict):
            continue
        if block.get("type") == "text":
            parts.append({"type": "text", "text": str(block.get("text") or "")})
        elif block.get("type") == "image":
            url = block.get("url") or f"data:{block.get('mimeType', '')};base64,{block.get('data', '')}"
            parts.append({"type": "image_url", "image_url": {"url": url}})
    return parts


def _note_kind(message: dict) -> str:
    if message.get("role") == "custom":
        return str(message.get("customType") or "custom")
    return str(message.get("role") or "message")
