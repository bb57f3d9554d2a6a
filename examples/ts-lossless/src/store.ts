/**
 * One session's records in the host's state store. Keys live under
 * `s/<session>/` (the session id with `%` and `/` percent-encoded, so no
 * session's keys fall under another's prefix):
 *
 * | key | value (JSON, bigints kept) |
 * |---|---|
 * | `meta` | {@link Meta}: messages stored, messages summarized, the last summarized entry id, the next node id, the roots |
 * | `m/<seq>` | message `seq` (in the order received), the whole `MessageEntry` |
 * | `e/<entry id>` | the sequence number of that transcript entry (makes ingestion idempotent) |
 * | `n/<node>` | a summary {@link SummaryNode} |
 *
 * Sequence numbers and node ids are 16 hex digits so keys sort in order.
 * Writes are ordered so a call cut short loses nothing acknowledged: messages
 * before the meta that counts them, nodes before the meta that makes them roots.
 */
import { state, type MessageEntry } from "@ctxbox/guest";

/** A summary the prompt may show: the top of one DAG branch. */
export interface Root {
  node: number;
  level: number;
  tokens: number;
}

/** What is stored and summarized for a session. */
export interface Meta {
  /** Messages stored (the next sequence number). */
  nextSeq: number;
  /** Messages `0..summarizedEnd` are covered by leaf summaries. */
  summarizedEnd: number;
  /** The transcript id of the last summarized message. */
  frontierEntryId?: string;
  nextNode: number;
  /** The highest-level summaries, oldest first. */
  roots: Root[];
}

/** One node of the summary DAG. */
export interface SummaryNode {
  /** 0 for a leaf (covers messages), above that it covers nodes. */
  level: number;
  /** Message sequence numbers (leaf) or node ids (above). */
  sources: number[];
  firstSeq: number;
  lastSeq: number;
  summary: string;
  /** Tokens of the summary as a prompt message. */
  tokens: number;
}

/** A message as stored: its sequence number (0-based, in the order received) and the entry. */
export interface Stored {
  seq: number;
  entry: MessageEntry;
}

const hex = (n: number) => n.toString(16).padStart(16, "0");
const encode = (id: string) => id.replaceAll("%", "%25").replaceAll("/", "%2F");

/** The records of one session. */
export class SessionStore {
  private readonly prefix: string;

  constructor(sessionId: string) {
    this.prefix = `s/${encode(sessionId)}/`;
  }

  meta(): Meta {
    return state.getJson<Meta>(`${this.prefix}meta`) ?? { nextSeq: 0, summarizedEnd: 0, nextNode: 0, roots: [] };
  }

  saveMeta(meta: Meta): void {
    state.setJson(`${this.prefix}meta`, meta);
  }

  message(seq: number): MessageEntry {
    const entry = state.getJson<MessageEntry>(`${this.prefix}m/${hex(seq)}`);
    if (!entry) throw new Error(`message ${seq} is missing from the store`);
    return entry;
  }

  node(id: number): SummaryNode {
    const node = state.getJson<SummaryNode>(`${this.prefix}n/${hex(id)}`);
    if (!node) throw new Error(`summary node ${id} is missing from the store`);
    return node;
  }

  saveNode(id: number, node: SummaryNode): void {
    state.setJson(`${this.prefix}n/${hex(id)}`, node);
  }

  /** Stores the entries not stored yet (by transcript id), in order; answers those, with their sequence numbers. */
  append(entries: MessageEntry[]): Stored[] {
    const meta = this.meta();
    const added: Stored[] = [];
    for (const entry of entries) {
      const indexKey = `${this.prefix}e/${encode(entry.id)}`;
      if (state.get(indexKey) !== undefined) continue;
      state.setJson(`${this.prefix}m/${hex(meta.nextSeq)}`, entry);
      state.setJson(indexKey, meta.nextSeq);
      added.push({ seq: meta.nextSeq, entry });
      meta.nextSeq += 1;
    }
    if (added.length > 0) this.saveMeta(meta);
    return added;
  }
}
