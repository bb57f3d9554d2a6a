// A scripted stand-in for `ctxbox serve`, run as its own process by the unit
// tests: `node fake-sidecar.js LOG OPTIONS_FILE` (a JSON `Options`). It
// speaks PROTOCOL.md (version 1 like today's server, or 2 with reverse calls
// and tools) and
// appends every line it receives to LOG (`{"at": ms, "line": {...}}`), so a
// test can check what the plugin sent, answers to reverse requests included.
//
// What it does, by method:
// - `hello`: with `protocol: 2` answers the newest version both speak; with
//   any other it refuses every version but that one, as today's server does
//   with 1.
// - sessions: counts each session's messages as the server would: a `sync`
//   is refused `history-mismatch` (with `data.length`) past what it holds or
//   when it would leave fewer messages unless marked `reset`; `commitTurn`
//   and `ingest` add theirs; every answer's `length` is that count. A
//   method named in `evictBefore` finds its session given up when it comes
//   without a `sync`: `commitTurn` is then refused `session-unknown`,
//   `ingest` starts the session again from its messages.
// - `assemble`: keeps every message, or with `keepLast` a note and the last
//   `keepLast` messages; `session-busy` (or `busyCode`) for the first
//   `busy[sessionId]` attempts of a session.
// - `commitTurn`, `afterTurn`, `ingest`: answer as if done.
// - `bootstrap`, `maintain`, `compact`: first asks the client a reverse
//   `complete` (for `compact`, as its `customInstructions` say: a JSON
//   `Reverse`) and answers with the client's answer as JSON in `reason`;
//   `compact` answers `compact` at once instead when that option is set.
// - `tools`: `tools` (version 2); none after a failed tool call when
//   `quarantineOnError`.
// - `callTool`: `grep` echoes its arguments and session; `ask` asks a
//   reverse `complete` with `arguments.question` and answers its text;
//   `hang` never answers; any other name answers `isError`.
// Any method named in `delayMs` answers that much later.

import { appendFileSync, readFileSync } from "node:fs";
import { createInterface } from "node:readline";

interface Options {
  protocol: number;
  tools?: { name: string; description: string; parameters: object }[];
  busy?: Record<string, number>;
  /** The error code `busy` answers with (default `session-busy`). */
  busyCode?: string;
  quarantineOnError?: boolean;
  /** What `compact` answers (no reverse request). */
  compact?: object;
  /** Answer delays by method, ms. */
  delayMs?: Record<string, number>;
  /** `assemble` answers a note and the last this many messages. */
  keepLast?: number;
  /** Methods that, without a `sync`, find their session given up. */
  evictBefore?: string[];
}

/** A reverse `complete` as the fake sends it, and what else to do around it. */
interface Reverse {
  method?: string;
  deadlineMs?: number;
  /** Sends the server's `cancel` this long after the request. */
  cancelAfterMs?: number;
  params?: Record<string, unknown>;
}

type Request = { id: number | string; method: string; params?: Record<string, any>; deadlineMs?: number };

const [logPath, optionsPath] = process.argv.slice(2);
const options = JSON.parse(readFileSync(optionsPath, "utf8")) as Options;
let protocol = 0;
let reverseIds = 0;
let quarantined = false;
const attempts = new Map<string, number>();
/** How many messages each session holds. */
const held = new Map<string, number>();

/** Whether `method` finds its session given up (`evictBefore`); forgets it if so. */
function evicted(method: string, params: Record<string, any>): boolean {
  if (params.sync || !options.evictBefore?.includes(method)) return false;
  held.delete(params.sessionId);
  return true;
}

/** Applies a request's `sync` to its session, as the server does (without digests); throws its refusal. */
function applySync(params: Record<string, any>): void {
  const sync = params.sync;
  if (!sync) return;
  const length = held.get(params.sessionId) ?? 0;
  const leaves = sync.base + sync.messages.length;
  if (sync.base > length || (!sync.reset && leaves < length)) {
    throw { code: "history-mismatch", message: `the server holds ${length} messages and the sync would leave ${leaves}`, data: { length } };
  }
  held.set(params.sessionId, leaves);
}
const waiting = new Map<string, (answer: unknown) => void>();

const write = (message: object) => process.stdout.write(`${JSON.stringify(message)}\n`);

/** Asks the client `reverse`; resolves with its answer line (or `"no answer"` a while after the deadline). */
function ask(requestId: number | string, params: Record<string, any>, reverse: Reverse): Promise<unknown> {
  const id = `srv-${++reverseIds}`;
  const deadlineMs = reverse.deadlineMs ?? 5_000;
  write({
    id,
    method: reverse.method ?? "complete",
    deadlineMs,
    params: {
      sessionId: params.sessionId,
      sessionKey: params.sessionKey,
      engine: params.engine,
      requestId,
      purpose: "summarize a chunk",
      systemPrompt: "You summarize for the fake sidecar",
      messages: [{ role: "user", content: "the chunk to summarize" }],
      maxTokens: 64,
      ...reverse.params,
    },
  });
  if (reverse.cancelAfterMs !== undefined) {
    setTimeout(() => write({ id: null, method: "cancel", params: { target: id } }), reverse.cancelAfterMs);
  }
  return new Promise((resolve) => {
    waiting.set(id, resolve);
    setTimeout(() => {
      if (waiting.delete(id)) resolve("no answer");
    }, deadlineMs + 1_000);
  });
}

async function serve(request: Request): Promise<object> {
  const params = request.params ?? {};
  switch (request.method) {
    case "hello": {
      const asked = params.protocol;
      if (options.protocol !== 2 && asked !== options.protocol) {
        throw { code: "unsupported-protocol", message: `protocol ${asked} is not spoken here`, data: { supported: [options.protocol] } };
      }
      protocol = Math.min(asked, options.protocol);
      return { protocol, server: "fake", ...(protocol >= 2 ? { capabilities: ["complete", "tools"] } : {}) };
    }
    case "info":
      return { selected: params.engine, serving: params.engine, info: { id: params.engine, ownsCompaction: true } };
    case "assemble": {
      const count = (attempts.get(params.sessionId) ?? 0) + 1;
      attempts.set(params.sessionId, count);
      if (count <= (options.busy?.[params.sessionId] ?? 0)) {
        throw { code: options.busyCode ?? "session-busy", message: `session ${params.sessionId} is busy (${options.busyCode ?? "leased by another host"})` };
      }
      applySync(params);
      const length = held.get(params.sessionId) ?? 0;
      const keep = Math.max(0, length - (options.keepLast ?? length));
      const items = keep > 0 ? [{ insert: { role: "custom", customType: "fake", content: `left out ${keep}`, display: false } }, { keep: [keep, length] }] : [{ keep: [0, length] }];
      return { items, estimatedTokens: 1, length, servedBy: "fake" };
    }
    case "bootstrap":
      return { bootstrapped: true, reason: JSON.stringify(await ask(request.id, params, {})), servedBy: "fake" };
    case "maintain":
      return { changed: false, bytesFreed: 0, rewrittenEntries: 0, reason: JSON.stringify(await ask(request.id, params, {})) };
    case "compact": {
      if (options.compact) return options.compact;
      const reverse = JSON.parse(params.customInstructions ?? "{}") as Reverse;
      const answer = await ask(request.id, params, reverse);
      return { ok: true, compacted: false, reason: JSON.stringify(answer), result: null, failure: null };
    }
    case "commitTurn": {
      if (evicted(request.method, params)) {
        throw { code: "session-unknown", message: "the server does not hold this session", data: { length: 0 } };
      }
      applySync(params);
      const length = (held.get(params.sessionId) ?? 0) + params.messages.length;
      held.set(params.sessionId, length);
      return { status: "committed", length };
    }
    case "ingest": {
      evicted(request.method, params);
      const length = (held.get(params.sessionId) ?? 0) + params.messages.length;
      held.set(params.sessionId, length);
      return { ingestedCount: params.messages.length, length };
    }
    case "afterTurn":
      applySync(params);
      return { length: held.get(params.sessionId) ?? 0 };
    case "tools":
      if (protocol < 2) throw { code: "unknown-method", message: "no method `tools`" };
      return { tools: quarantined ? [] : (options.tools ?? []), servedBy: "fake" };
    case "callTool": {
      if (protocol < 2) throw { code: "unknown-method", message: "no method `callTool`" };
      const session = `${params.sessionId}/${params.sessionKey}`;
      switch (params.name) {
        case "grep":
          return { content: `grep ${JSON.stringify(params.arguments)} in ${session}`, isError: false, servedBy: "fake" };
        case "ask": {
          const answer = (await ask(request.id, params, { params: { messages: [{ role: "user", content: params.arguments.question }] } })) as {
            result?: { text: string };
          };
          return { content: answer.result?.text ?? JSON.stringify(answer), isError: false, servedBy: "fake" };
        }
        case "hang":
          return new Promise(() => undefined);
        default:
          quarantined = options.quarantineOnError === true;
          return { content: `the engine failed in ${params.name}: boom`, isError: true, servedBy: "legacy" };
      }
    }
    case "cancel":
      return { cancelled: false };
    default:
      throw { code: "unknown-method", message: `no method \`${request.method}\`` };
  }
}

createInterface({ input: process.stdin })
  .on("line", (line) => {
    appendFileSync(logPath, `${JSON.stringify({ at: Date.now(), line: JSON.parse(line) })}\n`);
    const message = JSON.parse(line);
    if (typeof message.method !== "string") {
      waiting.get(message.id)?.(message);
      waiting.delete(message.id);
      return;
    }
    const delay = options.delayMs?.[message.method] ?? 0;
    new Promise((resolve) => setTimeout(resolve, delay)).then(() => serve(message)).then(
      (result) => write({ id: message.id, result }),
      (error) => write({ id: message.id, error }),
    );
  })
  .on("close", () => process.exit(0));
