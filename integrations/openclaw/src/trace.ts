// An optional trace of what the plugin tells the sidecar about each session
// (`traceFile` in the plugin's configuration): one JSON line per session
// call — the method, the session, how the messages OpenClaw passed were
// read (grown, a projection, a reset), what the sync sent, and the length
// the sidecar answered. For an operator checking that the sidecar's copy of
// a session follows OpenClaw's transcript, and for the end-to-end test.

import { appendFileSync } from "node:fs";

/** One traced session call. */
export interface TraceEntry {
  method: string;
  sessionId: string;
  /** How the messages OpenClaw passed relate to the history (tracker.ts), for a call with a sync. */
  relation?: string;
  /** The sync sent: its base, how many messages, whether a reset. */
  sync?: { base: number; messages: number; reset: boolean };
  /** The commit's status. */
  status?: string;
  /** What made OpenClaw ask for a compaction. */
  cause?: string;
  /** How many messages the sidecar said it holds. */
  length?: unknown;
}

/** Where traced calls go. */
export type Trace = (entry: TraceEntry) => void;

/** A trace appending to `path`, or none without one. A trace that cannot be written is dropped, never the call. */
export function traceTo(path: string | undefined): Trace | undefined {
  if (!path) return undefined;
  return (entry) => {
    try {
      appendFileSync(path, `${JSON.stringify({ at: Date.now(), ...entry })}\n`);
    } catch {
      // Tracing is diagnostics: a full disk must not fail a turn.
    }
  };
}
