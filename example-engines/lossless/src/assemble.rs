//! The prompt: summaries for what they cover, then the rest of the history
//! verbatim, the fresh tail always.
//!
//! Think of the session as the summary roots (oldest first) followed by the
//! history entries they do not cover. The prompt is the newest contiguous
//! stretch of that sequence that fits the budget, and always includes the
//! fresh tail (the newest `fresh_tail_messages` entries, moved back to
//! include the call of a tool result it opens with). Only when the fresh tail
//! (with the note below, when one is needed) is over the budget is it cut, to
//! its newest part that fits. Cuts never separate a tool call from its
//! results.
//!
//! Whenever earlier messages are left out with no summary standing in for
//! them, the prompt opens with a one-line note saying how many, that they are
//! stored, and which tools (by the names the model sees) find and read them;
//! the note's tokens are taken from the budget first.

use std::ops::Range;

use ctxbox_guest::{AgentMessage, AssembleResult, AssembledItem, EngineError, HistoryView};

use crate::config::Config;
use crate::coverage::Coverage;
use crate::ports::Store;
use crate::recall::ToolNames;
use crate::records::Root;
use crate::render;
use crate::session::Session;

/// What the prompt shows: the summary roots standing in for the oldest
/// history, the history kept verbatim, and how many earlier messages neither
/// covers.
struct Layout<'a> {
    shown_roots: &'a [Root],
    kept: Range<u32>,
    omitted: u64,
}

/// Plans the prompt for `history` within `token_budget` (no limit if `None`),
/// naming the engine's tools as `tools` says the model sees them; `estimate`
/// is the host's token estimate of a message.
pub(crate) fn plan<S: Store>(
    session: &Session<'_, S>,
    config: &Config,
    history: &impl HistoryView,
    token_budget: Option<u64>,
    tools: &ToolNames,
    estimate: &dyn Fn(&AgentMessage) -> u64,
) -> Result<AssembleResult, EngineError> {
    let meta = session.meta()?;
    let coverage = Coverage::locate(&meta, history);
    let roots: &[Root] = if coverage.summaries_apply {
        &meta.roots
    } else {
        &[]
    };
    let lay = |budget: Option<u64>| -> Result<Layout<'_>, EngineError> {
        let (shown_roots, kept) = choose(history, config, coverage, roots, budget);
        let omitted = omitted_messages(
            session,
            meta.summarized_end,
            coverage,
            roots,
            shown_roots,
            &kept,
        )?;
        Ok(Layout {
            shown_roots,
            kept,
            omitted,
        })
    };
    let mut layout = lay(token_budget)?;
    let mut note = None;
    if layout.omitted > 0 {
        // Room for the note first; with less room, more may be left out.
        let sized = render::omission_note(layout.omitted, tools);
        let note_tokens = estimate(&sized);
        if let Some(budget) = token_budget {
            layout = lay(Some(budget.saturating_sub(note_tokens)))?;
        }
        let message = render::omission_note(layout.omitted, tools);
        let tokens = estimate(&message);
        note = Some((message, tokens));
    }

    let mut items = Vec::with_capacity(layout.shown_roots.len() + 2);
    let mut estimated_tokens = 0;
    if let Some((message, tokens)) = note {
        items.push(AssembledItem::Insert(message));
        estimated_tokens += tokens;
    }
    for root in layout.shown_roots {
        let node = session.node(root.node)?;
        items.push(AssembledItem::Insert(render::summary_message(&node)));
        estimated_tokens += root.tokens;
    }
    if !layout.kept.is_empty() {
        items.push(AssembledItem::keep(layout.kept.clone()));
    }
    estimated_tokens += history.tokens(layout.kept);
    Ok(AssembleResult {
        items,
        estimated_tokens,
        system_prompt_addition: None,
        context_projection: None,
    })
}

/// The summary roots shown and the history kept verbatim within `budget`.
fn choose<'r>(
    history: &impl HistoryView,
    config: &Config,
    coverage: Coverage,
    roots: &'r [Root],
    budget: Option<u64>,
) -> (&'r [Root], Range<u32>) {
    let len = history.len();
    let tail = fresh_tail_start(history, coverage.covered_end, config.fresh_tail_messages);
    match budget {
        None => (roots, coverage.covered_end..len),
        Some(budget) if history.tokens(tail..len) > budget => {
            (&[][..], overflowing_tail_start(history, tail, budget)..len)
        }
        Some(budget) => {
            // Saturating: a host whose token sums disagree must not make the
            // engine panic.
            let available = budget.saturating_sub(history.tokens(tail..len));
            let start = pair_safe_forward(
                history,
                fitting_start(history, coverage.covered_end..tail, available),
            );
            let available = available.saturating_sub(history.tokens(start..tail));
            let shown_roots = if start == coverage.covered_end {
                newest_fitting_roots(roots, available)
            } else {
                &[]
            };
            (shown_roots, start..len)
        }
    }
}

/// Earlier messages the prompt shows neither verbatim nor through a summary:
/// the history between what the summaries cover and what is kept, and the
/// summarized messages of the roots not shown (those before the oldest shown
/// root, or all of them).
fn omitted_messages<S: Store>(
    session: &Session<'_, S>,
    summarized_end: u64,
    coverage: Coverage,
    roots: &[Root],
    shown_roots: &[Root],
    kept: &Range<u32>,
) -> Result<u64, EngineError> {
    let unsummarized = u64::from(kept.start.saturating_sub(coverage.covered_end));
    let hidden_summarized = match shown_roots.first() {
        _ if roots.is_empty() => 0,
        None => summarized_end,
        Some(oldest_shown) => session.node(oldest_shown.node)?.first_seq,
    };
    Ok(unsummarized + hidden_summarized)
}

/// Where the fresh tail starts: `fresh_tail_messages` from the end, but not
/// inside what the summaries cover, and moved back to the call of a tool
/// result it would open with.
fn fresh_tail_start(history: &impl HistoryView, covered_end: u32, fresh_tail_messages: u32) -> u32 {
    let mut start = history
        .len()
        .saturating_sub(fresh_tail_messages)
        .max(covered_end);
    while let Some(pair) = history.split_pair(start) {
        let back = pair.start.max(covered_end);
        if back == start {
            break;
        }
        start = back;
    }
    start
}

/// The smallest start in `range` whose entries up to `range.end` fit
/// `available` tokens (`range.end` itself when none do). Suffix sums shrink
/// as the start grows: binary search, O(log n) token queries.
fn fitting_start(history: &impl HistoryView, range: Range<u32>, available: u64) -> u32 {
    let (mut low, mut high) = (range.start, range.end);
    while low < high {
        let mid = low + (high - low) / 2;
        if history.tokens(mid..range.end) <= available {
            high = mid;
        } else {
            low = mid + 1;
        }
    }
    low
}

/// `start`, moved forward past the part of any tool-call pair it would cut.
fn pair_safe_forward(history: &impl HistoryView, mut start: u32) -> u32 {
    while let Some(pair) = history.split_pair(start) {
        start = pair.end;
    }
    start
}

/// Where a fresh tail over the budget is cut: the newest pair-safe part that
/// fits, or, when not even the newest message fits, the newest message with
/// its call if it is a tool result (an empty prompt helps no one).
fn overflowing_tail_start(history: &impl HistoryView, tail: u32, budget: u64) -> u32 {
    let len = history.len();
    let start = pair_safe_forward(history, fitting_start(history, tail..len, budget));
    if start < len {
        return start;
    }
    let newest = len.saturating_sub(1);
    history.split_pair(newest).map_or(newest, |pair| pair.start)
}

/// The newest roots whose tokens together fit `available`.
fn newest_fitting_roots(roots: &[Root], available: u64) -> &[Root] {
    let mut used = 0;
    let mut first = roots.len();
    while let Some(root) = first.checked_sub(1).and_then(|index| roots.get(index)) {
        if used + root.tokens > available {
            break;
        }
        used += root.tokens;
        first -= 1;
    }
    &roots[first..]
}
