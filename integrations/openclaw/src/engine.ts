// The OpenClaw context engine: each method forwards to the shared sidecar
// and, whenever ctxbox itself cannot answer (down, restarting, too slow, an
// error), gives OpenClaw what its legacy engine would: the history passed
// through, nothing compacted, nothing stored. It never throws and never
// waits past its call timeout.

import { Sidecar, SidecarError, type CallOptions } from "./sidecar.js";
import type { Trace } from "./trace.js";
import { SessionTracker, digest, type SyncParams } from "./tracker.js";
import type {
  AgentMessage,
  AssembleResult,
  BootstrapResult,
  CompactResult,
  ContextEngine,
  ContextEngineInfo,
  LlmCapability,
  MaintenanceResult,
} from "./types.js";

/** OpenClaw's own compaction (`delegateCompactionToRuntime` of its plugin SDK). */
export type RuntimeCompaction = (params: Parameters<ContextEngine["compact"]>[0]) => Promise<CompactResult>;

/** What the engine needs besides the sidecar. */
export interface EngineOptions {
  /** The ctxbox engine (bundled name or .wasm path) every call names. */
  engine: string;
  /** Longest a call may take, ms (but those below). */
  callTimeoutMs: number;
  /**
   * Longest a call that may compact may take, ms: `compact`, and
   * `commitTurn` and `afterTurn` (an engine may compact after a turn).
   * Default: `callTimeoutMs`.
   */
  compactTimeoutMs?: number;
  /** Whether the serving ctxbox engine owns compaction (its `info`). */
  ownsCompaction: boolean;
  /** The serving engine's turn maintenance mode (its `info`; `foreground` when it names none). */
  turnMaintenanceMode?: "foreground" | "background";
  /** OpenClaw's built-in compaction, when the plugin runs inside OpenClaw. */
  runtimeCompaction?: RuntimeCompaction;
  /** Where warnings go. */
  warn: (message: string) => void;
  /** Where each session call is traced, if anywhere (`traceFile`). */
  trace?: Trace;
}

/** The engine id this plugin registers with OpenClaw. */
export const ENGINE_ID = "ctxbox";

/** A piece of an assembled prompt as the sidecar tells it: a run of the session's own messages, or an engine-made one. */
export type PromptItem = { keep: [number, number] } | { insert: AgentMessage };

/**
 * The prompt `items` describe, taken from `messages` (what the sidecar holds,
 * as the sync made sure). Throws on a range outside them.
 */
export function materialize(items: PromptItem[], messages: AgentMessage[]): AgentMessage[] {
  const prompt: AgentMessage[] = [];
  for (const item of items) {
    if ("keep" in item) {
      const [start, end] = item.keep;
      if (!(Number.isInteger(start) && Number.isInteger(end) && 0 <= start && start <= end && end <= messages.length)) {
        throw new Error(`the sidecar kept messages ${start}..${end} of ${messages.length}`);
      }
      for (let index = start; index < end; index++) prompt.push(messages[index]);
    } else {
      prompt.push(item.insert);
    }
  }
  return prompt;
}

/** A rough token count of `messages` for a pass-through answer (4 characters a token). */
export function roughTokens(messages: AgentMessage[]): number {
  let chars = 0;
  for (const message of messages) chars += JSON.stringify(message)?.length ?? 0;
  return Math.ceil(chars / 4);
}

/** Builds the engine object OpenClaw asks for each turn. */
export function createEngine(sidecar: Sidecar, tracker: SessionTracker, options: EngineOptions): ContextEngine {
  /** The timeout of `method`: the compaction timeout for the calls that may compact. */
  const timeoutOf = (method: string) =>
    MAY_COMPACT.has(method) ? (options.compactTimeoutMs ?? options.callTimeoutMs) : options.callTimeoutMs;
  /**
   * Calls `method`; the engine's completions while it runs use
   * `runtimeContext`'s model, if it has one. `signal` abandons the call
   * (and cancels it on the sidecar).
   */
  const call = async <T>(method: string, params: object, extra: CallExtra = {}): Promise<T> =>
    (await sidecar.call(method, { engine: options.engine, ...params }, timeoutOf(method), {
      ...callOptions(extra.runtimeContext),
      signal: extra.signal,
      onSent: extra.onSent,
    })) as T;
  /**
   * Calls `method` and tells whether the process that answered is still
   * the running one (so what it now holds of the session can be recorded),
   * and, with `since`, the one that ran then. A call that started the
   * sidecar counts: its answer came from the new process.
   */
  const callCurrent = async <T>(
    method: string,
    params: object,
    extra: CallExtra = {},
    since?: number,
  ): Promise<{ result: T; current: boolean }> => {
    let sentTo: number | undefined;
    const result = await call<T>(method, params, { ...extra, onSent: (generation) => (sentTo = generation) });
    return { result, current: sentTo === sidecar.generation && (since === undefined || since === sentTo) };
  };
  /** Runs `work`; on any failure warns and answers `fallback`. */
  const guarded = async <T>(method: string, work: () => Promise<T>, fallback: (why: string) => T): Promise<T> => {
    try {
      return await work();
    } catch (error) {
      const why =
        error instanceof SidecarError ? `${error.code}: ${error.message}` : error instanceof Error ? error.message : String(error);
      options.warn(`ctxbox ${method} answered without the engine: ${why}`);
      return fallback(why);
    }
  };
  /** Warns that the sidecar's count of a session is not this plugin's (it is resent in full at the next call). */
  const disagreed = (method: string, sessionId: string, length: unknown, ours: number | undefined) =>
    options.warn(
      `ctxbox ${method}: the sidecar holds ${String(length)} messages of session ${sessionId}, this plugin ${ours ?? "none"}; it is resent in full at the next call`,
    );
  /**
   * A session call with a sync of `messages` (what OpenClaw passes: the
   * session, or a projection of it the tracker recognises). When the
   * sidecar's copy differs, the whole history is resent, marked a reset only
   * when the sidecar's copy is no longer than it. Answers the result and the
   * history the sidecar then holds (what its ranges are positions in).
   */
  const synced = async <T extends { length?: unknown }>(
    method: string,
    sessionId: string,
    messages: AgentMessage[],
    params: object,
    runtimeContext?: unknown,
  ): Promise<{ result: T; history: AgentMessage[] }> => {
    const plan = tracker.plan(sidecar, sessionId, messages);
    let sync: SyncParams = plan.sync;
    for (;;) {
      try {
        const { result, current } = await callCurrent<T>(method, { sessionId, sync, ...params }, { runtimeContext });
        options.trace?.({ method, sessionId, relation: plan.relation, sync: traced(sync), length: result.length });
        const holder = current ? sidecar.generation : undefined;
        if (!tracker.settle(sessionId, plan, holder, result.length)) disagreed(method, sessionId, result.length, plan.history.length);
        return { result, history: plan.history };
      } catch (error) {
        if (!(error instanceof SidecarError && error.code === "history-mismatch")) throw error;
        const held = (error.data as { length?: unknown } | undefined)?.length;
        if (sync.base > 0) sync = tracker.resend(plan, false);
        else if (!sync.reset && typeof held === "number" && held <= plan.history.length) sync = tracker.resend(plan, true);
        else throw error;
      }
    }
  };

  const info: ContextEngineInfo = {
    id: ENGINE_ID,
    name: `ctxbox (${options.engine})`,
    version: "0.1.0",
    ownsCompaction: options.ownsCompaction,
    turnMaintenanceMode: options.turnMaintenanceMode ?? "foreground",
    transcriptSemantics: {
      currentTurnFence: "before-current-turn-entry-v1",
      turnAdvancementIdempotency: "atomic-idempotent-v1",
    },
  };

  return {
    info,

    bootstrap: (params) =>
      guarded<BootstrapResult>(
        "bootstrap",
        () => call("bootstrap", session(params), { runtimeContext: params.runtimeContext }),
        (reason) => ({ bootstrapped: false, reason }),
      ),

    maintain: (params) =>
      guarded<MaintenanceResult>(
        "maintain",
        async () => {
          const result = await call<MaintenanceResult>(
            "maintain",
            { ...session(params), runtimeContext: safeRuntimeContext(params.runtimeContext) },
            { runtimeContext: params.runtimeContext, signal: params.abortSignal },
          );
          return {
            changed: result.changed,
            bytesFreed: result.bytesFreed ?? 0,
            rewrittenEntries: result.rewrittenEntries,
            reason: result.reason ?? undefined,
          };
        },
        (reason) => ({ changed: false, bytesFreed: 0, rewrittenEntries: 0, reason }),
      ),

    ingest: (params) =>
      guarded(
        "ingest",
        async () => {
          const result = await ingestOne(params.sessionId, params.sessionKey, [params.message], params.isHeartbeat);
          return { ingested: result > 0 };
        },
        () => ({ ingested: false }),
      ),

    ingestBatch: (params) =>
      guarded(
        "ingestBatch",
        async () => ({
          ingestedCount: await ingestOne(params.sessionId, params.sessionKey, params.messages, params.isHeartbeat),
        }),
        () => ({ ingestedCount: 0 }),
      ),

    assemble: (params) =>
      guarded<AssembleResult>(
        "assemble",
        async () => {
          const { result, history } = await synced<{
            items: PromptItem[];
            estimatedTokens: number;
            systemPromptAddition?: string | null;
            length?: number;
          }>("assemble", params.sessionId, params.messages, {
            sessionKey: params.sessionKey,
            tokenBudget: params.tokenBudget,
            availableTools: params.availableTools ? [...params.availableTools] : [],
            citationsMode: params.citationsMode,
            model: params.model,
            prompt: params.prompt,
            answer: "ranges",
          });
          const prompt = materialize(result.items, history);
          // OpenClaw's next assemble of the turn passes what this one kept.
          tracker.answered(params.sessionId, prompt);
          const answer: AssembleResult = { messages: prompt, estimatedTokens: result.estimatedTokens };
          if (result.systemPromptAddition) answer.systemPromptAddition = result.systemPromptAddition;
          return answer;
        },
        () => ({ messages: params.messages, estimatedTokens: roughTokens(params.messages) }),
      ),

    commitTurn: (params) =>
      guarded(
        "commitTurn",
        async () => {
          const sessionId = params.sessionId;
          const generation = sidecar.generation;
          const commit = (sync: SyncParams | undefined) =>
            callCurrent<{ status: "committed" | "duplicate"; length?: number }>(
              "commitTurn",
              {
                sessionId,
                sessionKey: params.sessionKey,
                advancementKey: params.advancementKey,
                messages: params.messages,
                digests: params.messages.map(digest),
                isHeartbeat: params.isHeartbeat ?? false,
                // The engine hears of the turn (after-turn) under the turn's
                // budget: an engine that compacts after a turn needs it.
                tokenBudget: turnBudget(params.runtimeContext),
                ...(sync ? { sync } : {}),
              },
              {},
              generation,
            );
          // A sidecar that lost the session (restarted, or its copy is
          // stale) gets the history with the turn.
          let sync = tracker.inStep(sidecar, sessionId) ? undefined : tracker.fullSync(sessionId);
          let answer;
          try {
            answer = await commit(sync);
          } catch (error) {
            // The sidecar gave the session up: never a turn on a partial
            // history. Without the history to resend, OpenClaw's transcript
            // reaches the sidecar at the next assemble.
            const full = tracker.fullSync(sessionId);
            if (!(error instanceof SidecarError && error.code === "session-unknown" && full)) throw error;
            sync = full;
            answer = await commit(sync);
          }
          const { result, current } = answer;
          options.trace?.({ method: "commitTurn", sessionId, sync: sync && traced(sync), status: result.status, length: result.length });
          if (sync && current) tracker.resent(sessionId, generation);
          const before = tracker.history(sessionId)?.length;
          // A duplicate the sidecar holds the turn of (an answer lost before) counts as appended.
          const holdsTurn =
            result.status === "committed" || (before !== undefined && result.length === before + params.messages.length);
          if (!tracker.appended(sessionId, generation, current, holdsTurn ? params.messages : [], result.length)) {
            disagreed("commitTurn", sessionId, result.length, tracker.history(sessionId)?.length);
          }
          return { status: result.status };
        },
        // The transcript is OpenClaw's; like the legacy engine, nothing
        // else needs the turn. The sidecar catches up at the next sync.
        () => ({ status: "committed" as const }),
      ),

    afterTurn: (params) =>
      guarded(
        "afterTurn",
        async () => {
          await synced(
            "afterTurn",
            params.sessionId,
            params.messages,
            {
              sessionKey: params.sessionKey,
              prePromptMessageCount: params.prePromptMessageCount,
              tokenBudget: params.tokenBudget,
              isHeartbeat: params.isHeartbeat ?? false,
              runtimeContext: safeRuntimeContext(params.runtimeContext),
            },
            params.runtimeContext,
          );
        },
        () => undefined,
      ),

    // An engine that owns compaction compacts in the sidecar; otherwise (and
    // whenever ctxbox cannot) OpenClaw's own compaction runs, as it would
    // for its legacy engine. So it does when the engine compacted nothing
    // but OpenClaw requires a compaction: refused, it would fail the turn.
    compact: async (params) => {
      options.trace?.({ method: "compact", sessionId: params.sessionId, cause: compactionCause(params) });
      if (options.ownsCompaction) {
        const result = await guarded<CompactResult | undefined>(
          "compact",
          async () =>
            withoutNulls(
              await call<CompactResult>(
                "compact",
                {
                  ...session(params),
                  tokenBudget: params.tokenBudget,
                  force: params.force ?? false,
                  currentTokenCount: params.currentTokenCount,
                  compactionTarget: params.compactionTarget,
                  customInstructions: params.customInstructions,
                  runtimeSettings: plain(params.runtimeSettings),
                  runtimeContext: safeRuntimeContext(params.runtimeContext),
                },
                { runtimeContext: params.runtimeContext, signal: params.abortSignal },
              ),
            ),
          () => undefined,
        );
        if (params.abortSignal?.aborted) {
          return result ?? { ok: false, compacted: false, reason: "the compaction was aborted" };
        }
        if (result?.ok && (result.compacted || !requiredCompaction(params))) return result;
        if (result?.ok) {
          options.warn(
            `ctxbox compact: the engine compacted nothing${result.reason ? ` (${result.reason})` : ""} but OpenClaw requires a compaction (${compactionCause(params)}); OpenClaw's own compaction runs`,
          );
        }
      }
      if (!options.runtimeCompaction) {
        return { ok: false, compacted: false, reason: "ctxbox could not compact and OpenClaw's compaction is not available" };
      }
      return options.runtimeCompaction(params);
    },

    prepareSubagentSpawn: (params) =>
      guarded(
        "prepareSubagentSpawn",
        async () => {
          const result = await call<{ preparationId: string | null }>("prepareSubagentSpawn", {
            parentSessionKey: params.parentSessionKey,
            childSessionKey: params.childSessionKey,
            contextMode: params.contextMode,
            ttlMs: params.ttlMs,
          });
          const preparationId = result.preparationId;
          if (!preparationId) return undefined;
          return {
            rollback: () =>
              guarded(
                "rollbackSubagentSpawn",
                async () => {
                  await call("rollbackSubagentSpawn", { preparationId });
                },
                () => undefined,
              ),
          };
        },
        () => undefined,
      ),

    onSubagentEnded: (params) =>
      guarded(
        "subagentEnded",
        async () => {
          await call("subagentEnded", { childSessionKey: params.childSessionKey, reason: params.reason });
        },
        () => undefined,
      ),

    // The sidecar is shared by every engine object of this process; a turn
    // ending does not stop it.
    dispose: async () => undefined,
  };

  async function ingestOne(
    sessionId: string,
    sessionKey: string | undefined,
    messages: AgentMessage[],
    isHeartbeat: boolean | undefined,
  ): Promise<number> {
    const generation = sidecar.generation;
    const { result, current } = await callCurrent<{ ingestedCount: number; length?: number }>(
      "ingest",
      { sessionId, sessionKey, messages, digests: messages.map(digest), isHeartbeat: isHeartbeat ?? false },
      {},
      generation,
    );
    options.trace?.({ method: "ingest", sessionId, length: result.length });
    if (!tracker.appended(sessionId, generation, current, messages, result.length)) {
      disagreed("ingest", sessionId, result.length, tracker.history(sessionId)?.length);
    }
    return result.ingestedCount;
  }
}

/** What a trace tells of a sync: not its messages. */
function traced(sync: SyncParams): { base: number; messages: number; reset: boolean } {
  return { base: sync.base, messages: sync.messages.length, reset: sync.reset === true };
}

/** The session fields every session call carries. */
function session(params: { sessionId: string; sessionKey?: string; sessionFile?: string }): object {
  return { sessionId: params.sessionId, sessionKey: params.sessionKey, sessionFile: params.sessionFile };
}

/** What a call to the sidecar may carry besides its parameters. */
interface CallExtra {
  /** OpenClaw's runtime context of the call: its model (`llm`) answers the engine's completions. */
  runtimeContext?: unknown;
  /** Abandons the call. */
  signal?: AbortSignal;
  /** Told the generation of the process the call is sent to. */
  onSent?: (generation: number) => void;
}

/** The methods whose engine call may compact: they get the compaction timeout (the sidecar gives them its compaction window). */
const MAY_COMPACT = new Set(["compact", "commitTurn", "afterTurn"]);

/**
 * The budget OpenClaw gives a turn, from the runtime context it passes
 * `commitTurn` (`tokenBudget`, else the model's context window): a positive
 * whole number of tokens, or undefined.
 */
export function turnBudget(runtimeContext: unknown): number | undefined {
  if (typeof runtimeContext !== "object" || runtimeContext === null) return undefined;
  const { tokenBudget, modelContextWindow } = runtimeContext as { tokenBudget?: unknown; modelContextWindow?: unknown };
  for (const value of [tokenBudget, modelContextWindow]) {
    if (typeof value === "number" && Number.isFinite(value) && value >= 1) return Math.floor(value);
  }
  return undefined;
}

/** The triggers of the compactions OpenClaw forces to rescue a turn: its context budget, a provider's overflow, a timeout. */
const RESCUE_TRIGGERS = new Set(["budget", "overflow", "timeout_recovery"]);

/**
 * Whether OpenClaw requires this compaction: its preflight before a turn
 * (`runtimeContext.forceReason: "preflight_required"`), or a compaction it
 * forces to rescue a turn (`runtimeContext.trigger` "budget", "overflow" or
 * "timeout_recovery"). OpenClaw fails the turn, or gives up its recovery,
 * when such a compaction compacts nothing. Any other — a manual one
 * (`/compact`, `openclaw sessions compact`: trigger "manual"), an unforced
 * one, one OpenClaw does not say the cause of — is the engine's to decline.
 */
export function requiredCompaction(params: { force?: boolean; runtimeContext?: unknown }): boolean {
  const context = (typeof params.runtimeContext === "object" && params.runtimeContext !== null ? params.runtimeContext : {}) as {
    forceReason?: unknown;
    trigger?: unknown;
  };
  if (context.forceReason === "preflight_required") return true;
  if (context.forceReason === "manual") return false;
  return params.force === true && typeof context.trigger === "string" && RESCUE_TRIGGERS.has(context.trigger);
}

/** What made OpenClaw ask for a required compaction, for a warning. */
function compactionCause(params: { runtimeContext?: unknown }): string {
  const { forceReason, trigger } = (params.runtimeContext ?? {}) as { forceReason?: unknown; trigger?: unknown };
  return [typeof forceReason === "string" ? forceReason : undefined, typeof trigger === "string" ? `trigger ${trigger}` : undefined]
    .filter(Boolean)
    .join(", ") || "forced";
}

/** Scalar fields of OpenClaw's runtime context the sidecar is sent. */
const RUNTIME_CONTEXT_FIELDS = [
  "trigger",
  "forceReason",
  "preflightCompactionTrigger",
  "currentTokenCount",
  "tokenBudget",
  "attempt",
  "maxAttempts",
  "provider",
  "modelId",
  "model",
  "modelContextWindow",
  "cwd",
  "workspaceDir",
  "agentHarnessId",
  "allowDeferredCompactionExecution",
] as const;

/** Fields of `runtimeContext.sessionTarget` the sidecar is sent (not `storePath`, OpenClaw's own database). */
const SESSION_TARGET_FIELDS = ["agentId", "sessionId", "sessionKey", "threadId"] as const;

/**
 * What the sidecar is told of OpenClaw's runtime context: the chosen scalar
 * fields above and the session target's ids, nothing else. The context also
 * holds the whole OpenClaw configuration (`config`, provider API keys
 * included), functions and the sender's details, which must not reach an
 * engine.
 */
export function safeRuntimeContext(context: unknown): Record<string, unknown> | undefined {
  if (typeof context !== "object" || context === null) return undefined;
  const source = context as Record<string, unknown>;
  const picked: Record<string, unknown> = {};
  for (const field of RUNTIME_CONTEXT_FIELDS) {
    if (isScalar(source[field])) picked[field] = source[field];
  }
  const target = source.sessionTarget;
  if (typeof target === "object" && target !== null) {
    const ids: Record<string, unknown> = {};
    for (const field of SESSION_TARGET_FIELDS) {
      const value = (target as Record<string, unknown>)[field];
      if (isScalar(value)) ids[field] = value;
    }
    if (Object.keys(ids).length > 0) picked.sessionTarget = ids;
  }
  return Object.keys(picked).length > 0 ? picked : undefined;
}

/** A string, a finite number or a boolean. */
function isScalar(value: unknown): value is string | number | boolean {
  return typeof value === "string" || typeof value === "boolean" || (typeof value === "number" && Number.isFinite(value));
}

/** The call options that lend the sidecar's completions `runtimeContext.llm` (OpenClaw's model, bound to the session). */
function callOptions(runtimeContext: unknown): CallOptions {
  const llm = (runtimeContext as { llm?: Partial<LlmCapability> } | undefined)?.llm;
  if (typeof llm?.complete !== "function") return {};
  const complete = llm.complete.bind(llm);
  return { context: { llm: { complete } } };
}

/** The JSON-safe part of a runtime object (functions dropped). */
function plain(value: unknown): unknown {
  if (value === undefined) return undefined;
  try {
    return JSON.parse(JSON.stringify(value));
  } catch {
    return undefined;
  }
}

/** `value` with its `null` fields removed (the sidecar writes `null` for "none"). */
function withoutNulls<T>(value: T): T {
  return JSON.parse(JSON.stringify(value, (_key, field) => (field === null ? undefined : field)));
}
