/**
 * `@ctxbox/guest/openclaw`: an OpenClaw context-engine plugin as a ctxbox
 * engine. {@link openClawEngine} finds the plugin's definition, calls its
 * `register(api)` with the sandbox's plugin API (on the first export call:
 * the host's configuration and SQL exist only during calls), creates the
 * context engine it registered, and answers each export of the contract
 * with the matching OpenClaw engine method, messages converted both ways.
 * `ctxbox-ts-build --openclaw-plugin` generates the module that calls it.
 */
import { isThenable } from "../console.js";
import { randomUUID } from "../node/crypto.js";
import { defineEngine, toolArguments, toolsOf, type Awaitable, type Engine, type Tools } from "../engine.js";
import { estimateTokens, runtimeSettings } from "../host.js";
import { userText } from "../prompt.js";
import { readRange, toArray } from "../history.js";
import type {
  AssembledItem,
  AssembleResult,
  EngineInfo,
  HostParam,
  MessageEntry,
  SessionRef,
} from "../wit.js";
import { DEFAULT_PLUGIN_ROOT, emptyRegistrations, HOST_MODEL, openClawConfig, pluginApi, pluginConfig, type PluginIdentity, type Registrations } from "./api.js";
import { duringSessionCall, openClawSessionKey } from "./call.js";
import { compactParamsToOpenClaw, compactResultFromOpenClaw, jsonObject, type OpenClawCompactResult } from "./compaction.js";
import { BootstrapMarks } from "./bootstrap-marks.js";
import { LiveMessages } from "./live-messages.js";
import { fromOpenClaw, sameMessageKey, type OpenClawMessage } from "./messages.js";
import { repairToolPairing } from "./tool-pairing.js";
import { callRegisteredTool, listRegisteredTools } from "./tools.js";

/** An OpenClaw context engine (`ContextEngine` of OpenClaw's plugin SDK), as far as the adapter calls it. */
interface OpenClawContextEngine {
  info?: Record<string, unknown>;
  bootstrap?(params: Record<string, unknown>): Awaitable<Record<string, unknown> | undefined>;
  ingest?(params: Record<string, unknown>): Awaitable<{ ingested?: boolean } | undefined>;
  ingestBatch?(params: Record<string, unknown>): Awaitable<{ ingestedCount?: number } | undefined>;
  assemble(params: Record<string, unknown>): Awaitable<Record<string, unknown>>;
  compact?(params: Record<string, unknown>): Awaitable<OpenClawCompactResult>;
  afterTurn?(params: Record<string, unknown>): Awaitable<void>;
  maintain?(params: Record<string, unknown>): Awaitable<Record<string, unknown> | undefined>;
  prepareSubagentSpawn?(params: Record<string, unknown>): Awaitable<{ rollback?: () => unknown } | undefined>;
  onSubagentEnded?(params: Record<string, unknown>): Awaitable<void>;
  dispose?(): Awaitable<void>;
}

/** What the build knows of the plugin's package. */
export interface OpenClawPluginMeta {
  /** `openclaw.plugin.json`. */
  manifest: Record<string, unknown>;
  /** The plugin's `package.json`. */
  packageJson: Record<string, unknown>;
  /** Where the build mounted the plugin's package (default `/plugin`). */
  rootDir?: string;
}

/** The plugin definition OpenClaw loads from a module: `register` and, for an object, the object. */
interface PluginDefinition {
  definition?: Record<string, unknown>;
  register: (api: Record<string, unknown>) => unknown;
}

/**
 * The definition in a plugin module, found as OpenClaw finds it: the
 * default export (or the module) when it is a function (the `register`
 * itself) or an object with `register`, looking through nested `default`
 * and `module` properties.
 */
export function pluginDefinition(pluginModule: unknown): PluginDefinition {
  const candidates: unknown[] = [(pluginModule as { default?: unknown } | null)?.default ?? pluginModule, pluginModule];
  const seen = new Set<unknown>();
  for (let at = 0; at < candidates.length && at < 12; at += 1) {
    const candidate = candidates[at];
    if (seen.has(candidate)) continue;
    seen.add(candidate);
    if (typeof candidate === "function") return { register: candidate as PluginDefinition["register"] };
    if (candidate !== null && typeof candidate === "object") {
      const definition = candidate as Record<string, unknown>;
      if (typeof definition.register === "function") {
        return { definition, register: definition.register as PluginDefinition["register"] };
      }
      for (const key of ["default", "module"]) if (key in definition) candidates.push(definition[key]);
    }
  }
  throw new Error("the plugin module exports no plugin definition (an object with `register(api)`, or a function)");
}

const text = (value: unknown): string | undefined => (typeof value === "string" && value.trim() !== "" ? value : undefined);

/** Who the plugin is, from its manifest, its definition and its package. */
function identityOf(found: PluginDefinition, meta: OpenClawPluginMeta): PluginIdentity {
  const { manifest, packageJson } = meta;
  const id = text(manifest.id) ?? text(found.definition?.id) ?? text(packageJson.name);
  if (id === undefined) throw new Error("the plugin has no id (openclaw.plugin.json `id`)");
  const contracts = manifest.contracts as { tools?: unknown } | undefined;
  return {
    id,
    name: text(manifest.name) ?? text(found.definition?.name) ?? id,
    version: text(packageJson.version) ?? text(manifest.version),
    description: text(manifest.description) ?? text(found.definition?.description) ?? text(packageJson.description),
    declaredTools: Array.isArray(contracts?.tools) ? contracts.tools.filter((name): name is string => typeof name === "string") : [],
    rootDir: meta.rootDir ?? DEFAULT_PLUGIN_ROOT,
  };
}

/** OpenClaw's names of the host-added parameters, and the contract's. */
const HOST_PARAMS: Record<string, HostParam> = {
  sessionKey: "session-key",
  prompt: "prompt",
  runtimeSettings: "runtime-settings",
  runtimeContext: "runtime-context",
};

/** The contract's `engine-info` for an OpenClaw engine's `info` (the plugin's identity where it says nothing). */
function engineInfo(identity: PluginIdentity, info: Record<string, unknown> | undefined): EngineInfo {
  const accepted = Array.isArray(info?.acceptedHostParams)
    ? info.acceptedHostParams.flatMap((name) => (typeof name === "string" && name in HOST_PARAMS ? [HOST_PARAMS[name] as HostParam] : []))
    : undefined;
  const mode = info?.turnMaintenanceMode;
  return {
    id: text(info?.id) ?? identity.id,
    name: text(info?.name) ?? identity.name,
    version: text(info?.version) ?? identity.version,
    ownsCompaction: info?.ownsCompaction === true,
    acceptedHostParams: accepted,
    turnMaintenanceMode: mode === "background" ? "background" : mode === undefined ? undefined : "foreground",
  };
}

/** `value` (maybe a Promise) passed to `then`, synchronously when it is not a Promise. */
function after<T, R>(value: Awaitable<T>, then: (value: T) => Awaitable<R>): Awaitable<R> {
  return isThenable(value) ? (value as Promise<T>).then(then) : then(value);
}

/** Runs `run` for each of `items` in order, waiting for each answer when it is a Promise. */
function inOrder<T>(items: T[], run: (item: T) => Awaitable<unknown>): Awaitable<void> {
  const from = (start: number): Awaitable<void> => {
    for (let at = start; at < items.length; at += 1) {
      const answer = run(items[at] as T);
      if (isThenable(answer)) return (answer as Promise<unknown>).then(() => from(at + 1));
    }
  };
  return from(0);
}

/**
 * The plugin, registered once and its context engine created once, both on
 * demand. A `register` or factory that fails is tried again by the next
 * call (with fresh registrations), so a failure is each call's error.
 */
class LoadedPlugin {
  registrations: Registrations = emptyRegistrations();
  private registered = false;
  private registering: Promise<void> | undefined;
  private contextEngine: OpenClawContextEngine | undefined;
  private creating: Promise<OpenClawContextEngine> | undefined;

  readonly identity: PluginIdentity;
  private readonly found: PluginDefinition;

  constructor(identity: PluginIdentity, found: PluginDefinition) {
    this.identity = identity;
    this.found = found;
  }

  /** Calls `register(api)`, then the `gateway_start` hooks (the gateway starts once its plugins are loaded). */
  private register(): Awaitable<void> {
    if (this.registered) return;
    if (this.registering) return this.registering;
    const registrations = emptyRegistrations();
    const finish = (): Awaitable<void> =>
      after(this.runHooks(registrations, "gateway_start", {}, {}), () => {
        if (registrations.ignored.length > 0) {
          console.info(`[${this.identity.id}] registered, never called in the sandbox: ${[...new Set(registrations.ignored)].join(", ")}`);
        }
        this.registrations = registrations;
        this.registered = true;
        this.registering = undefined;
      });
    const answer = this.found.register(pluginApi(this.identity, registrations));
    if (!isThenable(answer)) return finish();
    this.registering = (answer as Promise<unknown>).then(finish, (thrown: unknown) => {
      this.registering = undefined;
      throw thrown;
    }) as Promise<void>;
    return this.registering;
  }

  /** The handlers of `event`, run in order; their answers (the defined ones). */
  runHooks(registrations: Registrations, event: string, payload: Record<string, unknown>, ctx: Record<string, unknown>): Awaitable<unknown[]> {
    const answers: unknown[] = [];
    return after(
      inOrder(registrations.hooks.get(event) ?? [], (handler) =>
        after(handler(payload, ctx), (answer) => {
          if (answer !== undefined) answers.push(answer);
        }),
      ),
      () => answers,
    );
  }

  /** The registered context engine: the one with the plugin's id, else the only (or first) one. */
  private factory(): () => unknown {
    const { engines } = this.registrations;
    const factory = engines.get(this.identity.id) ?? engines.values().next().value;
    if (factory === undefined) throw new Error(`plugin "${this.identity.id}" registered no context engine`);
    return factory;
  }

  /** The plugin's context engine, registering the plugin first if need be. */
  engine(): Awaitable<OpenClawContextEngine> {
    if (this.contextEngine) return this.contextEngine;
    if (this.creating) return this.creating;
    const adopt = (engine: unknown): OpenClawContextEngine => {
      if (engine === null || typeof engine !== "object" || typeof (engine as { assemble?: unknown }).assemble !== "function") {
        throw new Error(`plugin "${this.identity.id}": its context-engine factory answered no engine (no \`assemble\`)`);
      }
      this.contextEngine = engine as OpenClawContextEngine;
      this.creating = undefined;
      return this.contextEngine;
    };
    const created = after(this.register(), () => after(this.factory()(), adopt));
    if (!isThenable(created)) return created;
    this.creating = (created as Promise<OpenClawContextEngine>).catch((thrown: unknown) => {
      this.creating = undefined;
      throw thrown;
    });
    return this.creating;
  }

  /** The engine if it can be had without waiting (registration and factory synchronous), else `undefined`. */
  engineNow(): OpenClawContextEngine | undefined {
    const engine = this.engine();
    if (!isThenable(engine)) return engine;
    // Nobody waits for it here: a failure is reported to the call that does.
    (engine as Promise<unknown>).catch(() => {});
    return undefined;
  }

  /** Whether `register` has run to its end. */
  get isRegistered(): boolean {
    return this.registered;
  }

  /** Registers the plugin now if that needs no waiting; answers whether it is registered. */
  registeredNow(): boolean {
    const answer = this.register();
    if (isThenable(answer)) (answer as Promise<unknown>).catch(() => {});
    return this.registered;
  }
}

/** A whole-number token count for the contract (0 for anything else). */
function tokenCount(value: unknown): bigint {
  return typeof value === "number" && Number.isFinite(value) && value > 0 ? BigInt(Math.floor(value)) : 0n;
}

/**
 * The assemble answer's messages against the history: a message that is a
 * history entry (see {@link sameMessageKey}) after the last one kept is
 * kept (adjacent entries as one range), any other message is inserted.
 */
export function itemsAgainstHistory(entries: MessageEntry[], messages: OpenClawMessage[]): AssembledItem[] {
  const positions = new Map<string, number[]>();
  entries.forEach((entry, at) => {
    const key = sameMessageKey(entry.message);
    positions.set(key, [...(positions.get(key) ?? []), at]);
  });
  const items: AssembledItem[] = [];
  let next = 0;
  for (const message of messages) {
    const converted = fromOpenClaw(message);
    const at = positions.get(sameMessageKey(converted))?.find((position) => position >= next);
    if (at === undefined) {
      items.push({ tag: "insert", val: converted });
      continue;
    }
    const last = items.at(-1);
    if (last?.tag === "keep" && last.val.end === at) last.val.end = at + 1;
    else items.push({ tag: "keep", val: { start: at, end: at + 1 } });
    next = at + 1;
  }
  return items;
}

/** The session fields every OpenClaw engine method takes. */
function sessionParams(session: SessionRef): Record<string, unknown> {
  return { sessionId: session.sessionId, sessionKey: openClawSessionKey(session), sessionFile: session.sessionFile };
}

/**
 * What OpenClaw's runtime contexts always carry: the configuration (the one
 * the plugin sees) and the run's provider and model (the host's).
 */
function runtimeContextBase(pluginId: string): Record<string, unknown> {
  return { config: openClawConfig(pluginId), ...HOST_MODEL };
}

/**
 * The runtime context (JSON) parsed, with {@link runtimeContextBase} and its
 * `sessionTarget` lifted, as OpenClaw passes them.
 */
function runtimeContextParams(runtimeContext: string | undefined, pluginId: string): Record<string, unknown> {
  const parsed: Record<string, unknown> = { ...runtimeContextBase(pluginId), ...jsonObject(runtimeContext) };
  return { runtimeContext: parsed, ...(parsed.sessionTarget === undefined ? {} : { sessionTarget: parsed.sessionTarget }) };
}

/** The runtime settings of the call, parsed, as a param (none outside `assemble`, `compact`, `afterTurn`). */
function runtimeSettingsParam(): Record<string, unknown> {
  const settings = runtimeSettings();
  return settings === undefined ? {} : { runtimeSettings: settings };
}

/** The text `before_prompt_build` hooks ask to add to the system prompt, in order: prepended parts, then appended. */
function hookSystemText(answers: unknown[]): { before: string[]; after: string[] } {
  const before: string[] = [];
  const afterParts: string[] = [];
  for (const answer of answers) {
    const { prependSystemContext, appendSystemContext } = (answer ?? {}) as Record<string, unknown>;
    if (typeof prependSystemContext === "string" && prependSystemContext.trim()) before.push(prependSystemContext);
    if (typeof appendSystemContext === "string" && appendSystemContext.trim()) afterParts.push(appendSystemContext);
  }
  return { before, after: afterParts };
}

/** The most of an assemble budget the hooks' system text may take before it is left out. */
const HOOK_TEXT_SHARE = 0.5;

/**
 * The hooks' system text and the tokens it takes (the host's estimate). In
 * OpenClaw it is part of the system prompt, outside the engine's budget; the
 * host counts a `systemPromptAddition` against the budget, so the engine is
 * given the budget less the text, and a text larger than half the budget is
 * left out (with a warning) rather than crowd out the conversation.
 */
function hookTextWithin(
  text: { before: string[]; after: string[] },
  budget: bigint | undefined,
  pluginId: string,
): { before: string[]; after: string[]; tokens: number } {
  const all = [...text.before, ...text.after].join("\n\n");
  if (all === "") return { ...text, tokens: 0 };
  const tokens = estimateTokens([{ id: "hook", parentId: undefined, timestampMs: 0n, message: userText(all) }]);
  if (budget === undefined || tokens <= Number(budget) * HOOK_TEXT_SHARE) return { ...text, tokens };
  console.warn(`[${pluginId}] before_prompt_build text (~${tokens} tokens) left out: over half the budget of ${budget}`);
  return { before: [], after: [], tokens: 0 };
}

/**
 * The ctxbox engine of an OpenClaw plugin module (`import * as plugin`):
 * `engine` for the component's `engine` export, `tools` for its `tools`
 * export. `meta` is the plugin's manifest and `package.json`. Nothing of
 * the plugin runs until the host's first call.
 */
export function openClawEngine(pluginModule: unknown, meta: OpenClawPluginMeta): { engine: Engine; tools: Tools } {
  const found = pluginDefinition(pluginModule);
  const plugin = new LoadedPlugin(identityOf(found, meta), found);
  const { identity } = plugin;
  const preparations = new Map<string, () => unknown>();
  const live = new LiveMessages();
  const bootstrapped = new BootstrapMarks();

  /** The plugin's `bootstrap` of `session` with its live `messages`, recorded as done for every instance. */
  const bootstrapPlugin = (openclaw: OpenClawContextEngine, session: SessionRef, messages: OpenClawMessage[]) => {
    bootstrapped.mark(session.sessionId);
    return openclaw.bootstrap?.({ ...sessionParams(session), messages });
  };

  /**
   * Before an `assemble` of a session the plugin was never bootstrapped for
   * (by the host, in any instance of the engine), the plugin's `bootstrap`,
   * as OpenClaw bootstraps an engine before a run of a session with a
   * transcript (`bootstrapHarnessContextEngine`): engines that keep their
   * own store, as lossless-claw does, otherwise answer a session they do
   * not know with the raw live history. Not again in an instance that
   * replaced the one bootstrapped: OpenClaw bootstraps before every run, but
   * lossless-claw's `bootstrap` of a conversation it holds reconciles the
   * whole history, 10¹¹ instructions in the sandbox's interpreter on a long
   * session. A failure is logged and the `assemble` goes on, as in OpenClaw.
   */
  const bootstrapIfNeverBootstrapped = (openclaw: OpenClawContextEngine, session: SessionRef, messages: OpenClawMessage[]): Awaitable<unknown> => {
    if (!openclaw.bootstrap || messages.length === 0 || bootstrapped.has(session.sessionId)) return undefined;
    const failed = (thrown: unknown) => console.warn(`[${identity.id}] context engine bootstrap failed: ${String(thrown)}`);
    try {
      const answer = bootstrapPlugin(openclaw, session, messages);
      return isThenable(answer) ? (answer as Promise<unknown>).catch(failed) : answer;
    } catch (thrown) {
      failed(thrown);
      return undefined;
    }
  };

  /** Runs `run` with the context engine, as the call about `session` (`operation`). */
  const withEngine = <T>(session: SessionRef | undefined, operation: string, run: (engine: OpenClawContextEngine) => Awaitable<T>): Awaitable<T> => {
    const go = (): Awaitable<T> => after(plugin.engine(), run);
    return session === undefined ? go() : duringSessionCall(session, operation, go);
  };

  const engine = defineEngine({
    info: () => {
      let source: Record<string, unknown> | undefined;
      try {
        source = plugin.engineNow()?.info;
      } catch (thrown) {
        console.warn(`[${identity.id}] the engine could not be created to read its info: ${(thrown as Error).message}`);
      }
      return engineInfo(identity, source);
    },

    bootstrap(session, history) {
      return withEngine(session, "bootstrap", (openclaw) => {
        if (!openclaw.bootstrap) return { bootstrapped: false };
        const messages = live.ofHistory(session.sessionId, toArray(history));
        return after(bootstrapPlugin(openclaw, session, messages), (result) => ({
          bootstrapped: result?.bootstrapped === true,
          importedMessages: typeof result?.importedMessages === "number" ? Math.max(0, Math.floor(result.importedMessages)) : undefined,
          reason: typeof result?.reason === "string" ? result.reason : undefined,
        }));
      });
    },

    ingest(session, entry, isHeartbeat) {
      return withEngine(session, "ingest", (openclaw) => {
        if (!openclaw.ingest) return { ingested: false };
        const [message] = live.ofEntries(session.sessionId, [entry]);
        return after(openclaw.ingest({ ...sessionParams(session), message, isHeartbeat }), (result) => ({
          ingested: result?.ingested === true,
        }));
      });
    },

    ingestBatch(session, entries, isHeartbeat) {
      return withEngine(session, "ingestBatch", (openclaw) => {
        if (openclaw.ingestBatch) {
          const messages = live.ofEntries(session.sessionId, entries);
          return after(openclaw.ingestBatch({ ...sessionParams(session), messages, isHeartbeat }), (result) => ({
            ingestedCount: typeof result?.ingestedCount === "number" ? Math.max(0, Math.floor(result.ingestedCount)) : 0,
          }));
        }
        // OpenClaw ingests one by one for an engine without `ingestBatch`.
        let ingestedCount = 0;
        return after(
          inOrder(live.ofEntries(session.sessionId, entries), (message) =>
            after(openclaw.ingest?.({ ...sessionParams(session), message, isHeartbeat }), (result) => {
              if (result?.ingested === true) ingestedCount += 1;
            }),
          ),
          () => ({ ingestedCount }),
        );
      });
    },

    assemble(session, history, params) {
      return withEngine(session, "assemble", (openclaw) => {
        const entries = toArray(history);
        const messages = live.ofHistory(session.sessionId, entries);
        const hookEvent = { prompt: params.prompt ?? "", messages };
        const hookCtx = { sessionId: session.sessionId, sessionKey: openClawSessionKey(session) };
        const bootstrap = bootstrapIfNeverBootstrapped(openclaw, session, messages);
        return after(after(bootstrap, () => plugin.runHooks(plugin.registrations, "before_prompt_build", hookEvent, hookCtx)), (answers) => {
          const hooks = hookTextWithin(hookSystemText(answers), params.tokenBudget, identity.id);
          const request = {
            ...sessionParams(session),
            messages,
            tokenBudget: params.tokenBudget === undefined ? undefined : Math.max(0, Number(params.tokenBudget) - hooks.tokens),
            availableTools: new Set(params.availableTools),
            citationsMode: params.citationsMode,
            prompt: params.prompt,
            model: params.model,
            ...runtimeSettingsParam(),
          };
          return after(openclaw.assemble(request), (result): AssembleResult => {
            const own = typeof result.systemPromptAddition === "string" && result.systemPromptAddition.trim() ? [result.systemPromptAddition] : [];
            const addition = [...hooks.before, ...own, ...hooks.after].join("\n\n");
            const projection = (result.contextProjection as { mode?: unknown } | undefined)?.mode;
            return {
              items: itemsAgainstHistory(entries, repairToolPairing(Array.isArray(result.messages) ? (result.messages as OpenClawMessage[]) : [])),
              estimatedTokens: tokenCount(result.estimatedTokens),
              systemPromptAddition: addition === "" ? undefined : addition,
              contextProjection: projection === "per_turn" ? { tag: "per-turn" } : undefined,
            };
          });
        });
      });
    },

    compact(session, _history, params) {
      return withEngine(session, "compact", (openclaw) => {
        if (!openclaw.compact) return { ok: true, compacted: false, reason: "the engine does not compact", tokensBefore: 0n };
        return after(openclaw.compact(compactParamsToOpenClaw(session, params, runtimeContextBase(identity.id))), compactResultFromOpenClaw);
      });
    },

    afterTurn(session, history, params) {
      return withEngine(session, "afterTurn", (openclaw) => {
        if (!openclaw.afterTurn) {
          // OpenClaw ingests the turn's new messages for an engine without `afterTurn`.
          const fresh = readRange(history, params.prePromptMessageCount, history.len());
          return fresh.length === 0 ? undefined : after(this.ingestBatch(session, fresh, params.isHeartbeat), () => undefined);
        }
        return openclaw.afterTurn({
          ...sessionParams(session),
          messages: live.ofHistory(session.sessionId, toArray(history)),
          prePromptMessageCount: params.prePromptMessageCount,
          isHeartbeat: params.isHeartbeat,
          tokenBudget: params.tokenBudget === undefined ? undefined : Number(params.tokenBudget),
          ...runtimeContextParams(params.runtimeContext, identity.id),
          ...runtimeSettingsParam(),
        });
      });
    },

    maintain(session, _history, _reason, runtimeContext) {
      return withEngine(session, "maintain", (openclaw) => {
        if (!openclaw.maintain) return { changed: false, rewrittenEntries: 0 };
        return after(openclaw.maintain({ ...sessionParams(session), ...runtimeContextParams(runtimeContext, identity.id) }), (result) => ({
          changed: result?.changed === true,
          rewrittenEntries: typeof result?.rewrittenEntries === "number" ? Math.max(0, Math.floor(result.rewrittenEntries)) : 0,
          reason: typeof result?.reason === "string" ? result.reason : undefined,
        }));
      });
    },

    prepareSubagentSpawn(spawn) {
      return withEngine(undefined, "prepareSubagentSpawn", (openclaw) => {
        if (!openclaw.prepareSubagentSpawn) return undefined;
        const request = {
          parentSessionKey: spawn.parentSessionKey,
          childSessionKey: spawn.childSessionKey,
          contextMode: spawn.contextMode,
          ...(spawn.ttlMs === undefined ? {} : { ttlMs: Number(spawn.ttlMs) }),
        };
        return after(openclaw.prepareSubagentSpawn(request), (preparation) => {
          if (typeof preparation?.rollback !== "function") return undefined;
          const id = `spawn-${randomUUID()}`;
          preparations.set(id, preparation.rollback);
          return id;
        });
      });
    },

    rollbackSubagentSpawn(preparationId) {
      const rollback = preparations.get(preparationId);
      preparations.delete(preparationId);
      return rollback === undefined ? undefined : after(rollback(), () => undefined);
    },

    onSubagentEnded(childSessionKey, reason) {
      return withEngine(undefined, "onSubagentEnded", (openclaw) => openclaw.onSubagentEnded?.({ childSessionKey, reason }));
    },

    dispose() {
      // Nothing to close for a plugin that never ran.
      if (!plugin.isRegistered) return undefined;
      return withEngine(undefined, "dispose", (openclaw) =>
        after(openclaw.dispose?.(), () => after(plugin.runHooks(plugin.registrations, "gateway_stop", {}, {}), () => undefined)),
      );
    },

    tools: () => (plugin.registeredNow() ? listRegisteredTools(plugin.registrations.tools, pluginConfig()) : []),

    callTool(session, name, argumentsJson) {
      const params = toolArguments(argumentsJson);
      return withEngine(session, "callTool", () =>
        callRegisteredTool(plugin.registrations.tools, pluginConfig(), session, name, params),
      );
    },
  });
  return { engine, tools: toolsOf(engine) };
}
