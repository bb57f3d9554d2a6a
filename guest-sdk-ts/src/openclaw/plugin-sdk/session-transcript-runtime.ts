/**
 * `openclaw/plugin-sdk/session-transcript-runtime` inside a ctxbox engine:
 * `readVisibleSessionTranscriptMessageEntries`, the session's visible branch
 * (root to leaf, abandoned branches left out) as OpenClaw projects it, read
 * through `host.read-transcript-delta` from the root. The host answers for
 * the current call's session only; as in OpenClaw, during `bootstrap` and
 * `assemble` the read ends before the current turn's own entries.
 */
import { readTranscriptDelta } from "../../host.js";
import { requireSession } from "../call.js";
import { entryToOpenClaw, type OpenClawMessage } from "../messages.js";

/** Which session to read (OpenClaw's `SessionTranscriptReadTarget`). */
export interface SessionTranscriptReadTarget {
  sessionId: string;
  sessionKey?: string;
  agentId?: string;
  storePath?: string;
  threadId?: string | number;
}

/** One visible message entry of the transcript. */
export interface VisibleSessionTranscriptMessageEntry {
  entryId: string;
  parentId: string | null;
  /** The entry's position on the branch, from 1. */
  seq: number;
  message: OpenClawMessage;
  role: string;
  /** When the entry was written (ISO 8601). */
  createdAt?: string;
}

/** The codes a reset's reason starts with when the cursor no longer applies (`wit/host.wit`). */
const RESET_CODES = ["invalid_cursor", "scope_mismatch", "generation_mismatch", "anchor_missing", "anchor_moved"];

/** Reads started again after the branch moved under the reader, before giving up. */
const MAX_RESTARTS = 3;

/** The visible message entries of the current session's transcript, oldest first. */
export async function readVisibleSessionTranscriptMessageEntries(
  target: SessionTranscriptReadTarget,
): Promise<VisibleSessionTranscriptMessageEntry[]> {
  requireSession("readVisibleSessionTranscriptMessageEntries", target?.sessionId);
  let entries: VisibleSessionTranscriptMessageEntry[] = [];
  let cursor: string | undefined;
  for (let restarts = 0; ; ) {
    const delta = readTranscriptDelta(cursor);
    if (delta.tag === "missing") return [];
    if (delta.tag === "reset") {
      // A reset without one of the host's codes is an oversized entry skipped
      // (its cursor continues after it); a coded one (the branch moved, the
      // file was replaced) means reading again from the root.
      if (!RESET_CODES.some((code) => delta.val.reason.startsWith(`${code}:`))) {
        cursor = delta.val.cursor;
        continue;
      }
      restarts += 1;
      if (restarts > MAX_RESTARTS) throw new Error(`the transcript kept changing while it was read: ${delta.val.reason}`);
      entries = [];
      cursor = undefined;
      continue;
    }
    for (const entry of delta.val.entries) {
      const message = entryToOpenClaw(entry);
      entries.push({
        entryId: entry.id,
        parentId: entry.parentId ?? null,
        seq: entries.length + 1,
        message,
        role: message.role,
        createdAt: new Date(Number(entry.timestampMs)).toISOString(),
      });
    }
    cursor = delta.val.cursor;
    if (!delta.val.hasMore) return entries;
  }
}
