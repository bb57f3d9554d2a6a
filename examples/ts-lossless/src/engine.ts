/**
 * `ts-lossless`: the idea of ctxbox's `lossless` engine in TypeScript. Every
 * message it is given is kept in the host's state store and indexed in the
 * host's searchable memory (session scope, document `m<number>`); old history
 * is shown as a DAG of summaries written by the agent's model (`host.complete`,
 * or the host's summarizer when it has no model: leaf summaries of 8
 * messages, 4 of a level condensed into one of the next); the prompt is the
 * summary roots followed by the history they do not cover. The model gets
 * two tools, `grep` (every message containing the given words, summarized or
 * not) and `expand` (messages read back in full by number, as summaries name
 * them). It owns compaction: `compact`, and `afterTurn` once the context
 * passes 75% of the budget. The instance keeps nothing between calls.
 */
import { defineEngine, pages, readRange, type MessageEntry } from "@ctxbox/guest";
import { plan } from "./assemble.js";
import { compact, type Goal } from "./compaction.js";
import { thresholdTokens } from "./config.js";
import * as recall from "./recall.js";
import { SessionStore } from "./store.js";

/** Stores the entries `store` does not have yet and indexes them; answers how many were new. */
function append(store: SessionStore, entries: MessageEntry[]): number {
  const stored = store.append(entries);
  recall.index(stored);
  return stored.length;
}

export const engine = defineEngine({
  info: {
    id: "ts-lossless",
    name: "Lossless (TypeScript)",
    version: "0.1.0",
    ownsCompaction: true,
    acceptedHostParams: [],
  },

  tools: recall.TOOLS,

  callTool(session, name, argumentsJson) {
    return recall.callTool(new SessionStore(session.sessionId), name, argumentsJson);
  },

  bootstrap(session, history) {
    const store = new SessionStore(session.sessionId);
    let imported = 0;
    for (const page of pages(history)) imported += append(store, page.entries);
    return { bootstrapped: true, importedMessages: imported };
  },

  ingest(session, entry) {
    // Stored now or before: either way the store has it.
    append(new SessionStore(session.sessionId), [entry]);
    return { ingested: true };
  },

  ingestBatch(session, entries) {
    append(new SessionStore(session.sessionId), entries);
    return { ingestedCount: entries.length };
  },

  assemble(session, history, params) {
    const budget = params.tokenBudget === undefined ? undefined : Number(params.tokenBudget);
    return plan(new SessionStore(session.sessionId), history, budget);
  },

  compact(session, history, params) {
    const budget = params.tokenBudget === undefined ? undefined : Number(params.tokenBudget);
    const goal: Goal =
      budget === undefined || params.force
        ? "everything"
        : { within: params.compactionTarget === "budget" ? budget : thresholdTokens(budget) };
    return compact(new SessionStore(session.sessionId), history, goal, params.customInstructions);
  },

  afterTurn(session, history, params) {
    const store = new SessionStore(session.sessionId);
    append(store, readRange(history, params.prePromptMessageCount, history.len()));
    if (params.tokenBudget === undefined) return;
    const result = compact(store, history, { within: thresholdTokens(Number(params.tokenBudget)) }, undefined);
    // The turn is done either way; the next compaction retries.
    if (!result.ok) console.warn(`proactive compaction failed: ${result.reason}`);
  },
});
