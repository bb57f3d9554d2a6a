//! Running engine logic natively: an in-memory history, synthetic sessions,
//! and the prompt the host would build from an `assemble` answer, checked
//! against the host's tool-pairing rule. For unit tests and native benches;
//! nothing here talks to the host.
//!
//! ```
//! use ctxbox_guest::testing::{MemoryHistory, check_tool_pairing, conversation};
//! use ctxbox_guest::{AssembleResult, HistoryView};
//!
//! let history = MemoryHistory::new(conversation(4));
//! // Keeping 2..16 starts on a tool result whose call (1) is left out.
//! let broken = AssembleResult::keep_range(2..16, history.tokens(2..16));
//! assert!(check_tool_pairing(&broken.materialize(&history), &history).is_err());
//! let whole = AssembleResult::keep_range(1..16, history.tokens(1..16));
//! assert!(check_tool_pairing(&whole.materialize(&history), &history).is_ok());
//! ```

use std::collections::{HashMap, HashSet};
use std::ops::Range;

use crate::{
    AgentMessage, AssembleResult, AssembledItem, HistoryView, MessageEntry, MessageKind, ToolCall,
    ToolPairing,
};

/// A [`HistoryView`] over entries held in memory, with the host's tool
/// pairing and per-entry token estimates.
#[derive(Debug, Clone)]
pub struct MemoryHistory {
    entries: Vec<MessageEntry>,
    /// `prefix_tokens[i]`: estimated tokens of entries `0..i`.
    prefix_tokens: Vec<u64>,
    pairing: Vec<ToolPairing>,
}

impl MemoryHistory {
    /// A history of `entries`, each estimated with [`rough_tokens`].
    pub fn new(entries: Vec<MessageEntry>) -> Self {
        Self::with_estimator(entries, |entry| rough_tokens(&entry.message))
    }

    /// A history of `entries`, each estimated by `estimate` (e.g. fixed
    /// figures, to make a test's budget arithmetic obvious).
    pub fn with_estimator(
        entries: Vec<MessageEntry>,
        estimate: impl Fn(&MessageEntry) -> u64,
    ) -> Self {
        let mut prefix_tokens = Vec::with_capacity(entries.len() + 1);
        prefix_tokens.push(0);
        let mut total = 0;
        for entry in &entries {
            total += estimate(entry);
            prefix_tokens.push(total);
        }
        let pairing = pairing_of(&entries);
        Self {
            entries,
            prefix_tokens,
            pairing,
        }
    }

    /// The entries, oldest first.
    pub fn entries(&self) -> &[MessageEntry] {
        &self.entries
    }
}

impl Default for MemoryHistory {
    /// An empty history.
    fn default() -> Self {
        Self::new(Vec::new())
    }
}

impl HistoryView for MemoryHistory {
    fn len(&self) -> u32 {
        self.entries.len() as u32
    }

    fn entry(&self, index: u32) -> Option<MessageEntry> {
        self.entries.get(index as usize).cloned()
    }

    fn kind(&self, index: u32) -> Option<MessageKind> {
        self.entries
            .get(index as usize)
            .map(|entry| entry.message.kind())
    }

    fn tool_pairing(&self, index: u32) -> Option<ToolPairing> {
        self.pairing.get(index as usize).copied()
    }

    fn tokens(&self, range: Range<u32>) -> u64 {
        let end = (range.end as usize).min(self.entries.len());
        let start = (range.start as usize).min(end);
        self.prefix_tokens[end] - self.prefix_tokens[start]
    }
}

/// A simple stand-in for the host's token estimator: a quarter of the
/// message's characters (text, thinking, tool-call names and arguments,
/// summaries), rounded up, plus 12 per message. The host's own estimator also
/// weighs CJK text, images and content blocks; use
/// [`MemoryHistory::with_estimator`] when a test needs exact figures.
pub fn rough_tokens(message: &AgentMessage) -> u64 {
    let blocks = match message {
        AgentMessage::User(m) => &m.content,
        AgentMessage::Assistant(m) => &m.content,
        AgentMessage::ToolResult(m) => &m.content,
        AgentMessage::Custom(m) => &m.content,
        AgentMessage::CompactionSummary(m) => {
            return (m.summary.chars().count() as u64).div_ceil(4) + 12;
        }
        AgentMessage::BranchSummary(m) => {
            return (m.summary.chars().count() as u64).div_ceil(4) + 12;
        }
    };
    let chars: usize = blocks
        .iter()
        .map(|block| match block {
            crate::ContentBlock::Text(text) => text.chars().count(),
            crate::ContentBlock::Thinking(thinking) => thinking.text.chars().count(),
            crate::ContentBlock::ToolCall(call) => {
                call.name.chars().count() + call.arguments_json.chars().count()
            }
            crate::ContentBlock::Image(_) => 0,
        })
        .sum();
    (chars as u64).div_ceil(4) + 12
}

/// Entries for `messages`, oldest first: ids `e0`, `e1`, …, each the parent of
/// the next, one second apart.
pub fn entries(messages: impl IntoIterator<Item = AgentMessage>) -> Vec<MessageEntry> {
    messages
        .into_iter()
        .enumerate()
        .map(|(index, message)| MessageEntry {
            id: format!("e{index}"),
            parent_id: index.checked_sub(1).map(|parent| format!("e{parent}")),
            timestamp_ms: 1_700_000_000_000 + index as i64 * 1_000,
            message,
        })
        .collect()
}

/// A synthetic session of `turns` turns of four entries each: a question, an
/// assistant call of `read_file` (call id `call-<turn>`), its result of about
/// 400 characters, and an answer.
pub fn conversation(turns: usize) -> Vec<MessageEntry> {
    entries((0..turns).flat_map(|turn| {
        let call_id = format!("call-{turn}");
        [
            AgentMessage::user_text(format!("question {turn}: {}", "please look ".repeat(10))),
            AgentMessage::tool_use([ToolCall::new(
                call_id.clone(),
                "read_file",
                format!(r#"{{"path":"src/{turn}.rs"}}"#),
            )]),
            AgentMessage::tool_result(
                call_id,
                "read_file",
                format!("output {turn}: {}", "data ".repeat(80)),
            ),
            AgentMessage::assistant_text(format!("answer {turn}: {}", "because ".repeat(10))),
        ]
    }))
}

/// Each entry's pairing role, as the host computes it: results point at the
/// assistant message that made their call, assistant messages with calls at
/// their last result.
fn pairing_of(entries: &[MessageEntry]) -> Vec<ToolPairing> {
    let mut pairing = vec![ToolPairing::None; entries.len()];
    let mut callers: HashMap<&str, u32> = HashMap::new();
    for (index, entry) in entries.iter().enumerate() {
        let index = index as u32;
        match &entry.message {
            AgentMessage::Assistant(_) => {
                for call in entry.message.tool_calls() {
                    callers.insert(&call.id, index);
                    pairing[index as usize] = ToolPairing::ToolCalls(index);
                }
            }
            AgentMessage::ToolResult(result) => {
                let call = callers.get(result.tool_call_id.as_str()).copied();
                pairing[index as usize] = ToolPairing::ToolResult(call);
                if let Some(call) = call {
                    pairing[call as usize] = ToolPairing::ToolCalls(index);
                }
            }
            _ => {}
        }
    }
    pairing
}

impl AssembleResult {
    /// The messages of the prompt this answer describes over `history`, as
    /// the host builds it: kept ranges copied (clamped to the history),
    /// inserted messages as given.
    pub fn materialize(&self, history: &impl HistoryView) -> Vec<AgentMessage> {
        let mut messages = Vec::new();
        for item in &self.items {
            match item {
                AssembledItem::Keep(range) => messages.extend(
                    history
                        .range(range.start..range.end)
                        .into_iter()
                        .map(|entry| entry.message),
                ),
                AssembledItem::Insert(message) => messages.push(message.clone()),
            }
        }
        messages
    }
}

/// Checks a prompt against the host's tool-pairing rule: a tool result whose
/// call is in `history` needs that call earlier in the prompt, and a tool call
/// whose result is in `history` needs a result for it later in the prompt
/// (the result may be an inserted message answering the same call id). The
/// error names the first call id that breaks the rule.
pub fn check_tool_pairing(
    prompt: &[AgentMessage],
    history: &impl HistoryView,
) -> Result<(), String> {
    let mut calls_in_history = HashSet::new();
    let mut answered_in_history = HashSet::new();
    for entry in history.range(0..history.len()) {
        calls_in_history.extend(entry.message.tool_calls().map(|call| call.id.clone()));
        if let AgentMessage::ToolResult(result) = entry.message {
            answered_in_history.insert(result.tool_call_id);
        }
    }

    let mut called = HashSet::new();
    let mut awaiting_result = Vec::new();
    for message in prompt {
        for call in message.tool_calls() {
            called.insert(call.id.as_str());
            if answered_in_history.contains(&call.id) {
                awaiting_result.push(call.id.as_str());
            }
        }
        if let AgentMessage::ToolResult(result) = message {
            let id = result.tool_call_id.as_str();
            if calls_in_history.contains(id) && !called.contains(id) {
                return Err(format!("tool result for `{id}` comes without its call"));
            }
            awaiting_result.retain(|&awaited| awaited != id);
        }
    }
    match awaiting_result.first() {
        Some(id) => Err(format!("tool call `{id}` comes without its result")),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{ContentBlock, ToolResultMessage};

    fn entry(id: &str, message: AgentMessage) -> MessageEntry {
        MessageEntry {
            id: id.into(),
            parent_id: None,
            timestamp_ms: 0,
            message,
        }
    }

    fn call(id: &str) -> AgentMessage {
        calls(&[id])
    }

    fn calls(ids: &[&str]) -> AgentMessage {
        AgentMessage::tool_use(ids.iter().map(|&id| ToolCall::new(id, "read", "{}")))
    }

    fn result(call_id: &str) -> AgentMessage {
        AgentMessage::tool_result(call_id, "read", "ok")
    }

    /// user, call c1, its result, user, calls c2 and c3, their results, a
    /// result whose call is not in the history.
    fn sample() -> MemoryHistory {
        MemoryHistory::with_estimator(
            vec![
                entry("u1", AgentMessage::user_text("hi")),
                entry("a1", call("c1")),
                entry("r1", result("c1")),
                entry("u2", AgentMessage::user_text("more")),
                entry("a2", calls(&["c2", "c3"])),
                entry("r2", result("c2")),
                entry("r3", result("c3")),
                entry("x", result("gone")),
            ],
            |_| 10,
        )
    }

    #[test]
    fn the_fitting_suffix_fits_and_never_parts_a_pair() {
        let history = sample();
        // Ten tokens per entry, eight entries.
        let starts: Vec<u32> = [0, 9, 10, 20, 30, 40, 50, 60, 70, 80]
            .into_iter()
            .map(|max_tokens| history.fitting_suffix(max_tokens))
            .collect();
        // 20-30 tokens would start at r3 or r2, inside the pair a2..r3: the
        // suffix begins after it (the orphan result is no pair); 60 would
        // start at r1, after its call: u2 instead.
        assert_eq!(starts, [8, 8, 7, 7, 7, 4, 3, 3, 1, 0]);
        let interleaved = MemoryHistory::with_estimator(
            vec![
                entry("a", call("c1")),
                entry("u", AgentMessage::user_text("while it runs")),
                entry("r", result("c1")),
            ],
            |_| 10,
        );
        assert_eq!(interleaved.fitting_suffix(20), 3, "u is inside the pair");
    }

    #[test]
    fn pairs_calls_with_their_results_like_the_host() {
        let history = sample();
        assert_eq!(history.tool_pairing(0), Some(ToolPairing::None));
        assert_eq!(history.tool_pairing(1), Some(ToolPairing::ToolCalls(2)));
        assert_eq!(
            history.tool_pairing(2),
            Some(ToolPairing::ToolResult(Some(1)))
        );
        assert_eq!(history.tool_pairing(4), Some(ToolPairing::ToolCalls(6)));
        assert_eq!(
            history.tool_pairing(6),
            Some(ToolPairing::ToolResult(Some(4)))
        );
        assert_eq!(history.tool_pairing(7), Some(ToolPairing::ToolResult(None)));
        assert_eq!(history.tool_pairing(8), None);
    }

    #[test]
    fn an_empty_history_has_no_tokens() {
        let history = MemoryHistory::default();
        assert!(history.is_empty());
        assert_eq!(history.tokens(0..5), 0);
        assert_eq!(history.split_pair(0), None);
    }

    #[test]
    fn sums_tokens_and_finds_entries() {
        let history = sample();
        assert_eq!(history.tokens(0..8), 80);
        assert_eq!(history.tokens(6..99), 20);
        assert_eq!(history.tokens(9..12), 0);
        assert_eq!(history.find("r2"), Some(5));
        assert_eq!(history.find("nope"), None);
        let ids: Vec<String> = history.range(3..5).into_iter().map(|e| e.id).collect();
        assert_eq!(ids, ["u2", "a2"]);
    }

    #[test]
    fn finds_the_pair_a_cut_would_split() {
        let history = sample();
        assert_eq!(history.split_pair(0), None);
        assert_eq!(history.split_pair(1), None);
        assert_eq!(history.split_pair(2), Some(1..3));
        assert_eq!(history.split_pair(3), None);
        assert_eq!(history.split_pair(5), Some(4..7));
        assert_eq!(history.split_pair(6), Some(4..7));
        assert_eq!(
            history.split_pair(7),
            None,
            "the orphan result answers no call in the history"
        );
        assert_eq!(history.split_pair(8), None);
    }

    #[test]
    fn finds_a_split_pair_with_a_message_between_call_and_result() {
        let history = MemoryHistory::new(vec![
            entry("a", call("c")),
            entry("u", AgentMessage::user_text("steer")),
            entry("r", result("c")),
        ]);
        assert_eq!(history.split_pair(1), Some(0..3));
        assert_eq!(history.split_pair(2), Some(0..3));
    }

    #[test]
    fn conversations_are_well_formed_chains() {
        let session = conversation(3);
        assert_eq!(session.len(), 12);
        assert_eq!(session[5].id, "e5");
        assert_eq!(session[5].parent_id.as_deref(), Some("e4"));
        let history = MemoryHistory::new(session);
        assert_eq!(history.tool_pairing(5), Some(ToolPairing::ToolCalls(6)));
        assert_eq!(
            history.tool_pairing(6),
            Some(ToolPairing::ToolResult(Some(5)))
        );
        let all: Vec<AgentMessage> = history
            .entries()
            .iter()
            .map(|e| e.message.clone())
            .collect();
        assert_eq!(check_tool_pairing(&all, &history), Ok(()));
    }

    #[test]
    fn rough_tokens_count_characters_and_overhead() {
        assert_eq!(rough_tokens(&AgentMessage::user_text("abcde")), 2 + 12);
        assert_eq!(
            rough_tokens(&call("c")),
            ("read{}".len() as u64).div_ceil(4) + 12
        );
    }

    #[test]
    fn materializes_keeps_and_inserts_in_order() {
        let history = sample();
        let answer = AssembleResult {
            items: vec![
                AssembledItem::Insert(AgentMessage::note("n", "note")),
                AssembledItem::keep(3..4),
            ],
            estimated_tokens: 0,
            system_prompt_addition: None,
            context_projection: None,
        };
        assert_eq!(
            answer.materialize(&history),
            vec![
                AgentMessage::note("n", "note"),
                AgentMessage::user_text("more")
            ]
        );
    }

    #[test]
    fn pairing_check_accepts_whole_pairs_and_replaced_results() {
        let history = sample();
        let all: Vec<AgentMessage> = history
            .entries()
            .iter()
            .map(|e| e.message.clone())
            .collect();
        assert_eq!(check_tool_pairing(&all, &history), Ok(()));
        assert_eq!(check_tool_pairing(&all[3..], &history), Ok(()));
        let replaced = vec![
            call("c1"),
            AgentMessage::ToolResult(ToolResultMessage {
                tool_call_id: "c1".into(),
                tool_name: "read".into(),
                content: vec![ContentBlock::Text("[elided]".into())],
                is_error: false,
                details: None,
            }),
        ];
        assert_eq!(check_tool_pairing(&replaced, &history), Ok(()));
    }

    #[test]
    fn pairing_check_rejects_separated_pairs() {
        let history = sample();
        let all: Vec<AgentMessage> = history
            .entries()
            .iter()
            .map(|e| e.message.clone())
            .collect();
        assert!(
            check_tool_pairing(&all[2..], &history)
                .unwrap_err()
                .contains("c1")
        );
        assert!(
            check_tool_pairing(&all[..2], &history)
                .unwrap_err()
                .contains("c1")
        );
        assert!(
            check_tool_pairing(&all[4..6], &history)
                .unwrap_err()
                .contains("c3")
        );
        assert!(check_tool_pairing(&[result("c1"), call("c1")], &history).is_err());
        assert_eq!(
            check_tool_pairing(&all[7..], &history),
            Ok(()),
            "its call is not in the history"
        );
    }
}
