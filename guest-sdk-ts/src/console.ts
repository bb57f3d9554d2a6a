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

/** Export calls in progress: the host's imports exist only during one. */
let callDepth = 0;
/** Export calls begun so far: which call is in progress. */
let callsBegun = 0;

/** Whether `value` is a Promise (or another thenable): what an `async` method answers. */
export function isThenable(value: unknown): value is PromiseLike<unknown> {
  return (
    (typeof value === "object" || typeof value === "function") &&
    value !== null &&
    typeof (value as { then?: unknown }).then === "function"
  );
}

/**
 * Runs `run` as (part of) an export call, so `console` writes reach the host;
 * `defineEngine` wraps every export in it. When `run` answers a Promise (an
 * `async` method), the call lasts until it settles: the export's caller waits
 * for it (componentize-js runs the event loop until then), so writes after an
 * `await` are part of the call too.
 */
export function duringCall<T>(run: () => T): T {
  if (callDepth === 0) callsBegun += 1;
  callDepth += 1;
  let answer: T;
  try {
    answer = run();
  } catch (thrown) {
    callDepth -= 1;
    throw thrown;
  }
  if (!isThenable(answer)) {
    callDepth -= 1;
    return answer;
  }
  return answer.then(
    (value) => {
      callDepth -= 1;
      return value;
    },
    (thrown: unknown) => {
      callDepth -= 1;
      throw thrown;
    },
  ) as T;
}

/**
 * The export call in progress (a number no other call of this instance has),
 * or `undefined` outside one: at the module's top level the host's imports
 * cannot be called.
 */
export function currentCall(): number | undefined {
  return callDepth > 0 ? callsBegun : undefined;
}

function writer(level: LogLevel) {
  return (...args: unknown[]): void => {
    // Outside a call (the module's top level, which the build runs while it
    // pre-initializes the component) there is no host: calling an import
    // there fails the build, so the record is dropped.
    if (callDepth === 0) return;
    hostLog(level, args.map(format).join(" "));
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
