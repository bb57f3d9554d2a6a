//! The pre-prompt check's decision, as the reference makes it
//! (`preemptive-compaction`): the context's estimate × 1.2 against the
//! prompt budget (the window minus the reserve); when it is over, what the
//! oversized tool results hold ([`Reducible`](super::tool_results::Reducible))
//! decides between compacting, truncating tool results, or both. Each
//! check is kept in the turn report as a [`PrePromptCheck`].

use serde::Serialize;

use crate::contract::tokens::PRE_PROMPT_SAFETY_FACTOR;

/// Characters a token is counted as when comparing tokens over with
/// characters reducible.
const CHARS_PER_TOKEN: u64 = 4;
/// Margin truncation alone must clear beyond the excess, tokens.
const TRUNCATE_ONLY_MARGIN_TOKENS: u64 = 512;
/// Truncation alone must also clear the excess this many times over.
const TRUNCATE_ONLY_FACTOR: f64 = 1.5;

/// What the pre-prompt check does, named as the reference names its routes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Route {
    /// The prompt fits: nothing.
    Fits,
    /// Over, and no tool result is oversized: compact.
    CompactOnly,
    /// Over, and truncating oversized tool results clears the excess with
    /// room to spare: truncate, no compaction.
    #[serde(rename = "truncate_tool_results_only")]
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

/// One pre-prompt check, as the turn report keeps it: what the prompt was
/// counted at and by whom, against which budget, and what was done.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PrePromptCheck {
    /// What the check did.
    pub route: Route,
    /// The prompt's size as counted, tokens (the host's estimate × 1.2, or
    /// the caller's own figure as given).
    pub estimated_prompt_tokens: u64,
    /// Where that count came from: `transcript_estimate` (the host's
    /// weighted estimate), `calibrated_estimate` (the same, scaled by what
    /// the model reported), or the source a caller named with its own
    /// figure ([`Session::set_prompt_pressure`](super::Session::set_prompt_pressure)).
    pub pressure_source: String,
    /// The budget the prompt was held to: the window minus the reserve.
    pub prompt_budget: u64,
    /// Tokens the prompt is over that budget (0 when it fits).
    pub overflow_tokens: u64,
    /// Characters truncating oversized tool results would cut.
    pub tool_result_reducible_chars: u64,
}

impl PrePromptCheck {
    /// The check of a prompt counted at `estimate` tokens by `source` under
    /// `budget`, with `reducible_chars` characters of oversized tool
    /// results.
    pub(super) fn decide(estimate: u64, source: String, budget: u64, reducible_chars: u64) -> Self {
        Self {
            route: route(estimate, budget, reducible_chars),
            estimated_prompt_tokens: estimate,
            pressure_source: source,
            prompt_budget: budget,
            overflow_tokens: estimate.saturating_sub(budget),
            tool_result_reducible_chars: reducible_chars,
        }
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
fn route(estimate: u64, budget: u64, reducible_chars: u64) -> Route {
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
    fn a_check_says_how_far_over_and_what_could_be_cut() {
        let check = PrePromptCheck::decide(11_000, "tokenizer".into(), 10_000, 6_048);
        assert_eq!(check.route, Route::TruncateOnly);
        assert_eq!(check.overflow_tokens, 1_000);
        let json = serde_json::to_value(&check).expect("JSON");
        assert_eq!(json["route"], "truncate_tool_results_only");
        assert_eq!(json["pressureSource"], "tokenizer");
        assert_eq!(json["toolResultReducibleChars"], 6_048);
        let fits = PrePromptCheck::decide(9_000, "transcript_estimate".into(), 10_000, 0);
        assert_eq!((fits.route, fits.overflow_tokens), (Route::Fits, 0));
        assert_eq!(serde_json::to_value(fits.route).expect("JSON"), "fits");
    }

    #[test]
    fn the_estimate_carries_the_safety_factor() {
        assert_eq!(estimate(10_000), 12_000);
        assert_eq!(trigger_tokens(12_000), 10_000);
    }
}
