// A loopback OpenAI-compatible chat-completions server for the end-to-end
// test: records every request body, answers each with a streamed reply
// (SSE chunks, a usage chunk, [DONE]) of text or of one tool call, binds
// 127.0.0.1 only, and closes itself after `idleMs` without requests (long:
// a cold gateway on a loaded machine may take minutes to send its first).
// Like a real provider it refuses a request that leaves the answer fewer
// than MIN_COMPLETION_TOKENS (OpenClaw asks for 1 when the tool schemas and
// the prompt fill the window): such a turn fails instead of passing on a
// reply no real model would give.

import { createServer } from "node:http";

/** The fewest completion tokens a request may ask for. */
export const MIN_COMPLETION_TOKENS = 16;

/**
 * Starts the server. `reply(body, index)` gives answer `index`: its text, or
 * `{ toolCall: { name, arguments } }` to call a tool (`arguments` an object).
 * Resolves with { url, requests, refused, close }: `refused` holds the
 * requests refused for their `max_completion_tokens` (or `max_tokens`).
 */
export function startFakeModel({ reply, idleMs = 900_000 } = {}) {
  const requests = [];
  const refused = [];
  let idle;
  const server = createServer((req, res) => {
    clearTimeout(idle);
    idle = setTimeout(() => server.close(), idleMs);
    idle.unref();
    let body = "";
    req.on("data", (chunk) => (body += chunk));
    req.on("end", () => {
      if (req.method === "GET" && req.url?.endsWith("/models")) {
        res.writeHead(200, { "content-type": "application/json" });
        res.end(JSON.stringify({ object: "list", data: [{ id: "fake-1", object: "model" }] }));
        return;
      }
      if (req.method !== "POST" || !req.url?.endsWith("/chat/completions")) {
        res.writeHead(404).end();
        return;
      }
      let parsed;
      try {
        parsed = JSON.parse(body);
      } catch {
        res.writeHead(400).end("not JSON");
        return;
      }
      const limit = parsed.max_completion_tokens ?? parsed.max_tokens;
      if (typeof limit === "number" && limit < MIN_COMPLETION_TOKENS) {
        refused.push(parsed);
        res.writeHead(400, { "content-type": "application/json" });
        res.end(
          JSON.stringify({
            error: {
              message: `max_completion_tokens is ${limit}: at least ${MIN_COMPLETION_TOKENS} are needed for an answer (the prompt and the tool schemas leave no room in the context window)`,
              type: "invalid_request_error",
              param: "max_completion_tokens",
              code: "invalid_value",
            },
          }),
        );
        return;
      }
      const index = requests.length;
      requests.push(parsed);
      const answer = reply ? reply(parsed, index) : `reply ${index}`;
      const text = typeof answer === "string" ? answer : JSON.stringify(answer.toolCall.arguments);
      const id = `chatcmpl-${index}`;
      const chunk = (delta, finish = null, extra = {}) =>
        `data: ${JSON.stringify({ id, object: "chat.completion.chunk", created: 0, model: "fake-1", choices: [{ index: 0, delta, finish_reason: finish }], ...extra })}\n\n`;
      res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" });
      res.write(chunk({ role: "assistant", content: "" }));
      if (typeof answer === "string") {
        for (let at = 0; at < text.length; at += 400) res.write(chunk({ content: text.slice(at, at + 400) }));
        res.write(chunk({}, "stop"));
      } else {
        const call = { index: 0, id: `call_${index}`, type: "function", function: { name: answer.toolCall.name, arguments: "" } };
        res.write(chunk({ tool_calls: [call] }));
        res.write(chunk({ tool_calls: [{ index: 0, function: { arguments: text } }] }));
        res.write(chunk({}, "tool_calls"));
      }
      const promptTokens = Math.ceil(body.length / 4);
      const completionTokens = Math.ceil(text.length / 4);
      res.write(
        `data: ${JSON.stringify({ id, object: "chat.completion.chunk", created: 0, model: "fake-1", choices: [], usage: { prompt_tokens: promptTokens, completion_tokens: completionTokens, total_tokens: promptTokens + completionTokens } })}\n\n`,
      );
      res.end("data: [DONE]\n\n");
    });
  });
  return new Promise((resolve, reject) => {
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address();
      idle = setTimeout(() => server.close(), idleMs);
      idle.unref();
      resolve({
        url: `http://127.0.0.1:${port}/v1`,
        requests,
        refused,
        close: () => new Promise((done) => server.close(() => done())),
      });
    });
  });
}
