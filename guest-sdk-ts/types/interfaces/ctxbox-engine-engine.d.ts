/// <reference path="./ctxbox-engine-history.d.ts" />
/// <reference path="./ctxbox-engine-types.d.ts" />
declare module 'ctxbox:engine/engine@0.1.0' {
  /**
   * Called once when the engine is loaded; the host caches the answer.
   */
  export function info(): EngineInfo;
  /**
   * The first time the engine sees a session: import what it needs from the
   * existing history.
   */
  export function bootstrap(session: SessionRef, history: History): BootstrapResult;
  /**
   * A new message was appended to the session, for hosts that deliver
   * messages one by one (ctxbox's own turn runner does not call it: the
   * engine hears of a turn's messages through `after-turn`). `is-heartbeat`
   * marks keep-alive turns that carry no new information.
   */
  export function ingest(session: SessionRef, entry: MessageEntry, isHeartbeat: boolean): IngestResult;
  /**
   * Several new messages at once.
   */
  export function ingestBatch(session: SessionRef, entries: Array<MessageEntry>, isHeartbeat: boolean): IngestBatchResult;
  /**
   * Builds the prompt for the next model call from `history`.
   */
  export function assemble(session: SessionRef, history: History, params: AssembleParams): AssembleResult;
  /**
   * Makes the session's context smaller. Bounded by the compaction watchdog:
   * one window (180 s by default), re-armed by `host.report-progress`, ten
   * windows at most; `host.aborted` turns true when the caller gives up, and
   * the host interrupts the engine soon after. Engines without their own
   * compaction delegate to `host.delegate-compaction` (the SDK's default).
   */
  export function compact(session: SessionRef, history: History, params: CompactParams): CompactResult;
  /**
   * The turn is over: `history` now includes its messages, the new ones
   * from `pre-prompt-message-count` on. The host calls this instead of
   * `ingest-batch` for the turn's answers (the reference ingests them only
   * for engines without `afterTurn`; the SDK's default does exactly that).
   * An engine that owns compaction may compact here; the call runs under
   * the compaction watchdog (and fuel budget) like `compact`.
   */
  export function afterTurn(session: SessionRef, history: History, params: AfterTurnParams): void;
  /**
   * Housekeeping at bootstrap, after each turn, and after compaction.
   */
  export function maintain(session: SessionRef, history: History, reason: MaintainReason, runtimeContext: Json | undefined): MaintainResult;
  /**
   * A subagent is about to be spawned. Return an id if there is anything to
   * undo should the spawn fail; the host then calls `rollback-subagent-spawn`
   * with it exactly once.
   */
  export function prepareSubagentSpawn(spawn: SubagentSpawn): string | undefined;
  /**
   * Undoes a `prepare-subagent-spawn` whose spawn failed.
   */
  export function rollbackSubagentSpawn(preparationId: string): void;
  /**
   * A subagent's session ended.
   */
  export function onSubagentEnded(childSessionKey: string, reason: SubagentEndReason): void;
  /**
   * The instance is about to be dropped: flush anything pending to the
   * `host.state-*` store.
   */
  export function dispose(): void;
  export type AgentMessage = import('ctxbox:engine/types@0.1.0').AgentMessage;
  export type MessageEntry = import('ctxbox:engine/types@0.1.0').MessageEntry;
  export type SessionRef = import('ctxbox:engine/types@0.1.0').SessionRef;
  export type HostParam = import('ctxbox:engine/types@0.1.0').HostParam;
  export type Json = import('ctxbox:engine/types@0.1.0').Json;
  export type CompactParams = import('ctxbox:engine/types@0.1.0').CompactParams;
  export type CompactResult = import('ctxbox:engine/types@0.1.0').CompactResult;
  export type EngineError = import('ctxbox:engine/types@0.1.0').EngineError;
  export type History = import('ctxbox:engine/history@0.1.0').History;
  /**
   * Whether per-turn maintenance may run after the turn has been answered.
   * # Variants
   * 
   * ## `"foreground"`
   * 
   * The host waits for `maintain(turn)` before finishing the turn.
   * ## `"background"`
   * 
   * The host runs `maintain(turn)` after the turn, without waiting.
   */
  export type TurnMaintenanceMode = 'foreground' | 'background';
  /**
   * Who the engine is and what it takes on.
   */
  export interface EngineInfo {
    /**
     * Stable identifier, non-empty (an empty id fails the load). The host
     * knows the engine by the id it was registered under (its state
     * store, logs and quarantine record use that one), which is usually
     * this id but need not be.
     */
    id: string,
    /**
     * Human-readable name, non-empty (an empty name fails the load).
     */
    name: string,
    version?: string,
    /**
     * True if the engine decides when to compact: the host then skips its
     * pre-prompt compaction check and leaves compaction to `after-turn` or
     * `compact`.
     */
    ownsCompaction: boolean,
    /**
     * The host-added parameters the engine wants. None means all of them.
     */
    acceptedHostParams?: Array<HostParam>,
    turnMaintenanceMode?: TurnMaintenanceMode,
  }
  export interface BootstrapResult {
    bootstrapped: boolean,
    importedMessages?: number,
    reason?: string,
  }
  export interface IngestResult {
    /**
     * False when the engine did not store the message (e.g. it relies on the
     * host's transcript). Not an error.
     */
    ingested: boolean,
  }
  export interface IngestBatchResult {
    ingestedCount: number,
  }
  /**
   * Everything `assemble` is told about the coming model call.
   */
  export interface AssembleParams {
    /**
     * The most tokens the assembled prompt should take. None: no limit
     * given. An engine that owns compaction must stay within it (the host
     * does not compact for it); others may go over, and the host compacts
     * or recovers from the model's overflow error.
     */
    tokenBudget?: bigint,
    /**
     * Names of the tools the model can call this turn.
     */
    availableTools: Array<string>,
    citationsMode?: string,
    model?: string,
    /**
     * The user's new prompt. Host-added (`host-param.prompt`).
     */
    prompt?: string,
  }
  export interface KeepRange {
    start: number,
    end: number,
  }
  /**
   * A piece of the assembled prompt.
   */
  export type AssembledItem = AssembledItemKeep | AssembledItemInsert;
  /**
   * History entries `start..end` (end exclusive) of the `history` passed to
   * this call, verbatim. Ranges must lie within `0..len` and come in
   * history order without overlapping: each `keep` starts at or after the
   * end of the previous `keep` (inserts in between do not count). So every
   * entry is kept at most once, in its original order; repeat or move
   * history with `insert`.
   */
  export interface AssembledItemKeep {
    tag: 'keep',
    val: KeepRange,
  }
  /**
   * A message the engine made up (a summary, a note, a recalled fact).
   */
  export interface AssembledItemInsert {
    tag: 'insert',
    val: AgentMessage,
  }
  /**
   * How long an assembled context may be reused.
   */
  export type ContextProjection = ContextProjectionPerTurn | ContextProjectionThreadBootstrap;
  /**
   * Assembled afresh every turn (the default).
   */
  export interface ContextProjectionPerTurn {
    tag: 'per-turn',
  }
  /**
   * Reused for the whole thread until the engine reports a new epoch.
   */
  export interface ContextProjectionThreadBootstrap {
    tag: 'thread-bootstrap',
    val: bigint,
  }
  /**
   * The prompt the model will see.
   * 
   * The host checks it before use: every `keep` range within the history and
   * after the previous one, the total size within the host's output cap, and
   * no tool call separated from its result (a kept tool result needs its assistant call before it; a kept
   * assistant call whose results exist needs them after it). A violation is
   * `invalid-output`.
   */
  export interface AssembleResult {
    items: Array<AssembledItem>,
    /**
     * The engine's estimate of the prompt's size in tokens.
     */
    estimatedTokens: bigint,
    /**
     * Text the host appends to the system prompt.
     */
    systemPromptAddition?: string,
    contextProjection?: ContextProjection,
  }
  /**
   * Why `maintain` runs.
   * # Variants
   * 
   * ## `"bootstrap"`
   * 
   * ## `"turn"`
   * 
   * ## `"compaction"`
   */
  export type MaintainReason = 'bootstrap' | 'turn' | 'compaction';
  export interface MaintainResult {
    changed: boolean,
    rewrittenEntries: number,
    reason?: string,
  }
  /**
   * What `after-turn` is told.
   */
  export interface AfterTurnParams {
    /**
     * Number of history entries before this turn's new messages.
     */
    prePromptMessageCount: number,
    tokenBudget?: bigint,
    isHeartbeat: boolean,
    /**
     * Host-added (`host-param.runtime-context`).
     */
    runtimeContext?: Json,
  }
  /**
   * Whether a subagent's context starts empty or from a copy of its parent's.
   * # Variants
   * 
   * ## `"isolated"`
   * 
   * ## `"fork"`
   */
  export type ContextMode = 'isolated' | 'fork';
  export interface SubagentSpawn {
    parentSessionKey: string,
    childSessionKey: string,
    contextMode: ContextMode,
    ttlMs?: bigint,
  }
  /**
   * # Variants
   * 
   * ## `"deleted"`
   * 
   * ## `"completed"`
   * 
   * ## `"swept"`
   * 
   * ## `"released"`
   */
  export type SubagentEndReason = 'deleted' | 'completed' | 'swept' | 'released';
}
