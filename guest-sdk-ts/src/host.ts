/**
 * The services the ctxbox host offers during a call, with host errors thrown
 * as {@link HostFailure} (which an export reports as `host-failure`) and token
 * counts as plain numbers.
 */
import * as raw from "ctxbox:engine/host@0.1.0";
import { HostFailure, hostErrorOf } from "./errors.js";
import type {
  CompactParams,
  CompactResult,
  Completion,
  CompletionRequest,
  IndexDocument,
  IndexPage,
  IndexScope,
  LogLevel,
  MessageEntry,
  StateEntry,
  TranscriptDelta,
  TranscriptReset,
} from "./wit.js";

/** Runs a host call that answers `result<_, host-error>`, rethrowing its error as a {@link HostFailure}. */
function call<T>(service: string, run: () => T): T {
  try {
    return run();
  } catch (thrown) {
    const hostError = hostErrorOf(thrown);
    throw hostError ? new HostFailure(service, hostError) : thrown;
  }
}

/**
 * The engine's own settings from the host's configuration
 * (`plugins.entries.<id>.config`), parsed; `undefined` when nothing is configured.
 */
export function engineConfig(): unknown {
  const json = raw.engineConfig();
  return json === undefined ? undefined : JSON.parse(json);
}

/**
 * The runtime settings of the call in progress (schema version, runtime mode,
 * model, limits, diagnostics), parsed; `undefined` outside `assemble`,
 * `compact` and `afterTurn`, or when the engine does not accept them.
 */
export function runtimeSettings(): unknown {
  const json = raw.runtimeSettings();
  return json === undefined ? undefined : JSON.parse(json);
}

/** Writes a record to the host's log (limited per call by the host; see `wit/host.wit`). */
export function log(level: LogLevel, message: string): void {
  raw.log(level, message);
}

/** Tells the host a long `compact` or `afterTurn` is making progress (re-arms its watchdog). */
export function reportProgress(): void {
  raw.reportProgress();
}

/**
 * Whether to stop now: the caller has cancelled the current call, or its
 * deadline is near (`sandbox.deadlineNoticeMs` before it). Return early, with
 * what you have or an error: an engine that stops within the notice is never
 * quarantined for it. `summarize` and `complete` end when the notice begins.
 */
export function aborted(): boolean {
  return raw.aborted();
}

/** The host's token estimate for `entries`. */
export function estimateTokens(entries: MessageEntry[]): number {
  return Number(raw.estimateTokens(entries));
}

/** Runs the host's native compaction on the current session (only during `compact`). */
export function delegateCompaction(params: CompactParams): CompactResult {
  return call("delegateCompaction", () => raw.delegateCompaction(params));
}

/** Options of {@link summarize}. */
export interface SummarizeOptions {
  /** What the summary must keep or how to write it. */
  instructions?: string;
  /** The most tokens the summary may take. */
  maxTokens: number;
}

/** Summarizes `text` with the host's configured summarizer. */
export function summarize(text: string, options: SummarizeOptions): string {
  return call("summarize", () => raw.summarize(text, options.instructions, options.maxTokens));
}

/** Options of {@link promptRequest}. */
export interface PromptOptions {
  /** The most tokens the answer may take (at least 1; the host may lower it to what is left of the engine's budget). */
  maxTokens: number;
  /** Instructions sent before the prompt. */
  system?: string;
  /** What the completion is for, in a few words (the host's log and audit), e.g. `"summarize"`. */
  purpose?: string;
}

/**
 * A completion request of one user message `text`: the common case of
 * {@link complete}. `host.complete(promptRequest(text, { maxTokens: 200 })).text`.
 */
export function promptRequest(text: string, options: PromptOptions): CompletionRequest {
  return {
    messages: [{ role: "user", text }],
    system: options.system,
    maxTokens: options.maxTokens,
    purpose: options.purpose,
  };
}

/**
 * Asks the embedding host's model for a completion: the agent's own model in
 * OpenClaw, the configured provider in `ctxbox run` (a replayed model answers
 * with an extractive summary of the request). Bounded per call and per engine
 * (`completions.*`): past a budget the host answers `quota-exceeded`; without
 * a model, `unavailable` (both thrown as a {@link HostFailure}). Waiting for
 * the model burns no fuel, and during `compact`/`afterTurn` an answer re-arms
 * the watchdog. The answer's token counts are bigints, as every 64-bit number
 * of the contract.
 */
export function complete(request: CompletionRequest): Completion {
  return call("complete", () => raw.complete(request));
}

/** Options of {@link index.search}. */
export interface SearchOptions {
  /** Hits per page, 1 to 100 (default 10). */
  limit?: number;
  /** Hits to skip, for the next page (default 0). */
  offset?: number;
}

/**
 * The engine's searchable memory: a full-text index of documents (an id, the
 * text, small JSON metadata), private to the engine, per session or for the
 * whole engine ({@link IndexScope}), counted against its state quota
 * (`quota-exceeded`). Matching is by substring, case-insensitively, every
 * word of the query, so Chinese and Japanese text needs no segmenting.
 * Writes are batched like {@link state}'s: durable when the call answers,
 * dropped if it fails, seen by later calls. A host without an index answers
 * `unavailable`. Errors are thrown as {@link HostFailure}.
 */
export const index = {
  /** Indexes `document` in `scope`, replacing one with the same id there. */
  put(scope: IndexScope, document: IndexDocument): void {
    call("index.put", () => raw.indexPut(scope, document));
  },
  /** Removes document `id` of `scope`; answers whether it existed. */
  delete(scope: IndexScope, id: string): boolean {
    return call("index.delete", () => raw.indexDelete(scope, id));
  },
  /**
   * The documents of `scope` containing every word of `text` (separated by
   * spaces), best first, with snippets (matches marked `[` `]`); `hasMore`
   * says whether another page follows.
   */
  search(text: string, scope: IndexScope, options: SearchOptions = {}): IndexPage {
    const query = { text, scope, limit: options.limit ?? 10, offset: options.offset ?? 0 };
    return call("index.search", () => raw.indexSearch(query));
  },
};

/** Options of {@link readTranscriptDelta}: host defaults when left out. */
export interface DeltaOptions {
  maxMessages?: number;
  maxBytes?: number;
}

/**
 * The session's active branch after `cursor` (from the root when undefined).
 * A rolled-back turn is never delivered: a cursor that had read it gets a
 * reset whose reason starts with `anchor_missing` (keep its cursor and read
 * again). During `bootstrap` and `assemble` the read stops before the current
 * turn's own entries, which `history` holds.
 */
export function readTranscriptDelta(cursor?: string, options: DeltaOptions = {}): TranscriptDelta {
  const maxBytes = options.maxBytes === undefined ? undefined : BigInt(options.maxBytes);
  return call("readTranscriptDelta", () => raw.readTranscriptDelta(cursor, options.maxMessages, maxBytes));
}

/** Options of {@link readTranscriptPage}: host defaults when left out. */
export interface PageOptions extends DeltaOptions {
  /**
   * When the next entry alone is larger than `maxBytes` but at most this,
   * read it anyway: ask again with exactly the bytes it needs (the page then
   * holds that entry alone).
   */
  growTo?: number;
}

/** A page of {@link readTranscriptPage}, its byte counts as numbers. */
export interface TranscriptPageRead {
  /** The cursor to pass next time. */
  cursor: string;
  /** The entries, in order; their lines measure at most the bytes asked for. */
  entries: MessageEntry[];
  /** Another entry is ready now. */
  hasMore: boolean;
  /** Set when `entries` is empty because the next entry is larger than `maxBytes`: its size. */
  requiredBytes?: number;
  /** The bytes `entries` measure (their lines in the transcript file). */
  serializedBytes: number;
}

/** An answer of {@link readTranscriptPage}. */
export type TranscriptRead =
  | { tag: "page"; val: TranscriptPageRead }
  | { tag: "reset"; val: TranscriptReset }
  | { tag: "unavailable"; val: string }
  | { tag: "missing" };

/**
 * Reads what {@link readTranscriptDelta} reads with the reference's page
 * edges: a page never holds more than `maxBytes`. When the next entry alone
 * is larger, the page is empty and `requiredBytes` names its size: ask again
 * with at least that much (or set `growTo`). When the host cannot read the
 * transcript now the answer is `unavailable`: keep the cursor and ask again
 * later.
 */
export function readTranscriptPage(cursor?: string, options: PageOptions = {}): TranscriptRead {
  const read = (from: string | undefined, maxBytes: number | undefined): TranscriptRead => {
    const bytes = maxBytes === undefined ? undefined : BigInt(maxBytes);
    return pageRead(call("readTranscriptPage", () => raw.readTranscriptPage(from, options.maxMessages, bytes)));
  };
  const first = read(cursor, options.maxBytes);
  const need = first.tag === "page" ? first.val.requiredBytes : undefined;
  if (first.tag === "page" && need !== undefined && options.growTo !== undefined && need <= options.growTo) {
    return read(first.val.cursor, need);
  }
  return first;
}

/** The contract's answer with its byte counts as numbers (a page is at most 64 MiB). */
function pageRead(answer: raw.TranscriptRead): TranscriptRead {
  if (answer.tag !== "page") return answer;
  const { requiredBytes, serializedBytes, ...page } = answer.val;
  return {
    tag: "page",
    val: {
      ...page,
      requiredBytes: requiredBytes === undefined ? undefined : Number(requiredBytes),
      serializedBytes: Number(serializedBytes),
    },
  };
}

/**
 * JSON text for `value`, with bigints (the contract's 64-bit numbers, such as
 * a message's `timestampMs`) written as `{"$bigint": "digits"}` so that
 * {@link fromJson} gives them back as bigints.
 */
export function toJson(value: unknown): string {
  return JSON.stringify(value, (_, v) => (typeof v === "bigint" ? { $bigint: v.toString() } : v));
}

/** Parses what {@link toJson} wrote. */
export function fromJson<T = unknown>(text: string): T {
  return JSON.parse(text, (_, v) =>
    v !== null && typeof v === "object" && typeof v.$bigint === "string" && Object.keys(v).length === 1
      ? BigInt(v.$bigint)
      : v,
  ) as T;
}

const encoder = new TextEncoder();
const decoder = new TextDecoder();

/** Entries read per `state-scan` crossing by {@link state.scan}. */
const SCAN_PAGE = 256;

/**
 * The engine's durable key-value store: private to the engine id, shared by
 * its sessions, kept across restarts, limited by a byte quota.
 */
export const state = {
  /** The bytes stored under `key`. */
  get(key: string): Uint8Array | undefined {
    return call("stateGet", () => raw.stateGet(key));
  },
  /** Stores `value` under `key`, atomically. */
  set(key: string, value: Uint8Array): void {
    call("stateSet", () => raw.stateSet(key, value));
  },
  /** Deletes `key`; answers whether it existed. */
  delete(key: string): boolean {
    return call("stateDelete", () => raw.stateDelete(key));
  },
  /** One page of at most `limit` entries under `prefix`, in key order, after `startAfter`. */
  scanPage(prefix: string, startAfter: string | undefined, limit: number): StateEntry[] {
    return call("stateScan", () => raw.stateScan(prefix, startAfter, limit));
  },
  /** Every entry under `prefix`, in key order (paging as needed). */
  scan(prefix: string): StateEntry[] {
    const all: StateEntry[] = [];
    for (;;) {
      const page = state.scanPage(prefix, all.at(-1)?.key, SCAN_PAGE);
      all.push(...page);
      if (page.length < SCAN_PAGE) return all;
    }
  },
  /** The UTF-8 text stored under `key`. */
  getText(key: string): string | undefined {
    const bytes = state.get(key);
    return bytes === undefined ? undefined : decoder.decode(bytes);
  },
  /** Stores `text` under `key` as UTF-8. */
  setText(key: string, text: string): void {
    state.set(key, encoder.encode(text));
  },
  /** The JSON value stored under `key` (parsed; see {@link toJson} for bigints). */
  getJson<T = unknown>(key: string): T | undefined {
    const text = state.getText(key);
    return text === undefined ? undefined : fromJson<T>(text);
  },
  /** Stores `value` under `key` as JSON text (bigints kept, see {@link toJson}). */
  setJson(key: string, value: unknown): void {
    state.setText(key, toJson(value));
  },
};
