// What the sidecar holds of each session, kept by this process: the
// session's history itself (never a projection of it), the prompts answered
// for it, and how each list of messages OpenClaw passes relates to them.
//
// OpenClaw calls `assemble` more than once per turn: the first time with the
// transcript, then (for an engine that owns compaction) before every model
// call with the messages the previous answer kept — a projection of what the
// plugin answered, possibly followed by the turn's new messages. Sent as the
// session, a projection would cut the sidecar's copy down to the prompt every
// turn. So each list is classified (PROTOCOL.md, "A sync never shrinks a
// session"): it extends the history, or is a projection (of an answered
// prompt, or a window of the history) followed by new messages, or else it
// is a reset the runtime made, sent marked `reset`.

import { createHash } from "node:crypto";

import type { AgentMessage } from "./types.js";

/** A short fingerprint of a message, to tell whether the sidecar's copy is the same. */
export function digest(message: AgentMessage): string {
  let known = digests.get(message);
  if (known === undefined) {
    known = createHash("sha256").update(JSON.stringify(message)).digest("hex").slice(0, 24);
    digests.set(message, known);
  }
  return known;
}

/** Digests by message object: OpenClaw passes the same objects call after call. */
const digests = new WeakMap<object, string>();

/** How many answered prompts of a session are remembered to recognise projections of them. */
const PROMPTS_KEPT = 4;

/** How many sessions this process keeps a history of; the least recently used is forgotten first. */
export const SESSIONS_KEPT = 256;

/** What a sync sends: PROTOCOL.md's `sync` parameter. */
export interface SyncParams {
  base: number;
  baseDigest: string | null;
  messages: AgentMessage[];
  digests: string[];
  reset?: true;
}

/** How a list of messages relates to the history this process keeps. */
export type Relation = "new" | "extends" | "projection" | "reset";

/** What to send for a list of messages, and the history the sidecar holds once it is applied. */
export interface SyncPlan {
  relation: Relation;
  sync: SyncParams;
  /** The session's history after the sync: what the sidecar's ranges are positions in. */
  history: AgentMessage[];
}

/** One session as this process knows it. */
interface Session {
  /** The history the sidecar holds (or is to be sent in full, when `stale`). */
  messages: AgentMessage[];
  digests: string[];
  /** The sidecar process that holds it. */
  generation: number;
  /** The sidecar's copy disagrees with this one (or is gone): the next call resends it in full. */
  stale: boolean;
  /** Digests of the prompts last answered, newest last. */
  prompts: string[][];
}

/** Where the sidecar a session lives in is at: its process generation. */
export interface Generational {
  readonly generation: number;
}

/**
 * Per-session history and sync state, kept per sidecar for the life of the
 * plugin process (OpenClaw makes a new engine object every turn).
 */
export class SessionTracker {
  private readonly sessions = new Map<string, Session>();

  /**
   * What to send so the sidecar holds `sessionId`'s history given the
   * `messages` OpenClaw passes now, and that history. Changes nothing until
   * [`settle`](#settle).
   */
  plan(sidecar: Generational, sessionId: string, messages: AgentMessage[]): SyncPlan {
    const known = this.sessions.get(sessionId);
    const sent = messages.map(digest);
    const { relation, kept } = classify(sent, known);
    // Extending or projecting: the held history, then what is new.
    const history = relation === "extends" || relation === "projection" ? [...known!.messages, ...messages.slice(kept)] : messages;
    const historyDigests = relation === "extends" || relation === "projection" ? [...known!.digests, ...sent.slice(kept)] : sent;
    // Where the history departs from what the sidecar holds.
    const base = relation === "new" ? 0 : relation === "reset" ? commonPrefix(sent, known!.digests) : known!.messages.length;
    const current = known !== undefined && !known.stale && known.generation === sidecar.generation;
    const from = current ? base : 0;
    const sync: SyncParams = {
      base: from,
      baseDigest: from > 0 ? historyDigests[from - 1] : null,
      messages: history.slice(from),
      digests: historyDigests.slice(from),
    };
    if (relation === "reset") sync.reset = true;
    return { relation, sync, history };
  }

  /**
   * The sync that resends `plan`'s whole history from 0, after the sidecar
   * refused the plan's own: marked `reset` when `reset` (the sidecar's copy
   * is wrong, not longer: it answered `heldLength` ≤ the history's length).
   */
  resend(plan: SyncPlan, reset: boolean): SyncParams {
    const sync: SyncParams = { base: 0, baseDigest: null, messages: plan.history, digests: plan.history.map(digest) };
    if (reset || plan.relation === "reset") sync.reset = true;
    return sync;
  }

  /**
   * The sidecar applied `plan` and answered `length`: the history is
   * recorded as held by the process of `generation` (undefined: the process
   * that answered is gone, so the copy is stale); a length other than the
   * history's marks the sidecar's copy stale. Answers whether the length
   * agreed.
   */
  settle(sessionId: string, plan: SyncPlan, generation: number | undefined, length: unknown): boolean {
    const known = this.sessions.get(sessionId);
    const session: Session = {
      messages: plan.history,
      digests: plan.history.map(digest),
      generation: generation ?? -1,
      stale: generation === undefined,
      prompts: known?.prompts ?? [],
    };
    this.keep(sessionId, session);
    return this.check(session, length);
  }

  /**
   * The sidecar appended `messages` to `sessionId` (a committed turn, an
   * ingest) and answered `length`. Recorded when this process knows the
   * history and the sidecar (`generation`, `current`) is the one holding it;
   * otherwise the history is no longer known. Answers whether the length
   * agreed (true when there was nothing to compare with).
   */
  appended(sessionId: string, generation: number, current: boolean, messages: AgentMessage[], length: unknown): boolean {
    const known = this.sessions.get(sessionId);
    if (!known) return true;
    known.messages = [...known.messages, ...messages];
    known.digests = [...known.digests, ...messages.map(digest)];
    if (!current || known.generation !== generation) known.stale = true;
    this.keep(sessionId, known);
    return this.check(known, length);
  }

  /** Remembers `prompt`, the answer to an `assemble` of `sessionId`, to recognise OpenClaw's projections of it. */
  answered(sessionId: string, prompt: AgentMessage[]): void {
    const known = this.sessions.get(sessionId);
    if (!known) return;
    known.prompts = [...known.prompts, prompt.map(digest)].slice(-PROMPTS_KEPT);
  }

  /** The history of `sessionId` this process keeps, if it keeps one. */
  history(sessionId: string): AgentMessage[] | undefined {
    return this.sessions.get(sessionId)?.messages;
  }

  /**
   * The sync that resends `sessionId`'s whole history (a `commitTurn` for a
   * session the sidecar no longer holds), or undefined when this process
   * does not keep it.
   */
  fullSync(sessionId: string): SyncParams | undefined {
    const known = this.sessions.get(sessionId);
    if (!known) return undefined;
    return { base: 0, baseDigest: null, messages: known.messages, digests: known.digests };
  }

  /** Whether the sidecar (`sidecar`'s current process) holds `sessionId` as this process keeps it. */
  inStep(sidecar: Generational, sessionId: string): boolean {
    const known = this.sessions.get(sessionId);
    return known !== undefined && !known.stale && known.generation === sidecar.generation;
  }

  /** The sidecar (process `generation`) now holds the history in full (a resend with a commit). */
  resent(sessionId: string, generation: number): void {
    const known = this.sessions.get(sessionId);
    if (!known) return;
    known.generation = generation;
    known.stale = false;
  }

  /** Forgets `sessionId`. */
  forget(sessionId: string): void {
    this.sessions.delete(sessionId);
  }

  /** Whether the sidecar's `length` is this history's; marks it stale if not (a number the sidecar did not answer is no evidence). */
  private check(session: Session, length: unknown): boolean {
    if (typeof length !== "number" || length === session.messages.length) return true;
    session.stale = true;
    return false;
  }

  /** Keeps `session` as the most recently used, forgetting the least recently used beyond the bound. */
  private keep(sessionId: string, session: Session): void {
    this.sessions.delete(sessionId);
    this.sessions.set(sessionId, session);
    while (this.sessions.size > SESSIONS_KEPT) {
      const oldest = this.sessions.keys().next().value;
      if (oldest === undefined) break;
      this.sessions.delete(oldest);
    }
  }
}

/**
 * How the messages with digests `sent` relate to `known`, and for an
 * extension or a projection how many of them are already held (the rest is
 * new).
 */
export function classify(sent: string[], known: { digests: string[]; prompts: string[][] } | undefined): { relation: Relation; kept: number } {
  if (!known) return { relation: "new", kept: 0 };
  const held = known.digests;
  if (sent.length >= held.length && commonPrefix(sent, held) === held.length) return { relation: "extends", kept: held.length };
  // Nothing at all: the projection of an empty prompt, never a session emptied (a new session has a new id).
  if (sent.length === 0) return { relation: "projection", kept: 0 };
  let kept = 0;
  for (const candidate of [held, ...known.prompts]) kept = Math.max(kept, projectionLength(sent, candidate));
  return kept > 0 ? { relation: "projection", kept } : { relation: "reset", kept: 0 };
}

/**
 * How many of `sent`, from the first, are a projection of `candidate`: taken
 * from it in order (some may be left out) and reaching its last message. 0
 * when they are not.
 */
export function projectionLength(sent: string[], candidate: string[]): number {
  let next = 0;
  for (let index = 0; index < sent.length; index++) {
    while (next < candidate.length && candidate[next] !== sent[index]) next++;
    if (next === candidate.length) return 0;
    next++;
    if (next === candidate.length) return index + 1;
  }
  return 0;
}

/** How many leading digests `a` and `b` share. */
function commonPrefix(a: string[], b: string[]): number {
  const end = Math.min(a.length, b.length);
  let index = 0;
  while (index < end && a[index] === b[index]) index++;
  return index;
}
