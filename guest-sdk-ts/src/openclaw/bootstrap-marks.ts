/**
 * Which sessions the plugin has been bootstrapped for, kept in the engine's
 * durable state so that every instance of the engine knows it: a ctxbox
 * host bootstraps a session once, in one instance, and the instances that
 * serve the session later (after a replacement or a restart) must not take
 * it for a session the plugin has never seen. Looked up once per instance
 * and session; a mark that cannot be stored (the state's quota) is only
 * remembered by the instance, so another instance bootstraps again.
 */
import { state } from "../host.js";

/** Where the marks live in the engine's state. */
const PREFIX = "@ctxbox/openclaw/bootstrapped/";

/** The marks one engine instance has seen or made. */
export class BootstrapMarks {
  #known = new Set<string>();

  /** Whether the plugin was bootstrapped for `sessionId`, by this instance or another. */
  has(sessionId: string): boolean {
    if (this.#known.has(sessionId)) return true;
    if (state.get(PREFIX + sessionId) === undefined) return false;
    this.#known.add(sessionId);
    return true;
  }

  /** Records that the plugin was bootstrapped for `sessionId`. */
  mark(sessionId: string): void {
    if (this.#known.has(sessionId)) return;
    this.#known.add(sessionId);
    try {
      state.set(PREFIX + sessionId, new Uint8Array(0));
    } catch (thrown) {
      console.warn(`the bootstrap of session ${sessionId} is not recorded for other instances: ${(thrown as Error).message}`);
    }
  }
}
