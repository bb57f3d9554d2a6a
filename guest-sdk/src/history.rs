//! The session history an engine reads: a host-owned view, not a copy.

use std::cell::Cell;
use std::ops::Range;

use crate::__private::bindings::ctxbox::engine::history::History as RawHistory;
use crate::codec::DecodeError;
use crate::packed::{self, EntryView};
use crate::{MessageEntry, MessageKind, ToolPairing};

/// Read access to a session's active context, oldest entry first.
///
/// [`History`] implements it over the host's resource; implement it yourself
/// over an in-memory list to run engine logic natively (tests, benches), or
/// use [`MemoryHistory`](crate::testing::MemoryHistory).
///
/// ```
/// use ctxbox_guest::testing::{MemoryHistory, conversation};
/// use ctxbox_guest::{HistoryView, MessageKind, ToolPairing};
///
/// // Two turns: question, tool call, tool result, answer.
/// let history = MemoryHistory::new(conversation(2));
/// assert_eq!(history.len(), 8);
/// assert_eq!(history.kind(1), Some(MessageKind::Assistant));
/// assert_eq!(history.tool_pairing(2), Some(ToolPairing::ToolResult(Some(1))));
/// // A cut before entry 2 would separate the call (1) from its result (2).
/// assert_eq!(history.split_pair(2), Some(1..3));
/// assert_eq!(history.split_pair(4), None);
/// assert!(history.tokens(0..4) > 0);
/// ```
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

    /// The entries in `range` (clamped to the history), oldest first.
    /// Default: one [`entry`](HistoryView::entry) call per index.
    fn range(&self, range: Range<u32>) -> Vec<MessageEntry> {
        (range.start..range.end.min(self.len()))
            .map_while(|index| self.entry(index))
            .collect()
    }

    /// Position of the entry whose transcript id is `entry_id`. Default: a
    /// linear scan from the newest entry back.
    fn find(&self, entry_id: &str) -> Option<u32> {
        (0..self.len())
            .rev()
            .find(|&index| self.entry(index).is_some_and(|entry| entry.id == entry_id))
    }

    /// The start of the newest suffix within `max_tokens` that separates no
    /// tool call from its results: the smallest `start` with
    /// `tokens(start..len) <= max_tokens` where no assistant message before
    /// `start` has a result at or after it; `len` when only the empty suffix
    /// qualifies (the WIT `fitting-suffix`).
    ///
    /// [`History`] asks the host: one crossing, O(log n) there. Default: a
    /// binary search over [`tokens`](HistoryView::tokens), then a scan of
    /// [`tool_pairing`](HistoryView::tool_pairing) up to the answer.
    fn fitting_suffix(&self, max_tokens: u64) -> u32 {
        let len = self.len();
        let (mut low, mut high) = (0, len);
        while low < high {
            let mid = low + (high - low) / 2;
            if self.tokens(mid..len) <= max_tokens {
                high = mid;
            } else {
                low = mid + 1;
            }
        }
        // The furthest result of any call before each cut, up to a cut that
        // has none after it.
        let mut furthest_result = None;
        for position in 0..len {
            let open = furthest_result.is_some_and(|last| last >= position);
            if position >= low && !open {
                return position;
            }
            if let Some(ToolPairing::ToolCalls(last_result)) = self.tool_pairing(position) {
                furthest_result = furthest_result.max(Some(last_result));
            }
        }
        len
    }

    /// Entries of `range` (clamped) in the `history.packed-range` layout
    /// ([`packed::pack`]): possibly only a prefix of the range, never empty
    /// while the range is not. [`History`] asks the host (one copy across
    /// the boundary); default: [`range`](HistoryView::range), packed. An
    /// implementation must write every string as UTF-8, as the host does:
    /// release builds of [`scan`](HistoryView::scan) borrow them unchecked.
    fn packed_range(&self, range: Range<u32>) -> Vec<u8> {
        packed::pack(&self.range(range))
    }

    /// Reads the entries of `range` (clamped) in place, oldest first,
    /// calling `visit` with each: the bulk path for an engine that reads
    /// many messages. A page at a time crosses the boundary as one byte
    /// string, and an [`EntryView`] borrows its strings from it, so nothing
    /// is allocated per entry; call [`EntryView::to_entry`] for an owned copy.
    ///
    /// ```
    /// use ctxbox_guest::testing::{MemoryHistory, conversation};
    /// use ctxbox_guest::HistoryView;
    ///
    /// let history = MemoryHistory::new(conversation(2));
    /// let mut text_bytes = 0;
    /// history
    ///     .scan(0..history.len(), |entry| text_bytes += entry.text().map_or(0, |t| t.len()))
    ///     .unwrap();
    /// let expected: usize = history.entries().iter().map(|e| e.message.text().len()).sum();
    /// assert_eq!(text_bytes, expected);
    /// ```
    fn scan(
        &self,
        range: Range<u32>,
        mut visit: impl FnMut(EntryView<'_>),
    ) -> Result<(), DecodeError>
    where
        Self: Sized,
    {
        let end = range.end.min(self.len());
        let mut next = range.start;
        while next < end {
            let page = self.packed_range(next..end);
            let read = packed::read_page(&page, next, &mut visit)?;
            if read == 0 {
                break;
            }
            next += read;
        }
        Ok(())
    }

    /// The tool-call pair that cutting the history just before `cut` would
    /// separate, as the positions from the assistant call to its last result
    /// (`call..last_result + 1`); `None` when the cut separates no pair.
    ///
    /// Looks at the entries on both sides of the cut, so it finds every pair
    /// whose results follow their call directly or with at most one other
    /// message between them, which is how agent loops write them.
    fn split_pair(&self, cut: u32) -> Option<Range<u32>> {
        let straddling = |call: u32| match self.tool_pairing(call) {
            Some(ToolPairing::ToolCalls(last_result)) if call < cut && last_result >= cut => {
                Some(call..last_result + 1)
            }
            _ => None,
        };
        if let Some(ToolPairing::ToolResult(Some(call))) = self.tool_pairing(cut)
            && call < cut
        {
            return straddling(call).or(Some(call..cut + 1));
        }
        match self.tool_pairing(cut.checked_sub(1)?)? {
            ToolPairing::ToolCalls(_) => straddling(cut - 1),
            ToolPairing::ToolResult(Some(call)) => straddling(call),
            _ => None,
        }
    }
}

/// The history passed to an engine call. Valid only during that call.
///
/// A view of the host's copy, not a copy: each method is one crossing into
/// the host, so an engine reads only what it needs. [`History::to_vec`] gives
/// the reference's whole-array semantics for engines that want them.
///
/// ```no_run
/// # use ctxbox_guest::prelude::*;
/// # fn assemble(history: &History) -> Result<AssembleResult, EngineError> {
/// // Drop the oldest half, whatever it holds (a real engine keeps tool
/// // pairs whole: see `HistoryView::split_pair`).
/// let len = history.len();
/// let newest = history.range(len / 2..len);
/// let text: usize = newest.iter().map(|entry| entry.message.text().len()).sum();
/// ctxbox_guest::debug!("keeping {} entries, {text} bytes of text", newest.len());
/// Ok(AssembleResult::keep_range(len / 2..len, history.tokens(len / 2..len)))
/// # }
/// ```
pub struct History<'a> {
    raw: &'a RawHistory,
    /// The length, asked of the host once: a history does not change during
    /// the call it is lent for.
    len: Cell<Option<u32>>,
}

impl<'a> History<'a> {
    pub(crate) fn new(raw: &'a RawHistory) -> Self {
        Self {
            raw,
            len: Cell::new(None),
        }
    }

    /// Number of entries.
    pub fn len(&self) -> u32 {
        match self.len.get() {
            Some(len) => len,
            None => {
                let len = self.raw.len();
                self.len.set(Some(len));
                len
            }
        }
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

    /// The start of the newest suffix within `max_tokens` that separates no
    /// tool call from its results ([`HistoryView::fitting_suffix`]), answered
    /// by the host in one crossing.
    pub fn fitting_suffix(&self, max_tokens: u64) -> u32 {
        self.raw.fitting_suffix(max_tokens)
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

    fn range(&self, range: Range<u32>) -> Vec<MessageEntry> {
        History::range(self, range)
    }

    fn find(&self, entry_id: &str) -> Option<u32> {
        History::find(self, entry_id)
    }

    fn fitting_suffix(&self, max_tokens: u64) -> u32 {
        History::fitting_suffix(self, max_tokens)
    }

    fn packed_range(&self, range: Range<u32>) -> Vec<u8> {
        self.raw.packed_range(range.start, range.end)
    }
}
