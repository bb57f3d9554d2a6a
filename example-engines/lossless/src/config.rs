//! The engine's tunables.

/// How much history stays verbatim, how summaries are cut and condensed, and
/// how much work one call may do. The defaults follow lossless-claw.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// The newest messages, never summarized and always sent verbatim.
    pub fresh_tail_messages: u32,
    /// Messages one leaf summary covers (more when a chunk would otherwise
    /// end between a tool call and its results). At least 1.
    pub leaf_chunk_messages: u32,
    /// Consecutive summaries of one level condensed into one summary of the
    /// next level. At least 2.
    pub condense_fanout: u32,
    /// `after-turn` compacts once the context exceeds this percentage of the
    /// token budget, down to it; `compact` with the `threshold` target aims
    /// for it too.
    pub context_threshold_percent: u64,
    /// The most tokens a leaf summary may take (and at most half of what it
    /// summarizes).
    pub leaf_summary_tokens: u32,
    /// The most tokens a condensed summary may take (and at most half of what
    /// it condenses).
    pub condensed_summary_tokens: u32,
    /// Summaries one call writes at most; the rest waits for the next call,
    /// so one call stays within the host's time limits.
    pub max_summaries_per_call: u32,
    /// Characters of one message the summarizer reads; the rest of a longer
    /// message (a large tool output, say) is cut from the summarizer's input,
    /// never from the store.
    pub max_message_chars: usize,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            fresh_tail_messages: 32,
            leaf_chunk_messages: 8,
            condense_fanout: 4,
            context_threshold_percent: 75,
            leaf_summary_tokens: 1_200,
            condensed_summary_tokens: 2_000,
            max_summaries_per_call: 64,
            max_message_chars: 8_000,
        }
    }
}

impl Config {
    /// The token figure `after-turn` keeps the context under, for `budget`.
    pub fn threshold_tokens(&self, budget: u64) -> u64 {
        budget.saturating_mul(self.context_threshold_percent) / 100
    }
}
