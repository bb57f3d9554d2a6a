/**
 * A `console` that writes to `host.log`: engines are built without WASI stdio,
 * so the runtime's own console would go nowhere.
 */
import { log as hostLog } from "ctxbox:engine/host@0.1.0";
import type { LogLevel } from "./wit.js";

/** One argument as text: strings as they are, errors with name, message and stack, the rest as JSON. */
function format(value: unknown): string {
  if (typeof value === "string") return value;
  // SpiderMonkey's `stack` holds the frames only.
  if (value instanceof Error) return `${value.name}: ${value.message}${value.stack ? `\n${value.stack}` : ""}`;
  try {
    const json = JSON.stringify(value, (_, v) => (typeof v === "bigint" ? v.toString() : v));
    return json ?? String(value);
  } catch {
    return String(value);
  }
}

function writer(level: LogLevel) {
  return (...args: unknown[]): void => {
    try {
      hostLog(level, args.map(format).join(" "));
    } catch {
      // No host outside a call (e.g. while the build pre-initializes the
      // module): the record is dropped rather than failing the engine.
    }
  };
}

/** The console engines see: `log`/`info` at info, `debug`, `warn`, `error`, `trace`. */
export const hostConsole = {
  log: writer("info"),
  info: writer("info"),
  debug: writer("debug"),
  warn: writer("warn"),
  error: writer("error"),
  trace: writer("trace"),
};

/** Replaces `globalThis.console` with {@link hostConsole}; `defineEngine` calls it. */
export function installConsole(): void {
  Object.defineProperty(globalThis, "console", {
    value: hostConsole,
    writable: true,
    configurable: true,
  });
}
