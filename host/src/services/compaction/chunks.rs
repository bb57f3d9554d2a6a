//! Splitting the history to summarize into chunks of about a token budget,
//! never separating a tool call from its results (a group larger than the
//! budget forms a chunk of its own).

use std::ops::Range;

use crate::contract::history::{History, ToolPairing};

/// `range` of `history` as consecutive chunks of at most `max_tokens` tokens
/// each (unless a single tool group is larger).
pub(crate) fn split(history: &History, range: Range<usize>, max_tokens: u64) -> Vec<Range<usize>> {
    let mut chunks = Vec::new();
    let mut chunk_start = range.start;
    let mut index = range.start;
    while index < range.end {
        let group_end = group_end(history, index, range.end);
        let oversized = history.tokens(chunk_start..group_end) > max_tokens;
        if oversized && chunk_start < index {
            chunks.push(chunk_start..index);
            chunk_start = index;
        }
        index = group_end;
    }
    if chunk_start < range.end {
        chunks.push(chunk_start..range.end);
    }
    chunks
}

/// One past the last entry of the group starting at `index`: a message with
/// tool calls reaches to its last result (and to the results of calls made
/// within that span); anything else stands alone.
fn group_end(history: &History, index: usize, limit: usize) -> usize {
    let mut end = index + 1;
    let mut cursor = index;
    while cursor < end {
        if let Some(ToolPairing::ToolCalls { last_result }) = history.tool_pairing(cursor) {
            end = end.max(last_result as usize + 1);
        }
        cursor += 1;
    }
    end.min(limit)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::contract::types::{AgentMessage, MessageEntry};

    fn entry(message: AgentMessage) -> MessageEntry {
        MessageEntry {
            id: String::new(),
            parent_id: None,
            timestamp_ms: 0,
            message,
        }
    }

    fn call(id: &str) -> MessageEntry {
        entry(AgentMessage::tool_call(id, "read", "{}"))
    }

    fn result(id: &str) -> MessageEntry {
        entry(AgentMessage::tool_result(id, "read", "z".repeat(4_000)))
    }

    #[test]
    fn chunks_keep_tool_groups_whole() {
        let history = History::new(vec![
            entry(AgentMessage::user_text("go")),
            call("a"),
            result("a"),
            call("b"),
            result("b"),
            entry(AgentMessage::user_text("more")),
        ]);
        // 19 tokens for each user message, 1,038 for each call with its result.
        assert_eq!(split(&history, 0..6, 1_100), [0..3, 3..6]);
        let chunks = split(&history, 0..6, 1_000);
        assert_eq!(chunks, [0..1, 1..3, 3..5, 5..6]);
        for chunk in &chunks {
            assert!(!matches!(
                history.kind(chunk.start),
                Some(crate::contract::types::MessageKind::ToolResult)
            ));
        }
        assert_eq!(split(&history, 0..6, 1_000_000), vec![0..6]);
        assert_eq!(split(&history, 2..2, 10), Vec::<Range<usize>>::new());
    }
}
