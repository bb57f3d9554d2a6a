/**
 * The prompt: summaries for what they cover, then the rest of the history
 * verbatim, the fresh tail always. The prompt is the newest stretch of
 * "summary roots, then uncovered history" that fits the budget; only when the
 * fresh tail alone is over the budget is it cut. Cuts never separate a tool
 * call from its results.
 */
import { assembled, insert, keep, splitPair, tokens, type AssembleResult, type History } from "@ctxbox/guest";
import { config } from "./config.js";
import { summaryMessage } from "./render.js";
import type { Meta, Root, SessionStore } from "./store.js";

/** The part of a history the summary roots stand in for. */
export interface Coverage {
  /** History entries `0..coveredEnd` are represented by the summaries. */
  coveredEnd: number;
  /** False when nothing is summarized yet or the last summarized entry is not in this history. */
  summariesApply: boolean;
}

/** Finds the last summarized message in `history` (results whose call is covered are covered too). */
export function locate(meta: Meta, history: History): Coverage {
  const frontier = meta.frontierEntryId === undefined ? undefined : history.find(meta.frontierEntryId);
  if (frontier === undefined) return { coveredEnd: 0, summariesApply: false };
  let coveredEnd = frontier + 1;
  for (let pair = splitPair(history, coveredEnd); pair; pair = splitPair(history, coveredEnd)) {
    coveredEnd = pair[1];
  }
  return { coveredEnd, summariesApply: true };
}

/** Tokens of the whole context without a budget: the roots (when they apply) and the history after them. */
export function contextTokens(meta: Meta, history: History): number {
  const coverage = locate(meta, history);
  const summaryTokens = coverage.summariesApply ? meta.roots.reduce((sum, root) => sum + root.tokens, 0) : 0;
  return summaryTokens + tokens(history, coverage.coveredEnd, history.len());
}

/** Plans the prompt for `history` within `budget` (no limit when undefined). */
export function plan(store: SessionStore, history: History, budget: number | undefined): AssembleResult {
  const meta = store.meta();
  const len = history.len();
  const coverage = locate(meta, history);
  const roots = coverage.summariesApply ? meta.roots : [];
  const tail = freshTailStart(history, coverage.coveredEnd);
  let shown: Root[];
  let start: number;
  if (budget === undefined) {
    [shown, start] = [roots, coverage.coveredEnd];
  } else if (tokens(history, tail, len) > budget) {
    [shown, start] = [[], overflowingTailStart(history, tail, budget)];
  } else {
    let available = budget - tokens(history, tail, len);
    start = pairSafeForward(history, fittingStart(history, coverage.coveredEnd, tail, available));
    available -= tokens(history, start, tail);
    shown = start === coverage.coveredEnd ? newestFittingRoots(roots, available) : [];
  }
  const items = shown.map((root) => insert(summaryMessage(store.node(root.node))));
  if (start < len) items.push(keep(start, len));
  const summaryTokens = shown.reduce((sum, root) => sum + root.tokens, 0);
  return assembled(items, summaryTokens + tokens(history, start, len));
}

/** `freshTailMessages` from the end, not inside the covered part, moved back to the call of a result it opens with. */
function freshTailStart(history: History, coveredEnd: number): number {
  let start = Math.max(history.len() - config.freshTailMessages, coveredEnd, 0);
  for (;;) {
    const pair = splitPair(history, start);
    const back = pair ? Math.max(pair[0], coveredEnd) : start;
    if (back === start) return start;
    start = back;
  }
}

/** The smallest start in `from..to` whose entries up to `to` fit `available` (binary search). */
function fittingStart(history: History, from: number, to: number, available: number): number {
  let [low, high] = [from, to];
  while (low < high) {
    const mid = low + Math.floor((high - low) / 2);
    if (tokens(history, mid, to) <= available) high = mid;
    else low = mid + 1;
  }
  return low;
}

/** `start`, moved forward past the part of any tool-call pair it would cut. */
function pairSafeForward(history: History, start: number): number {
  for (let pair = splitPair(history, start); pair; pair = splitPair(history, start)) start = pair[1];
  return start;
}

/** The newest pair-safe part of an over-budget tail that fits, else the newest message (with its call). */
function overflowingTailStart(history: History, tail: number, budget: number): number {
  const len = history.len();
  const start = pairSafeForward(history, fittingStart(history, tail, len, budget));
  if (start < len) return start;
  const newest = Math.max(len - 1, 0);
  return splitPair(history, newest)?.[0] ?? newest;
}

/** The newest roots whose tokens together fit `available`. */
function newestFittingRoots(roots: Root[], available: number): Root[] {
  let used = 0;
  let first = roots.length;
  while (first > 0 && used + roots[first - 1]!.tokens <= available) {
    used += roots[first - 1]!.tokens;
    first -= 1;
  }
  return roots.slice(first);
}
