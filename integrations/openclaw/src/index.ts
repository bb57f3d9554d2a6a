// The OpenClaw plugin entry: registers the `ctxbox` context engine and the
// engine's tools. One sidecar per plugin process and configuration, shared
// by the engine objects OpenClaw makes every turn; sessions live in the
// sidecar. The sidecar's model completions go to OpenClaw's own model.

import { readConfig, serveArgs, type PluginConfig } from "./config.js";
import { reverseOptions } from "./complete.js";
import { checkInstallation, doctorArgs, helloProblems, sayOnce } from "./install.js";
import { ENGINE_ID, createEngine, type RuntimeCompaction } from "./engine.js";
import { traceTo } from "./trace.js";
import { SessionTracker } from "./tracker.js";
import { Sidecar, type ReverseOptions } from "./sidecar.js";
import { ToolCatalog, declaredTools, toolFactory } from "./tools.js";
import type { PluginApi } from "./types.js";

export { ENGINE_ID } from "./engine.js";

/** This plugin's manifest, whose `contracts.tools` names the engine tools OpenClaw may offer. */
const MANIFEST = new URL("../../openclaw.plugin.json", import.meta.url);

interface Shared {
  sidecar: Sidecar;
  tracker: SessionTracker;
  tools: ToolCatalog;
  /** What the serving engine's `info` says of it, once the sidecar has said. */
  traits?: EngineTraits;
}

/** What OpenClaw is told of the serving engine, from its `info`. */
export interface EngineTraits {
  /** Whether it owns compaction. */
  ownsCompaction: boolean;
  /**
   * When OpenClaw runs its turn maintenance: `background` also defers a
   * budget compaction to `maintain` when the engine owns compaction.
   */
  turnMaintenanceMode: "foreground" | "background";
}

/**
 * The sidecars of this process, by configuration. OpenClaw evaluates a
 * plugin's module once per registry (the context engine's, the tools'), so
 * the map lives on `globalThis`: every copy of this module shares one sidecar
 * (and its sessions) per configuration. Rename the key if `Shared` changes.
 */
const SHARED_KEY = Symbol.for("ctxbox.openclaw.sidecars.v1");
const shared = ((globalThis as Record<symbol, unknown>)[SHARED_KEY] ??= new Map<string, Shared>()) as Map<string, Shared>;

/** The process-wide sidecar for `config` (started on first call). */
export function sharedSidecar(
  config: PluginConfig,
  log: (line: string) => void,
  warn: (message: string) => void,
  reverse?: ReverseOptions,
): Shared {
  const key = JSON.stringify([config.ctxboxBin, serveArgs(config)]);
  let entry = shared.get(key);
  if (!entry) {
    const onHello = (answer: Record<string, unknown>) => {
      for (const problem of helloProblems(config.ctxboxBin, answer)) sayOnce(warn, problem);
    };
    const sidecar = new Sidecar({ bin: config.ctxboxBin, args: serveArgs(config), log, reverse, onHello });
    const tools = new ToolCatalog(sidecar, { engine: config.engine, timeoutMs: Math.min(config.callTimeoutMs, 10_000), warn });
    entry = { sidecar, tracker: new SessionTracker(), tools };
    shared.set(key, entry);
    // Said on OpenClaw's console at start, once: a missing or mismatched
    // binary, and what `ctxbox doctor` finds wrong with the engine and data.
    void checkInstallation(config.ctxboxBin, doctorArgs(config.engine, config.dataDir, config.configFile), warn);
  }
  return entry;
}

/** What the serving engine's `info` says of it: asked once, then refreshed in the background. */
async function engineTraits(entry: Shared, config: PluginConfig): Promise<EngineTraits> {
  const ask = entry.sidecar
    .call("info", { engine: config.engine }, Math.min(config.callTimeoutMs, 10_000))
    .then((answer) => {
      entry.traits = traitsOf((answer as { info?: unknown }).info);
      return entry.traits;
    })
    .catch(() => entry.traits ?? traitsOf(undefined));
  if (entry.traits !== undefined) {
    void ask;
    return entry.traits;
  }
  return ask;
}

/** What an `info` answer's engine info says: {@link ownsCompactionOf}, and its turn maintenance mode (`foreground` unless it says `background`). */
export function traitsOf(info: unknown): EngineTraits {
  const mode = typeof info === "object" && info !== null ? (info as { turnMaintenanceMode?: unknown }).turnMaintenanceMode : undefined;
  return { ownsCompaction: ownsCompactionOf(info), turnMaintenanceMode: mode === "background" ? "background" : "foreground" };
}

/**
 * Whether an `info` answer's engine info says it owns compaction.
 * PROTOCOL.md names the field `ownsCompaction`; `ctxbox serve` (protocols 1
 * and 2 alike, so far) sends the engine's info with snake_case fields
 * (`owns_compaction`), so both are read.
 */
export function ownsCompactionOf(info: unknown): boolean {
  if (typeof info !== "object" || info === null) return false;
  const { ownsCompaction, owns_compaction } = info as { ownsCompaction?: unknown; owns_compaction?: unknown };
  return (ownsCompaction ?? owns_compaction) === true;
}

/** The engine's tool list: refreshed every turn, waited for only when the running sidecar has not been asked yet. */
async function refreshTools(entry: Shared): Promise<void> {
  const asked = entry.tools.refresh();
  if (!entry.tools.fresh) await asked;
}

/** OpenClaw's `delegateCompactionToRuntime`, when the plugin runs inside OpenClaw. */
async function loadRuntimeCompaction(): Promise<RuntimeCompaction | undefined> {
  const sdk = "openclaw/plugin-sdk/core";
  try {
    const module = (await import(sdk)) as { delegateCompactionToRuntime?: RuntimeCompaction };
    return module.delegateCompactionToRuntime;
  } catch {
    return undefined;
  }
}

/** Registers the engine and a factory for each engine tool the manifest declares. */
export default function register(api: PluginApi): void {
  const config = readConfig(api.pluginConfig);
  const warn = (message: string) => (api.logger?.warn ?? console.warn)(message);
  const log = (line: string) => {
    // The sidecar's warnings (a quarantine, a fallback) are the operator's business.
    if (/\bWARN\b|\bERROR\b/.test(line)) warn(`ctxbox: ${line}`);
    else api.logger?.debug?.(`ctxbox: ${line}`);
  };
  const entry = sharedSidecar(config, log, warn, reverseOptions(api.runtime?.llm));
  const runtimeCompaction = loadRuntimeCompaction();
  const trace = traceTo(config.traceFile);
  api.registerContextEngine(ENGINE_ID, async () => {
    const [traits] = await Promise.all([engineTraits(entry, config), refreshTools(entry)]);
    return createEngine(entry.sidecar, entry.tracker, {
      engine: config.engine,
      callTimeoutMs: config.callTimeoutMs,
      compactTimeoutMs: config.compactTimeoutMs,
      ...traits,
      runtimeCompaction: await runtimeCompaction,
      warn,
      trace,
    });
  });
  const toolOptions = { engine: config.engine, callTimeoutMs: config.callTimeoutMs };
  for (const name of declaredTools(MANIFEST)) {
    api.registerTool(toolFactory(name, entry.sidecar, entry.tools, toolOptions), { name });
  }
}
