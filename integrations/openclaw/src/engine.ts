// The OpenClaw context engine: each method forwards to the shared sidecar
// and, whenever ctxbox itself cannot answer (down, restarting, too slow, an
// error), gives OpenClaw what its legacy engine would: the history passed
// through, nothing compacted, nothing stored. It never throws and never
// waits past its call timeout.

import { createHash } from "node:crypto";

import { Sidecar, SidecarError } from "./sidecar.js";
import type {
  AgentMessage,
  AssembleResult,
  BootstrapResult,
  CompactResult,
  ContextEngine,
  ContextEngineInfo,
  MaintenanceResult,
} from "./types.js";

/** OpenClaw's own compaction (`delegateCompactionToRuntime` of its plugin SDK). */
export type RuntimeCompaction = (params: Parameters<ContextEngine["compact"]>[0]) => Promise<CompactResult>;

/** What the engine needs besides the sidecar. */
export interface EngineOptions {
  /** The ctxbox engine (bundled name or .wasm path) every call names. */
  engine: string;
  /** Longest a call may take, ms. */
  callTimeoutMs: number;
  /** Whether the serving ctxbox engine owns compaction (its `info`). */
  ownsCompaction: boolean;
  /** OpenClaw's built-in compaction, when the plugin runs inside OpenClaw. */
  runtimeCompaction?: RuntimeCompaction;
  /** Where warnings go. */
  warn: (message: string) => void;
}

/** The engine id this plugin registers with OpenClaw. */
export const ENGINE_ID = "ctxbox";

/** A short fingerprint of a message, to tell whether the sidecar's copy is the same. */
export function digest(message: AgentMessage): string {
  return createHash("sha256").update(JSON.stringify(message)).digest("hex").slice(0, 24);
}

/** What this process last told the sidecar about a session. */
interface Synced {
  generation: number;
  count: number;
  lastDigest: string | undefined;
}

/**
 * Per-session sync state, kept per sidecar for the life of the plugin
 * process (OpenClaw makes a new engine object every turn).
 */
export class SessionTracker {
  private readonly sessions = new Map<string, Synced>();

  /** The `sync` that brings the sidecar's copy of `sessionId` to `messages`. */
  syncFor(sidecar: Sidecar, sessionId: string, messages: AgentMessage[], full = false): object {
    const known = this.sessions.get(sessionId);
    let base = 0;
    if (!full && known && known.generation === sidecar.generation && known.count <= messages.length && known.count > 0) {
      if (digest(messages[known.count - 1]) === known.lastDigest) base = known.count;
    }
    const tail = messages.slice(base);
    return {
      base,
      baseDigest: base > 0 ? known?.lastDigest : null,
      messages: tail,
      digests: tail.map(digest),
    };
  }

  /** The sidecar now holds `messages` of `sessionId` (or `count` of them, ending with `last`). */
  record(sidecar: Sidecar, sessionId: string, count: number, last: AgentMessage | undefined): void {
    this.sessions.set(sessionId, {
      generation: sidecar.generation,
      count,
      lastDigest: last === undefined ? undefined : digest(last),
    });
  }

  /** How many messages the sidecar holds for `sessionId`, as far as this process knows. */
  count(sidecar: Sidecar, sessionId: string): number | undefined {
    const known = this.sessions.get(sessionId);
    return known && known.generation === sidecar.generation ? known.count : undefined;
  }

  /** Forgets `sessionId`. */
  forget(sessionId: string): void {
    this.sessions.delete(sessionId);
  }
}

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
  const call = async <T>(method: string, params: object): Promise<T> =>
    (await sidecar.call(method, { engine: options.engine, ...params }, options.callTimeoutMs)) as T;
  /** Runs `work`; on any failure warns and answers `fallback`. */
  const guarded = async <T>(method: string, work: () => Promise<T>, fallback: (why: string) => T): Promise<T> => {
    try {
      return await work();
    } catch (error) {
      const why = error instanceof Error ? error.message : String(error);
      options.warn(`ctxbox ${method} answered without the engine: ${why}`);
      return fallback(why);
    }
  };
  /** A session call with a sync; resends the whole history once if the sidecar's copy differs. */
  const synced = async <T>(
    method: string,
    sessionId: string,
    messages: AgentMessage[],
    params: object,
  ): Promise<T> => {
    const attempt = async (full: boolean) => {
      const sync = tracker.syncFor(sidecar, sessionId, messages, full);
      const generation = sidecar.generation;
      const result = await call<T>(method, { sessionId, sync, ...params });
      if (sidecar.generation === generation) tracker.record(sidecar, sessionId, messages.length, messages.at(-1));
      return result;
    };
    try {
      return await attempt(false);
    } catch (error) {
      if (error instanceof SidecarError && error.code === "history-mismatch") return attempt(true);
      throw error;
    }
  };

  const info: ContextEngineInfo = {
    id: ENGINE_ID,
    name: `ctxbox (${options.engine})`,
    version: "0.1.0",
    ownsCompaction: options.ownsCompaction,
    turnMaintenanceMode: "foreground",
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
        () => call("bootstrap", session(params)),
        (reason) => ({ bootstrapped: false, reason }),
      ),

    maintain: (params) =>
      guarded<MaintenanceResult>(
        "maintain",
        async () => {
          const result = await call<MaintenanceResult>("maintain", {
            ...session(params),
            runtimeContext: plain(params.runtimeContext),
          });
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
          const result = await synced<{
            items: PromptItem[];
            estimatedTokens: number;
            systemPromptAddition?: string | null;
          }>("assemble", params.sessionId, params.messages, {
            sessionKey: params.sessionKey,
            tokenBudget: params.tokenBudget,
            availableTools: params.availableTools ? [...params.availableTools] : [],
            citationsMode: params.citationsMode,
            model: params.model,
            prompt: params.prompt,
            answer: "ranges",
          });
          const answer: AssembleResult = {
            messages: materialize(result.items, params.messages),
            estimatedTokens: result.estimatedTokens,
          };
          if (result.systemPromptAddition) answer.systemPromptAddition = result.systemPromptAddition;
          return answer;
        },
        () => ({ messages: params.messages, estimatedTokens: roughTokens(params.messages) }),
      ),

    commitTurn: (params) =>
      guarded(
        "commitTurn",
        async () => {
          const before = tracker.count(sidecar, params.sessionId);
          const generation = sidecar.generation;
          const result = await call<{ status: "committed" | "duplicate"; length: number }>("commitTurn", {
            sessionId: params.sessionId,
            sessionKey: params.sessionKey,
            advancementKey: params.advancementKey,
            messages: params.messages,
            digests: params.messages.map(digest),
            isHeartbeat: params.isHeartbeat ?? false,
          });
          if (result.status === "committed" && before !== undefined && sidecar.generation === generation) {
            tracker.record(sidecar, params.sessionId, before + params.messages.length, params.messages.at(-1));
          } else if (result.status === "committed") {
            tracker.forget(params.sessionId);
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
          await synced("afterTurn", params.sessionId, params.messages, {
            sessionKey: params.sessionKey,
            prePromptMessageCount: params.prePromptMessageCount,
            tokenBudget: params.tokenBudget,
            isHeartbeat: params.isHeartbeat ?? false,
            runtimeContext: plain(params.runtimeContext),
          });
        },
        () => undefined,
      ),

    // An engine that owns compaction compacts in the sidecar; otherwise (and
    // whenever ctxbox cannot) OpenClaw's own compaction runs, as it would
    // for its legacy engine.
    compact: async (params) => {
      if (options.ownsCompaction) {
        const result = await guarded<CompactResult | undefined>(
          "compact",
          async () =>
            withoutNulls(
              await call<CompactResult>("compact", {
                ...session(params),
                tokenBudget: params.tokenBudget,
                force: params.force ?? false,
                currentTokenCount: params.currentTokenCount,
                compactionTarget: params.compactionTarget,
                customInstructions: params.customInstructions,
                runtimeSettings: plain(params.runtimeSettings),
                runtimeContext: plain(params.runtimeContext),
              }),
            ),
          () => undefined,
        );
        if (result?.ok) return result;
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
    const before = tracker.count(sidecar, sessionId);
    const generation = sidecar.generation;
    const result = await call<{ ingestedCount: number }>("ingest", {
      sessionId,
      sessionKey,
      messages,
      digests: messages.map(digest),
      isHeartbeat: isHeartbeat ?? false,
    });
    if (before !== undefined && sidecar.generation === generation) {
      tracker.record(sidecar, sessionId, before + messages.length, messages.at(-1));
    }
    return result.ingestedCount;
  }
}

/** The session fields every session call carries. */
function session(params: { sessionId: string; sessionKey?: string; sessionFile?: string }): object {
  return { sessionId: params.sessionId, sessionKey: params.sessionKey, sessionFile: params.sessionFile };
}

/** The JSON-safe part of a runtime object (functions such as `llm.complete` dropped). */
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
