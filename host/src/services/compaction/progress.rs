//! The compaction-progress guard (ARCHITECTURE.md §6): a compaction that
//! frees little is worse than none — it costs a summarization request and
//! re-summarizes the previous summary, draining detail — so passes are
//! measured and low-yield ones stopped.
//!
//! The reference's rules (its `compaction-progress` tests, from an unmerged
//! multi-pass branch ported from Hermes Agent):
//! - a pass makes **progress** when it leaves under 95% of what it started
//!   from (strictly);
//! - a pass is **low-yield** when it saves under 10% of what it started
//!   from; two low-yield passes in a row **stop** further automatic passes;
//! - an effective pass resets the count.
//!
//! ctxbox's additions, so compaction frees enough to last:
//! - a pass that frees under a third of the prompt budget is low-yield too,
//!   and stops the guard at once: it could not reach its aim because what
//!   it must keep verbatim (the newest turn, never split between a tool call
//!   and its result) is too large, and another pass would keep the same;
//! - a stop lifts when the context has grown by a third of the budget since
//!   (enough new history for an effective pass, as in a long tool loop), or
//!   when the next turn begins; either way the guard then allows one pass,
//!   and a low-yield one stops it again.
//!
//! Both figures of a pass are the caller's own measurement, on one basis,
//! never an engine's claims. A compaction that failed is not a pass: the
//! guard answers for futile compactions, the engine guard for broken ones.

use serde::Serialize;

/// Share of its starting size a pass must leave behind, at least, to have
/// made no progress.
pub const NO_PROGRESS_SHARE: f64 = 0.95;
/// Share of its starting size a pass must save to be effective.
pub const LOW_YIELD_SAVINGS: f64 = 0.10;
/// Low-yield passes in a row that stop further passes.
pub const MAX_LOW_YIELD_IN_A_ROW: u32 = 2;
/// A pass must free this share of the prompt budget to be effective (and
/// the context must grow by as much to lift a stop).
pub const ROOM_SHARE_OF_BUDGET: f64 = 1.0 / 3.0;

/// Whether a pass from `before` to `after` tokens made progress: it left
/// under 95% of `before`.
pub fn made_progress(before: u64, after: u64) -> bool {
    before > 0 && (after as f64) < before as f64 * NO_PROGRESS_SHARE
}

/// The room a pass must free under a prompt budget of `budget` tokens.
fn enough_room(budget: u64) -> u64 {
    (budget as f64 * ROOM_SHARE_OF_BUDGET).ceil() as u64
}

/// How much one pass gave.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum PassYield {
    /// Saved at least 10% and a third of the budget.
    Effective,
    /// Made progress, but saved under 10%, or under a third of the budget.
    LowYield,
    /// Left 95% or more (or compacted nothing).
    NoProgress,
}

impl PassYield {
    /// Its name in reports: `effective`, `low-yield` or `no-progress`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Effective => "effective",
            Self::LowYield => "low-yield",
            Self::NoProgress => "no-progress",
        }
    }

    /// The yield of a pass from `before` to `after` tokens under a prompt
    /// budget of `budget`.
    pub fn of(before: u64, after: u64, budget: u64) -> Self {
        if !made_progress(before, after) {
            return Self::NoProgress;
        }
        let saved = before - after;
        if (saved as f64) < before as f64 * LOW_YIELD_SAVINGS || saved < enough_room(budget) {
            Self::LowYield
        } else {
            Self::Effective
        }
    }
}

/// Why the guard stopped automatic compaction.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct GuardStop {
    /// Low-yield passes in a row when it stopped.
    pub passes: u32,
    /// What the last of them freed.
    pub freed: u64,
    /// The context's size after it, in the measuring caller's units.
    pub tokens: u64,
    /// The prompt budget.
    pub budget: u64,
}

impl std::fmt::Display for GuardStop {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.passes >= MAX_LOW_YIELD_IN_A_ROW {
            write!(
                f,
                "compaction stopped: {} passes in a row each freed under {}% of the context or under a third of the {}-token budget",
                self.passes,
                (LOW_YIELD_SAVINGS * 100.0) as u32,
                self.budget
            )?;
        } else {
            write!(
                f,
                "compaction stopped: the last pass freed {} tokens, under a third of the {}-token budget",
                self.freed, self.budget
            )?;
        }
        write!(
            f,
            "; the context is still {} tokens, most of it the newest turn, which is never split between a tool call and its result (compaction resumes when the context grows by a third of the budget or the next turn begins)",
            self.tokens
        )
    }
}

/// One session's guard.
#[derive(Debug, Clone, Default)]
pub struct ProgressGuard {
    low_yield_in_a_row: u32,
    stopped: Option<GuardStop>,
}

impl ProgressGuard {
    /// Records a pass from `before` to `after` tokens (`after == before`
    /// for a pass that compacted nothing) under a prompt budget of `budget`,
    /// and answers its yield. A pass freeing under a third of the budget,
    /// or the second low-yield pass in a row, stops the guard.
    pub fn record(&mut self, before: u64, after: u64, budget: u64) -> PassYield {
        let pass = PassYield::of(before, after, budget);
        if pass == PassYield::Effective {
            self.low_yield_in_a_row = 0;
            self.stopped = None;
            return pass;
        }
        self.low_yield_in_a_row += 1;
        let freed = before.saturating_sub(after);
        if self.low_yield_in_a_row >= MAX_LOW_YIELD_IN_A_ROW || freed < enough_room(budget) {
            self.stopped = Some(GuardStop {
                passes: self.low_yield_in_a_row,
                freed,
                tokens: after,
                budget,
            });
        }
        pass
    }

    /// Why automatic passes are stopped, if they are.
    pub fn stopped(&self) -> Option<&GuardStop> {
        self.stopped.as_ref()
    }

    /// The context is now `tokens` (same units as the passes): a stop is
    /// lifted once it has grown by a third of the budget since; answers
    /// whether it was.
    pub fn lift_if_grown(&mut self, tokens: u64) -> bool {
        let grown = self
            .stopped
            .as_ref()
            .is_some_and(|stop| tokens >= stop.tokens + enough_room(stop.budget));
        if grown {
            self.lift();
        }
        grown
    }

    /// A new turn began: a stop is lifted.
    pub fn new_turn(&mut self) {
        self.lift();
    }

    /// Lifts a stop, leaving one pass before a low-yield one stops it again.
    fn lift(&mut self) {
        if self.stopped.take().is_some() {
            self.low_yield_in_a_row = MAX_LOW_YIELD_IN_A_ROW - 1;
        }
    }

    /// Forgets everything (a session starts over).
    pub fn reset(&mut self) {
        *self = Self::default();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A budget small enough that the reference's 10% rule decides.
    const SMALL_BUDGET: u64 = 3;

    // The reference's `compactionMadeProgress` cases.
    #[test]
    fn progress_means_leaving_under_95_percent() {
        assert!(made_progress(200_000, 100_000));
        assert!(!made_progress(200_000, 195_000));
        assert!(!made_progress(200_000, 200_000));
        assert!(!made_progress(200_000, 210_000));
        assert!(made_progress(200_000, 189_999));
        assert!(!made_progress(200_000, 190_000), "the boundary is strict");
        assert!(!made_progress(0, 0));
        assert!(made_progress(1, 0));
        assert!(!made_progress(1_000, 950));
    }

    #[test]
    fn yields_are_effective_low_or_none() {
        assert_eq!(
            PassYield::of(200_000, 100_000, SMALL_BUDGET),
            PassYield::Effective
        );
        assert_eq!(
            PassYield::of(100_000, 90_000, SMALL_BUDGET),
            PassYield::Effective
        );
        assert_eq!(
            PassYield::of(100_000, 91_000, SMALL_BUDGET),
            PassYield::LowYield
        );
        assert_eq!(
            PassYield::of(100_000, 97_500, SMALL_BUDGET),
            PassYield::NoProgress
        );
    }

    #[test]
    fn freeing_under_a_third_of_the_budget_is_low_yield() {
        // 30% saved, but only 3,000 of a 12,000-token budget.
        assert_eq!(PassYield::of(10_000, 7_000, 12_000), PassYield::LowYield);
        assert_eq!(PassYield::of(10_000, 6_000, 12_000), PassYield::Effective);
    }

    // The reference's `CompactionProgressTracker` cases.
    #[test]
    fn an_effective_pass_resets_the_count() {
        let mut guard = ProgressGuard::default();
        assert_eq!(
            guard.record(200_000, 100_000, SMALL_BUDGET),
            PassYield::Effective
        );
        assert_eq!(guard.low_yield_in_a_row, 0);
        assert!(guard.stopped().is_none());
    }

    #[test]
    fn two_low_yield_passes_in_a_row_stop_it() {
        let mut guard = ProgressGuard::default();
        assert_eq!(
            guard.record(200_000, 185_000, SMALL_BUDGET),
            PassYield::LowYield
        );
        assert_eq!(guard.low_yield_in_a_row, 1);
        assert!(guard.stopped().is_none());
        guard.record(200_000, 185_000, SMALL_BUDGET);
        let stop = guard.stopped().expect("stopped");
        assert_eq!(stop.passes, 2);
        assert_eq!(stop.tokens, 185_000);
        assert!(stop.to_string().contains("2 passes in a row"), "{stop}");
    }

    #[test]
    fn an_effective_pass_between_low_yield_ones_keeps_it_going() {
        let mut guard = ProgressGuard::default();
        guard.record(200_000, 185_000, SMALL_BUDGET);
        guard.record(200_000, 100_000, SMALL_BUDGET);
        guard.record(200_000, 185_000, SMALL_BUDGET);
        assert!(guard.stopped().is_none());
        assert_eq!(guard.low_yield_in_a_row, 1);
    }

    #[test]
    fn a_pass_freeing_too_little_room_stops_it_at_once() {
        let mut guard = ProgressGuard::default();
        assert_eq!(guard.record(12_000, 10_000, 12_000), PassYield::LowYield);
        let stop = guard.stopped().expect("stopped after one");
        assert_eq!((stop.passes, stop.freed), (1, 2_000));
        assert!(
            stop.to_string()
                .contains("freed 2000 tokens, under a third"),
            "{stop}"
        );
    }

    #[test]
    fn a_stop_lifts_when_the_context_grows_by_a_third_of_the_budget() {
        let mut guard = ProgressGuard::default();
        guard.record(12_000, 10_000, 12_000);
        assert!(!guard.lift_if_grown(13_999));
        assert!(guard.stopped().is_some());
        assert!(guard.lift_if_grown(14_000));
        assert!(guard.stopped().is_none());
        guard.record(14_000, 13_000, 12_000);
        assert!(
            guard.stopped().is_some(),
            "one more low-yield pass stops it again"
        );
    }

    #[test]
    fn a_new_turn_lifts_a_stop_for_one_pass() {
        let mut guard = ProgressGuard::default();
        guard.record(100, 99, SMALL_BUDGET);
        guard.record(100, 99, SMALL_BUDGET);
        assert!(guard.stopped().is_some());
        guard.new_turn();
        assert!(guard.stopped().is_none());
        guard.record(100, 99, SMALL_BUDGET);
        assert!(
            guard.stopped().is_some(),
            "one low-yield pass stops it again"
        );
        guard.new_turn();
        guard.record(100, 50, SMALL_BUDGET);
        guard.new_turn();
        guard.record(100, 85, SMALL_BUDGET);
        assert!(
            guard.stopped().is_none(),
            "an effective pass cleared the count"
        );
    }

    #[test]
    fn reset_clears_everything() {
        let mut guard = ProgressGuard::default();
        guard.record(100, 99, SMALL_BUDGET);
        guard.record(100, 99, SMALL_BUDGET);
        guard.reset();
        assert!(guard.stopped().is_none());
        assert_eq!(guard.low_yield_in_a_row, 0);
    }
}
