/** The engine's tunables: the defaults of the Rust `lossless` engine (after lossless-claw). */
export const config = {
  /** The newest messages, never summarized and always sent verbatim. */
  freshTailMessages: 32,
  /** Messages one leaf summary covers (more when a chunk would end between a tool call and its results). */
  leafChunkMessages: 8,
  /** Consecutive summaries of one level condensed into one of the next level. */
  condenseFanout: 4,
  /** `afterTurn` compacts once the context passes this share of the budget, down to it. */
  contextThresholdPercent: 75,
  /** The most tokens a leaf summary may take (and at most half of what it summarizes). */
  leafSummaryTokens: 1_200,
  /** The most tokens a condensed summary may take (and at most half of what it condenses). */
  condensedSummaryTokens: 2_000,
  /** Summaries one call writes at most; the next call continues. */
  maxSummariesPerCall: 64,
  /** Characters of one message the summarizer reads (the store keeps it whole). */
  maxMessageChars: 8_000,
} as const;

/** The token figure `afterTurn` keeps the context under, for `budget`. */
export function thresholdTokens(budget: number): number {
  return Math.floor((budget * config.contextThresholdPercent) / 100);
}
