//! The contract's rules for engine answers (ARCHITECTURE.md §5, "output"): checked
//! before the host uses an answer from any engine it does not trust. A
//! violation is an `invalid-output` failure.
//!
//! `keep` ranges must come in history order without overlapping, so an
//! answer can never describe a prompt longer than the history plus its
//! inserts: a few bytes of answer cannot make the host copy the transcript
//! many times over.
//!
//! Checking an `assemble` answer costs O(items) when no kept range starts or
//! ends inside a tool-call pair (the common case, answered from
//! [`History::splits_pair`]); only an answer that cuts through a pair, or
//! inserts tool messages of its own, is walked message by message.

use std::collections::{HashMap, HashSet};

use crate::contract::history::History;
use crate::contract::tokens;
use crate::contract::types::{
    AgentMessage, AssembleResult, AssembledItem, CompactResult, ContentBlock, EngineInfo,
};

/// A broken rule, in words that tell the engine author what to fix.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Violation {
    /// A `keep` range outside the history.
    #[error("keep range {start}..{end} is outside the history of {len} entries")]
    KeepOutOfBounds {
        /// Range start.
        start: u32,
        /// Range end.
        end: u32,
        /// History length.
        len: usize,
    },
    /// A `keep` range that starts before the previous one ended (repeats,
    /// overlaps or reorders history entries).
    #[error(
        "keep range {start}..{end} starts before the previous keep range ended at {previous_end}: keep ranges must be in history order and must not overlap"
    )]
    KeepOverlaps {
        /// Range start.
        start: u32,
        /// Range end.
        end: u32,
        /// End of the previous `keep` range.
        previous_end: u32,
    },
    /// A tool result without its call before it.
    #[error("the prompt has a result for tool call `{call_id}` but not the call before it")]
    OrphanedToolResult {
        /// The call id.
        call_id: String,
    },
    /// A tool call whose result exists but was left out.
    #[error("the prompt has tool call `{call_id}` but not its result, which the history has")]
    ToolCallWithoutResult {
        /// The call id.
        call_id: String,
    },
    /// `first-kept-entry-id` names no entry.
    #[error("first-kept-entry-id `{0}` names no entry of the session")]
    UnknownFirstKeptEntry(String),
    /// What an `assemble` answer adds to the prompt (the messages it inserts
    /// and its system-prompt addition) is larger than the whole budget: host
    /// compaction shrinks history, never what the engine added, so no
    /// recovery could bring the prompt under the window.
    #[error(
        "what the answer adds to the prompt (inserted messages and system-prompt addition) is ~{tokens} tokens, over the whole budget of {budget}: no compaction can make such a prompt fit"
    )]
    AdditionsOverBudget {
        /// Estimated tokens of the inserted messages and the addition.
        tokens: u64,
        /// The budget the engine was given.
        budget: u64,
    },
    /// A `json` field that is not JSON, nests too deep or is too large.
    #[error("{field} is not usable JSON: {reason}")]
    InvalidJson {
        /// Which field, e.g. `details` of the compact result.
        field: &'static str,
        /// What is wrong with it.
        reason: String,
    },
    /// The engine's tool definitions break the contract
    /// (`contract::tools`).
    #[error("the engine's tools break the contract: {0}")]
    BadTools(String),
    /// A tool result breaks the contract (its size).
    #[error("{0}")]
    BadToolResult(String),
    /// A `compact` answer names a rotated session the host did not rotate
    /// into during the call: only a rotation the host itself performed
    /// (delegated compaction with `truncateAfterCompaction`) may be reported,
    /// or the engine would choose which file the session continues in.
    #[error(
        "rotated-session names `{0}`, which is not a rotation the host performed for this session"
    )]
    UnperformedRotation(String),
    /// A compaction claims `compacted` but changed nothing: the engine does
    /// not own compaction, so what it compacts is the transcript, and the
    /// transcript has no new compaction and no rotation.
    #[error(
        "the answer claims a compaction, but it changed nothing: the engine does not own compaction, and the session's transcript has no new compaction or rotation"
    )]
    NothingCompacted,
    /// The compaction claims to have grown the context.
    #[error("tokens-after ({after}) is above tokens-before ({before})")]
    TokensGrew {
        /// Claimed tokens before.
        before: u64,
        /// Claimed tokens after.
        after: u64,
    },
}

/// What makes `info` unusable, if anything: the host names and logs an engine
/// by its id and name, so neither may be blank (the reference's contract
/// validation of a resolved engine).
pub fn info_problem(info: &EngineInfo) -> Option<&'static str> {
    if info.id.trim().is_empty() {
        Some("its info has an empty id")
    } else if info.name.trim().is_empty() {
        Some("its info has an empty name")
    } else {
        None
    }
}

/// Checks an `assemble` answer against the history it was given: every
/// `keep` range within the history, each starting at or after the end of the
/// previous one, and no tool call separated from its result. Never copies
/// more than the history plus the inserted messages.
pub fn check_assemble(history: &History, result: &AssembleResult) -> Result<(), Violation> {
    let len = history.len();
    let mut inserts_tool_messages = false;
    let mut previous_end = 0u32;
    for item in &result.items {
        match *item {
            AssembledItem::Keep { start, end } => {
                if start > end || end as usize > len {
                    return Err(Violation::KeepOutOfBounds { start, end, len });
                }
                if start < previous_end {
                    return Err(Violation::KeepOverlaps {
                        start,
                        end,
                        previous_end,
                    });
                }
                previous_end = end;
            }
            AssembledItem::Insert(ref message) => {
                inserts_tool_messages |= matches!(message, AgentMessage::ToolResult { .. })
                    || message.tool_call_ids().next().is_some();
                check_message_json(message)?;
            }
        }
    }
    if inserts_tool_messages || cuts_through_a_pair(history, &result.items) {
        check_pairing_exactly(history, &result.items)
    } else {
        Ok(())
    }
}

/// Checks the tools an engine offers (`wit/tools.wit`).
pub fn check_tools(tools: &[crate::contract::tools::EngineTool]) -> Result<(), Violation> {
    crate::contract::tools::check_definitions(tools).map_err(Violation::BadTools)
}

/// Checks a tool's answer (`wit/tools.wit`).
pub fn check_tool_result(result: &str) -> Result<(), Violation> {
    crate::contract::tools::check_result(result).map_err(Violation::BadToolResult)
}

/// The smallest token budget a minimal answer is sure to fit: one short note
/// saying what was left out (about 400 characters). Under it, an answer whose
/// additions are over the budget is the caller's doing, not the engine's
/// ([`Violation::is_callers_doing`]).
pub const MIN_ANSWER_BUDGET_TOKENS: u64 = 128;

impl Violation {
    /// Whether the rule was broken only because of what the caller asked:
    /// additions over a budget smaller than [`MIN_ANSWER_BUDGET_TOKENS`],
    /// which even a minimal answer may not fit. The host then answers the
    /// call without the engine and holds nothing against it.
    pub fn is_callers_doing(&self) -> bool {
        matches!(self, Self::AdditionsOverBudget { budget, .. } if *budget < MIN_ANSWER_BUDGET_TOKENS)
    }
}

/// What an `assemble` answer adds to the prompt, by the host's estimate: the
/// messages it inserts and its system-prompt addition. Kept history does not
/// count: the host can compact it.
pub fn added_tokens(result: &AssembleResult) -> u64 {
    let addition = result
        .system_prompt_addition
        .as_deref()
        .map_or(0, tokens::estimate_text);
    result
        .items
        .iter()
        .filter_map(|item| match item {
            AssembledItem::Insert(message) => Some(tokens::estimate_message(message)),
            AssembledItem::Keep { .. } => None,
        })
        .fold(addition, u64::saturating_add)
}

/// Checks that what an `assemble` answer adds to the prompt
/// ([`added_tokens`]) fits in `budget`, when the engine was given one.
pub fn check_additions_fit(result: &AssembleResult, budget: Option<u64>) -> Result<(), Violation> {
    let Some(budget) = budget else {
        return Ok(());
    };
    let tokens = added_tokens(result);
    if tokens > budget {
        return Err(Violation::AdditionsOverBudget { tokens, budget });
    }
    Ok(())
}

/// Whether any run of consecutive kept entries starts or ends inside a pair.
fn cuts_through_a_pair(history: &History, items: &[AssembledItem]) -> bool {
    let mut run: Option<(u32, u32)> = None;
    let mut runs = Vec::new();
    for item in items {
        let AssembledItem::Keep { start, end } = *item else {
            continue;
        };
        if start == end {
            continue;
        }
        run = match run {
            Some((run_start, run_end)) if run_end == start => Some((run_start, end)),
            Some(finished) => {
                runs.push(finished);
                Some((start, end))
            }
            None => Some((start, end)),
        };
    }
    runs.extend(run);
    runs.iter().any(|&(start, end)| {
        history.splits_pair(start as usize) || history.splits_pair(end as usize)
    })
}

/// Walks the prompt in order: every tool result needs its call earlier (if
/// the call exists at all), every call needs a result later (if the history
/// has one).
fn check_pairing_exactly(history: &History, items: &[AssembledItem]) -> Result<(), Violation> {
    let mut answered_in_history: HashSet<&str> = HashSet::new();
    let mut called_in_history: HashSet<&str> = HashSet::new();
    for entry in history.entries() {
        match &entry.message {
            AgentMessage::ToolResult { tool_call_id, .. } => {
                answered_in_history.insert(tool_call_id);
            }
            message => called_in_history.extend(message.tool_call_ids()),
        }
    }
    let prompt = history.materialize(items);
    let called_in_prompt: HashSet<&str> = prompt
        .iter()
        .flat_map(AgentMessage::tool_call_ids)
        .collect();

    // Calls seen so far, and whether each has been answered since.
    let mut open_calls: HashMap<&str, bool> = HashMap::new();
    for message in &prompt {
        if let AgentMessage::ToolResult { tool_call_id, .. } = message {
            let exists = called_in_history.contains(tool_call_id.as_str())
                || called_in_prompt.contains(tool_call_id.as_str());
            match open_calls.get_mut(tool_call_id.as_str()) {
                Some(answered) => *answered = true,
                None if exists => {
                    return Err(Violation::OrphanedToolResult {
                        call_id: tool_call_id.clone(),
                    });
                }
                None => {}
            }
        }
        for call_id in message.tool_call_ids() {
            open_calls.entry(call_id).or_insert(false);
        }
    }
    let mut unanswered: Vec<&str> = open_calls
        .into_iter()
        .filter(|(call_id, answered)| !answered && answered_in_history.contains(call_id))
        .map(|(call_id, _)| call_id)
        .collect();
    unanswered.sort_unstable();
    match unanswered.first() {
        Some(call_id) => Err(Violation::ToolCallWithoutResult {
            call_id: (*call_id).to_owned(),
        }),
        None => Ok(()),
    }
}

/// The most bytes one `json` field of an answer may hold.
pub const MAX_JSON_BYTES: usize = 1024 * 1024;
/// The deepest nesting of arrays and objects a `json` field may have.
pub const MAX_JSON_DEPTH: usize = 64;

/// Checks that `text`, the `json` field `field` of an answer, is one JSON
/// value of at most [`MAX_JSON_BYTES`] bytes nested at most
/// [`MAX_JSON_DEPTH`] deep.
pub fn check_json(field: &'static str, text: &str) -> Result<(), Violation> {
    let invalid = |reason: String| Violation::InvalidJson { field, reason };
    if text.len() > MAX_JSON_BYTES {
        return Err(invalid(format!(
            "{} bytes, over the {MAX_JSON_BYTES}-byte limit",
            text.len()
        )));
    }
    let depth = json_depth(text);
    if depth > MAX_JSON_DEPTH {
        return Err(invalid(format!(
            "nested {depth} deep, over the limit of {MAX_JSON_DEPTH}"
        )));
    }
    serde_json::from_str::<serde::de::IgnoredAny>(text)
        .map(drop)
        .map_err(|error| invalid(error.to_string()))
}

/// The deepest nesting of `[` and `{` in `text`, outside strings (a scan,
/// so no parser recursion is spent on a hostile value).
fn json_depth(text: &str) -> usize {
    let (mut depth, mut deepest) = (0usize, 0usize);
    let (mut in_string, mut escaped) = (false, false);
    for byte in text.bytes() {
        if in_string {
            match byte {
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                b'"' => in_string = false,
                _ => {}
            }
            continue;
        }
        match byte {
            b'"' => in_string = true,
            b'[' | b'{' => {
                depth += 1;
                deepest = deepest.max(depth);
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    deepest
}

/// The `json` fields of a message an engine inserted: tool-call arguments
/// and `details`.
fn check_message_json(message: &AgentMessage) -> Result<(), Violation> {
    for block in message.content() {
        if let ContentBlock::ToolCall { arguments_json, .. } = block {
            check_json("the arguments of an inserted tool call", arguments_json)?;
        }
    }
    match message {
        AgentMessage::ToolResult {
            details: Some(details),
            ..
        }
        | AgentMessage::Custom {
            details: Some(details),
            ..
        } => check_json("the details of an inserted message", details),
        _ => Ok(()),
    }
}

/// Checks a `compact` answer against the history it was given.
pub fn check_compact(history: &History, result: &CompactResult) -> Result<(), Violation> {
    if let Some(details) = &result.details {
        check_json("details", details)?;
    }
    if let Some(after) = result.tokens_after
        && after > result.tokens_before
    {
        return Err(Violation::TokensGrew {
            before: result.tokens_before,
            after,
        });
    }
    if let Some(id) = &result.first_kept_entry_id
        && history.find(id).is_none()
    {
        return Err(Violation::UnknownFirstKeptEntry(id.clone()));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inserted_messages_must_fit_the_whole_budget() {
        let answer = |inserts: usize| AssembleResult {
            items: std::iter::once(AssembledItem::Keep { start: 0, end: 0 })
                .chain(
                    (0..inserts)
                        .map(|n| AssembledItem::Insert(AgentMessage::user_text(n.to_string()))),
                )
                .collect(),
            estimated_tokens: 0,
            system_prompt_addition: None,
            context_projection: None,
        };
        assert_eq!(check_additions_fit(&answer(10), Some(1_000)), Ok(()));
        assert_eq!(
            check_additions_fit(&answer(10_000), None),
            Ok(()),
            "no budget, no rule"
        );
        let error = check_additions_fit(&answer(10_000), Some(1_000)).expect_err("too many");
        assert!(
            matches!(error, Violation::AdditionsOverBudget { budget: 1_000, .. }),
            "{error}"
        );
        assert!(!error.is_callers_doing());
    }

    #[test]
    fn a_system_prompt_addition_counts_against_the_budget() {
        let answer = AssembleResult {
            items: vec![AssembledItem::Keep { start: 0, end: 0 }],
            estimated_tokens: 0,
            system_prompt_addition: Some("x".repeat(40_000)),
            context_projection: None,
        };
        let error = check_additions_fit(&answer, Some(1_000)).expect_err("too large");
        assert!(
            error.to_string().contains("system-prompt addition"),
            "{error}"
        );
        assert_eq!(check_additions_fit(&answer, Some(20_000)), Ok(()));
        let tiny = check_additions_fit(&answer, Some(20)).expect_err("too large");
        assert!(tiny.is_callers_doing(), "no minimal answer fits 20 tokens");
    }

    #[test]
    fn json_fields_must_be_json_within_limits() {
        assert_eq!(check_json("details", r#"{"a":[1,{"b":"]]]"}]}"#), Ok(()));
        let not_json = check_json("details", "{not json").expect_err("refused");
        assert!(
            not_json
                .to_string()
                .starts_with("details is not usable JSON")
        );
        let deep = format!("{}{}", "[".repeat(200), "]".repeat(200));
        let too_deep = check_json("details", &deep).expect_err("refused");
        assert!(
            too_deep.to_string().contains("nested 200 deep"),
            "{too_deep}"
        );
        let brackets_in_strings = format!("[\"{}\"]", "[".repeat(200));
        assert_eq!(check_json("details", &brackets_in_strings), Ok(()));
        let huge = format!("\"{}\"", "x".repeat(MAX_JSON_BYTES));
        assert!(check_json("details", &huge).is_err());
    }
    use crate::contract::types::{ContentBlock, MessageEntry, StopReason};

    fn entry(id: &str, message: AgentMessage) -> MessageEntry {
        MessageEntry {
            id: id.into(),
            parent_id: None,
            timestamp_ms: 0,
            message,
        }
    }

    fn call(call_id: &str) -> AgentMessage {
        AgentMessage::Assistant {
            content: vec![ContentBlock::ToolCall {
                id: call_id.into(),
                name: "exec".into(),
                arguments_json: "{}".into(),
            }],
            model: None,
            provider: None,
            usage: None,
            stop_reason: StopReason::ToolUse,
            error_message: None,
        }
    }

    fn result(call_id: &str) -> AgentMessage {
        AgentMessage::tool_result(call_id, "exec", "done")
    }

    /// user, call c1, result c1, user, call c2 (pending)
    fn history() -> History {
        History::new(vec![
            entry("u1", AgentMessage::user_text("go")),
            entry("a1", call("c1")),
            entry("r1", result("c1")),
            entry("u2", AgentMessage::user_text("again")),
            entry("a2", call("c2")),
        ])
    }

    fn keep(start: u32, end: u32) -> AssembledItem {
        AssembledItem::Keep { start, end }
    }

    fn assembled(items: Vec<AssembledItem>) -> AssembleResult {
        AssembleResult::of_items(items)
    }

    #[test]
    fn accepts_ranges_that_keep_pairs_whole() {
        let history = history();
        for items in [
            vec![keep(0, 5)],
            vec![keep(3, 5)],
            vec![keep(0, 1), keep(1, 3)],
            vec![
                AssembledItem::Insert(AgentMessage::user_text("note")),
                keep(1, 5),
            ],
            vec![],
        ] {
            assert_eq!(
                check_assemble(&history, &assembled(items.clone())),
                Ok(()),
                "{items:?}"
            );
        }
    }

    #[test]
    fn refuses_ranges_out_of_bounds() {
        let error = check_assemble(&history(), &assembled(vec![keep(2, 9)]));
        assert_eq!(
            error,
            Err(Violation::KeepOutOfBounds {
                start: 2,
                end: 9,
                len: 5
            })
        );
        let error = check_assemble(&history(), &assembled(vec![keep(3, 2)]));
        assert!(matches!(error, Err(Violation::KeepOutOfBounds { .. })));
    }

    #[test]
    fn refuses_a_result_without_its_call() {
        let error = check_assemble(&history(), &assembled(vec![keep(2, 5)]));
        assert_eq!(
            error,
            Err(Violation::OrphanedToolResult {
                call_id: "c1".into()
            })
        );
    }

    #[test]
    fn refuses_a_call_without_its_result() {
        let error = check_assemble(&history(), &assembled(vec![keep(0, 2), keep(3, 5)]));
        assert_eq!(
            error,
            Err(Violation::ToolCallWithoutResult {
                call_id: "c1".into()
            })
        );
    }

    #[test]
    fn refuses_ranges_out_of_order_repeated_or_overlapping() {
        for (items, start, end, previous_end) in [
            (vec![keep(2, 3), keep(1, 2)], 1, 2, 3),
            (vec![keep(0, 5), keep(0, 5)], 0, 5, 5),
            (vec![keep(0, 3), keep(2, 5)], 2, 5, 3),
            (vec![keep(3, 5), keep(4, 4)], 4, 4, 5),
        ] {
            assert_eq!(
                check_assemble(&history(), &assembled(items.clone())),
                Err(Violation::KeepOverlaps {
                    start,
                    end,
                    previous_end
                }),
                "{items:?}"
            );
        }
        // Inserts between ranges do not reset the order.
        let items = vec![
            keep(0, 3),
            AssembledItem::Insert(AgentMessage::user_text("note")),
            keep(0, 3),
        ];
        assert!(matches!(
            check_assemble(&history(), &assembled(items)),
            Err(Violation::KeepOverlaps { .. })
        ));
    }

    #[test]
    fn an_amplifying_answer_is_refused_at_its_second_item() {
        // A million copies of the whole history would make the host clone
        // five million messages; the check stops at the second copy.
        let items = vec![keep(0, 5); 1_000_000];
        assert_eq!(
            check_assemble(&history(), &assembled(items)),
            Err(Violation::KeepOverlaps {
                start: 0,
                end: 5,
                previous_end: 5
            })
        );
        // Empty ranges copy nothing and stay allowed in order.
        let empties = vec![keep(5, 5); 1_000];
        assert_eq!(check_assemble(&history(), &assembled(empties)), Ok(()));
    }

    #[test]
    fn checks_inserted_tool_messages() {
        let history = history();
        let made_up_pair = vec![
            keep(0, 1),
            AssembledItem::Insert(call("x9")),
            AssembledItem::Insert(result("x9")),
        ];
        assert_eq!(check_assemble(&history, &assembled(made_up_pair)), Ok(()));
        let stray_result = vec![keep(3, 4), AssembledItem::Insert(result("c1"))];
        assert_eq!(
            check_assemble(&history, &assembled(stray_result)),
            Err(Violation::OrphanedToolResult {
                call_id: "c1".into()
            })
        );
    }

    #[test]
    fn checks_compaction_claims() {
        let history = history();
        let honest = CompactResult {
            ok: true,
            compacted: true,
            first_kept_entry_id: Some("u2".into()),
            tokens_before: 100,
            tokens_after: Some(40),
            ..CompactResult::default()
        };
        assert_eq!(check_compact(&history, &honest), Ok(()));
        let unknown = CompactResult {
            first_kept_entry_id: Some("nope".into()),
            ..honest.clone()
        };
        assert_eq!(
            check_compact(&history, &unknown),
            Err(Violation::UnknownFirstKeptEntry("nope".into()))
        );
        let grew = CompactResult {
            tokens_after: Some(101),
            ..honest
        };
        assert_eq!(
            check_compact(&history, &grew),
            Err(Violation::TokensGrew {
                before: 100,
                after: 101
            })
        );
    }
}

/// The promises the rules make, checked on random histories and answers.
#[cfg(test)]
mod properties {
    use proptest::prelude::*;

    use super::*;
    use crate::contract::types::MessageEntry;

    /// A history of `shape`: `true` is a tool call followed by its result,
    /// `false` a user message.
    fn history_of(shape: &[bool]) -> History {
        let messages = shape.iter().enumerate().flat_map(|(n, &pair)| {
            let call = format!("call-{n}");
            if pair {
                vec![
                    AgentMessage::tool_call(&call, "exec", "{}"),
                    AgentMessage::tool_result(&call, "exec", "ok"),
                ]
            } else {
                vec![AgentMessage::user_text(format!("ask {n}"))]
            }
        });
        History::new(
            messages
                .enumerate()
                .map(|(index, message)| MessageEntry {
                    id: format!("e{index}"),
                    parent_id: None,
                    timestamp_ms: 0,
                    message,
                })
                .collect(),
        )
    }

    fn answer(items: Vec<AssembledItem>) -> AssembleResult {
        AssembleResult {
            items,
            estimated_tokens: 0,
            system_prompt_addition: None,
            context_projection: None,
        }
    }

    proptest! {
        #[test]
        fn an_accepted_answer_keeps_ranges_ordered_and_tool_pairs_whole(
            shape in prop::collection::vec(any::<bool>(), 0..24),
            ranges in prop::collection::vec((0u32..50, 0u32..50), 0..6),
        ) {
            let history = history_of(&shape);
            let items: Vec<AssembledItem> = ranges
                .iter()
                .map(|&(a, b)| AssembledItem::Keep { start: a.min(b), end: a.max(b) })
                .collect();
            if check_assemble(&history, &answer(items.clone())).is_ok() {
                let mut previous_end = 0;
                for item in &items {
                    if let AssembledItem::Keep { start, end } = *item {
                        prop_assert!(end as usize <= history.len());
                        prop_assert!(start >= previous_end, "ranges in history order");
                        previous_end = end;
                    }
                }
                let prompt = history.materialize(&items);
                let mut open: HashSet<&str> = HashSet::new();
                for message in &prompt {
                    if let AgentMessage::ToolResult { tool_call_id, .. } = message {
                        prop_assert!(open.remove(tool_call_id.as_str()), "{tool_call_id} answered before it was called");
                    }
                    open.extend(message.tool_call_ids());
                }
                prop_assert!(open.is_empty(), "calls left without their results: {open:?}");
            }
        }

        #[test]
        fn ranges_cut_between_pairs_are_accepted(
            shape in prop::collection::vec(any::<bool>(), 1..24),
            picks in prop::collection::vec(any::<prop::sample::Index>(), 0..8),
        ) {
            let history = history_of(&shape);
            let boundaries: Vec<u32> = (0..=history.len())
                .filter(|&at| !history.splits_pair(at))
                .map(|at| at as u32)
                .collect();
            let mut cuts: Vec<u32> = picks.iter().map(|pick| *pick.get(&boundaries)).collect();
            cuts.sort_unstable();
            let items = cuts
                .chunks_exact(2)
                .map(|pair| AssembledItem::Keep { start: pair[0], end: pair[1] })
                .collect();
            prop_assert_eq!(check_assemble(&history, &answer(items)), Ok(()));
        }

        #[test]
        fn json_within_the_limits_is_accepted_and_anything_else_refused_without_panicking(
            text in ".{0,64}",
            depth in 0usize..100,
        ) {
            let nested = format!("{}{}{}", "[".repeat(depth), serde_json::Value::String(text.clone()), "]".repeat(depth));
            let verdict = check_json("details", &nested);
            prop_assert_eq!(verdict.is_ok(), depth <= MAX_JSON_DEPTH);
            // Arbitrary text: an answer either way, never a panic.
            let _ = check_json("details", &text);
        }
    }
}
