//! The session history an engine reads: a host-owned view, not a copy.

use std::ops::Range;

use crate::__private::bindings::ctxbox::engine::history::History as RawHistory;
use crate::{MessageEntry, MessageKind, ToolPairing};

/// Read access to a session's active context, oldest entry first.
///
/// [`History`] implements it over the host's resource; implement it yourself
/// over an in-memory list to run engine logic natively (tests, benches).
pub trait HistoryView {
    /// Number of entries.
    fn len(&self) -> u32;

    /// Whether there are no entries.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The entry at `index`.
    fn entry(&self, index: u32) -> Option<MessageEntry>;

    /// The kind of the entry at `index`, without copying it.
    fn kind(&self, index: u32) -> Option<MessageKind>;

    /// The entry's part in tool-call pairing.
    fn tool_pairing(&self, index: u32) -> Option<ToolPairing>;

    /// Estimated tokens of the entries in `range` (the host's estimator).
    fn tokens(&self, range: Range<u32>) -> u64;
}

/// The history passed to an engine call. Valid only during that call.
pub struct History<'a> {
    raw: &'a RawHistory,
}

impl<'a> History<'a> {
    pub(crate) fn new(raw: &'a RawHistory) -> Self {
        Self { raw }
    }

    /// Number of entries.
    pub fn len(&self) -> u32 {
        self.raw.len()
    }

    /// Whether there are no entries.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The entry at `index`, or `None` past the end.
    pub fn entry(&self, index: u32) -> Option<MessageEntry> {
        self.raw.entry(index)
    }

    /// The entries in `range`, all of them (paging through the host's per-call
    /// copy cap when needed).
    pub fn range(&self, range: Range<u32>) -> Vec<MessageEntry> {
        let end = range.end.min(self.len());
        let mut entries = Vec::with_capacity(end.saturating_sub(range.start) as usize);
        let mut next = range.start;
        while next < end {
            let page = self.raw.range(next, end);
            if page.is_empty() {
                break;
            }
            next += page.len() as u32;
            entries.extend(page);
        }
        entries
    }

    /// Every entry, oldest first: the reference's message-array view.
    pub fn to_vec(&self) -> Vec<MessageEntry> {
        self.range(0..self.len())
    }

    /// The kind of the entry at `index`, without copying the entry.
    pub fn kind(&self, index: u32) -> Option<MessageKind> {
        self.raw.kind(index)
    }

    /// The entry's part in tool-call pairing.
    pub fn tool_pairing(&self, index: u32) -> Option<ToolPairing> {
        self.raw.tool_pairing(index)
    }

    /// Position of the entry with transcript id `entry_id`.
    pub fn find(&self, entry_id: &str) -> Option<u32> {
        self.raw.find(entry_id)
    }

    /// The host's token estimate for the entries in `range`.
    pub fn tokens(&self, range: Range<u32>) -> u64 {
        self.raw.tokens(range.start, range.end)
    }
}

impl HistoryView for History<'_> {
    fn len(&self) -> u32 {
        History::len(self)
    }

    fn entry(&self, index: u32) -> Option<MessageEntry> {
        History::entry(self, index)
    }

    fn kind(&self, index: u32) -> Option<MessageKind> {
        History::kind(self, index)
    }

    fn tool_pairing(&self, index: u32) -> Option<ToolPairing> {
        History::tool_pairing(self, index)
    }

    fn tokens(&self, range: Range<u32>) -> u64 {
        History::tokens(self, range)
    }
}
