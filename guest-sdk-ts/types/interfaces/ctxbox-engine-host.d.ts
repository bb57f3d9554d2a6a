/// <reference path="./ctxbox-engine-types.d.ts" />
declare module 'ctxbox:engine/host@0.1.0' {
  /**
   * The engine's own settings from the host's configuration
   * (`plugins.entries.<id>.config`, for the id the engine is registered
   * under) as a JSON object, or none when nothing is configured. The host
   * caps it at 64 KiB. The same during every call of an instance, `info`
   * included; a changed configuration reaches new instances.
   */
  export function engineConfig(): Json | undefined;
  /**
   * The runtime settings of the call in progress (the reference's
   * `runtimeSettings`: schema version, runtime mode, model, engine
   * selection, limits such as `promptTokenBudget`, diagnostics such as
   * `degradedReason`) as a JSON object, during `assemble`, `compact` and
   * `after-turn`; none in other calls, when the host has none, or when the
   * engine's `accepted-host-params` leaves out `runtime-settings`. During
   * `compact` it is the same as `compact-params.runtime-settings`. (An
   * import rather than a field, so engines built before it still load.)
   */
  export function runtimeSettings(): Json | undefined;
  /**
   * Writes to the host's log (`tracing`, target `ctxbox::engine`), tagged
   * with engine and session. Per call, the first `sandbox.maxLogRecordsPerCall`
   * records (100 by default) are logged; later ones are dropped and the host
   * logs how many. A message longer than `sandbox.maxLogMessageBytes` (4,096
   * by default) is cut at that many bytes and marked. Neither fails the
   * call. A call that writes more than 100 times its allowance is flooding
   * the host: that record traps the call with `host-limit`. Message bytes
   * count against the call's input budget.
   */
  export function log(level: LogLevel, message: string): void;
  /**
   * Tells the host that long work is making progress. During `compact` and
   * `after-turn` (both run under the compaction watchdog) each call re-arms
   * the watchdog for one more window; the total never exceeds ten windows,
   * however often it is called. During any other call it does not change
   * the deadline.
   */
  export function reportProgress(): void;
  /**
   * Whether the engine should stop now: the caller has cancelled the current
   * call, or the call's deadline is near (`sandbox.deadlineNoticeMs`
   * before it, 1 s by default, at most a quarter of the call's time). An
   * engine doing long work should check it and return early, with what it
   * has or an error; one that returns within the notice stopped in time and
   * is never quarantined for it (its call is served by the host's `legacy`
   * instead). The host interrupts the engine shortly after an abort, and at
   * the deadline, either way. Host services the engine waits on
   * (`summarize`, `complete`) end when the notice begins.
   */
  export function aborted(): boolean;
  /**
   * The host's token estimate for these entries: the same estimator it
   * budgets with, so engine and host agree.
   */
  export function estimateTokens(entries: Array<MessageEntry>): bigint;
  /**
   * Runs the host's native compaction on this session, as if the engine did
   * not exist (OpenClaw's `delegateCompactionToRuntime`). Only during `compact`.
   */
  export function delegateCompaction(params: CompactParams): CompactResult;
  /**
   * Summarizes `text` with the host's configured summarizer, in at most
   * `max-tokens` tokens, within the time left to the current call.
   */
  export function summarize(text: string, instructions: string | undefined, maxTokens: number): string;
  /**
   * Reads the entries of the session's active branch (root to leaf, as the
   * context is built) after `cursor` (from the root when none): messages and
   * compaction summaries, never an abandoned branch's entries (a rolled-back
   * turn) and never runtime-context carriers (`openclaw.runtime-context`
   * custom messages, which no engine sees). While the host builds a turn's
   * prompt (`bootstrap`, `assemble`) the read ends before the turn's own
   * first entry; later calls see it. Defaults: 1,000 messages and 1 MiB per
   * page; caps: 10,000 and 64 MiB.
   * Entries are measured by their line in the transcript file; a page's
   * first entry may exceed `max-bytes`, never the 64 MiB cap. An entry larger
   * than the cap is never returned: when it is next, the answer is a `reset`
   * whose reason names the entry and whose cursor continues right after it
   * (everything before it was already delivered, so keep what you have).
   * When the host cannot read the transcript (its disk or shared store
   * failed) the call fails with `failed`.
   * `read-transcript-page` reads the same entries with stricter page edges;
   * new engines should prefer it.
   */
  export function readTranscriptDelta(cursor: string | undefined, maxMessages: number | undefined, maxBytes: bigint | undefined): TranscriptDelta;
  /**
   * Reads what `read-transcript-delta` reads (the same branch, fence,
   * cursors, resets, defaults and caps), with the reference's page edges
   * (OpenClaw's visible-message delta):
   * - A page never holds more than `max-bytes`. When the next entry alone
   *   is larger, the page is empty, `has-more` is true, its cursor reads
   *   that entry next, and `required-bytes` is the entry's size: ask again
   *   with `max-bytes` at least that (up to the 64 MiB cap; an entry over
   *   the cap is skipped with a `reset`, as `read-transcript-delta` does).
   * - When the host cannot read the transcript now (its disk or shared
   *   store failed), the answer is `unavailable`: nothing was read and the
   *   cursor you hold is still good, so ask again later (in this call or a
   *   later one).
   * (A function of its own, so engines built before it still load.)
   */
  export function readTranscriptPage(cursor: string | undefined, maxMessages: number | undefined, maxBytes: bigint | undefined): TranscriptRead;
  /**
   * Reads a value from the engine's durable key-value store. Each engine has
   * its own store, shared by all its sessions and surviving restarts, named
   * by the id the host registered the engine under (not the id its `info`
   * declares: declaring another engine's id does not reach that engine's
   * store).
   */
  export function stateGet(key: string): Uint8Array | undefined;
  /**
   * Writes a value. A call's writes and deletes are one batch: the call
   * itself reads them back at once (`state-get`, `state-scan`), other calls
   * see them once this call has answered, when the host commits the batch
   * in one transaction before using the answer; a call that fails leaves
   * none of them. Fails with `quota-exceeded` if the engine's store would
   * grow past its byte quota (pending writes count).
   */
  export function stateSet(key: string, value: Uint8Array): void;
  /**
   * Deletes a key; answers whether it existed.
   */
  export function stateDelete(key: string): boolean;
  /**
   * Up to `limit` entries whose key starts with `prefix`, in key order,
   * starting after `start-after` (for paging).
   */
  export function stateScan(prefix: string, startAfter: string | undefined, limit: number): Array<StateEntry>;
  /**
   * Asks the embedding host's model for a completion: the agent's own
   * model in OpenClaw (`ctxbox serve` asks its client), the configured
   * provider in `ctxbox run` and the library (a replayed model answers
   * with an extractive summary of the request). Bounded per call and per
   * engine: a count of completions and a token budget
   * (`completions.maxPerCall`, `completions.maxTokensPerCall`,
   * `completions.maxTokensPerHour`), and the call's own deadline. Time
   * spent waiting for the model burns no fuel, and during `compact` and
   * `after-turn` an answer re-arms the compaction watchdog like
   * `report-progress`. Fails with `unavailable` when the host has no
   * model, `quota-exceeded` when a budget is spent, `aborted` when the
   * call is cancelled or out of time, `failed` when the model failed.
   * (Added within contract 0.1: engines that do not import it still
   * load.)
   */
  export function complete(request: CompletionRequest): Completion;
  /**
   * Indexes a document (replacing one with the same id in its scope).
   * Writes are batched like `state-set`: they become durable and
   * searchable together when the call has answered (before the answer is
   * used), and a call that fails leaves none. Text, metadata and the
   * index's overhead count against the engine's state quota, the one
   * `state-set` uses, pending writes of both kinds included
   * (`quota-exceeded`). (Added within contract 0.1.)
   */
  export function indexPut(scope: IndexScope, document: IndexDocument): void;
  /**
   * Removes a document; answers whether it existed, counting the call's
   * own pending puts and deletes. Batched like `index-put`.
   */
  export function indexDelete(scope: IndexScope, id: string): boolean;
  /**
   * Searches the engine's documents, ranked, with snippets and paging. An
   * engine reaches only its own documents (named by the id it is
   * registered under). A search sees committed documents only: the
   * call's own `index-put`s and `index-delete`s become visible when it
   * commits, to the calls after it. A query out of its limits answers
   * `invalid-argument`, naming the rule it breaks.
   */
  export function indexSearch(query: IndexQuery): IndexPage;
  export type MessageEntry = import('ctxbox:engine/types@0.1.0').MessageEntry;
  export type CompactParams = import('ctxbox:engine/types@0.1.0').CompactParams;
  export type CompactResult = import('ctxbox:engine/types@0.1.0').CompactResult;
  export type Json = import('ctxbox:engine/types@0.1.0').Json;
  /**
   * # Variants
   * 
   * ## `"trace"`
   * 
   * ## `"debug"`
   * 
   * ## `"info"`
   * 
   * ## `"warn"`
   * 
   * ## `"error"`
   */
  export type LogLevel = 'trace' | 'debug' | 'info' | 'warn' | 'error';
  /**
   * Why a host service refused or failed.
   * # Variants
   * 
   * ## `"unavailable"`
   * 
   * The service does not exist in this host (or is not configured).
   * ## `"invalid-argument"`
   * 
   * An argument was malformed or out of range.
   * ## `"quota-exceeded"`
   * 
   * The engine's storage quota would be exceeded.
   * ## `"aborted"`
   * 
   * The call was aborted or ran out of time.
   * ## `"failed"`
   * 
   * The service itself failed (I/O, network, summarizer).
   */
  export type HostErrorKind = 'unavailable' | 'invalid-argument' | 'quota-exceeded' | 'aborted' | 'failed';
  export interface HostError {
    kind: HostErrorKind,
    message: string,
  }
  export interface TranscriptPage {
    cursor: string,
    entries: Array<MessageEntry>,
    hasMore: boolean,
  }
  export interface TranscriptReset {
    cursor: string,
    reason: string,
  }
  /**
   * A page of `read-transcript-delta`.
   */
  export type TranscriptDelta = TranscriptDeltaPage | TranscriptDeltaReset | TranscriptDeltaMissing;
  /**
   * Entries appended after the cursor, in order, and the cursor to pass
   * next time. `has-more` says another page is ready now.
   */
  export interface TranscriptDeltaPage {
    tag: 'page',
    val: TranscriptPage,
  }
  /**
   * The cursor no longer applies: start again from `cursor`. `reason`
   * starts with a code: `invalid_cursor` (not one of this host's),
   * `scope_mismatch` (another session's, or from before a rotation),
   * `generation_mismatch` (the file was replaced or rewritten),
   * `anchor_missing` (the last entry read left the active branch: a
   * rolled-back turn or an abandoned branch), `anchor_moved`.
   * Also how an entry over the page cap is skipped (see
   * `read-transcript-delta`; `cursor` then continues after it).
   */
  export interface TranscriptDeltaReset {
    tag: 'reset',
    val: TranscriptReset,
  }
  /**
   * The session has no transcript.
   */
  export interface TranscriptDeltaMissing {
    tag: 'missing',
  }
  export interface BoundedTranscriptPage {
    /**
     * The cursor to pass next time.
     */
    cursor: string,
    /**
     * The entries, in order; their lines measure at most `max-bytes`.
     */
    entries: Array<MessageEntry>,
    /**
     * Another entry is ready now.
     */
    hasMore: boolean,
    /**
     * Set when `entries` is empty because the next entry is larger than
     * `max-bytes`: that entry's size in bytes. Ask again with at least
     * this `max-bytes`.
     */
    requiredBytes?: bigint,
    /**
     * The bytes `entries` measure (their lines in the transcript file).
     */
    serializedBytes: bigint,
  }
  /**
   * An answer of `read-transcript-page`.
   */
  export type TranscriptRead = TranscriptReadPage | TranscriptReadReset | TranscriptReadUnavailable | TranscriptReadMissing;
  /**
   * Entries appended after the cursor, within `max-bytes`.
   */
  export interface TranscriptReadPage {
    tag: 'page',
    val: BoundedTranscriptPage,
  }
  /**
   * The cursor no longer applies, or an entry over the cap was
   * skipped: as in `transcript-delta`.
   */
  export interface TranscriptReadReset {
    tag: 'reset',
    val: TranscriptReset,
  }
  /**
   * The transcript cannot be read now; keep your cursor and ask again
   * later. The reason starts with `storage_unavailable:` and says what
   * failed.
   */
  export interface TranscriptReadUnavailable {
    tag: 'unavailable',
    val: string,
  }
  /**
   * The session has no transcript.
   */
  export interface TranscriptReadMissing {
    tag: 'missing',
  }
  /**
   * A key and its value in the engine's private store.
   */
  export interface StateEntry {
    key: string,
    value: Uint8Array,
  }
  /**
   * --- the embedding host's model ------------------------------------
   * Who speaks a message of a completion request.
   * # Variants
   * 
   * ## `"system"`
   * 
   * ## `"user"`
   * 
   * ## `"assistant"`
   */
  export type CompletionRole = 'system' | 'user' | 'assistant';
  /**
   * One message of a completion request: text only.
   */
  export interface CompletionMessage {
    role: CompletionRole,
    text: string,
  }
  /**
   * What to ask the host's model.
   */
  export interface CompletionRequest {
    /**
     * The conversation to complete, oldest first; a plain prompt is one
     * `user` message. At least one message.
     */
    messages: Array<CompletionMessage>,
    /**
     * Instructions sent before the messages.
     */
    system?: string,
    /**
     * Most tokens the answer may take (at least 1; the host may lower
     * it to what is left of the engine's budget).
     */
    maxTokens: number,
    /**
     * What the completion is for, in a few words (the host's log and
     * the embedding runtime's audit, e.g. "summarize a chunk").
     */
    purpose?: string,
  }
  /**
   * The model's answer.
   */
  export interface Completion {
    text: string,
    /**
     * Tokens the request took, as the model reported them (the host's
     * estimate when it did not).
     */
    inputTokens: bigint,
    /**
     * Tokens of the answer, likewise.
     */
    outputTokens: bigint,
    /**
     * The model that answered, when the host knows it.
     */
    model?: string,
  }
  /**
   * --- searchable memory ----------------------------------------------
   * Which documents a call writes or searches: the engine's own across all
   * its sessions, or the current session's.
   * # Variants
   * 
   * ## `"engine"`
   * 
   * Documents of the engine itself, not of one session. A search in
   * this scope also finds every session's documents.
   * ## `"session"`
   * 
   * Documents of the session the call is about (not during `info`,
   * the subagent hooks or `dispose`).
   */
  export type IndexScope = 'engine' | 'session';
  /**
   * A document to index.
   */
  export interface IndexDocument {
    /**
     * The engine's name for it, unique within its scope (at most 256
     * bytes); a put with an id already there replaces that document.
     */
    id: string,
    /**
     * The text searched (at most 1 MiB).
     */
    text: string,
    /**
     * Small JSON metadata returned with hits (at most 4 KiB).
     */
    metadata?: Json,
  }
  /**
   * A full-text search.
   */
  export interface IndexQuery {
    /**
     * Words to find, separated by spaces; a document must contain every
     * one, matched case-insensitively as a substring (so CJK text needs
     * no spaces between its words). 1 to 32 words, at most 1 KiB.
     */
    text: string,
    scope: IndexScope,
    /**
     * Hits per page (1 to 100).
     */
    limit: number,
    /**
     * Hits to skip, for the next page.
     */
    offset: number,
  }
  /**
   * One document found.
   */
  export interface IndexHit {
    id: string,
    /**
     * The session it belongs to; none for engine documents.
     */
    sessionId?: string,
    /**
     * Higher is better; comparable within one search only.
     */
    score: number,
    /**
     * The best-matching passage, at most about 300 characters, with the
     * matched words marked `[` `]`.
     */
    snippet: string,
    metadata?: Json,
  }
  /**
   * A page of hits, best first.
   */
  export interface IndexPage {
    hits: Array<IndexHit>,
    /**
     * Whether another page follows (`offset + limit`).
     */
    hasMore: boolean,
  }
}
