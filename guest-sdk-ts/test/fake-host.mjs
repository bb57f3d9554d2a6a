// A fake ctxbox host for the transpiled test engine: the `ctxbox:engine`
// imports over in-memory data, recording what the engine asked for, the
// `sql` import from fake-sql.mjs (node:sqlite behind the contract), and WASI
// from @bytecodealliance/preview2-shim.
import * as shim from "@bytecodealliance/preview2-shim";
import { Database, Statement } from "./fake-sql.mjs";

/** A host error the way a transpiled import reports one: thrown with a `payload`. */
function hostError(kind, message) {
  const error = new Error(message);
  error.payload = { kind, message };
  return error;
}

/**
 * `read-transcript-page` over `lines` (`{ entry, bytes }`, in order): the
 * cursor is the count read; a page holds what fits in `maxBytes`, and an
 * empty page names the bytes the next entry needs.
 */
function transcriptPage(lines, cursor, maxMessages, maxBytes) {
  const start = cursor === undefined ? 0 : Number(cursor);
  let end = start;
  let bytes = 0n;
  while (end < lines.length && end - start < maxMessages && bytes + lines[end].bytes <= maxBytes) {
    bytes += lines[end].bytes;
    end += 1;
  }
  const requiredBytes = end === start && end < lines.length ? lines[end].bytes : undefined;
  const entries = lines.slice(start, end).map((line) => line.entry);
  return {
    tag: "page",
    val: { cursor: String(end), entries, hasMore: end < lines.length, requiredBytes, serializedBytes: bytes },
  };
}

/** A history resource over `entries`, answering `range` in pages of at most `page` entries. */
export class History {
  constructor(entries, page = 2) {
    this.entries = entries;
    this.page = page;
  }
  len() { return this.entries.length; }
  entry(index) { return this.entries[index]; }
  range(start, end) { return this.entries.slice(start, Math.min(end, start + this.page)); }
  kind(index) { return this.entries[index]?.message.tag; }
  toolPairing(index) {
    const message = this.entries[index]?.message;
    if (!message) return undefined;
    if (message.tag === "assistant" && message.val.content.some((block) => block.tag === "tool-call")) {
      let last = index;
      while (this.entries[last + 1]?.message.tag === "tool-result") last += 1;
      return { tag: "tool-calls", val: last };
    }
    if (message.tag === "tool-result") {
      let call = index - 1;
      while (call >= 0 && this.entries[call].message.tag === "tool-result") call -= 1;
      return { tag: "tool-result", val: call >= 0 ? call : undefined };
    }
    return { tag: "none" };
  }
  find(id) {
    const at = this.entries.findIndex((entry) => entry.id === id);
    return at < 0 ? undefined : at;
  }
  tokens(start, end) { return BigInt(10 * (Math.min(end, this.entries.length) - start)); }
  /** The first start whose suffix fits and that no earlier call's results straddle, by brute force. */
  fittingSuffix(maxTokens) {
    const len = this.entries.length;
    const straddled = (cut) =>
      this.entries.slice(0, cut).some((_, index) => {
        const pairing = this.toolPairing(index);
        return pairing.tag === "tool-calls" && pairing.val >= cut;
      });
    for (let start = 0; start < len; start += 1) {
      if (this.tokens(start, len) <= maxTokens && !straddled(start)) return start;
    }
    return len;
  }
}

/** The words of an index query or document, lower-cased. */
const words = (text) => text.toLowerCase().split(/\s+/).filter((word) => word !== "");

/**
 * The fake host's searchable memory: documents by scope and id, the current
 * call's session (`fake.session`) owning the session scope. Matching is the
 * host's: every word of the query, case-insensitively, as a substring; hits
 * score by how often the words occur, snippets mark the first match `[` `]`.
 */
class FakeIndex {
  constructor(fake) {
    this.fake = fake;
    this.documents = new Map();
  }
  key(scope, id) {
    return `${scope === "session" ? `session/${this.fake.session}` : "engine"}/${id}`;
  }
  bytes() {
    let total = 0;
    for (const { text, metadata } of this.documents.values()) total += text.length + (metadata?.length ?? 0);
    return total;
  }
  put(scope, document) {
    const key = this.key(scope, document.id);
    const before = this.documents.get(key);
    this.documents.set(key, { ...document, sessionId: scope === "session" ? this.fake.session : undefined });
    if (this.bytes() > this.fake.indexQuotaBytes) {
      if (before) this.documents.set(key, before);
      else this.documents.delete(key);
      throw hostError("quota-exceeded", `the index would grow past ${this.fake.indexQuotaBytes} bytes`);
    }
  }
  delete(scope, id) {
    return this.documents.delete(this.key(scope, id));
  }
  search({ text, scope, limit, offset }) {
    const wanted = words(text);
    if (wanted.length === 0 || limit < 1 || limit > 100) throw hostError("invalid-argument", "a query needs 1 to 32 words and a limit of 1 to 100");
    const prefix = `session/${this.fake.session}/`;
    const hits = [];
    for (const [key, document] of this.documents) {
      // The engine scope finds every document; the session scope the session's.
      if (scope === "session" && !key.startsWith(prefix)) continue;
      const lower = document.text.toLowerCase();
      if (!wanted.every((word) => lower.includes(word))) continue;
      const score = wanted.reduce((sum, word) => sum + lower.split(word).length - 1, 0);
      const at = lower.indexOf(wanted[0]);
      const snippet = `${document.text.slice(0, at)}[${document.text.slice(at, at + wanted[0].length)}]${document.text.slice(at + wanted[0].length)}`;
      hits.push({ id: document.id, sessionId: document.sessionId, score, snippet, metadata: document.metadata });
    }
    hits.sort((a, b) => b.score - a.score || a.id.localeCompare(b.id));
    return { hits: hits.slice(offset, offset + limit), hasMore: hits.length > offset + limit };
  }
}

/** The fake model: `[model] ` and the last message, with token counts of a quarter of the characters. */
function defaultModel(request) {
  const text = `[model] ${request.messages.at(-1).text}`;
  const input = request.messages.reduce((sum, message) => sum + message.text.length, request.system?.length ?? 0);
  return { text, inputTokens: BigInt(Math.ceil(input / 4)), outputTokens: BigInt(Math.ceil(text.length / 4)), model: "fake-model" };
}

/**
 * The fake host: `logs`, `state`, `delegated`, `completions` (the requests
 * the model was asked) and `index` record what the engine did. Set
 * `modelError` or `indexError` to a host-error kind to make the model or the
 * index fail with it, `config` to the engine's configuration (JSON text), `indexQuotaBytes` to bound the index, `session` to the
 * session the next call is about (the index's session scope), `transcript`
 * to the lines `readTranscriptPage` reads (`{ entry, bytes }`) or
 * `transcriptUnavailable` to the reason it cannot; `pageReads` records the
 * `maxBytes` of each read.
 */
export function fakeHost() {
  const logs = [];
  const state = new Map();
  const delegated = [];
  const completions = [];
  const fake = {
    session: "s", modelError: undefined, indexError: undefined, indexQuotaBytes: Infinity, config: undefined,
    transcript: [], transcriptUnavailable: undefined, pageReads: [],
  };
  const index = new FakeIndex(fake);
  /** Runs an index operation unless `fake.indexError` says the index fails. */
  const indexCall = (run) => {
    if (fake.indexError) throw hostError(fake.indexError, `the index failed (${fake.indexError})`);
    return run();
  };
  const host = {
    log: (level, message) => logs.push({ level, message }),
    reportProgress: () => {},
    aborted: () => false,
    engineConfig: () => fake.config,
    runtimeSettings: () => undefined,
    estimateTokens: (entries) => BigInt(7 * entries.length),
    delegateCompaction: (params) => {
      delegated.push(params);
      return { ok: true, compacted: false, reason: "fake", tokensBefore: 0n };
    },
    summarize: () => { throw hostError("unavailable", "no summarizer configured"); },
    readTranscriptDelta: () => ({ tag: "missing" }),
    readTranscriptPage: (cursor, maxMessages, maxBytes) => {
      fake.pageReads.push(maxBytes);
      if (fake.transcriptUnavailable) return { tag: "unavailable", val: fake.transcriptUnavailable };
      return transcriptPage(fake.transcript, cursor, maxMessages ?? 1000, maxBytes ?? 1048576n);
    },
    stateGet: (key) => state.get(key),
    stateSet: (key, value) => { state.set(key, new Uint8Array(value)); },
    stateDelete: (key) => state.delete(key),
    stateScan: (prefix, after, limit) =>
      [...state.keys()].filter((key) => key.startsWith(prefix) && (after === undefined || key > after)).sort()
        .slice(0, limit).map((key) => ({ key, value: state.get(key) })),
    complete: (request) => {
      completions.push(request);
      if (fake.modelError === "unavailable") throw hostError("unavailable", "no model configured");
      if (fake.modelError) throw hostError(fake.modelError, `the model refused (${fake.modelError})`);
      if (request.messages.length === 0 || request.maxTokens < 1) throw hostError("invalid-argument", "an empty request");
      return defaultModel(request);
    },
    indexPut: (scope, document) => indexCall(() => index.put(scope, document)),
    indexDelete: (scope, id) => indexCall(() => index.delete(scope, id)),
    indexSearch: (query) => indexCall(() => index.search(query)),
  };
  const ctxbox = {
    "ctxbox:engine/host": host,
    "ctxbox:engine/sql": { Database, Statement },
    "ctxbox:engine/history": { History },
    "ctxbox:engine/types": {},
  };
  const wasi = {
    "wasi:cli/stderr": shim.cli.stderr, "wasi:cli/stdout": shim.cli.stdout, "wasi:cli/stdin": shim.cli.stdin,
    "wasi:cli/environment": shim.cli.environment, "wasi:cli/exit": shim.cli.exit,
    "wasi:cli/terminal-input": shim.cli.terminalInput, "wasi:cli/terminal-output": shim.cli.terminalOutput,
    "wasi:cli/terminal-stdin": shim.cli.terminalStdin, "wasi:cli/terminal-stdout": shim.cli.terminalStdout,
    "wasi:cli/terminal-stderr": shim.cli.terminalStderr,
    "wasi:clocks/monotonic-clock": shim.clocks.monotonicClock, "wasi:clocks/wall-clock": shim.clocks.wallClock,
    "wasi:io/error": shim.io.error, "wasi:io/poll": shim.io.poll, "wasi:io/streams": shim.io.streams,
    "wasi:random/random": shim.random.random,
  };
  // The transpiled component looks its imports up without the version suffix;
  // the types name them with it: offer both.
  const imports = {};
  for (const [name, value] of Object.entries({ ...ctxbox, ...wasi })) {
    imports[name] = value;
    imports[`${name}@${name.startsWith("ctxbox:") ? "0.1.0" : "0.2.12"}`] = value;
  }
  return Object.assign(fake, { imports, logs, state, delegated, completions, index });
}
