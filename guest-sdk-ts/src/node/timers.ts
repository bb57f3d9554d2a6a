/**
 * `setImmediate`/`clearImmediate` for Node-written engine code: a callback
 * after the current microtasks, on StarlingMonkey's timer queue (a zero-delay
 * `setTimeout`), which runs while an export call waits on a Promise.
 *
 * Node runs an immediate as soon as the current operation yields, so
 * plugins schedule background work with it (lossless-claw prepares its
 * summaries so, after `afterTurn` answers). Nothing runs in a sandbox
 * between export calls: {@link settleImmediates} lets a call run what it
 * scheduled before it ends, within its own fuel and deadline.
 */

/** Immediates scheduled and neither run nor cleared, by timer id. */
const pending = new Set<number>();

/**
 * The most event-loop turns {@link settleImmediates} waits: background work
 * that keeps rescheduling itself is left for a later call past this.
 */
const MAX_SETTLE_TURNS = 1_000;

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
  const id = setTimeout(() => {
    pending.delete(id);
    callback(...args);
  }, 0);
  pending.add(id);
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
  if (!immediate) return;
  pending.delete(immediate.id);
  clearTimeout(immediate.id);
}

/** Whether an immediate is waiting to run. */
export function immediatesPending(): boolean {
  return pending.size > 0;
}

/** Waits until the immediates scheduled so far, and those they schedule, have run. */
export async function settleImmediates(): Promise<void> {
  for (let turn = 0; pending.size > 0 && turn < MAX_SETTLE_TURNS; turn++) {
    await new Promise((resolve) => setTimeout(resolve, 0));
  }
}
