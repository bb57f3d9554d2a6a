declare module 'ctxbox:engine/types@0.1.0' {
  /**
   * JSON text. The host always sends valid JSON; engines must send valid JSON.
   */
  export type Json = string;
  /**
   * Token usage an assistant message reported, as recorded in the transcript.
   */
  export interface Usage {
    input: bigint,
    output: bigint,
    cacheRead: bigint,
    cacheWrite: bigint,
    /**
     * The provider's total for the whole request (prompt + completion).
     */
    total: bigint,
  }
  /**
   * Base64-encoded image data.
   */
  export interface Image {
    mimeType: string,
    data: string,
  }
  /**
   * A tool invocation requested by the assistant.
   */
  export interface ToolCall {
    /**
     * Unique within the session; the matching `tool-result` carries it in
     * `tool-call-id`.
     */
    id: string,
    name: string,
    /**
     * The call's arguments as a JSON object.
     */
    argumentsJson: Json,
  }
  /**
   * Model reasoning, with the provider's signature when it gave one.
   */
  export interface Thinking {
    text: string,
    signature?: string,
  }
  /**
   * One block of message content.
   */
  export type ContentBlock = ContentBlockText | ContentBlockThinking | ContentBlockImage | ContentBlockToolCall;
  export interface ContentBlockText {
    tag: 'text',
    val: string,
  }
  export interface ContentBlockThinking {
    tag: 'thinking',
    val: Thinking,
  }
  export interface ContentBlockImage {
    tag: 'image',
    val: Image,
  }
  export interface ContentBlockToolCall {
    tag: 'tool-call',
    val: ToolCall,
  }
  /**
   * Why the assistant stopped.
   * # Variants
   * 
   * ## `"stop"`
   * 
   * ## `"length"`
   * 
   * ## `"tool-use"`
   * 
   * ## `"error"`
   * 
   * ## `"aborted"`
   */
  export type StopReason = 'stop' | 'length' | 'tool-use' | 'error' | 'aborted';
  export interface UserMessage {
    content: Array<ContentBlock>,
  }
  export interface AssistantMessage {
    content: Array<ContentBlock>,
    model?: string,
    provider?: string,
    usage?: Usage,
    stopReason: StopReason,
    errorMessage?: string,
  }
  export interface ToolResultMessage {
    /**
     * The `id` of the `tool-call` this answers.
     */
    toolCallId: string,
    toolName: string,
    content: Array<ContentBlock>,
    isError: boolean,
    /**
     * Tool-specific structured details, if the transcript has any.
     */
    details?: Json,
  }
  /**
   * An extension message (`custom_message` in transcripts). Providers see it
   * as user content.
   */
  export interface CustomMessage {
    customType: string,
    content: Array<ContentBlock>,
    /**
     * Whether a UI shows it; it reaches the model either way.
     */
    display: boolean,
    details?: Json,
  }
  /**
   * A summary that stands in for compacted history.
   */
  export interface CompactionSummary {
    summary: string,
    tokensBefore: bigint,
  }
  /**
   * A summary of an abandoned branch of the conversation tree.
   */
  export interface BranchSummary {
    summary: string,
    fromId: string,
  }
  /**
   * One message of the conversation.
   */
  export type AgentMessage = AgentMessageUser | AgentMessageAssistant | AgentMessageToolResult | AgentMessageCustom | AgentMessageCompactionSummary | AgentMessageBranchSummary;
  export interface AgentMessageUser {
    tag: 'user',
    val: UserMessage,
  }
  export interface AgentMessageAssistant {
    tag: 'assistant',
    val: AssistantMessage,
  }
  export interface AgentMessageToolResult {
    tag: 'tool-result',
    val: ToolResultMessage,
  }
  export interface AgentMessageCustom {
    tag: 'custom',
    val: CustomMessage,
  }
  export interface AgentMessageCompactionSummary {
    tag: 'compaction-summary',
    val: CompactionSummary,
  }
  export interface AgentMessageBranchSummary {
    tag: 'branch-summary',
    val: BranchSummary,
  }
  /**
   * The kind of an `agent-message`, for cheap inspection without copying it.
   * # Variants
   * 
   * ## `"user"`
   * 
   * ## `"assistant"`
   * 
   * ## `"tool-result"`
   * 
   * ## `"custom"`
   * 
   * ## `"compaction-summary"`
   * 
   * ## `"branch-summary"`
   */
  export type MessageKind = 'user' | 'assistant' | 'tool-result' | 'custom' | 'compaction-summary' | 'branch-summary';
  /**
   * A message as stored in the session transcript.
   */
  export interface MessageEntry {
    /**
     * The transcript entry id. `first-kept-entry-id` and `find` refer to it.
     */
    id: string,
    parentId?: string,
    /**
     * Milliseconds since the Unix epoch.
     */
    timestampMs: bigint,
    message: AgentMessage,
  }
  /**
   * Which session a call is about.
   */
  export interface SessionRef {
    sessionId: string,
    /**
     * The host's routing key for the session. A host-added parameter:
     * only present if the engine accepts `host-param.session-key`.
     */
    sessionKey?: string,
    /**
     * Path of the session transcript on the host (informational: engines
     * have no filesystem; read it through `host.read-transcript-delta`).
     */
    sessionFile: string,
  }
  /**
   * Parameters the host adds beyond the reference's core ones. An engine that
   * declares `engine-info.accepted-host-params` receives only those it lists;
   * one that declares nothing receives all of them.
   * # Variants
   * 
   * ## `"session-key"`
   * 
   * ## `"prompt"`
   * 
   * ## `"runtime-settings"`
   * 
   * ## `"runtime-context"`
   * 
   * The runtime context (JSON) of `compact`, `after-turn` and `maintain`.
   * It carries the reference's `sessionTarget` (`agentId`, `sessionId`,
   * `sessionKey`, `storePath`); a compaction's also its `trigger`,
   * `currentTokenCount` and overflow `attempt`; `maintain`'s the agent's
   * `workspaceDir` and `agentDir`, the session's `cwd`, a compaction's
   * `trigger`, `previousSessionId` after a rotation (the target is then
   * the successor's) and `allowDeferredCompactionExecution` when it runs
   * in the background. Fields the host does not know are left out.
   */
  export type HostParam = 'session-key' | 'prompt' | 'runtime-settings' | 'runtime-context';
  /**
   * What `compact` should aim for.
   * # Variants
   * 
   * ## `"budget"`
   * 
   * Keep going until the rebuilt context fits `token-budget`.
   * ## `"threshold"`
   * 
   * Stop once the context is under the compaction trigger threshold.
   */
  export type CompactionTarget = 'budget' | 'threshold';
  /**
   * The parameters of a compaction, as given to `engine.compact` and to
   * `host.delegate-compaction`.
   */
  export interface CompactParams {
    tokenBudget?: bigint,
    /**
     * Compact even if the engine's own trigger would not fire.
     */
    force: boolean,
    /**
     * The prompt size the provider reported, when compaction follows a
     * context-overflow error.
     */
    currentTokenCount?: bigint,
    compactionTarget: CompactionTarget,
    customInstructions?: string,
    /**
     * Host-added (`host-param.runtime-settings`).
     */
    runtimeSettings?: Json,
    /**
     * Host-added (`host-param.runtime-context`).
     */
    runtimeContext?: Json,
  }
  /**
   * A transcript that compaction rotated into (see `compact-result`).
   */
  export interface RotatedSession {
    sessionId: string,
    sessionFile: string,
  }
  /**
   * The outcome of a compaction.
   * 
   * The host validates it: `first-kept-entry-id` must name an entry of the
   * session and `tokens-after` must not exceed `tokens-before`; a result that
   * breaks either rule is `invalid-output` and quarantines the engine.
   */
  export interface CompactResult {
    /**
     * False when compaction was attempted and failed.
     */
    ok: boolean,
    /**
     * False when nothing was compacted (not needed, nothing to cut); the
     * host then tries other means of making room.
     */
    compacted: boolean,
    reason?: string,
    summary?: string,
    firstKeptEntryId?: string,
    tokensBefore: bigint,
    tokensAfter?: bigint,
    rotatedSession?: RotatedSession,
    details?: Json,
  }
  /**
   * # Variants
   * 
   * ## `"unsupported"`
   * 
   * The engine does not implement this operation.
   * ## `"invalid-input"`
   * 
   * The input broke one of the engine's assumptions.
   * ## `"host-failure"`
   * 
   * A host service the engine relies on failed.
   * ## `"internal"`
   * 
   * Anything else.
   */
  export type EngineErrorKind = 'unsupported' | 'invalid-input' | 'host-failure' | 'internal';
  /**
   * How an engine call failed, as the engine reports it. Any error quarantines
   * the engine for the rest of the host's life (or its back-off period), so
   * report errors only for real failures, not for "nothing to do". The one
   * exception is `compact`: an error there is that compaction's answer (the
   * caller gets `ok: false` with the message), not a quarantine, and the
   * next compaction asks the engine again.
   */
  export interface EngineError {
    kind: EngineErrorKind,
    message: string,
  }
}
