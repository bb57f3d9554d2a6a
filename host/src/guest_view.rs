//! The host's [`History`] seen through the guest SDK's [`HistoryView`], so an
//! engine's logic can run natively on exactly what its wasm build would see
//! (benches compare the two). Feature `guest-view`.

use std::ops::Range;

use ctxbox_guest::HistoryView;

use crate::history::{History, ToolPairing};
use crate::types::MessageKind;

impl HistoryView for History {
    fn len(&self) -> u32 {
        History::len(self) as u32
    }

    fn entry(&self, _index: u32) -> Option<ctxbox_guest::MessageEntry> {
        // Engines run natively decide from kinds, pairing and tokens; copying
        // whole entries between the two type families is not needed yet.
        None
    }

    fn kind(&self, index: u32) -> Option<ctxbox_guest::MessageKind> {
        use ctxbox_guest::MessageKind as Guest;
        History::kind(self, index as usize).map(|kind| match kind {
            MessageKind::User => Guest::User,
            MessageKind::Assistant => Guest::Assistant,
            MessageKind::ToolResult => Guest::ToolResult,
            MessageKind::Custom => Guest::Custom,
            MessageKind::CompactionSummary => Guest::CompactionSummary,
            MessageKind::BranchSummary => Guest::BranchSummary,
        })
    }

    fn tool_pairing(&self, index: u32) -> Option<ctxbox_guest::ToolPairing> {
        History::tool_pairing(self, index as usize).map(|pairing| match pairing {
            ToolPairing::None => ctxbox_guest::ToolPairing::None,
            ToolPairing::ToolCalls { last_result } => {
                ctxbox_guest::ToolPairing::ToolCalls(last_result)
            }
            ToolPairing::ToolResult { call } => ctxbox_guest::ToolPairing::ToolResult(call),
        })
    }

    fn tokens(&self, range: Range<u32>) -> u64 {
        History::tokens(self, range.start as usize..range.end as usize)
    }
}
