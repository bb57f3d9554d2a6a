//! The prompt: the whole history, with stale tool output replaced by
//! placeholders.
//!
//! A tool result older than the last `recent_turns` turns, and larger than
//! `min_elided_tokens`, is replaced by a placeholder result for the same call
//! (same call id, tool name and error flag), so every call in the prompt is
//! still answered and no pair is separated. Everything else is kept verbatim
//! as ranges of the host's history.

use ctxbox_guest::{
    AgentMessage, AssembleResult, AssembledItem, ContentBlock, HistoryView, MessageKind,
    ToolResultMessage,
};

use crate::config::Config;

/// Appended to the system prompt when some tool output was elided.
pub const SYSTEM_PROMPT_ADDITION: &str = "To save context, the output of tool calls from earlier \
turns may be replaced by a placeholder saying it was elided. If you need that output again, call \
the tool again.";

/// An upper bound of the host's token estimate of one placeholder.
pub const PLACEHOLDER_TOKENS: u64 = 64;

/// Plans the prompt for `history`.
pub fn plan(history: &impl HistoryView, config: &Config) -> AssembleResult {
    let len = history.len();
    let recent_start = recent_turns_start(history, config.recent_turns);
    let mut items = Vec::new();
    let mut kept_from = 0;
    let mut elided_tokens = 0;
    let mut placeholders = 0;
    for index in 0..recent_start {
        if history.kind(index) != Some(MessageKind::ToolResult) {
            continue;
        }
        let tokens = history.tokens(index..index + 1);
        if tokens <= config.min_elided_tokens {
            continue;
        }
        let Some(AgentMessage::ToolResult(result)) =
            history.entry(index).map(|entry| entry.message)
        else {
            continue;
        };
        if kept_from < index {
            items.push(AssembledItem::keep(kept_from..index));
        }
        items.push(AssembledItem::Insert(placeholder(result, tokens)));
        kept_from = index + 1;
        elided_tokens += tokens;
        placeholders += 1;
    }
    if kept_from < len {
        items.push(AssembledItem::keep(kept_from..len));
    }
    AssembleResult {
        items,
        // Saturating: a host whose token sums disagree must not make the
        // engine panic.
        estimated_tokens: history.tokens(0..len).saturating_sub(elided_tokens)
            + placeholders * PLACEHOLDER_TOKENS,
        system_prompt_addition: (placeholders > 0).then(|| SYSTEM_PROMPT_ADDITION.to_owned()),
        context_projection: None,
    }
}

/// Where the newest `recent_turns` turns start: the position of the
/// `recent_turns`-th user message from the end; 0 when there are fewer turns
/// (nothing is stale), the end when `recent_turns` is 0 (everything is).
fn recent_turns_start(history: &impl HistoryView, recent_turns: u32) -> u32 {
    let mut turns_seen = 0;
    let mut start = history.len();
    while turns_seen < recent_turns {
        let Some(index) = start.checked_sub(1) else {
            return 0;
        };
        start = index;
        if history.kind(index) == Some(MessageKind::User) {
            turns_seen += 1;
        }
    }
    start
}

/// The stand-in for `result`, which the host estimated at `tokens`.
fn placeholder(result: ToolResultMessage, tokens: u64) -> AgentMessage {
    AgentMessage::ToolResult(ToolResultMessage {
        content: vec![ContentBlock::Text(format!(
            "[Output elided: this result is from an earlier turn (about {tokens} tokens).]"
        ))],
        details: None,
        ..result
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use ctxbox_guest::testing::rough_tokens;

    #[test]
    fn a_placeholder_costs_at_most_its_estimate() {
        let AgentMessage::ToolResult(original) = AgentMessage::tool_result("c", "read", "…")
        else {
            unreachable!("tool_result builds a tool result");
        };
        let largest = placeholder(original, u64::MAX);
        // The host also counts 6 tokens per content block.
        assert!(rough_tokens(&largest) + 6 <= PLACEHOLDER_TOKENS);
    }
}
