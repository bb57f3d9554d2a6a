/**
 * Reading the history a call is lent: paged copies, token counts as numbers,
 * the newest suffix that fits a budget, and where a cut would split a tool
 * call from its results.
 */
import type { AgentMessage, History, MessageEntry } from "./wit.js";

/**
 * Entries `start..end` (end exclusive, clamped to the history), oldest first.
 * The host caps what one `range` crossing copies, so this pages until done.
 */
export function readRange(history: History, start: number, end: number): MessageEntry[] {
  const stop = Math.min(end, history.len());
  const entries: MessageEntry[] = [];
  for (let next = start; next < stop; ) {
    const page = history.range(next, stop);
    if (page.length === 0) break;
    entries.push(...page);
    next += page.length;
  }
  return entries;
}

/** Every entry of the history (the reference's whole-array view), oldest first. */
export function toArray(history: History): MessageEntry[] {
  return readRange(history, 0, history.len());
}

/** Pages of at most `pageSize` entries over `start..end`, for histories too long to copy at once. */
export function* pages(
  history: History,
  pageSize = 256,
  start = 0,
  end = history.len(),
): Generator<{ start: number; entries: MessageEntry[] }> {
  for (let next = start; next < end; ) {
    const entries = readRange(history, next, Math.min(end, next + pageSize));
    if (entries.length === 0) return;
    yield { start: next, entries };
    next += entries.length;
  }
}

/** The host's token estimate of entries `start..end`, as a number. */
export function tokens(history: History, start: number, end: number): number {
  return Number(history.tokens(start, end));
}

/**
 * The start of the newest suffix that fits `maxTokens` without separating a tool
 * call from its results (`history.len()` when only the empty suffix does): the
 * host's `fitting-suffix`, one crossing however long the history.
 */
export function fittingSuffix(history: History, maxTokens: number): number {
  const max = Number.isFinite(maxTokens) ? BigInt(Math.max(0, Math.floor(maxTokens))) : 2n ** 64n - 1n;
  return history.fittingSuffix(max);
}

/**
 * The tool-call pair a cut just before `cut` would separate, as `[call, lastResult + 1]`;
 * undefined when the cut separates none. Looks at both sides of the cut, as the
 * Rust SDK's `HistoryView::split_pair` does.
 */
export function splitPair(history: History, cut: number): [number, number] | undefined {
  const straddling = (call: number): [number, number] | undefined => {
    const pairing = history.toolPairing(call);
    return pairing?.tag === "tool-calls" && call < cut && pairing.val >= cut
      ? [call, pairing.val + 1]
      : undefined;
  };
  const at = history.toolPairing(cut);
  if (at?.tag === "tool-result" && at.val !== undefined && at.val < cut) {
    return straddling(at.val) ?? [at.val, cut + 1];
  }
  if (cut === 0) return undefined;
  const before = history.toolPairing(cut - 1);
  if (before?.tag === "tool-calls") return straddling(cut - 1);
  if (before?.tag === "tool-result" && before.val !== undefined) return straddling(before.val);
  return undefined;
}

/** The text of a message's text blocks (and of summaries), joined by newlines. */
export function messageText(message: AgentMessage): string {
  switch (message.tag) {
    case "compaction-summary":
    case "branch-summary":
      return message.val.summary;
    default:
      return message.val.content
        .flatMap((block) => (block.tag === "text" ? [block.val] : []))
        .join("\n");
  }
}
