//! Where a compaction aims (ARCHITECTURE.md §6, step 5): well under the
//! trigger, so one compaction frees room for many turns.
//!
//! The caller's target (the prompt budget, or the trigger threshold) is
//! measured in the caller's units: provider-reported usage, or the
//! pre-prompt check's weighted estimate × 1.2. The cut and the summary
//! budget are measured in the transcript's own per-entry estimates. The
//! two differ, often by half (usage counts the system prompt and tools,
//! the pre-prompt check weighs tool results double), so the aim is scaled
//! into the transcript's units by how much larger the caller's figure for
//! the context is than the transcript's — the reference's unit scaling
//! (#111886). Aiming at the target itself, in the wrong units, is how a
//! compaction ends just under the trigger and the next message crosses it
//! again.

use super::config::TargetShare;

/// The most the caller's units may outweigh the transcript's: a figure the
/// caller cannot vouch for (an engine's, a client's) can shrink the aim by
/// this much at most.
const MAX_UNIT_SCALE: f64 = 4.0;

/// A compaction's aim, in the transcript's units.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Aim {
    /// Tokens the rebuilt context should take at most, in the transcript's
    /// estimates; `None` without a target.
    pub tokens: Option<u64>,
    /// The caller's units per transcript unit (at least 1).
    pub scale: f64,
}

impl Aim {
    /// The aim for `target` (caller's units) at `share`, for a context the
    /// caller counts as `tokens_before` and the transcript as
    /// `transcript_tokens`.
    pub(crate) fn new(
        target: Option<u64>,
        share: TargetShare,
        tokens_before: u64,
        transcript_tokens: u64,
    ) -> Self {
        let scale = if transcript_tokens == 0 {
            1.0
        } else {
            (tokens_before as f64 / transcript_tokens as f64).clamp(1.0, MAX_UNIT_SCALE)
        };
        Self {
            tokens: target.map(|target| (share.of(target) as f64 / scale) as u64),
            scale,
        }
    }

    /// `tokens` of the transcript's units in the caller's.
    pub(crate) fn in_caller_units(&self, tokens: u64) -> u64 {
        (tokens as f64 * self.scale).ceil() as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aims_at_the_share_of_the_target_in_the_transcripts_units() {
        let share = TargetShare::try_from(0.4).expect("in range");
        // The caller counts the context 1.5 times what the transcript does.
        let aim = Aim::new(Some(12_000), share, 15_000, 10_000);
        assert_eq!(aim.scale, 1.5);
        assert_eq!(
            aim.tokens,
            Some(3_200),
            "40% of 12,000 is 4,800 caller tokens"
        );
        assert_eq!(aim.in_caller_units(3_200), 4_800);
    }

    #[test]
    fn never_scales_below_one_or_beyond_the_cap() {
        let share = TargetShare::DEFAULT;
        assert_eq!(Aim::new(Some(10_000), share, 5_000, 10_000).scale, 1.0);
        assert_eq!(
            Aim::new(Some(10_000), share, 1_000_000, 10).scale,
            MAX_UNIT_SCALE
        );
        assert_eq!(Aim::new(Some(10_000), share, 10, 0).scale, 1.0);
        assert_eq!(Aim::new(None, share, 10, 10).tokens, None);
    }
}
