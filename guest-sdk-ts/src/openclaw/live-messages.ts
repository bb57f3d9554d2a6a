/**
 * OpenClaw's live session, as its engines see it: the same message object
 * for the same message from one call to the next. OpenClaw keeps one array
 * of message objects per session in its process and hands it to every
 * engine call, and engines rely on that identity: lossless-claw memoizes its
 * serialized token estimate per message object (a `WeakMap`), so with fresh
 * objects every call it re-serialized and re-counted the whole history in
 * every `assemble`, which in the sandbox's interpreter ran out of a call's
 * fuel on a 60-message session. Here each session's converted messages are
 * kept by history entry id and handed out again while the entry is the same.
 */
import type { MessageEntry } from "../wit.js";
import { entryToOpenClaw, type OpenClawMessage } from "./messages.js";

/** Sessions whose messages are kept (the newest used); an instance mostly serves one. */
const SESSIONS_KEPT = 8;

/** A converted message and what says it is still its entry's. */
interface Kept {
  timestampMs: bigint;
  tag: string;
  message: OpenClawMessage;
}

/** The live messages of the sessions an engine instance serves. */
export class LiveMessages {
  #sessions = new Map<string, Map<string, Kept>>();

  /**
   * The messages of a whole history of `sessionId`: the objects handed out
   * before for the same entries, new ones for the rest. Entries no longer in
   * the history are forgotten.
   */
  ofHistory(sessionId: string, entries: readonly MessageEntry[]): OpenClawMessage[] {
    const before = this.#sessions.get(sessionId);
    const now = new Map<string, Kept>();
    const messages = entries.map((entry) => this.#message(before, now, entry));
    this.#keep(sessionId, now);
    return messages;
  }

  /** The messages of some entries of `sessionId` (ingested ones), kept with the rest. */
  ofEntries(sessionId: string, entries: readonly MessageEntry[]): OpenClawMessage[] {
    const kept = this.#sessions.get(sessionId) ?? new Map<string, Kept>();
    const messages = entries.map((entry) => this.#message(kept, kept, entry));
    this.#keep(sessionId, kept);
    return messages;
  }

  /** The kept object for `entry` if it is still that entry's, else a new one; recorded in `into`. */
  #message(from: Map<string, Kept> | undefined, into: Map<string, Kept>, entry: MessageEntry): OpenClawMessage {
    const kept = entry.id === "" ? undefined : from?.get(entry.id);
    if (kept !== undefined && kept.timestampMs === entry.timestampMs && kept.tag === entry.message.tag) {
      into.set(entry.id, kept);
      return kept.message;
    }
    const message = entryToOpenClaw(entry);
    if (entry.id !== "") into.set(entry.id, { timestampMs: entry.timestampMs, tag: entry.message.tag, message });
    return message;
  }

  /** Records `messages` as the session's newest, forgetting the least recent session past {@link SESSIONS_KEPT}. */
  #keep(sessionId: string, messages: Map<string, Kept>): void {
    this.#sessions.delete(sessionId);
    this.#sessions.set(sessionId, messages);
    if (this.#sessions.size > SESSIONS_KEPT) this.#sessions.delete(this.#sessions.keys().next().value as string);
  }
}
