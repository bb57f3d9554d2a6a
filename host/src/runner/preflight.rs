//! The pre-prompt check's decision, as the reference makes it
//! (`preemptive-compaction`): the context's estimate × 1.2 against the
//! prompt budget (the window minus the reserve); when it is over, what the
//! oversized tool results hold ([`Reducible`](super::tool_results::Reducible))
//! decides between compacting, truncating tool results, or both.

use crate::contract::tokens::PRE_PROMPT_SAFETY_FACTOR;

/// Characters a token is counted as when comparing tokens over with
/// characters reducible.
const CHARS_PER_TOKEN: u64 = 4;
/// Margin truncation alone must clear beyond the excess, tokens.
const TRUNCATE_ONLY_MARGIN_TOKENS: u64 = 512;
/// Truncation alone must also clear the excess this many times over.
const TRUNCATE_ONLY_FACTOR: f64 = 1.5;

/// What the pre-prompt check does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Route {
    /// The prompt fits: nothing.
    Fits,
    /// Over, and no tool result is oversized: compact.
    CompactOnly,
    /// Over, and truncating oversized tool results clears the excess with
    /// room to spare: truncate, no compaction.
    TruncateOnly,
    /// Over, and truncation alone would not clear it: compact, then
    /// truncate.
    CompactThenTruncate,
}

impl Route {
    /// Whether the route compacts.
    pub(super) fn compacts(self) -> bool {
        matches!(self, Self::CompactOnly | Self::CompactThenTruncate)
    }

    /// Whether the route truncates tool results in prompts.
    pub(super) fn truncates(self) -> bool {
        matches!(self, Self::TruncateOnly | Self::CompactThenTruncate)
    }
}

/// The pre-prompt estimate of a context of `context_tokens`: × 1.2.
pub(super) fn estimate(context_tokens: u64) -> u64 {
    (context_tokens as f64 * PRE_PROMPT_SAFETY_FACTOR).ceil() as u64
}

/// The context size (before the safety factor) over which the pre-prompt
/// check acts for a prompt budget of `budget`.
pub(super) fn trigger_tokens(budget: u64) -> u64 {
    (budget as f64 / PRE_PROMPT_SAFETY_FACTOR) as u64
}

/// The route for a prompt estimated at `estimate` tokens under a budget of
/// `budget`, with `reducible_chars` characters of oversized tool results.
/// Truncation alone is chosen when it removes the excess plus 512 tokens
/// and at least one and a half times the excess.
pub(super) fn route(estimate: u64, budget: u64, reducible_chars: u64) -> Route {
    let over = estimate.saturating_sub(budget);
    if over == 0 {
        return Route::Fits;
    }
    if reducible_chars == 0 {
        return Route::CompactOnly;
    }
    let over_chars = over * CHARS_PER_TOKEN;
    let truncate_only_chars = (over_chars + TRUNCATE_ONLY_MARGIN_TOKENS * CHARS_PER_TOKEN)
        .max((over_chars as f64 * TRUNCATE_ONLY_FACTOR).ceil() as u64);
    if reducible_chars >= truncate_only_chars {
        Route::TruncateOnly
    } else {
        Route::CompactThenTruncate
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_prompt_within_its_budget_fits() {
        assert_eq!(route(10_000, 10_000, 50_000), Route::Fits);
        assert_eq!(route(9_000, 10_000, 0), Route::Fits);
    }

    #[test]
    fn without_oversized_tool_results_the_check_compacts_only() {
        assert_eq!(route(10_001, 10_000, 0), Route::CompactOnly);
    }

    #[test]
    fn truncation_alone_must_clear_the_excess_with_a_margin() {
        // 1,000 tokens over: 4,000 characters, truncation alone needs
        // max(4,000 + 2,048, 6,000) = 6,048 characters.
        assert_eq!(route(11_000, 10_000, 6_048), Route::TruncateOnly);
        assert_eq!(route(11_000, 10_000, 6_047), Route::CompactThenTruncate);
        // 10,000 tokens over: 40,000 characters, 1.5 × is the larger bar.
        assert_eq!(route(20_000, 10_000, 60_000), Route::TruncateOnly);
        assert_eq!(route(20_000, 10_000, 59_999), Route::CompactThenTruncate);
    }

    #[test]
    fn routes_say_what_they_do() {
        assert!(!Route::Fits.compacts() && !Route::Fits.truncates());
        assert!(Route::CompactOnly.compacts() && !Route::CompactOnly.truncates());
        assert!(!Route::TruncateOnly.compacts() && Route::TruncateOnly.truncates());
        assert!(Route::CompactThenTruncate.compacts() && Route::CompactThenTruncate.truncates());
    }

    #[test]
    fn the_estimate_carries_the_safety_factor() {
        assert_eq!(estimate(10_000), 12_000);
        assert_eq!(trigger_tokens(12_000), 10_000);
    }
}
