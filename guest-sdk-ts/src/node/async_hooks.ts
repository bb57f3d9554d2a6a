/**
 * `node:async_hooks`' `AsyncLocalStorage`, for engine code that keeps a
 * value for the duration of a callback (lossless-claw keeps its held
 * transaction locks so). The guest runs one export call at a time and
 * StarlingMonkey has no async context propagation: the store is the one of
 * the innermost `run` still in progress, including across `await`s inside
 * it as long as no other `run` of the same storage is interleaved — which
 * within one call happens only if the engine starts work it does not
 * await. Each `run` restores the previous store when its callback (or the
 * Promise it answers) settles.
 */

/** A value kept for the duration of `run`. */
export class AsyncLocalStorage<T> {
  #store: T | undefined;
  #enabled = false;

  /** The store of the `run` in progress, or `undefined`. */
  getStore(): T | undefined {
    return this.#enabled ? this.#store : undefined;
  }

  /** Runs `callback(...args)` with `store` as the store, until it (or its Promise) settles. */
  run<R>(store: T, callback: (...args: unknown[]) => R, ...args: unknown[]): R {
    const previous = { store: this.#store, enabled: this.#enabled };
    const restore = () => {
      this.#store = previous.store;
      this.#enabled = previous.enabled;
    };
    this.#store = store;
    this.#enabled = true;
    let answer: R;
    try {
      answer = callback(...args);
    } catch (error) {
      restore();
      throw error;
    }
    if (answer !== null && typeof answer === "object" && typeof (answer as { then?: unknown }).then === "function") {
      return (answer as unknown as Promise<unknown>).then(
        (value) => {
          restore();
          return value;
        },
        (error: unknown) => {
          restore();
          throw error;
        },
      ) as R;
    }
    restore();
    return answer;
  }

  /** Runs `callback(...args)` without a store. */
  exit<R>(callback: (...args: unknown[]) => R, ...args: unknown[]): R {
    return this.run(undefined as T, callback, ...args);
  }

  /** Sets the store for the rest of the current synchronous execution. */
  enterWith(store: T): void {
    this.#store = store;
    this.#enabled = true;
  }

  /** Stops answering a store until the next `run` or `enterWith`. */
  disable(): void {
    this.#enabled = false;
    this.#store = undefined;
  }
}

export default { AsyncLocalStorage };
