//! `read-transcript-delta` over a history instead of a file: the session's
//! transcript as the host has it when there is no transcript file it can
//! read. A runtime that keeps its sessions in its own store (OpenClaw 2026.9
//! keeps them in SQLite and names a session by its key where a path used to
//! be) sends `ctxbox serve` the session's messages instead, and the history
//! the engine call was given is that session: the same messages, in order,
//! on one branch.
//!
//! Cursors, anchors, paging, the current-turn fence and resets are the
//! file reader's ([`delta::read`]): each entry stands as its JSON, so an
//! entry the runtime rewrote (a suffix replaced by a reset sync) no longer
//! matches a cursor's anchor and the cursor is answered with a reset. The
//! generation is the session's, so a cursor of another session is refused.

use super::delta::{self, DeltaSource, PageLimits};
use super::record::{Node, NodeKind, Record};
use crate::contract::history::History;
use crate::contract::services::{OversizedEntry, TranscriptDelta};

/// The page after `cursor` of `history`, the transcript of session
/// `session_id`, as [`delta::read`] reads a file's active branch.
pub(crate) fn read(
    session_id: &str,
    history: &History,
    cursor: Option<&str>,
    max_messages: u32,
    max_bytes: u64,
    oversized: OversizedEntry,
    fence: Option<&str>,
) -> TranscriptDelta {
    let records: Vec<Record> = history.entries().iter().map(record_of).collect();
    let branch: Vec<usize> = (0..records.len()).collect();
    let source = DeltaSource {
        records: &records,
        branch: &branch,
        session_id,
        generation: delta::generation(&format!("history of {session_id}"), None),
        predecessor: None,
    };
    delta::read(
        &source,
        cursor,
        PageLimits::asked(max_messages, max_bytes, oversized),
        fence,
    )
}

/// One history entry as a transcript record: its JSON stands for its line
/// (what pages are measured by and anchors digest).
fn record_of(entry: &crate::contract::types::MessageEntry) -> Record {
    // A message entry of strings, numbers and JSON values always serializes.
    let raw = serde_json::to_string(entry).unwrap_or_default();
    Record {
        raw: raw.into_boxed_str(),
        node: Some(Node {
            id: entry.id.clone(),
            parent_id: entry.parent_id.clone(),
            kind: NodeKind::Message {
                entry: entry.clone(),
                tokens: 0,
            },
            misshapen: None,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::contract::types::{AgentMessage, MessageEntry};
    use crate::transcript::delta::tests::page;

    fn history(texts: &[&str]) -> History {
        let mut parent = None;
        History::new(
            texts
                .iter()
                .enumerate()
                .map(|(index, text)| {
                    let id = format!("m{}", index + 1);
                    MessageEntry {
                        id: id.clone(),
                        parent_id: parent.replace(id),
                        timestamp_ms: 1_000 * index as i64,
                        message: AgentMessage::user_text(*text),
                    }
                })
                .collect(),
        )
    }

    /// The reason of a reset; panics on anything else.
    fn reset_reason(delta: TranscriptDelta) -> String {
        match delta {
            TranscriptDelta::Reset { reason, .. } => reason,
            other => panic!("not a reset: {other:?}"),
        }
    }

    #[test]
    fn pages_the_history_in_order_and_resumes_after_the_cursor() {
        let held = history(&["a", "b", "c"]);
        let read = |cursor: Option<&str>| {
            read(
                "s",
                &held,
                cursor,
                2,
                u64::MAX,
                OversizedEntry::DeliverAlone,
                None,
            )
        };
        let (cursor, ids, more) = page(read(None));
        assert_eq!((ids, more), (vec!["m1".to_owned(), "m2".to_owned()], true));
        let (cursor, ids, more) = page(read(Some(&cursor)));
        assert_eq!((ids, more), (vec!["m3".to_owned()], false));
        // Nothing new since: an empty page that keeps its place.
        let (_, ids, more) = page(read(Some(&cursor)));
        assert_eq!((ids.len(), more), (0, false));
        // The session grew: the same cursor reads what was appended.
        let grown = history(&["a", "b", "c", "d"]);
        let (_, ids, _) = page(self::read(
            "s",
            &grown,
            Some(&cursor),
            10,
            u64::MAX,
            OversizedEntry::DeliverAlone,
            None,
        ));
        assert_eq!(ids, vec!["m4".to_owned()]);
    }

    #[test]
    fn a_rewritten_entry_or_another_session_resets_the_cursor() {
        let held = history(&["a", "b"]);
        let options = (10, u64::MAX, OversizedEntry::DeliverAlone);
        let (cursor, _, _) = page(read(
            "s", &held, None, options.0, options.1, options.2, None,
        ));
        let rewritten = history(&["a", "B"]);
        let reason = reset_reason(read(
            "s",
            &rewritten,
            Some(&cursor),
            options.0,
            options.1,
            options.2,
            None,
        ));
        assert!(reason.starts_with("generation_mismatch:"), "{reason}");
        let reason = reset_reason(read(
            "t",
            &held,
            Some(&cursor),
            options.0,
            options.1,
            options.2,
            None,
        ));
        assert!(reason.starts_with("scope_mismatch:"), "{reason}");
    }

    #[test]
    fn stops_at_the_current_turn_fence() {
        let held = history(&["a", "b", "c"]);
        let (_, ids, more) = page(read(
            "s",
            &held,
            None,
            10,
            u64::MAX,
            OversizedEntry::DeliverAlone,
            Some("m3"),
        ));
        assert_eq!((ids, more), (vec!["m1".to_owned(), "m2".to_owned()], false));
    }
}
