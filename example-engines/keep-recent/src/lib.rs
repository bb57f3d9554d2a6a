//! `keep-recent`: the newest history that fits the token budget.
//!
//! The prompt is the longest suffix of the session's history whose host-side
//! token estimate fits the budget, never starting on a tool result whose call
//! was left out, preceded by a one-line note saying how much was omitted. A
//! compaction summary at the head of the history is kept too when it takes at
//! most half the budget: it is the only record of what came before it.
//! Compaction is delegated to the host (the SDK default).
//!
//! The planning logic ([`plan`]) works on any [`HistoryView`], so it also runs
//! natively; the wasm export calls it over the host's history, costing five
//! boundary crossings or fewer whatever the session's length: the suffix is
//! one `fitting-suffix` query, answered by the host.

use ctxbox_guest::prelude::*;

/// The engine's id.
pub const ID: &str = "keep-recent";

/// Tokens set aside for the omission note.
pub const NOTE_TOKENS: u64 = 48;

/// The exported engine.
#[derive(Default)]
pub struct KeepRecent;

impl Engine for KeepRecent {
    fn info(&self) -> EngineInfo {
        let mut info = EngineInfo::new(ID, "Keep recent").with_version(env!("CARGO_PKG_VERSION"));
        // It needs none of the host-added parameters.
        info.accepted_host_params = Some(Vec::new());
        info
    }

    fn assemble(
        &mut self,
        _session: &SessionRef,
        history: &History,
        params: AssembleParams,
    ) -> Result<AssembleResult, EngineError> {
        Ok(plan(history, params.token_budget))
    }
}

ctxbox_guest::export_engine!(KeepRecent);

/// Chooses the prompt: see the crate docs.
pub fn plan(history: &impl HistoryView, token_budget: Option<u64>) -> AssembleResult {
    let len = history.len();
    let all_tokens = history.tokens(0..len);
    let budget = match token_budget {
        Some(budget) if all_tokens > budget => budget,
        _ => return AssembleResult::keep_range(0..len, all_tokens),
    };

    let (pinned_end, pinned_tokens) = pinned_summary(history, budget);
    let available = budget.saturating_sub(NOTE_TOKENS + pinned_tokens);
    let start = kept_start(history, pinned_end, available);

    let omitted = start - pinned_end;
    let kept_tokens = history.tokens(start..len);
    let mut items = Vec::with_capacity(3);
    if pinned_end > 0 {
        items.push(AssembledItem::keep(0..pinned_end));
    }
    let mut estimated_tokens = pinned_tokens + kept_tokens;
    if omitted > 0 {
        let omitted_tokens = all_tokens.saturating_sub(pinned_tokens + kept_tokens);
        items.push(AssembledItem::Insert(AgentMessage::note(
            "keep-recent",
            format!(
                "[keep-recent: {omitted} earlier messages (about {omitted_tokens} tokens) were left out to fit the context window.]"
            ),
        )));
        estimated_tokens += NOTE_TOKENS;
    }
    if start < len {
        items.push(AssembledItem::keep(start..len));
    }
    AssembleResult {
        items,
        estimated_tokens,
        system_prompt_addition: None,
        context_projection: None,
    }
}

/// `(1, its tokens)` if the history opens with a compaction summary worth at
/// most half the budget, else `(0, 0)`.
fn pinned_summary(history: &impl HistoryView, budget: u64) -> (u32, u64) {
    if history.kind(0) != Some(MessageKind::CompactionSummary) {
        return (0, 0);
    }
    let tokens = history.tokens(0..1);
    if tokens <= budget / 2 {
        (1, tokens)
    } else {
        (0, 0)
    }
}

/// The first entry kept after `floor`: the start of the newest suffix that
/// fits `available` tokens without parting a tool call from its results
/// (one host query). When only the empty suffix fits, the newest entry
/// alone, or the newest call with its results when the newest entries are
/// results (the search below).
fn kept_start(history: &impl HistoryView, floor: u32, available: u64) -> u32 {
    let start = history.fitting_suffix(available);
    if start < history.len() {
        return start.max(floor);
    }
    pair_safe_start(history, fitting_suffix_start(history, floor, available))
}

/// The smallest start in `floor..len` whose suffix fits `available` tokens;
/// `len - 1` (the newest entry alone) when nothing fits, because an empty
/// prompt is never more useful than an oversized one.
fn fitting_suffix_start(history: &impl HistoryView, floor: u32, available: u64) -> u32 {
    let len = history.len();
    // Suffix token counts shrink as the start grows: binary search.
    let (mut low, mut high) = (floor, len);
    while low < high {
        let mid = low + (high - low) / 2;
        if history.tokens(mid..len) <= available {
            high = mid;
        } else {
            low = mid + 1;
        }
    }
    if low == len && len > floor {
        len - 1
    } else {
        low
    }
}

/// Moves `start` so the kept suffix does not open with a tool result whose
/// call is left out: past such results, or, when they are the newest entries,
/// back to their call (the pair is kept whole rather than dropped).
fn pair_safe_start(history: &impl HistoryView, start: u32) -> u32 {
    let len = history.len();
    let mut next = start;
    while next < len {
        match history.tool_pairing(next) {
            Some(ToolPairing::ToolResult(Some(call))) if call < start => next += 1,
            _ => return next,
        }
    }
    // Only orphaned results were left: keep the newest call with its results.
    match history.tool_pairing(start) {
        Some(ToolPairing::ToolResult(Some(call))) => call,
        _ => start,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ops::Range;

    /// A history of (kind, tokens, pairing) rows for native tests.
    struct Rows(Vec<(MessageKind, u64, ToolPairing)>);

    impl HistoryView for Rows {
        fn len(&self) -> u32 {
            self.0.len() as u32
        }
        fn entry(&self, _index: u32) -> Option<MessageEntry> {
            None
        }
        fn kind(&self, index: u32) -> Option<MessageKind> {
            self.0.get(index as usize).map(|row| row.0)
        }
        fn tool_pairing(&self, index: u32) -> Option<ToolPairing> {
            self.0.get(index as usize).map(|row| row.2)
        }
        fn tokens(&self, range: Range<u32>) -> u64 {
            let end = range.end.min(self.len()) as usize;
            let start = (range.start as usize).min(end);
            self.0[start..end].iter().map(|row| row.1).sum()
        }
    }

    fn user(tokens: u64) -> (MessageKind, u64, ToolPairing) {
        (MessageKind::User, tokens, ToolPairing::None)
    }

    fn kept_ranges(result: &AssembleResult) -> Vec<Range<u32>> {
        result
            .items
            .iter()
            .filter_map(|item| match item {
                AssembledItem::Keep(range) => Some(range.start..range.end),
                AssembledItem::Insert(_) => None,
            })
            .collect()
    }

    fn has_note(result: &AssembleResult) -> bool {
        result
            .items
            .iter()
            .any(|item| matches!(item, AssembledItem::Insert(_)))
    }

    #[test]
    fn keeps_everything_within_budget() {
        let history = Rows(vec![user(10), user(20)]);
        let result = plan(&history, Some(100));
        assert_eq!(kept_ranges(&result), vec![0..2]);
        assert_eq!(result.estimated_tokens, 30);
        assert!(!has_note(&result));
        assert_eq!(kept_ranges(&plan(&history, None)), vec![0..2]);
    }

    #[test]
    fn keeps_the_newest_suffix_that_fits_with_a_note() {
        let history = Rows(vec![user(100), user(100), user(100), user(100)]);
        let result = plan(&history, Some(250 + NOTE_TOKENS));
        assert_eq!(kept_ranges(&result), vec![2..4]);
        assert!(has_note(&result));
        assert_eq!(result.estimated_tokens, 200 + NOTE_TOKENS);
    }

    #[test]
    fn never_opens_with_a_result_whose_call_was_cut() {
        let history = Rows(vec![
            user(10),
            (MessageKind::Assistant, 100, ToolPairing::ToolCalls(3)),
            (
                MessageKind::ToolResult,
                10,
                ToolPairing::ToolResult(Some(1)),
            ),
            (
                MessageKind::ToolResult,
                10,
                ToolPairing::ToolResult(Some(1)),
            ),
            user(10),
        ]);
        // 30 tokens fit entries 2..5, but 2 and 3 answer the call at 1.
        let result = plan(&history, Some(30 + NOTE_TOKENS));
        assert_eq!(kept_ranges(&result), vec![4..5]);
    }

    #[test]
    fn keeps_the_newest_pair_whole_when_nothing_else_fits() {
        let history = Rows(vec![
            user(10),
            (MessageKind::Assistant, 500, ToolPairing::ToolCalls(2)),
            (
                MessageKind::ToolResult,
                500,
                ToolPairing::ToolResult(Some(1)),
            ),
        ]);
        let result = plan(&history, Some(100));
        assert_eq!(kept_ranges(&result), vec![1..3]);
    }

    #[test]
    fn keeps_the_newest_message_even_when_it_alone_is_too_big() {
        let history = Rows(vec![user(10), user(1000)]);
        assert_eq!(kept_ranges(&plan(&history, Some(0))), vec![1..2]);
    }

    #[test]
    fn pins_a_leading_compaction_summary() {
        let history = Rows(vec![
            (MessageKind::CompactionSummary, 50, ToolPairing::None),
            user(100),
            user(100),
            user(100),
        ]);
        let result = plan(&history, Some(50 + NOTE_TOKENS + 200));
        assert_eq!(kept_ranges(&result), vec![0..1, 2..4]);
    }
}
