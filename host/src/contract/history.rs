//! The host-owned view of a session's active context that engine calls read.
//!
//! A [`History`] is an immutable, cheaply cloned snapshot. Token estimates are
//! summed into prefix sums once, so `tokens(start, end)` is O(1), and the
//! tool-call pairing of every entry is computed once, so an engine can keep a
//! range without splitting a call from its result by asking about its ends.

use std::collections::HashMap;
use std::ops::Range;
use std::sync::{Arc, OnceLock};

use crate::contract::tokens;
use crate::contract::types::{AgentMessage, AssembledItem, MessageEntry, MessageKind};

/// An entry's part in tool-call pairing (the WIT `tool-pairing`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ToolPairing {
    /// Not part of a pair.
    None,
    /// An assistant message with tool calls; its results end at this index
    /// (inclusive; its own index when no call has a result).
    ToolCalls {
        /// Index of the last result answering one of its calls.
        last_result: u32,
    },
    /// A tool result.
    ToolResult {
        /// Index of the assistant message that made the call, if present.
        call: Option<u32>,
    },
}

/// A snapshot of a session's active context, oldest entry first.
#[derive(Clone)]
pub struct History {
    inner: Arc<Inner>,
}

struct Inner {
    entries: Vec<MessageEntry>,
    /// `prefix_tokens[i]` = estimated tokens of entries `0..i`.
    prefix_tokens: Vec<u64>,
    pairing: Vec<ToolPairing>,
    /// `safe_cut[p]`: the first cut position at or after `p` that separates
    /// no tool call from its results (a cut at `p` is between entries
    /// `p - 1` and `p`; `safe_cut[p] == p` when that cut is safe).
    safe_cut: Vec<u32>,
    positions: OnceLock<HashMap<String, u32>>,
}

impl History {
    /// A snapshot of `entries`, estimating each with the host estimator.
    pub fn new(entries: Vec<MessageEntry>) -> Self {
        let estimates: Vec<u64> = entries
            .iter()
            .map(|entry| tokens::estimate_message(&entry.message))
            .collect();
        Self::with_estimates(entries, &estimates)
    }

    /// A snapshot of `entries` whose per-entry token estimates are already
    /// known (e.g. cached by the transcript store). `estimates` must have one
    /// figure per entry; missing ones are computed.
    pub fn with_estimates(entries: Vec<MessageEntry>, estimates: &[u64]) -> Self {
        let mut prefix_tokens = Vec::with_capacity(entries.len() + 1);
        let mut total = 0u64;
        prefix_tokens.push(0);
        for (index, entry) in entries.iter().enumerate() {
            total += estimates
                .get(index)
                .copied()
                .unwrap_or_else(|| tokens::estimate_message(&entry.message));
            prefix_tokens.push(total);
        }
        let pairing = compute_pairing(&entries);
        let safe_cut = compute_safe_cuts(&pairing);
        Self {
            inner: Arc::new(Inner {
                entries,
                prefix_tokens,
                pairing,
                safe_cut,
                positions: OnceLock::new(),
            }),
        }
    }

    /// This history with only its first `keep` entries, then `appended`
    /// (whose estimates are `estimates`, one per entry; missing ones are
    /// computed). When this is the only handle on the snapshot its entries
    /// are reused in place, so growing a session by a turn costs the new
    /// entries, not a copy of the whole history.
    pub fn edited(self, keep: usize, appended: Vec<MessageEntry>, estimates: &[u64]) -> Self {
        let mut inner = Arc::try_unwrap(self.inner).unwrap_or_else(|shared| Inner {
            entries: shared.entries[..keep.min(shared.entries.len())].to_vec(),
            prefix_tokens: shared.prefix_tokens[..=keep.min(shared.entries.len())].to_vec(),
            pairing: Vec::new(),
            safe_cut: Vec::new(),
            positions: OnceLock::new(),
        });
        let keep = keep.min(inner.entries.len());
        // Positions already found stay valid when entries are only added
        // (the new ones are added to them); a cut drops them.
        let mut positions = inner.positions.take();
        if keep < inner.entries.len() {
            positions = None;
        }
        inner.entries.truncate(keep);
        inner.prefix_tokens.truncate(keep + 1);
        let mut total = inner.prefix_tokens[keep];
        for (index, entry) in appended.iter().enumerate() {
            total += estimates
                .get(index)
                .copied()
                .unwrap_or_else(|| tokens::estimate_message(&entry.message));
            inner.prefix_tokens.push(total);
        }
        if inner.entries.is_empty() {
            // Taken as it is: never two copies of a large first batch.
            inner.entries = appended;
        } else {
            inner.entries.extend(appended);
        }
        inner.pairing = compute_pairing(&inner.entries);
        inner.safe_cut = compute_safe_cuts(&inner.pairing);
        if let Some(mut positions) = positions {
            for (index, entry) in inner.entries.iter().enumerate().skip(keep) {
                positions.insert(entry.id.clone(), index as u32);
            }
            inner.positions = OnceLock::from(positions);
        }
        Self {
            inner: Arc::new(inner),
        }
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.inner.entries.len()
    }

    /// Whether there are no entries.
    pub fn is_empty(&self) -> bool {
        self.inner.entries.is_empty()
    }

    /// All entries.
    pub fn entries(&self) -> &[MessageEntry] {
        &self.inner.entries
    }

    /// The entry at `index`.
    pub fn entry(&self, index: usize) -> Option<&MessageEntry> {
        self.inner.entries.get(index)
    }

    /// The kind of the entry at `index`.
    pub fn kind(&self, index: usize) -> Option<MessageKind> {
        self.entry(index).map(|entry| entry.message.kind())
    }

    /// The pairing role of the entry at `index`.
    pub fn tool_pairing(&self, index: usize) -> Option<ToolPairing> {
        self.inner.pairing.get(index).copied()
    }

    /// Whether cutting the history before entry `position` (between
    /// `position - 1` and `position`) would separate a tool call from one of
    /// its results. Cutting at 0 or at the end never does.
    pub fn splits_pair(&self, position: usize) -> bool {
        self.inner
            .safe_cut
            .get(position)
            .is_some_and(|&safe| safe as usize != position)
    }

    /// The start of the newest suffix within `max_tokens` that separates no
    /// tool call from its results (the WIT `fitting-suffix`): the smallest
    /// `start` with `tokens(start..len) <= max_tokens` and
    /// `!splits_pair(start)`; `len` when only the empty suffix qualifies.
    /// O(log n): a binary search over the prefix sums, then one lookup.
    pub fn fitting_suffix(&self, max_tokens: u64) -> usize {
        let prefix = &self.inner.prefix_tokens;
        let total = prefix[self.len()];
        // Suffix sums shrink as the start grows: the first start whose
        // prefix leaves at most `max_tokens` behind it.
        let fitting = prefix.partition_point(|&before| total - before > max_tokens);
        self.inner.safe_cut[fitting] as usize
    }

    /// Position of the entry with id `entry_id`.
    pub fn find(&self, entry_id: &str) -> Option<usize> {
        let positions = self.inner.positions.get_or_init(|| {
            self.inner
                .entries
                .iter()
                .enumerate()
                .map(|(index, entry)| (entry.id.clone(), index as u32))
                .collect()
        });
        positions.get(entry_id).map(|&index| index as usize)
    }

    /// Estimated tokens of entries in `range` (clamped to the history).
    pub fn tokens(&self, range: Range<usize>) -> u64 {
        let end = range.end.min(self.len());
        let start = range.start.min(end);
        self.inner.prefix_tokens[end] - self.inner.prefix_tokens[start]
    }

    /// Estimated tokens of the whole history.
    pub fn total_tokens(&self) -> u64 {
        self.tokens(0..self.len())
    }

    /// The prompt an `assemble` answer describes: kept ranges copied from this
    /// history, inserted messages as given. Ranges are clamped to the history;
    /// validate the answer first ([`crate::contract::validate`]).
    pub fn materialize(&self, items: &[AssembledItem]) -> Vec<AgentMessage> {
        let mut messages = Vec::new();
        for item in items {
            match item {
                AssembledItem::Keep { start, end } => {
                    let end = (*end as usize).min(self.len());
                    let start = (*start as usize).min(end);
                    messages.extend(
                        self.inner.entries[start..end]
                            .iter()
                            .map(|entry| entry.message.clone()),
                    );
                }
                AssembledItem::Insert(message) => messages.push(message.clone()),
            }
        }
        messages
    }
}

impl Default for History {
    fn default() -> Self {
        Self::new(Vec::new())
    }
}

impl std::fmt::Debug for History {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("History")
            .field("len", &self.len())
            .field("tokens", &self.total_tokens())
            .finish()
    }
}

/// Each entry's pairing role: results point at the assistant message that
/// made their call, assistant messages at their last result.
fn compute_pairing(entries: &[MessageEntry]) -> Vec<ToolPairing> {
    let mut pairing = vec![ToolPairing::None; entries.len()];
    let mut callers: HashMap<&str, u32> = HashMap::new();
    for (index, entry) in entries.iter().enumerate() {
        let index = index as u32;
        match &entry.message {
            AgentMessage::Assistant { .. } => {
                let mut makes_calls = false;
                for id in entry.message.tool_call_ids() {
                    callers.insert(id, index);
                    makes_calls = true;
                }
                if makes_calls {
                    pairing[index as usize] = ToolPairing::ToolCalls { last_result: index };
                }
            }
            AgentMessage::ToolResult { tool_call_id, .. } => {
                let call = callers.get(tool_call_id.as_str()).copied();
                pairing[index as usize] = ToolPairing::ToolResult { call };
                if let Some(call) = call {
                    pairing[call as usize] = ToolPairing::ToolCalls { last_result: index };
                }
            }
            _ => {}
        }
    }
    pairing
}

/// For every cut position, the first position at or after it where a cut
/// separates no call from its results (some call before a cut with a result
/// at or after it makes the cut unsafe; a cut at the end is always safe).
fn compute_safe_cuts(pairing: &[ToolPairing]) -> Vec<u32> {
    let mut unsafe_cut = Vec::with_capacity(pairing.len() + 1);
    let mut furthest_result: Option<u32> = None;
    for (position, role) in pairing.iter().enumerate() {
        unsafe_cut.push(furthest_result.is_some_and(|last| last as usize >= position));
        if let ToolPairing::ToolCalls { last_result } = role {
            furthest_result = furthest_result.max(Some(*last_result));
        }
    }
    unsafe_cut.push(false);
    let mut safe_cut = vec![0; unsafe_cut.len()];
    let mut next_safe = pairing.len() as u32;
    for (position, is_unsafe) in unsafe_cut.iter().enumerate().rev() {
        if !is_unsafe {
            next_safe = position as u32;
        }
        safe_cut[position] = next_safe;
    }
    safe_cut
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(id: &str, message: AgentMessage) -> MessageEntry {
        MessageEntry {
            id: id.into(),
            parent_id: None,
            timestamp_ms: 0,
            message,
        }
    }

    fn call(id: &str) -> AgentMessage {
        AgentMessage::tool_call(id, "read", "{}")
    }

    fn result(call_id: &str) -> AgentMessage {
        AgentMessage::tool_result(call_id, "read", "ok")
    }

    #[test]
    fn pairs_calls_with_their_results() {
        let history = History::new(vec![
            entry("u", AgentMessage::user_text("hi")),
            entry("a", call("c1")),
            entry("r", result("c1")),
            entry("x", result("missing")),
            entry("b", call("c2")),
        ]);
        assert_eq!(history.tool_pairing(0), Some(ToolPairing::None));
        assert_eq!(
            history.tool_pairing(1),
            Some(ToolPairing::ToolCalls { last_result: 2 })
        );
        assert_eq!(
            history.tool_pairing(2),
            Some(ToolPairing::ToolResult { call: Some(1) })
        );
        assert_eq!(
            history.tool_pairing(3),
            Some(ToolPairing::ToolResult { call: None })
        );
        assert_eq!(
            history.tool_pairing(4),
            Some(ToolPairing::ToolCalls { last_result: 4 })
        );
        assert_eq!(history.tool_pairing(5), None);
        // Cutting between the call (1) and its result (2) splits the pair;
        // cutting before the orphan result (3) or the pending call (4) does not.
        let splits: Vec<bool> = (0..=5).map(|p| history.splits_pair(p)).collect();
        assert_eq!(splits, vec![false, false, true, false, false, false]);
    }

    #[test]
    fn sums_tokens_over_ranges_and_finds_ids() {
        let history = History::new(vec![
            entry("a", AgentMessage::user_text("abcd")),
            entry("b", AgentMessage::user_text("abcdefgh")),
        ]);
        let one = history.tokens(0..1);
        assert_eq!(history.tokens(0..2), one + history.tokens(1..2));
        assert_eq!(history.tokens(1..99), history.tokens(1..2));
        assert_eq!(history.tokens(5..9), 0);
        assert_eq!(history.find("b"), Some(1));
        assert_eq!(history.find("zz"), None);
    }

    #[test]
    fn an_edited_history_is_the_history_of_its_entries() {
        let first = History::new(vec![
            entry("u", AgentMessage::user_text("hi")),
            entry("a", call("c1")),
        ]);
        let held = first.clone();
        // Shared (another handle is alive): the kept prefix is copied.
        let grown = first.edited(2, vec![entry("r", result("c1"))], &[]);
        assert_eq!(held.len(), 2, "the other handle is unchanged");
        // Unique: edited in place; a suffix replaced.
        let replaced = grown.edited(1, vec![entry("b", call("c2"))], &[7]);
        let fresh = History::new(vec![
            entry("u", AgentMessage::user_text("hi")),
            entry("b", call("c2")),
        ]);
        assert_eq!(replaced.len(), 2);
        assert_eq!(replaced.find("b"), Some(1));
        assert_eq!(replaced.find("a"), None);
        assert_eq!(replaced.tokens(1..2), 7, "the given estimate is used");
        assert_eq!(replaced.tokens(0..1), fresh.tokens(0..1));
        assert_eq!(replaced.tool_pairing(1), fresh.tool_pairing(1));
        let regrown = replaced.edited(9, vec![entry("s", result("c2"))], &[]);
        assert_eq!(
            regrown.tool_pairing(1),
            Some(ToolPairing::ToolCalls { last_result: 2 })
        );
        assert!(regrown.splits_pair(2));
        // Positions found before an append are kept and extended; a cut
        // forgets the entries it removed.
        assert_eq!(regrown.find("s"), Some(2));
        let appended = regrown.edited(3, vec![entry("t", AgentMessage::user_text("more"))], &[]);
        assert_eq!(appended.find("t"), Some(3));
        assert_eq!(appended.find("b"), Some(1));
        let cut = appended.edited(1, vec![entry("a", call("c3"))], &[]);
        assert_eq!(cut.find("a"), Some(1));
        assert_eq!(cut.find("b"), None);
        assert_eq!(cut.find("t"), None);
    }

    #[test]
    fn the_fitting_suffix_never_splits_a_pair() {
        let history = History::new(vec![
            entry("u", AgentMessage::user_text("question")),
            entry("a", call("c1")),
            entry("r", result("c1")),
            entry("v", AgentMessage::user_text("next")),
        ]);
        let tokens = |start: usize| history.tokens(start..4);
        assert_eq!(history.fitting_suffix(u64::MAX), 0);
        assert_eq!(history.fitting_suffix(tokens(0)), 0);
        assert_eq!(history.fitting_suffix(tokens(1)), 1);
        // The result (2) fits with what follows, its call does not.
        assert_eq!(history.fitting_suffix(tokens(2)), 3);
        assert_eq!(history.fitting_suffix(tokens(3) - 1), 4);
        assert_eq!(History::default().fitting_suffix(0), 0);
    }

    /// A random conversation: users, assistants with or without a call,
    /// results answering open calls (in any order, possibly much later),
    /// orphan results; sizes from a few to a few hundred characters.
    fn conversation() -> impl proptest::strategy::Strategy<Value = Vec<MessageEntry>> {
        use proptest::prelude::*;
        let step = (0u8..5, 1usize..400, 0usize..4);
        proptest::collection::vec(step, 0..40).prop_map(|steps| {
            let mut open: Vec<String> = Vec::new();
            let mut entries = Vec::new();
            for (index, (kind, size, pick)) in steps.into_iter().enumerate() {
                let text = "x".repeat(size);
                let message = match kind {
                    0 => AgentMessage::user_text(text),
                    1 => {
                        let id = format!("c{index}");
                        open.push(id.clone());
                        AgentMessage::tool_call(&id, "read", &text)
                    }
                    2 | 3 if !open.is_empty() => {
                        let id = open.remove(pick % open.len());
                        AgentMessage::tool_result(&id, "read", &text)
                    }
                    2 => AgentMessage::tool_result("orphan", "read", &text),
                    _ => AgentMessage::assistant_text(text),
                };
                entries.push(entry(&format!("e{index}"), message));
            }
            entries
        })
    }

    /// Whether a cut at `position` separates a call from a result, by
    /// looking at every pair.
    fn splits_by_brute_force(entries: &[MessageEntry], position: usize) -> bool {
        entries[..position].iter().any(|before| {
            before.message.tool_call_ids().any(|id| {
                entries[position..].iter().any(|after| {
                    matches!(&after.message, AgentMessage::ToolResult { tool_call_id, .. }
                        if tool_call_id == id)
                })
            })
        })
    }

    proptest::proptest! {
        #[test]
        fn the_fitting_suffix_is_the_first_fitting_safe_start(
            entries in conversation(),
            share in 0u64..=110,
        ) {
            let history = History::new(entries.clone());
            let len = history.len();
            let max_tokens = history.total_tokens() * share / 100;
            let expected = (0..=len)
                .find(|&start| {
                    history.tokens(start..len) <= max_tokens
                        && !splits_by_brute_force(&entries, start)
                })
                .unwrap_or(len);
            proptest::prop_assert_eq!(history.fitting_suffix(max_tokens), expected);
            for position in 0..=len {
                proptest::prop_assert_eq!(
                    history.splits_pair(position),
                    splits_by_brute_force(&entries, position)
                );
            }
        }
    }

    #[test]
    fn materializes_kept_ranges_and_inserts_in_order() {
        let history = History::new(vec![
            entry("a", AgentMessage::user_text("one")),
            entry("b", AgentMessage::user_text("two")),
        ]);
        let note = AgentMessage::user_text("note");
        let messages = history.materialize(&[
            AssembledItem::Insert(note.clone()),
            AssembledItem::Keep { start: 1, end: 2 },
        ]);
        assert_eq!(messages, vec![note, AgentMessage::user_text("two")]);
    }
}
