//! An owner's compaction claim against the host's measurement
//! (ARCHITECTURE.md §8): an engine that owns compaction answers how large
//! its context was before and after; the turn runner measures the prompt
//! the engine assembles before and after. Only a contradiction between the
//! two is the engine's fault: a compaction that honestly freed little (the
//! newest turn, never split between a tool call and its result, fills the
//! budget) is the progress guard's business (`progress.rs`), never a
//! quarantine.
//!
//! The two are in different units (the engine's own estimate, the host's
//! calibrated weighted one; CJK text alone can differ several times), so
//! they are compared as shares of where each started, with room to spare:
//! - the claim says it freed more than half its context more than the
//!   host measured ([`OVERCLAIM_TOLERANCE`]);
//! - or it says the context shrank while the prompt grew by more than a
//!   tenth ([`GROWTH_TOLERANCE`]).
//!
//! An answer without `tokensAfter`, or not claiming to have shrunk the
//! context, claims nothing to contradict.

use std::fmt;

/// How much more of its context (a share of it) a claim may say it freed
/// than the host measured before the claim is a contradiction.
pub const OVERCLAIM_TOLERANCE: f64 = 0.5;
/// How much the measured prompt may grow (a share of it) under a claim of
/// shrinking before the claim is a contradiction.
pub const GROWTH_TOLERANCE: f64 = 0.10;

/// What an engine's compaction answer says of its context, in its units.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Claim {
    /// Its `tokensBefore`.
    pub tokens_before: u64,
    /// Its `tokensAfter`, if it gave one.
    pub tokens_after: Option<u64>,
}

/// The prompt the engine assembled before and after, as the host measured it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MeasuredPrompt {
    /// Tokens before the compaction.
    pub before: u64,
    /// Tokens after it.
    pub after: u64,
}

/// A claim the measurement contradicts, with both, for the engine's
/// quarantine record.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Contradiction {
    claim: Claim,
    claimed_after: u64,
    measured: MeasuredPrompt,
}

impl Claim {
    /// The share of its context the claim says was freed; `None` when it
    /// claims no shrinking (or gives no figures to check).
    fn freed_share(self) -> Option<(f64, u64)> {
        let after = self.tokens_after?;
        (self.tokens_before > 0 && after < self.tokens_before)
            .then(|| (share_freed(self.tokens_before, after), after))
    }

    /// The contradiction between this claim and `measured`, if there is one.
    pub fn contradicted_by(self, measured: MeasuredPrompt) -> Option<Contradiction> {
        let (claimed, claimed_after) = self.freed_share()?;
        if measured.before == 0 {
            return None;
        }
        let freed = share_freed(measured.before, measured.after);
        let overclaims = claimed - freed > OVERCLAIM_TOLERANCE;
        let grew = -freed > GROWTH_TOLERANCE;
        (overclaims || grew).then_some(Contradiction {
            claim: self,
            claimed_after,
            measured,
        })
    }
}

/// The share of `before` that going down to `after` freed (negative when
/// it grew).
fn share_freed(before: u64, after: u64) -> f64 {
    (before as f64 - after as f64) / before as f64
}

/// A share as a whole percentage.
fn percent(share: f64) -> i64 {
    (share * 100.0).round() as i64
}

impl fmt::Display for Contradiction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let MeasuredPrompt { before, after } = self.measured;
        write!(
            f,
            "its compaction claims to have freed {}% of its context ({} → {} tokens by its count), but the prompt it assembled next is ~{after} tokens against ~{before} before it",
            percent(share_freed(self.claim.tokens_before, self.claimed_after)),
            self.claim.tokens_before,
            self.claimed_after,
        )?;
        if after > before {
            write!(f, " (it grew, as the host measures)")
        } else {
            write!(
                f,
                " ({}% freed, as the host measures)",
                percent(share_freed(before, after))
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claim(before: u64, after: Option<u64>) -> Claim {
        Claim {
            tokens_before: before,
            tokens_after: after,
        }
    }

    fn measured(before: u64, after: u64) -> MeasuredPrompt {
        MeasuredPrompt { before, after }
    }

    #[test]
    fn an_honest_compaction_that_freed_little_is_no_contradiction() {
        // The newest turn fills the budget: the engine says it freed 4%,
        // the host measures nothing freed.
        assert!(
            claim(63_000, Some(60_500))
                .contradicted_by(measured(61_061, 61_061))
                .is_none()
        );
        // ~5,909 → ~5,678: a little, in both counts.
        assert!(
            claim(6_200, Some(5_900))
                .contradicted_by(measured(5_909, 5_678))
                .is_none()
        );
    }

    #[test]
    fn units_that_differ_are_no_contradiction() {
        // The engine counts a quarter of what the host does, and both say
        // it freed about half.
        assert!(
            claim(10_000, Some(5_000))
                .contradicted_by(measured(40_000, 22_000))
                .is_none()
        );
    }

    #[test]
    fn claiming_far_more_freed_than_measured_is_a_contradiction() {
        let found = claim(1_000_000, Some(10))
            .contradicted_by(measured(5_010, 5_000))
            .expect("contradiction");
        let text = found.to_string();
        assert!(
            text.contains(
                "claims to have freed 100% of its context (1000000 → 10 tokens by its count)"
            ),
            "{text}"
        );
        assert!(
            text.contains("~5000 tokens against ~5010 before it (0% freed, as the host measures)"),
            "{text}"
        );
    }

    #[test]
    fn growing_while_claiming_to_shrink_is_a_contradiction() {
        let found = claim(9_000, Some(8_000))
            .contradicted_by(measured(5_000, 6_000))
            .expect("contradiction");
        assert!(found.to_string().contains("it grew"), "{found}");
        assert!(
            claim(9_000, Some(8_000))
                .contradicted_by(measured(5_000, 5_400))
                .is_none(),
            "within the tolerance"
        );
    }

    #[test]
    fn no_claim_is_nothing_to_contradict() {
        assert!(
            claim(9_000, None)
                .contradicted_by(measured(5_000, 9_000))
                .is_none()
        );
        assert!(
            claim(9_000, Some(9_500))
                .contradicted_by(measured(5_000, 9_000))
                .is_none()
        );
        assert!(
            claim(0, Some(0))
                .contradicted_by(measured(5_000, 9_000))
                .is_none()
        );
    }
}
