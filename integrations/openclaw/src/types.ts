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

/** The slice of OpenClaw's plugin API this plugin uses. */
export interface PluginApi {
  pluginConfig?: Record<string, unknown>;
  logger?: { warn?: (message: string) => void; info?: (message: string) => void; debug?: (message: string) => void };
  registerContextEngine(id: string, factory: () => ContextEngine | Promise<ContextEngine>): void;
}
