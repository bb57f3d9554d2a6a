// The `ctxbox` binary the plugin runs: where it is found (the `ctxboxBin`
// setting, else the per-platform package `@ctxbox/openclaw-<os>-<arch>` that
// npm installed beside the plugin as an optional dependency, else PATH),
// whether its version is one this plugin speaks, and what `ctxbox doctor`
// says about the installation. Problems are said once per process.

import { execFile } from "node:child_process";
import { existsSync } from "node:fs";
import { createRequire } from "node:module";

/** The oldest ctxbox this plugin works with. */
export const MIN_CTXBOX: readonly number[] = [0, 1, 0];
/** The first ctxbox version this plugin does not know (0.x: each minor version may change the sidecar). */
export const BELOW_CTXBOX: readonly number[] = [0, 2, 0];

const VERSION_TIMEOUT_MS = 10_000;
const DOCTOR_TIMEOUT_MS = 120_000;

/** How to get a binary, said with every "missing" or "wrong version" message. */
export const INSTALL_HINT =
  "reinstall the plugin so npm brings its platform package (@ctxbox/openclaw-" +
  `${process.platform}-${process.arch}), or set plugins.entries.ctxbox.config.ctxboxBin to a ctxbox binary`;

/** The platform package's name for this machine. */
export function platformPackage(platform: string = process.platform, arch: string = process.arch): string {
  return `@ctxbox/openclaw-${platform}-${arch}`;
}

/**
 * The binary to run: `setting` when given, else the platform package's
 * `bin/ctxbox` (resolved from this module, as Node resolves a dependency),
 * else `ctxbox` on PATH.
 */
export function findBinary(setting: string | undefined, resolve: (id: string) => string = defaultResolve): string {
  if (setting) return setting;
  try {
    const bin = resolve(`${platformPackage()}/bin/ctxbox`);
    if (existsSync(bin)) return bin;
  } catch {
    // Not installed (another platform, or --omit=optional): PATH it is.
  }
  return "ctxbox";
}

function defaultResolve(id: string): string {
  return createRequire(import.meta.url).resolve(id);
}

/** `0.1.0` (or `ctxbox 0.1.0`, `0.1.0-rc.1`) as numbers; undefined if it is not a version. */
export function parseVersion(text: string): number[] | undefined {
  const word = text.trim().split(/\s+/).pop() ?? "";
  const parts = word.split(/[-+]/)[0].split(".");
  if (parts.length !== 3 || !parts.every((part) => /^\d+$/.test(part))) return undefined;
  return parts.map(Number);
}

function compare(a: readonly number[], b: readonly number[]): number {
  for (let i = 0; i < 3; i += 1) if (a[i] !== b[i]) return a[i] - b[i];
  return 0;
}

/** Why ctxbox `version` (what `bin` reported) does not suit this plugin, or undefined when it does. */
export function versionProblem(bin: string, version: string): string | undefined {
  const wanted = `>= ${MIN_CTXBOX.join(".")}, < ${BELOW_CTXBOX.join(".")}`;
  const parsed = parseVersion(version);
  if (!parsed) return `${bin} reports version ${JSON.stringify(version)}, not a ctxbox version; this plugin needs ctxbox ${wanted}`;
  if (compare(parsed, MIN_CTXBOX) < 0) {
    return `${bin} is ctxbox ${version}, too old for this plugin (it needs ctxbox ${wanted}): upgrade the binary (${INSTALL_HINT})`;
  }
  if (compare(parsed, BELOW_CTXBOX) >= 0) {
    return `${bin} is ctxbox ${version}, newer than this plugin knows (it needs ctxbox ${wanted}): upgrade the plugin (openclaw plugins install @ctxbox/openclaw) or use ctxbox ${MIN_CTXBOX[0]}.${MIN_CTXBOX[1]}.x`;
  }
  return undefined;
}

/** What a sidecar's `hello` answer says is wrong for this plugin: a ctxbox version it does not support, an engine (`defaultEngine`) it does not have. */
export function helloProblems(bin: string, answer: { version?: unknown; defaultEngine?: unknown; engines?: unknown }): string[] {
  const problems: string[] = [];
  if (typeof answer.version === "string") {
    const problem = versionProblem(bin, answer.version);
    if (problem) problems.push(problem);
  }
  const { defaultEngine: engine, engines } = answer;
  if (typeof engine === "string" && Array.isArray(engines) && !engine.endsWith(".wasm") && !engines.includes(engine)) {
    const known = engines.filter((name) => name !== "legacy").join(", ");
    problems.push(
      `no engine \`${engine}\` (plugins.entries.ctxbox.config.engine): this ctxbox has ${known}, or name a .wasm file; every turn goes on with OpenClaw's own context meanwhile`,
    );
  }
  return problems;
}

/** Runs `bin args` and resolves with its stdout (empty when it failed to start or timed out). */
function output(bin: string, args: string[], timeoutMs: number): Promise<{ stdout: string; missing: boolean }> {
  return new Promise((resolve) => {
    execFile(bin, args, { timeout: timeoutMs, maxBuffer: 4 * 1024 * 1024 }, (error, stdout) => {
      const code = (error as NodeJS.ErrnoException | null)?.code;
      resolve({ stdout: String(stdout ?? ""), missing: code === "ENOENT" || code === "EACCES" });
    });
  });
}

/** Why `bin` cannot serve this plugin (missing, not ctxbox, the wrong version), or undefined. */
export async function binaryProblem(bin: string): Promise<string | undefined> {
  const { stdout, missing } = await output(bin, ["--version"], VERSION_TIMEOUT_MS);
  if (missing) {
    return `no ctxbox binary: \`${bin}\` is not ${bin.includes("/") ? "an executable file" : "on PATH"}, so every turn goes on with OpenClaw's own context; ${INSTALL_HINT}`;
  }
  return versionProblem(bin, stdout.trim());
}

/** `ctxbox doctor`'s command line, limited to the plugin's engine and data directory. */
export function doctorArgs(engine: string, dataDir: string, configFile: string | undefined): string[] {
  const args = ["doctor", "--json", "--engine", engine, "--data-dir", dataDir];
  if (configFile) args.push("--config", configFile);
  return args;
}

/** The problems in `ctxbox doctor --json`'s output that concern this plugin (not Hermes's), each with its fix. */
export function doctorProblems(stdout: string): string[] {
  let report: unknown;
  try {
    report = JSON.parse(stdout);
  } catch {
    return [];
  }
  const findings = (report as { findings?: unknown })?.findings;
  if (!Array.isArray(findings)) return [];
  return findings
    .filter((f) => f && typeof f === "object" && f.status === "problem" && f.area !== "hermes")
    .map((f) => `${f.subject}: ${f.detail}${f.fix ? ` (fix: ${f.fix})` : ""}`);
}

/** The messages said in this process (on `globalThis`: OpenClaw evaluates the module more than once). */
const SAID_KEY = Symbol.for("ctxbox.openclaw.said.v1");
const said = ((globalThis as Record<symbol, unknown>)[SAID_KEY] ??= new Set<string>()) as Set<string>;

/** `warn(text)` unless this process said `text` already; whether it was said now. */
export function sayOnce(warn: (message: string) => void, text: string): boolean {
  if (said.has(text)) return false;
  said.add(text);
  warn(`ctxbox: ${text}`);
  return true;
}

/** The checks at start: the binary now, then `ctxbox doctor`'s problems; each said once through `warn`. */
export async function checkInstallation(
  bin: string,
  doctor: string[],
  warn: (message: string) => void,
): Promise<void> {
  const problem = await binaryProblem(bin);
  if (problem) {
    sayOnce(warn, problem);
    return;
  }
  const { stdout } = await output(bin, doctor, DOCTOR_TIMEOUT_MS);
  for (const found of doctorProblems(stdout)) sayOnce(warn, `ctxbox doctor: ${found}`);
}
