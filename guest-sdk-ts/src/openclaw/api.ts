/**
 * The `api` object an OpenClaw plugin's `register(api)` is given, inside a
 * ctxbox engine, and what the plugin registers through it. What the
 * contract has a place for is kept (context engines, tools, the
 * `before_prompt_build`, `gateway_start` and `gateway_stop` hooks); the rest
 * (commands, other hooks, session actions, services, …) is accepted and
 * never called, as an OpenClaw in which those events never happen would.
 * A conversation hook (`before_prompt_build` among them) is refused, as
 * OpenClaw refuses it for a plugin it did not bundle, unless the engine's
 * configuration allows it ({@link allowsConversationAccess}).
 */
import { HostFailure } from "../errors.js";
import { complete, engineConfig } from "../host.js";
import type { CompletionMessage } from "../wit.js";

/** OpenClaw's version whose plugin API this one follows. */
export const OPENCLAW_API_VERSION = "2026.9.6";

/** Where the plugin's package is mounted (read-only) unless the build says otherwise. */
export const DEFAULT_PLUGIN_ROOT = "/plugin";

/** The OpenClaw state directory a plugin is told about (virtual, like the rest of its filesystem). */
export const STATE_DIR = "/home/engine/.openclaw";

/**
 * The hooks that see the conversation: OpenClaw registers them for a plugin
 * it did not bundle only when `plugins.entries.<id>.hooks.allowConversationAccess`
 * is true.
 */
const CONVERSATION_HOOKS = new Set([
  "before_model_resolve",
  "agent_turn_prepare",
  "before_prompt_build",
  "before_agent_reply",
  "llm_input",
  "llm_output",
  "before_agent_finalize",
  "agent_end",
  "before_agent_run",
]);

/**
 * Whether the engine's configuration (`plugins.entries.<id>.config`) allows
 * the plugin's conversation hooks: its `hooks.allowConversationAccess`, as
 * `env` is read from it (OpenClaw keeps the switch beside the plugin's
 * configuration, where a sandboxed engine has nothing).
 */
export function allowsConversationAccess(config: Record<string, unknown>): boolean {
  const hooks = config.hooks;
  return typeof hooks === "object" && hooks !== null && (hooks as { allowConversationAccess?: unknown }).allowConversationAccess === true;
}

/** A hook handler as OpenClaw calls it: `(event, ctx)`. */
export type HookHandler = (event: Record<string, unknown>, ctx: Record<string, unknown>) => unknown;

/** A registered tool source: the factory OpenClaw calls per session, and the names it declared. */
export interface ToolRegistration {
  factory: (ctx: Record<string, unknown>) => unknown;
  names: string[];
}

/** What a plugin registered. */
export interface Registrations {
  /** Context-engine factories by id, in registration order. */
  engines: Map<string, () => unknown>;
  tools: ToolRegistration[];
  /** Hook handlers by event name, in registration order. */
  hooks: Map<string, HookHandler[]>;
  /** Names of registrations the sandbox accepted without a use for them (for the log). */
  ignored: string[];
}

/** What the adapter tells the api about the plugin. */
export interface PluginIdentity {
  id: string;
  name: string;
  version?: string;
  description?: string;
  /** The tool names the manifest declares (`contracts.tools`): OpenClaw refuses others. */
  declaredTools: string[];
  /** Where the plugin's package is (in the sandbox's virtual filesystem). */
  rootDir: string;
}

/** The engine's configuration: `plugins.entries.<id>.config` of the host (an object, maybe empty). */
export function pluginConfig(): Record<string, unknown> {
  const config = engineConfig();
  return config !== null && typeof config === "object" && !Array.isArray(config) ? (config as Record<string, unknown>) : {};
}

/** A logger writing to the host's log through `console`, with OpenClaw's logger methods. */
function pluginLogger(id: string): Record<string, (message: unknown, ...rest: unknown[]) => void> {
  const prefix = `[${id}]`;
  return {
    debug: (message, ...rest) => console.debug(prefix, message, ...rest),
    info: (message, ...rest) => console.info(prefix, message, ...rest),
    warn: (message, ...rest) => console.warn(prefix, message, ...rest),
    error: (message, ...rest) => console.error(prefix, message, ...rest),
  };
}

/** Answers the model's completion the plugin asks for, the most tokens when it names none. */
const DEFAULT_MAX_TOKENS = 4096;

const ROLES = new Set(["system", "user", "assistant"]);

/**
 * `api.runtime.llm.complete`: OpenClaw's plugin completion, here the host's
 * model (`host.complete`). The plugin's `model` override is not honoured:
 * the host decides which model answers (OpenClaw refuses overrides unless
 * its operator allows them).
 */
async function llmComplete(id: string, params: Record<string, unknown>): Promise<Record<string, unknown>> {
  const messages: CompletionMessage[] = [];
  for (const message of Array.isArray(params.messages) ? params.messages : []) {
    const { role, content } = (message ?? {}) as { role?: unknown; content?: unknown };
    if (typeof role !== "string" || !ROLES.has(role)) throw new Error(`runtime.llm.complete: a message with role ${JSON.stringify(role)}`);
    messages.push({ role: role as CompletionMessage["role"], text: typeof content === "string" ? content : JSON.stringify(content) });
  }
  const maxTokens =
    typeof params.maxTokens === "number" && Number.isFinite(params.maxTokens) && params.maxTokens >= 1
      ? Math.min(Math.floor(params.maxTokens), 0xffffffff)
      : DEFAULT_MAX_TOKENS;
  const purpose = typeof params.purpose === "string" ? params.purpose : undefined;
  let answer;
  try {
    answer = complete({
      messages,
      system: typeof params.systemPrompt === "string" ? params.systemPrompt : undefined,
      maxTokens,
      purpose,
    });
  } catch (thrown: unknown) {
    // OpenClaw's errors are plain Errors with the provider's message.
    throw thrown instanceof HostFailure ? new Error(thrown.message, { cause: thrown }) : thrown;
  }
  const inputTokens = Number(answer.inputTokens);
  const outputTokens = Number(answer.outputTokens);
  return {
    text: answer.text,
    provider: "ctxbox",
    model: answer.model ?? "ctxbox",
    stopReason: "stop",
    agentId: "main",
    usage: { inputTokens, outputTokens, totalTokens: inputTokens + outputTokens },
    execution: { mode: "direct-provider", owner: { kind: "provider", id: "ctxbox" } },
    audit: { caller: { kind: "plugin", id }, ...(purpose === undefined ? {} : { purpose }) },
  };
}

/** An OpenClaw runtime service the sandbox does not offer: calling it fails, naming it. */
function notOffered(what: string): () => never {
  return () => {
    throw new Error(`${what} is not offered to a sandboxed engine`);
  };
}

/** `~` and paths relative to `rootDir` as OpenClaw's `api.resolvePath` resolves them, in the virtual filesystem. */
function resolvePath(rootDir: string, input: string): string {
  if (input === "~" || input.startsWith("~/")) return `/home/engine${input.slice(1)}`;
  if (input.startsWith("/")) return input;
  const joined = `${rootDir}/${input}`.split("/");
  const parts: string[] = [];
  for (const part of joined) {
    if (part === "" || part === ".") continue;
    if (part === "..") parts.pop();
    else parts.push(part);
  }
  return `/${parts.join("/")}`;
}

/**
 * The provider and model the plugin is told the agent uses: the host's
 * model, whichever it is (`runtime.llm.complete` always answers with it).
 */
export const HOST_MODEL = { provider: "ctxbox", model: "host" } as const;

/** {@link HOST_MODEL} as OpenClaw's `provider/model` reference. */
const HOST_MODEL_REF = `${HOST_MODEL.provider}/${HOST_MODEL.model}`;

/**
 * The OpenClaw configuration plugin `id` sees (`api.config`, and the
 * `config` of its runtime contexts, as OpenClaw passes it): its own entry
 * (`plugins.entries.<id>`, enabled, `config` = the engine's configuration)
 * and the agents' default model ({@link HOST_MODEL_REF}); nothing else of
 * the host's.
 */
export function openClawConfig(id: string): Record<string, unknown> {
  return {
    agents: { defaults: { model: { primary: HOST_MODEL_REF } } },
    plugins: { entries: { [id]: { enabled: true, config: pluginConfig() } } },
  };
}

/** A fresh {@link Registrations}. */
export function emptyRegistrations(): Registrations {
  return { engines: new Map(), tools: [], hooks: new Map(), ignored: [] };
}

/**
 * The `api` for `plugin`, recording into `registrations`. Its configuration
 * is read now: build it during a call (the host's configuration exists only
 * then).
 */
export function pluginApi(plugin: PluginIdentity, registrations: Registrations): Record<string, unknown> {
  const root = openClawConfig(plugin.id);
  const config = (root.plugins as { entries: Record<string, { config: Record<string, unknown> }> }).entries[plugin.id]?.config ?? {};
  const logger = pluginLogger(plugin.id);
  const ignore = (what: string) => (..._args: unknown[]): void => {
    registrations.ignored.push(what);
  };
  const runtime = {
    version: OPENCLAW_API_VERSION,
    registrationMode: "full",
    config: { current: () => root, loadConfig: () => root },
    llm: { complete: (params: Record<string, unknown>) => llmComplete(plugin.id, params) },
    logging: { getChildLogger: () => logger, shouldLogVerbose: () => false },
    state: { resolveStateDir: () => STATE_DIR },
    subagent: {
      run: notOffered("runtime.subagent.run"),
      waitForRun: notOffered("runtime.subagent.waitForRun"),
      getSessionMessages: notOffered("runtime.subagent.getSessionMessages"),
      deleteSession: notOffered("runtime.subagent.deleteSession"),
    },
  };
  return {
    id: plugin.id,
    name: plugin.name,
    version: plugin.version,
    description: plugin.description,
    source: `${plugin.rootDir}/index.js`,
    rootDir: plugin.rootDir,
    registrationMode: "full",
    config: root,
    pluginConfig: config,
    runtime,
    logger,
    resolvePath: (input: string) => resolvePath(plugin.rootDir, input),
    registerContextEngine(id: string, factory: () => unknown): void {
      if (typeof id !== "string" || id.trim() === "" || typeof factory !== "function") {
        throw new Error("registerContextEngine needs an id and a factory");
      }
      if (registrations.engines.has(id)) {
        logger.error(`context engine "${id}" is already registered`);
        return;
      }
      registrations.engines.set(id, factory);
    },
    registerTool(tool: unknown, options?: { name?: string; names?: string[] }): void {
      const names = [...(options?.names ?? []), ...(options?.name ? [options.name] : [])];
      if (typeof tool !== "function") names.push((tool as { name?: string })?.name ?? "");
      // OpenClaw refuses tools the manifest does not declare (`contracts.tools`).
      const undeclared = names.filter((name) => !plugin.declaredTools.includes(name));
      if (plugin.declaredTools.length === 0 || undeclared.length > 0) {
        logger.error(`plugin must declare contracts.tools for: ${(undeclared.length ? undeclared : names).join(", ")}`);
        return;
      }
      const factory = typeof tool === "function" ? (tool as ToolRegistration["factory"]) : () => tool;
      registrations.tools.push({ factory, names });
    },
    on(event: string, handler: HookHandler): void {
      if (CONVERSATION_HOOKS.has(event) && !allowsConversationAccess(config)) {
        logger.warn(
          `typed hook "${event}" blocked, as OpenClaw blocks it for a plugin it did not bundle: allow it with hooks.allowConversationAccess = true in the engine's configuration (plugins.entries.${plugin.id}.config)`,
        );
        return;
      }
      const handlers = registrations.hooks.get(event) ?? [];
      handlers.push(handler);
      registrations.hooks.set(event, handlers);
    },
    registerHook: ignore("registerHook"),
    registerCommand: ignore("registerCommand"),
    registerService: ignore("registerService"),
    registerCli: ignore("registerCli"),
    registerGatewayMethod: ignore("registerGatewayMethod"),
    registerHttpRoute: ignore("registerHttpRoute"),
    registerProvider: ignore("registerProvider"),
    registerChannel: ignore("registerChannel"),
    registerMemoryPromptSection: ignore("registerMemoryPromptSection"),
    session: { controls: { registerSessionAction: ignore("session.controls.registerSessionAction") } },
  };
}
