/**
 * The Node globals engine code written for Node expects and StarlingMonkey
 * lacks: `process`, `Buffer`, `setImmediate`/`clearImmediate` and `Intl`
 * (each only where the runtime has none). Safe at the module's top level:
 * nothing here calls the host until engine code reads `process.env` in a
 * call.
 */
import { installBuffer } from "./buffer.js";
import { installIntl } from "./intl.js";
import { process } from "./process.js";
import { clearImmediate, setImmediate } from "./timers.js";

/** Defines `name` on the global object unless it is there. */
function provide(name: string, value: unknown): void {
  if ((globalThis as Record<string, unknown>)[name] === undefined) {
    Object.defineProperty(globalThis, name, { value, writable: true, configurable: true });
  }
}

/** Installs the globals (see the module's comment). */
export function installNodeGlobals(): void {
  provide("process", process);
  provide("global", globalThis);
  provide("setImmediate", setImmediate);
  provide("clearImmediate", clearImmediate);
  installBuffer();
  installIntl();
}
