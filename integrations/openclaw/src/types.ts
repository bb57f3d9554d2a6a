// The part of OpenClaw's context-engine contract (2026.9.6,
// `src/context-engine/types.ts`) this plugin implements, restated so the
// plugin builds without OpenClaw installed.

/** A message as OpenClaw holds it; passed through untouched. */
export type AgentMessage = { role: string; [field: string]: unknown };

/** What `info` declares. */
export interface ContextEngineInfo {
  id: string;
  name: string;
  version?: string;
  ownsCompaction?: boolean;
  turnMaintenanceMode?: "foreground" | "background";
  transcriptSemantics?: {
    currentTurnFence?: "before-current-turn-entry-v1";
    turnAdvancementIdempotency?: "atomic-idempotent-v1";
  };
}

/** Fields of every session-scoped call. */
export interface SessionParams {
  sessionId: string;
  sessionKey?: string;
  sessionFile?: string;
  runtimeSettings?: unknown;
  runtimeContext?: unknown;
}

export interface BootstrapResult {
  bootstrapped: boolean;
  importedMessages?: number;
  reason?: string;
}

export interface MaintenanceResult {
  changed: boolean;
  bytesFreed: number;
  rewrittenEntries: number;
  reason?: string;
}

export interface AssembleResult {
  messages: AgentMessage[];
  estimatedTokens: number;
  systemPromptAddition?: string;
}

export interface CompactResult {
  ok: boolean;
  compacted: boolean;
  reason?: string;
  result?: {
    summary?: string;
    firstKeptEntryId?: string;
    tokensBefore: number;
    tokensAfter?: number;
    details?: unknown;
  };
}

/** The engine object a factory returns. */
export interface ContextEngine {
  readonly info: ContextEngineInfo;
  bootstrap(params: SessionParams): Promise<BootstrapResult>;
  maintain(params: SessionParams & { abortSignal?: AbortSignal }): Promise<MaintenanceResult>;
  ingest(params: { sessionId: string; sessionKey?: string; message: AgentMessage; isHeartbeat?: boolean }): Promise<{
    ingested: boolean;
  }>;
  ingestBatch(params: {
    sessionId: string;
    sessionKey?: string;
    messages: AgentMessage[];
    isHeartbeat?: boolean;
  }): Promise<{ ingestedCount: number }>;
  assemble(
    params: SessionParams & {
      messages: AgentMessage[];
      tokenBudget?: number;
      availableTools?: Set<string>;
      citationsMode?: string;
      model?: string;
      prompt?: string;
    },
  ): Promise<AssembleResult>;
  commitTurn(
    params: SessionParams & {
      advancementKey: string;
      messages: AgentMessage[];
      isHeartbeat?: boolean;
      admission?: unknown;
      terminal?: unknown;
    },
  ): Promise<{ status: "committed" | "duplicate" }>;
  afterTurn(
    params: SessionParams & {
      messages: AgentMessage[];
      prePromptMessageCount: number;
      isHeartbeat?: boolean;
      tokenBudget?: number;
    },
  ): Promise<void>;
  compact(
    params: SessionParams & {
      tokenBudget?: number;
      force?: boolean;
      currentTokenCount?: number;
      compactionTarget?: "budget" | "threshold";
      customInstructions?: string;
      abortSignal?: AbortSignal;
    },
  ): Promise<CompactResult>;
  prepareSubagentSpawn(params: {
    parentSessionKey: string;
    childSessionKey: string;
    contextMode?: "isolated" | "fork";
    ttlMs?: number;
  }): Promise<{ rollback: () => Promise<void> } | undefined>;
  onSubagentEnded(params: { childSessionKey: string; reason: "deleted" | "completed" | "swept" | "released" }): Promise<void>;
  dispose(): Promise<void>;
}

/** One message of a model completion (`LlmCompleteMessage`). */
export interface LlmMessage {
  role: "system" | "user" | "assistant";
  content: string;
}

/** What this plugin asks of `llm.complete` (a part of `LlmDirectCompleteParams`). */
export interface LlmCompleteParams {
  messages: LlmMessage[];
  systemPrompt?: string;
  maxTokens?: number;
  /** A reason for OpenClaw's audit log. */
  purpose?: string;
  signal?: AbortSignal;
}

/** What `llm.complete` answers (the fields this plugin reads of `LlmCompleteResult`). */
export interface LlmCompleteResult {
  text: string;
  provider?: string;
  model?: string;
  /** `"error"`: the provider failed (OpenClaw resolves rather than throws). */
  stopReason?: "stop" | "length" | "toolUse" | "error" | "aborted";
  usage?: { inputTokens?: number; outputTokens?: number };
}

/** OpenClaw's model: `api.runtime.llm` (plugin-wide) or `runtimeContext.llm` (bound to the session). */
export interface LlmCapability {
  complete(params: LlmCompleteParams): Promise<LlmCompleteResult>;
}

/** What a plugin tool factory is told of the run it builds tools for (part of `OpenClawPluginToolContext`). */
export interface ToolContext {
  sessionId?: string;
  sessionKey?: string;
}

/** What a tool answers the model. */
export interface ToolResult {
  content: { type: "text"; text: string }[];
  details: unknown;
}

/** A tool offered to the model (the part of OpenClaw's `AnyAgentTool` this plugin fills in). */
export interface AgentTool {
  name: string;
  label: string;
  description: string;
  /** A JSON Schema object. */
  parameters: Record<string, unknown>;
  /** Throws to report a failure (OpenClaw tells the model and the turn goes on). */
  execute(toolCallId: string, params: unknown, signal?: AbortSignal): Promise<ToolResult>;
}

/** The slice of OpenClaw's plugin API this plugin uses. */
export interface PluginApi {
  pluginConfig?: Record<string, unknown>;
  logger?: { warn?: (message: string) => void; info?: (message: string) => void; debug?: (message: string) => void };
  runtime?: { llm?: LlmCapability };
  registerContextEngine(id: string, factory: () => ContextEngine | Promise<ContextEngine>): void;
  registerTool(factory: (ctx: ToolContext) => AgentTool | null, options: { name: string }): void;
}
