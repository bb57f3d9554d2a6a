//! Native compaction (ARCHITECTURE.md §6): the reference's algorithm, improved.
//!
//! 1. Size the context: the provider's figure, else the last valid assistant
//!    usage plus estimates of what followed, never below the host estimate.
//! 2. Skip unless forced or over `window - reserve` (the reserve raised to
//!    20,000 and capped at a quarter of the window, as the reference does).
//! 3. Cut before a user or assistant message so the newest history worth
//!    `keepRecentTokens` stays verbatim, never between a tool call and its
//!    result; a cut inside a turn gets a separate turn-prefix summary.
//! 4. Summarize what precedes the cut in chunks of about 40% of the window
//!    minus 4,096 tokens (tool groups whole), **in parallel** with bounded
//!    concurrency, then merge them in order with the previous compaction's
//!    summary folded in; the summary has the required sections and file
//!    lists and is capped at 16,000 characters.
//! 5. Aim well under the budget (`compactionTarget: budget`) or the trigger
//!    threshold (`threshold`): at `targetShare` (half) of it, scaled into the
//!    transcript's units (`target.rs`), so one compaction frees room for
//!    many turns; the summary and kept-history budgets are chosen so the
//!    rebuilt context fits the aim. It cannot when the newest turn alone
//!    (from the latest legal cut on) is larger than what is left for kept
//!    history: a turn is never split between a tool call and its result, so
//!    the compaction still happens but ends over the aim, and over the
//!    target the result's `reason` says so. A pass that could not, or did
//!    not, leave under 95% of the context writes nothing (`progress.rs`:
//!    checked before summarizing too, so a hopeless pass costs no summary);
//!    the turn runner's progress guard stops repeated low-yield passes.
//! 6. Append a `compaction` entry; the rebuilt context is its summary followed
//!    by the entries from `firstKeptEntryId`.
//! 7. Optionally rotate to a new transcript (`truncateAfterCompaction`).
//!
//! The [`Compactor`] is the one implementation: the `legacy` engine's
//! `compact` and the `delegate-compaction` host import both call it.

mod accounting;
mod chunks;
mod claim;
mod compactor;
mod config;
mod cut;
mod files;
mod finalize;
mod progress;
mod prompts;
mod serialize;
mod target;
mod watchdog;

pub(crate) use self::accounting::tokens_before as context_tokens;
pub use self::claim::{Claim, Contradiction, MeasuredPrompt};
pub use self::compactor::Compactor;
pub use self::config::{
    CompactionConfig, MAX_TIMEOUT_SECONDS, RESERVE_TOKENS_FLOOR, TargetShare,
    agent_timeout_seconds, effective_reserve,
};
pub use self::finalize::{MAX_SUMMARY_CHARS, TRUNCATION_MARKER};
pub use self::progress::{GuardStop, PassYield, ProgressGuard, made_progress};

use crate::contract::services::ProgressSink;
use crate::services::summarize::SummarizeError;
use crate::transcript::TranscriptError;

/// Why a compaction failed. Nothing was written to the transcript unless the
/// failure came after the compaction entry (then only rotation failed).
#[derive(Debug, thiserror::Error)]
pub enum CompactionError {
    /// Reading or writing the transcript failed.
    #[error(transparent)]
    Transcript(#[from] TranscriptError),
    /// Summarizing failed (and no summarizer could stand in).
    #[error("summarizing ({stage}) failed: {source}")]
    Summarize {
        /// `chunk` or `merge`.
        stage: &'static str,
        /// The summarizer's error.
        #[source]
        source: SummarizeError,
    },
    /// The caller cancelled it.
    #[error("compaction was cancelled")]
    Aborted,
    /// Summarization made no progress for `timeoutSeconds`.
    #[error("compaction made no progress for {seconds} s (compaction.timeoutSeconds)")]
    Timeout {
        /// The window.
        seconds: u64,
    },
    /// The host failed (a worker task died).
    #[error("compaction failed: {0}")]
    Internal(String),
}

/// A progress sink for callers without a watchdog.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoProgress;

impl ProgressSink for NoProgress {
    fn progress(&self) {}
}

#[cfg(test)]
mod tests;
