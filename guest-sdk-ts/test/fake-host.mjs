// A fake ctxbox host for the transpiled test engine: the `ctxbox:engine`
// imports over in-memory data, recording what the engine asked for, and
// WASI from @bytecodealliance/preview2-shim.
import * as shim from "@bytecodealliance/preview2-shim";

/** A host error the way a transpiled import reports one: thrown with a `payload`. */
function hostError(kind, message) {
  const error = new Error(message);
  error.payload = { kind, message };
  return error;
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

/** The fake host: `logs`, `state` and `delegated` record what the engine did. */
export function fakeHost() {
  const logs = [];
  const state = new Map();
  const delegated = [];
  const host = {
    log: (level, message) => logs.push({ level, message }),
    reportProgress: () => {},
    aborted: () => false,
    engineConfig: () => undefined,
    runtimeSettings: () => undefined,
    estimateTokens: (entries) => BigInt(7 * entries.length),
    delegateCompaction: (params) => {
      delegated.push(params);
      return { ok: true, compacted: false, reason: "fake", tokensBefore: 0n };
    },
    summarize: () => { throw hostError("unavailable", "no summarizer configured"); },
    readTranscriptDelta: () => ({ tag: "missing" }),
    stateGet: (key) => state.get(key),
    stateSet: (key, value) => { state.set(key, new Uint8Array(value)); },
    stateDelete: (key) => state.delete(key),
    stateScan: (prefix, after, limit) =>
      [...state.keys()].filter((key) => key.startsWith(prefix) && (after === undefined || key > after)).sort()
        .slice(0, limit).map((key) => ({ key, value: state.get(key) })),
  };
  const ctxbox = { "ctxbox:engine/host": host, "ctxbox:engine/history": { History }, "ctxbox:engine/types": {} };
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
  return { imports, logs, state, delegated };
}
