//! How much of a prompt's tool results the reference considers oversized for
//! a window (`tool-result-limits`, `tool-result-truncation`): one result may
//! hold 30% of the window (at four characters a token) up to a hard cap of
//! 16,000 characters (32,000 from a 100k window, 64,000 from 200k), and all
//! results together the larger of four such results and half the window.
//! What exceeds those is what truncating tool results can take off a prompt.
//! Overflow recovery truncates only when there is some; the pre-prompt check
//! routes on how much there is.
//!
//! ctxbox's truncation also cuts tool-call arguments and thinking (a file
//! written through a tool call is often the largest block of a prompt), so a
//! tool-call's arguments or a thinking block over the one-result cap counts
//! as oversized too; the aggregate is the tool results' alone.

use crate::contract::tokens;
use crate::contract::types::{AgentMessage, ContentBlock};

/// Share of the window one tool result may take.
const RESULT_WINDOW_SHARE: f64 = 0.3;
/// Share of the window all tool results together may take.
const AGGREGATE_WINDOW_SHARE: f64 = 0.5;
/// The aggregate is at least this many results at their cap.
const AGGREGATE_RESULTS: u64 = 4;
/// Characters a token is counted as.
const CHARS_PER_TOKEN: u64 = 4;

/// The cap on one result's characters for a window of `window` tokens.
fn result_cap_chars(window: u64) -> u64 {
    let hard_cap = match window {
        200_000.. => 64_000,
        100_000.. => 32_000,
        _ => 16_000,
    };
    let share = (window as f64 * RESULT_WINDOW_SHARE) as u64 * CHARS_PER_TOKEN;
    share.clamp(1, hard_cap)
}

/// The cap on one result for a window of `window` tokens, in tokens: what
/// truncation cuts every tool result down to.
pub(super) fn result_cap_tokens(window: u64) -> u64 {
    result_cap_chars(window) / CHARS_PER_TOKEN
}

/// What truncating tool results could take off a prompt.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct Reducible {
    /// Blocks of tool traffic (result text, tool-call arguments, thinking)
    /// over the one-result cap.
    pub(super) oversized: usize,
    /// Characters above the one-result cap, summed.
    pub(super) oversized_chars: u64,
    /// Characters still above the aggregate cap once each result is capped.
    pub(super) aggregate_chars: u64,
}

impl Reducible {
    /// What tool results in `messages` hold beyond the caps for `window`.
    pub(super) fn in_messages<'a>(
        messages: impl IntoIterator<Item = &'a AgentMessage>,
        window: u64,
    ) -> Self {
        let cap = result_cap_chars(window);
        let aggregate_cap = (cap * AGGREGATE_RESULTS)
            .max((window as f64 * CHARS_PER_TOKEN as f64 * AGGREGATE_WINDOW_SHARE) as u64);
        let mut reducible = Self::default();
        let mut capped_total = 0u64;
        let mut note = |chars: u64| {
            if chars > cap {
                reducible.oversized += 1;
                reducible.oversized_chars += chars - cap;
            }
        };
        for message in messages {
            match message {
                AgentMessage::ToolResult { content, .. } => {
                    let chars: u64 = content
                        .iter()
                        .map(|block| match block {
                            ContentBlock::Text { text } => tokens::weighted_chars(text),
                            _ => 0,
                        })
                        .sum();
                    note(chars);
                    capped_total += chars.min(cap);
                }
                AgentMessage::Assistant { content, .. } => {
                    for block in content {
                        match block {
                            ContentBlock::ToolCall { arguments_json, .. } => {
                                note(tokens::weighted_chars(arguments_json))
                            }
                            ContentBlock::Thinking { text, .. } => {
                                note(tokens::weighted_chars(text))
                            }
                            _ => {}
                        }
                    }
                }
                _ => {}
            }
        }
        reducible.aggregate_chars = capped_total.saturating_sub(aggregate_cap);
        reducible
    }

    /// Whether anything is oversized (the reference's
    /// `sessionLikelyHasOversizedToolResults`).
    pub(super) fn any(&self) -> bool {
        self.oversized > 0 || self.aggregate_chars > 0
    }

    /// Every character truncation could take off.
    pub(super) fn chars(&self) -> u64 {
        self.oversized_chars + self.aggregate_chars
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn result(chars: usize) -> AgentMessage {
        AgentMessage::tool_result("c", "exec", "x".repeat(chars))
    }

    #[test]
    fn one_result_may_take_thirty_percent_of_the_window_up_to_a_hard_cap() {
        assert_eq!(result_cap_chars(8_000), 9_600);
        assert_eq!(result_cap_chars(32_000), 16_000);
        assert_eq!(result_cap_chars(128_000), 32_000);
        assert_eq!(result_cap_chars(200_000), 64_000);
    }

    #[test]
    fn only_what_exceeds_the_caps_is_reducible() {
        let small = Reducible::in_messages(&[result(2_000), result(3_000)], 16_384);
        assert!(!small.any(), "{small:?}");
        assert_eq!(small.chars(), 0);
        let large = Reducible::in_messages(&[result(2_000), result(30_000)], 16_384);
        assert_eq!(large.oversized, 1);
        assert_eq!(large.oversized_chars, 30_000 - 16_000);
        assert!(large.any());
    }

    #[test]
    fn a_large_tool_call_argument_is_oversized_too() {
        let write = AgentMessage::tool_call(
            "w",
            "write",
            format!("{{\"content\":\"{}\"}}", "y".repeat(40_000)),
        );
        let reducible = Reducible::in_messages(&[write, result(100)], 16_384);
        assert_eq!(reducible.oversized, 1);
        assert!(reducible.any());
    }

    #[test]
    fn many_results_each_under_the_cap_can_exceed_the_aggregate() {
        // Window 16,384: cap 16,000 a result, aggregate max(64,000, 32,768).
        let many: Vec<AgentMessage> = (0..5).map(|_| result(15_000)).collect();
        let reducible = Reducible::in_messages(&many, 16_384);
        assert_eq!(reducible.oversized, 0);
        assert_eq!(reducible.aggregate_chars, 75_000 - 64_000);
        assert!(reducible.any());
    }
}
