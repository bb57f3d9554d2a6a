//! Where to cut (ARCHITECTURE.md §6, step 3): keep the newest history worth the keep budget,
//! cutting only before a user or assistant message (or another message that
//! starts a turn) and never between a tool call and its result. A cut inside a
//! turn marks the turn's beginning for a separate turn-prefix summary.
//!
//! The budgets are chosen so the rebuilt context fits the target: the summary
//! gets at most a quarter of the target (and 80% of the reserve, as in the
//! reference), the kept history the rest (at most `keepRecentTokens`).

use crate::contract::history::{History, ToolPairing};
use crate::contract::tokens::{BLOCK_OVERHEAD_TOKENS, MESSAGE_OVERHEAD_TOKENS};
use crate::contract::types::MessageKind;

/// Fewest tokens a summary is given, however small the target.
const MIN_SUMMARY_TOKENS: u64 = 128;
/// What a summary costs beyond its text: one message with one block.
pub(crate) const SUMMARY_OVERHEAD_TOKENS: u64 = MESSAGE_OVERHEAD_TOKENS + BLOCK_OVERHEAD_TOKENS;

/// A cut.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Cut {
    /// The first entry kept verbatim.
    pub first_kept: usize,
    /// The start of the turn the cut falls in, when it is not at a turn start
    /// (entries `turn_start..first_kept` get the turn-prefix summary).
    pub turn_start: Option<usize>,
    /// Most tokens the summary may take.
    pub summary_tokens: u64,
    /// Most tokens the kept history was meant to take (it takes more only
    /// when the newest turn alone is larger).
    pub keep_budget: u64,
}

impl Cut {
    /// Where the history summarized in chunks ends.
    pub fn history_end(&self) -> usize {
        self.turn_start.unwrap_or(self.first_kept)
    }
}

/// The cut for `history` (whose entries before `start` are a previous
/// summary), aiming at `target` tokens after compaction when there is one.
/// `None` when no cut leaves anything to summarize.
pub(crate) fn choose(
    history: &History,
    start: usize,
    target: Option<u64>,
    reserve_tokens: u64,
    keep_recent_tokens: u64,
) -> Option<Cut> {
    let reserve_share = reserve_tokens * 4 / 5;
    let summary_tokens = match target {
        Some(target) => reserve_share.min(target / 4),
        None => reserve_share,
    }
    .max(MIN_SUMMARY_TOKENS);
    let keep_budget = match target {
        Some(target) => {
            keep_recent_tokens.min(target.saturating_sub(summary_tokens + SUMMARY_OVERHEAD_TOKENS))
        }
        None => keep_recent_tokens,
    };

    let legal = legal_cuts(history, start);
    let len = history.len();
    let first_kept = legal
        .iter()
        .copied()
        .find(|&cut| history.tokens(cut..len) <= keep_budget)
        .or_else(|| legal.last().copied())?;
    let turn_start = if starts_turn(history.kind(first_kept)) {
        None
    } else {
        (start..first_kept)
            .rev()
            .find(|&index| starts_turn(history.kind(index)))
    };
    Some(Cut {
        first_kept,
        turn_start,
        summary_tokens,
        keep_budget,
    })
}

/// Indices after `start` before which the history may be cut, ascending.
fn legal_cuts(history: &History, start: usize) -> Vec<usize> {
    let mut cuts = Vec::new();
    // The furthest result of a call made so far: no cut at or before it.
    let mut open_until: Option<usize> = None;
    for index in start..history.len() {
        let crossing = open_until.is_some_and(|end| end >= index);
        if index > start && !crossing && can_start_kept_history(history.kind(index)) {
            cuts.push(index);
        }
        if let Some(ToolPairing::ToolCalls { last_result }) = history.tool_pairing(index) {
            let last_result = last_result as usize;
            open_until = Some(open_until.map_or(last_result, |end| end.max(last_result)));
        }
    }
    cuts
}

/// Messages kept history may begin with: anything but a tool result (whose
/// call would be left behind) and a summary (which is replaced).
fn can_start_kept_history(kind: Option<MessageKind>) -> bool {
    matches!(
        kind,
        Some(
            MessageKind::User
                | MessageKind::Assistant
                | MessageKind::Custom
                | MessageKind::BranchSummary
        )
    )
}

/// Messages that begin a turn: what the user (or an extension speaking for
/// the user) says.
fn starts_turn(kind: Option<MessageKind>) -> bool {
    matches!(
        kind,
        Some(MessageKind::User | MessageKind::Custom | MessageKind::BranchSummary)
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::contract::types::{AgentMessage, ContentBlock, MessageEntry, StopReason};

    fn entry(message: AgentMessage) -> MessageEntry {
        MessageEntry {
            id: String::new(),
            parent_id: None,
            timestamp_ms: 0,
            message,
        }
    }

    fn user() -> MessageEntry {
        entry(AgentMessage::user_text("x".repeat(400)))
    }

    fn calls(ids: &[&str]) -> MessageEntry {
        entry(AgentMessage::Assistant {
            content: ids
                .iter()
                .map(|id| ContentBlock::ToolCall {
                    id: (*id).into(),
                    name: "read".into(),
                    arguments_json: "{}".into(),
                })
                .collect(),
            model: None,
            provider: None,
            usage: None,
            stop_reason: StopReason::ToolUse,
            error_message: None,
        })
    }

    fn result(id: &str) -> MessageEntry {
        entry(AgentMessage::tool_result(id, "read", "y".repeat(400)))
    }

    #[test]
    fn never_cuts_inside_a_tool_group() {
        // 0 user, 1 calls a+b, 2 user (interleaved), 3 result a, 4 result b, 5 assistant
        let history = History::new(vec![
            user(),
            calls(&["a", "b"]),
            user(),
            result("a"),
            result("b"),
            entry(AgentMessage::assistant_text("done")),
        ]);
        assert_eq!(legal_cuts(&history, 0), [1, 5]);
    }

    #[test]
    fn keeps_the_longest_suffix_within_the_budget() {
        let history = History::new(vec![
            user(),
            calls(&["a"]),
            result("a"),
            user(),
            calls(&["b"]),
            result("b"),
        ]);
        let tail = history.tokens(3..6);
        let cut = choose(&history, 0, None, 16_384, tail).expect("a cut");
        assert_eq!(cut.first_kept, 3);
        assert_eq!(cut.turn_start, None);

        let tail = history.tokens(4..6);
        let cut = choose(&history, 0, None, 16_384, tail).expect("a cut");
        assert_eq!(
            (cut.first_kept, cut.turn_start),
            (4, Some(3)),
            "a mid-turn cut"
        );
    }

    #[test]
    fn a_cut_before_a_custom_message_or_branch_summary_is_at_a_turn_start() {
        let custom = entry(AgentMessage::Custom {
            custom_type: "note".into(),
            content: vec![ContentBlock::text("z".repeat(40))],
            display: true,
            details: None,
        });
        let branch = entry(AgentMessage::BranchSummary {
            summary: "w".repeat(40),
            from_id: "x".into(),
        });
        for turn_opener in [custom, branch] {
            let history = History::new(vec![
                user(),
                calls(&["a"]),
                result("a"),
                turn_opener,
                entry(AgentMessage::assistant_text("ok")),
            ]);
            let tail = history.tokens(3..5);
            let cut = choose(&history, 0, None, 16_384, tail).expect("a cut");
            assert_eq!(
                (cut.first_kept, cut.turn_start),
                (3, None),
                "{:?} starts a turn: no turn-prefix summary",
                history.kind(3)
            );
        }
    }

    #[test]
    fn gives_the_summary_a_quarter_of_a_small_target() {
        let history = History::new(vec![user(), user(), user()]);
        let cut = choose(&history, 0, Some(16_000), 16_384, 20_000).expect("a cut");
        assert_eq!(cut.summary_tokens, 4_000);
        assert_eq!(cut.keep_budget, 16_000 - 4_000 - SUMMARY_OVERHEAD_TOKENS);
        let cut = choose(&history, 0, Some(200_000), 16_384, 20_000).expect("a cut");
        assert_eq!((cut.summary_tokens, cut.keep_budget), (13_107, 20_000));
    }

    #[test]
    fn nothing_to_cut_after_a_lone_summary() {
        let summary = entry(AgentMessage::CompactionSummary {
            summary: "s".into(),
            tokens_before: 1,
        });
        let history = History::new(vec![summary, user()]);
        assert_eq!(choose(&history, 1, Some(10), 16_384, 0), None);
    }
}
