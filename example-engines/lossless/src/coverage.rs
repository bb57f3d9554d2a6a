//! Where the summarized part of the session lies in a history the host
//! passes, and how large the context is with the summaries standing in for it.

use ctxbox_guest::HistoryView;

use crate::records::Meta;

/// The part of a history the summary roots stand in for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Coverage {
    /// History entries `0..covered_end` are represented by the summaries and
    /// left out of the prompt.
    pub covered_end: u32,
    /// Whether the summaries apply to this history: false when nothing is
    /// summarized yet, or when the last summarized message is not in it (the
    /// host replaced the history, e.g. after a compaction of its own), in
    /// which case the history is used as it is.
    pub summaries_apply: bool,
}

impl Coverage {
    /// Finds the last summarized message in `history`.
    ///
    /// Leaf summaries never end between a tool call and its results, so the
    /// entries after it normally start a new exchange; should the history
    /// disagree, results whose call is covered are covered too, so the prompt
    /// never shows a result without its call.
    pub(crate) fn locate(meta: &Meta, history: &impl HistoryView) -> Self {
        let frontier = meta
            .frontier_entry_id
            .as_deref()
            .and_then(|entry_id| history.find(entry_id));
        let Some(frontier) = frontier else {
            return Self {
                covered_end: 0,
                summaries_apply: false,
            };
        };
        let mut covered_end = frontier + 1;
        while let Some(pair) = history.split_pair(covered_end) {
            covered_end = pair.end;
        }
        Self {
            covered_end,
            summaries_apply: true,
        }
    }

    /// Tokens of the whole context the engine would send without a budget:
    /// the summary roots (when they apply) and every entry after them.
    pub(crate) fn context_tokens(&self, meta: &Meta, history: &impl HistoryView) -> u64 {
        let summaries: u64 = if self.summaries_apply {
            meta.roots.iter().map(|root| root.tokens).sum()
        } else {
            0
        };
        summaries + history.tokens(self.covered_end..history.len())
    }
}
