/**
 * A `process` for Node-written engine code, with nothing of the machine in
 * it: `env` holds only the engine's configured `env` object
 * (`plugins.entries.<id>.config.env`, strings), read from the host during a
 * call (outside one it is empty); no arguments, `/` as the working
 * directory, `nextTick` on the microtask queue. `exit` and `chdir` throw: an
 * engine does not end or move its host.
 */
import { engineConfig } from "../host.js";
import { currentCall } from "../console.js";

/** The engine's configured environment: the string values of `config.env`. */
function configuredEnv(): Record<string, string> {
  if (currentCall() === undefined) return {};
  const config = engineConfig() as { env?: unknown } | undefined;
  const env: Record<string, string> = {};
  if (config?.env && typeof config.env === "object" && !Array.isArray(config.env)) {
    for (const [name, value] of Object.entries(config.env)) if (typeof value === "string") env[name] = value;
  }
  return env;
}

/** `process.env`: read once from the configuration in the first call that looks, then kept (writes stay). */
let env: Record<string, string> | undefined;

function refused(what: string): never {
  const error = new Error(`process.${what} is not offered to a sandboxed engine`) as Error & { code: string };
  error.code = "ERR_CTXBOX_REFUSED";
  throw error;
}

const started = Date.now();

/** The `process` object: see the module's comment. */
export const process = {
  get env(): Record<string, string> {
    if (env === undefined) {
      const loaded = configuredEnv();
      // Outside a call there is no configuration yet: do not keep the empty answer.
      if (currentCall() === undefined) return loaded;
      env = loaded;
    }
    return env;
  },
  argv: ["ctxbox", "engine"] as string[],
  execArgv: [] as string[],
  platform: "linux",
  arch: "wasm32",
  pid: 1,
  ppid: 0,
  title: "ctxbox-engine",
  version: "v22.0.0",
  versions: { node: "22.0.0" } as Record<string, string>,
  release: { name: "node" },
  exitCode: undefined as number | undefined,
  cwd: (): string => "/",
  chdir: (_directory: string): never => refused("chdir"),
  exit: (_code?: number): never => refused("exit"),
  abort: (): never => refused("abort"),
  kill: (): never => refused("kill"),
  getuid: (): number => 0,
  getgid: (): number => 0,
  umask: (): number => 0o022,
  uptime: (): number => (Date.now() - started) / 1000,
  hrtime: Object.assign(
    (previous?: [number, number]): [number, number] => {
      const nanos = hrtimeBigint();
      const now: [number, number] = [Number(nanos / 1_000_000_000n), Number(nanos % 1_000_000_000n)];
      if (!previous) return now;
      const diff = (now[0] - previous[0]) * 1e9 + (now[1] - previous[1]);
      return [Math.floor(diff / 1e9), diff % 1e9];
    },
    { bigint: () => hrtimeBigint() },
  ),
  memoryUsage: (): Record<string, number> => ({ rss: 0, heapTotal: 0, heapUsed: 0, external: 0, arrayBuffers: 0 }),
  emitWarning: (warning: unknown): void => console.warn(`Warning: ${warning instanceof Error ? warning.message : String(warning)}`),
  /** Runs `callback(...args)` once the current operation ends (the microtask queue). */
  nextTick(callback: (...args: unknown[]) => void, ...args: unknown[]): void {
    queueMicrotask(() => callback(...args));
  },
  on: () => process,
  once: () => process,
  off: () => process,
  removeListener: () => process,
  listeners: (): unknown[] => [],
  emit: (): boolean => false,
};

/** Monotonic nanoseconds (`performance.now()`, which the host's clock backs). */
function hrtimeBigint(): bigint {
  const perf = (globalThis as { performance?: { now(): number } }).performance;
  const ms = perf ? perf.now() : Date.now() - started;
  return BigInt(Math.round(ms * 1e6));
}

/** Forgets the configured environment read so far (tests; a new instance starts without it). */
export function resetEnv(): void {
  env = undefined;
}

export default process;
