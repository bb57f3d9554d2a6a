// The OpenClaw plugin entry: registers the `ctxbox` context engine. One
// sidecar per plugin process and configuration, shared by the engine
// objects OpenClaw makes every turn; sessions live in the sidecar.

import { readConfig, serveArgs, type PluginConfig } from "./config.js";
import { ENGINE_ID, SessionTracker, createEngine, type RuntimeCompaction } from "./engine.js";
import { Sidecar } from "./sidecar.js";
import type { PluginApi } from "./types.js";

export { ENGINE_ID } from "./engine.js";

interface Shared {
  sidecar: Sidecar;
  tracker: SessionTracker;
  /** The serving engine's `ownsCompaction`, once the sidecar has said. */
  ownsCompaction?: boolean;
}

const shared = new Map<string, Shared>();

/** The process-wide sidecar for `config` (started on first call). */
export function sharedSidecar(config: PluginConfig, log: (line: string) => void): Shared {
  const key = JSON.stringify([config.ctxboxBin, serveArgs(config)]);
  let entry = shared.get(key);
  if (!entry) {
    entry = { sidecar: new Sidecar({ bin: config.ctxboxBin, args: serveArgs(config), log }), tracker: new SessionTracker() };
    shared.set(key, entry);
  }
  return entry;
}

/** Whether the serving engine owns compaction: asked once, then refreshed in the background. */
async function ownsCompaction(entry: Shared, config: PluginConfig): Promise<boolean> {
  const ask = entry.sidecar
    .call("info", { engine: config.engine }, Math.min(config.callTimeoutMs, 10_000))
    .then((answer) => {
      const info = (answer as { info?: { ownsCompaction?: boolean } }).info;
      entry.ownsCompaction = info?.ownsCompaction === true;
      return entry.ownsCompaction;
    })
    .catch(() => entry.ownsCompaction ?? false);
  if (entry.ownsCompaction !== undefined) {
    void ask;
    return entry.ownsCompaction;
  }
  return ask;
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

/** Registers the engine. */
export default function register(api: PluginApi): void {
  const config = readConfig(api.pluginConfig);
  const warn = (message: string) => (api.logger?.warn ?? console.warn)(message);
  const log = (line: string) => {
    // The sidecar's warnings (a quarantine, a fallback) are the operator's business.
    if (/\bWARN\b|\bERROR\b/.test(line)) warn(`ctxbox: ${line}`);
    else api.logger?.debug?.(`ctxbox: ${line}`);
  };
  const runtimeCompaction = loadRuntimeCompaction();
  api.registerContextEngine(ENGINE_ID, async () => {
    const entry = sharedSidecar(config, log);
    return createEngine(entry.sidecar, entry.tracker, {
      engine: config.engine,
      callTimeoutMs: config.callTimeoutMs,
      ownsCompaction: await ownsCompaction(entry, config),
      runtimeCompaction: await runtimeCompaction,
      warn,
    });
  });
}
