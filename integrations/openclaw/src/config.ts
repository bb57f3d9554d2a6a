// The plugin's configuration (`plugins.entries.ctxbox.config`), checked and
// given its defaults.

import { homedir } from "node:os";
import { join } from "node:path";

import { findBinary } from "./install.js";

/** The checked configuration. */
export interface PluginConfig {
  /** Bundled engine name or .wasm path. */
  engine: string;
  /** The ctxbox binary: the setting, else the platform package's, else `ctxbox` on PATH (install.ts). */
  ctxboxBin: string;
  /** ctxbox's data directory. */
  dataDir: string;
  /** Optional ctxbox.toml. */
  configFile?: string;
  /** Longest any call may take, ms (but those below). */
  callTimeoutMs: number;
  /** Longest a call that may compact (`compact`, `commitTurn`, `afterTurn`) may take, ms. */
  compactTimeoutMs: number;
  /** Where to append a JSON line per session call (trace.ts), if anywhere. */
  traceFile?: string;
}

/** The default call timeout: above the sandbox's default 10 s call deadline. */
export const DEFAULT_CALL_TIMEOUT_MS = 15_000;

/**
 * The default timeout of the calls that may compact: the sandbox's default
 * compaction window (ctxbox's `agents.defaults.compaction.timeoutSeconds`,
 * 180 s), which is also OpenClaw's default compaction timeout.
 */
export const DEFAULT_COMPACT_TIMEOUT_MS = 180_000;

/** Reads `raw`, throwing an error naming the bad key. */
export function readConfig(raw: Record<string, unknown> | undefined): PluginConfig {
  const config = raw ?? {};
  const text = (key: string): string | undefined => {
    const value = config[key];
    if (value === undefined) return undefined;
    if (typeof value !== "string" || value.trim() === "") {
      throw new Error(`plugins.entries.ctxbox.config.${key} must be a non-empty string`);
    }
    return value;
  };
  const engine = text("engine");
  if (!engine) throw new Error("plugins.entries.ctxbox.config.engine is required (e.g. \"keep-recent\" or a .wasm path)");
  const milliseconds = (key: string, fallback: number): number => {
    const value = config[key] ?? fallback;
    if (typeof value !== "number" || !Number.isFinite(value) || value < 100) {
      throw new Error(`plugins.entries.ctxbox.config.${key} must be a number of milliseconds ≥ 100`);
    }
    return value;
  };
  return {
    engine,
    ctxboxBin: findBinary(text("ctxboxBin")),
    dataDir: text("dataDir") ?? join(homedir(), ".local", "share", "ctxbox"),
    configFile: text("configFile"),
    callTimeoutMs: milliseconds("callTimeoutMs", DEFAULT_CALL_TIMEOUT_MS),
    compactTimeoutMs: milliseconds("compactTimeoutMs", DEFAULT_COMPACT_TIMEOUT_MS),
    traceFile: text("traceFile"),
  };
}

/** The sidecar's command line for `config`. */
export function serveArgs(config: PluginConfig): string[] {
  const args = ["serve", "--engine", config.engine, "--data-dir", config.dataDir];
  if (config.configFile) args.push("--config", config.configFile);
  return args;
}
