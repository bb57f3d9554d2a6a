/**
 * The session the engine call in progress is about, for the OpenClaw SDK
 * functions a plugin calls with a session of its own naming
 * (`delegateCompactionToRuntime`, `readVisibleSessionTranscriptMessageEntries`):
 * the host answers for the current session only, so those refuse any other.
 */
import { isThenable } from "../console.js";
import type { Awaitable } from "../engine.js";
import { immediatesPending, settleImmediates } from "../node/timers.js";
import type { SessionRef } from "../wit.js";

/** The current call's session and what the adapter knows of it. */
export interface CallSession {
  session: SessionRef;
  /** Which export is running (`compact`, `assemble`, …): some host services exist only in one. */
  operation: string;
}

let current: CallSession | undefined;

/**
 * The calls after which the background work a plugin scheduled with
 * `setImmediate` runs before the call ends, as Node would run it right
 * after: all but `assemble`, which builds the prompt the turn waits on (what
 * it schedules runs during the next call that waits).
 */
const SETTLING = new Set(["afterTurn", "compact", "maintain", "bootstrap", "ingest", "ingestBatch", "callTool"]);

/**
 * Runs `run` as the call about `session` (`operation` names the export);
 * when it answers a Promise, the call lasts until that settles (export calls
 * never interleave: the host waits for each), and, but for `assemble`, until
 * the background work it scheduled has run ({@link SETTLING}).
 */
export function duringSessionCall<T>(session: SessionRef, operation: string, run: () => Awaitable<T>): Awaitable<T> {
  const outer = current;
  current = { session, operation };
  let answer: Awaitable<T>;
  try {
    answer = run();
  } catch (thrown) {
    current = outer;
    throw thrown;
  }
  const settles = SETTLING.has(operation);
  if (!isThenable(answer) && !(settles && immediatesPending())) {
    current = outer;
    return answer;
  }
  const settled = settles
    ? Promise.resolve(answer).then(
        (value) => settleImmediates().then(() => value),
        (error: unknown) =>
          settleImmediates().then(() => {
            throw error;
          }),
      )
    : (answer as Promise<T>);
  return settled.finally(() => {
    current = outer;
  });
}

/** The call in progress, or `undefined` outside a session's call. */
export function currentSessionCall(): CallSession | undefined {
  return current;
}

/**
 * The current call's session, checked against the one a plugin named
 * (`sessionId`, when it named one): `what` names the function, for the error.
 */
export function requireSession(what: string, sessionId: unknown): CallSession {
  if (current === undefined) {
    throw new Error(`${what} is only available during an engine call about a session`);
  }
  if (typeof sessionId === "string" && sessionId !== "" && sessionId !== current.session.sessionId) {
    throw new Error(
      `${what}: the sandbox answers for the current session (${current.session.sessionId}) only, not ${sessionId}`,
    );
  }
  return current;
}

/**
 * The session key OpenClaw hands an engine for `session`: the host's, or,
 * for a session the host routes under no key (a `ctxbox run` replay, an
 * embedder's unnamed session), `agent:main:<sessionId>`, the key of that
 * session under OpenClaw's default agent. OpenClaw resolves a key for every
 * agent run, and engines such as lossless-claw keep nothing for a session
 * without one.
 */
export function openClawSessionKey(session: SessionRef): string {
  return session.sessionKey ?? `agent:main:${session.sessionId}`;
}
