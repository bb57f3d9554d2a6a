/**
 * `setImmediate`/`clearImmediate` for Node-written engine code: a callback
 * after the current microtasks, on StarlingMonkey's timer queue (a zero-delay
 * `setTimeout`), which runs while an export call waits on a Promise.
 */

/** An immediate, as `setImmediate` answers it. */
export interface Immediate {
  readonly id: number;
  hasRef(): boolean;
  ref(): Immediate;
  unref(): Immediate;
  [Symbol.toPrimitive](): number;
}

/** Runs `callback(...args)` after the current microtasks. */
export function setImmediate(callback: (...args: unknown[]) => void, ...args: unknown[]): Immediate {
  if (typeof callback !== "function") {
    const error = new TypeError('The "callback" argument must be of type function.') as TypeError & { code: string };
    error.code = "ERR_INVALID_ARG_TYPE";
    throw error;
  }
  const id = setTimeout(() => callback(...args), 0);
  const immediate: Immediate = {
    id,
    hasRef: () => true,
    ref: () => immediate,
    unref: () => immediate,
    [Symbol.toPrimitive]: () => id,
  };
  return immediate;
}

/** Cancels an immediate that has not run. */
export function clearImmediate(immediate: Immediate | undefined): void {
  if (immediate) clearTimeout(immediate.id);
}
