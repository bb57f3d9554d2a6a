/**
 * Writing summaries: condense a run of `condenseFanout` same-level roots when
 * there is one, else summarize the next leaf chunk outside the fresh tail,
 * until the goal is met, nothing is left, the caller aborts or the call's
 * allowance (or the host's completion budget) is used. Summaries are written
 * by the agent's model (`host.complete`), or by the host's summarizer when
 * the host has no model. Each summary is persisted as it completes (node, then
 * meta), so a compaction cut short loses nothing and the next continues.
 */
import { HostFailure, host, promptRequest, type CompactResult, type History, type MessageEntry } from "@ctxbox/guest";
import { contextTokens } from "./assemble.js";
import { config } from "./config.js";
import * as render from "./render.js";
import type { Meta, SessionStore, SummaryNode } from "./store.js";

/** Summaries never get fewer tokens than this, whatever they cover. */
const MIN_SUMMARY_TOKENS = 64;

/** What compaction aims for: a token figure, or everything outside the fresh tail. */
export type Goal = { within: number } | "everything";

interface Pending {
  text: string;
  instructions: string;
  maxTokens: number;
  node: SummaryNode;
  placement: { leafEnd: number; lastEntryId: string } | { condensedRoots: number };
}

/** Runs a compaction of `store`'s session over `history` towards `goal`. */
export function compact(
  store: SessionStore,
  history: History,
  goal: Goal,
  customInstructions: string | undefined,
): CompactResult {
  const meta = store.meta();
  const tokensBefore = contextTokens(meta, history);
  let tokensNow = tokensBefore;
  let written = 0;
  let stop: string;
  let ok = true;
  for (;;) {
    if (host.aborted()) {
      stop = "aborted by the caller";
      break;
    }
    let pending = condensation(store, meta);
    if (!pending && goal !== "everything" && tokensNow <= goal.within) {
      stop = "the context fits its target";
      break;
    }
    pending ??= leaf(store, meta);
    if (!pending) {
      stop = "nothing left to summarize outside the fresh tail";
      break;
    }
    if (written >= config.maxSummariesPerCall) {
      stop = `stopped after ${written} summaries; the next compaction continues`;
      break;
    }
    let summary: string;
    try {
      summary = summarize(
        pending.text,
        render.instructions(pending.instructions, customInstructions),
        pending.maxTokens,
      );
    } catch (thrown) {
      if (!(thrown instanceof HostFailure)) throw thrown;
      if (thrown.hostError.kind === "aborted") {
        stop = "aborted by the caller";
      } else if (thrown.hostError.kind === "quota-exceeded") {
        // The host's budget for this call is spent: the next call continues.
        stop = `stopped after ${written} summaries; the next compaction continues`;
      } else {
        ok = false;
        stop = `the summarizer failed: ${thrown.hostError.message}`;
      }
      break;
    }
    commit(store, meta, pending, summary);
    written += 1;
    host.reportProgress();
    tokensNow = contextTokens(meta, history);
  }
  return {
    ok,
    compacted: written > 0,
    reason: stop,
    tokensBefore: BigInt(tokensBefore),
    tokensAfter: tokensNow <= tokensBefore ? BigInt(tokensNow) : undefined,
  };
}

/**
 * A summary of `text` by the agent's own model (`host.complete`), or, when
 * the host has none (`unavailable`), by the host's summarizer. Other host
 * errors are thrown as {@link HostFailure}.
 */
function summarize(text: string, instructions: string, maxTokens: number): string {
  const request = promptRequest(render.summaryPrompt(text, instructions), {
    maxTokens,
    system: render.SUMMARY_SYSTEM_PROMPT,
    purpose: "summarize",
  });
  try {
    return host.complete(request).text;
  } catch (thrown) {
    if (thrown instanceof HostFailure && thrown.hostError.kind === "unavailable") {
      return host.summarize(text, { instructions, maxTokens });
    }
    throw thrown;
  }
}

/** The tokens a summary of `sourceTokens` may take: at most half of them, at most `cap`. */
function summaryCap(cap: number, sourceTokens: number): number {
  return Math.max(Math.min(cap, Math.floor(sourceTokens / 2)), MIN_SUMMARY_TOKENS);
}

/** The newest `condenseFanout` roots, when they are of one level. */
function condensation(store: SessionStore, meta: Meta): Pending | undefined {
  const fanout = Math.max(config.condenseFanout, 2);
  if (meta.roots.length < fanout) return undefined;
  const run = meta.roots.slice(-fanout);
  const level = run[0]!.level;
  if (run.some((root) => root.level !== level)) return undefined;
  const children = run.map((root) => store.node(root.node));
  return {
    text: render.summaries(children),
    instructions: render.CONDENSE_INSTRUCTIONS,
    maxTokens: summaryCap(config.condensedSummaryTokens, children.reduce((sum, child) => sum + child.tokens, 0)),
    node: {
      level: level + 1,
      sources: run.map((root) => root.node),
      firstSeq: children[0]!.firstSeq,
      lastSeq: children.at(-1)!.lastSeq,
      summary: "",
      tokens: 0,
    },
    placement: { condensedRoots: fanout },
  };
}

/** The next `leafChunkMessages` unsummarized messages outside the fresh tail, with the results of a call it ends on. */
function leaf(store: SessionStore, meta: Meta): Pending | undefined {
  const start = meta.summarizedEnd;
  const limit = meta.nextSeq - config.freshTailMessages;
  let end = start + Math.max(config.leafChunkMessages, 1);
  if (end > limit) return undefined;
  const chunk: MessageEntry[] = [];
  for (let seq = start; seq < end; seq += 1) chunk.push(store.message(seq));
  while (end < meta.nextSeq) {
    const next = store.message(end);
    if (next.message.tag !== "tool-result") break;
    if (end >= limit) return undefined;
    chunk.push(next);
    end += 1;
  }
  return {
    text: render.transcript(chunk, config.maxMessageChars),
    instructions: render.LEAF_INSTRUCTIONS,
    maxTokens: summaryCap(config.leafSummaryTokens, host.estimateTokens(chunk)),
    node: {
      level: 0,
      sources: Array.from({ length: end - start }, (_, i) => start + i),
      firstSeq: start,
      lastSeq: end - 1,
      summary: "",
      tokens: 0,
    },
    placement: { leafEnd: end, lastEntryId: chunk.at(-1)!.id },
  };
}

/** Persists the summary's node, then the meta that makes it a root. */
function commit(store: SessionStore, meta: Meta, pending: Pending, summary: string): void {
  const node: SummaryNode = { ...pending.node, summary };
  node.tokens = host.estimateTokens([
    { id: "", timestampMs: 0n, message: render.summaryMessage(node) },
  ]);
  const id = meta.nextNode;
  store.saveNode(id, node);
  meta.nextNode += 1;
  if ("leafEnd" in pending.placement) {
    meta.summarizedEnd = pending.placement.leafEnd;
    meta.frontierEntryId = pending.placement.lastEntryId;
  } else {
    meta.roots.splice(meta.roots.length - pending.placement.condensedRoots);
  }
  meta.roots.push({ node: id, level: node.level, tokens: node.tokens });
  store.saveMeta(meta);
}
