//! `read-transcript-delta`: pages of the entries appended after a cursor,
//! along the session's active branch.
//!
//! A cursor is opaque to engines. It names the session, the generation of the
//! file (its identity: a file replaced on disk, even with the same session,
//! has another), the position (entries of the active branch read so far, from
//! the root) and an anchor (the id and a digest of the last entry read). The
//! branch is the path from the root to the leaf, as the context is built, so
//! entries of an abandoned branch (a rolled-back turn) are never delivered; a
//! cursor that no longer fits the branch is answered with a reset whose
//! reason starts with the reference's code (`invalid_cursor`,
//! `scope_mismatch`, `generation_mismatch`, `anchor_missing`,
//! `anchor_moved`) instead of wrong entries. Runtime-context carriers are not
//! delivered (engines never see them). A read may be fenced before the
//! current turn's first entry: it then ends before that entry. An entry over
//! the bytes asked for is delivered alone or answered with the bytes it
//! needs, as [`OversizedEntry`] says.

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::record::{NodeKind, Record};
use crate::contract::services::{OversizedEntry, TranscriptDelta};
use crate::contract::types::MessageEntry;

/// Prefix of every cursor this host issues.
const CURSOR_PREFIX: &str = "ctxbox2.";

/// The most bytes a page may hold (ARCHITECTURE.md §7), whatever the caller asks: an
/// entry larger than this is never returned (see [`read`]).
pub const MAX_PAGE_BYTES: u64 = 64 * 1024 * 1024;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Cursor {
    #[serde(rename = "s")]
    session: String,
    #[serde(rename = "g")]
    generation: u64,
    #[serde(rename = "p")]
    position: u64,
    #[serde(rename = "a", default, skip_serializing_if = "Option::is_none")]
    anchor: Option<Anchor>,
}

/// The last entry a cursor read: its id and a digest of its line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Anchor {
    #[serde(rename = "i")]
    id: String,
    #[serde(rename = "d")]
    digest: String,
}

impl Cursor {
    fn encode(&self) -> String {
        // Serializing a struct of strings and integers cannot fail.
        let json = serde_json::to_vec(self).unwrap_or_default();
        format!("{CURSOR_PREFIX}{}", hex::encode(json))
    }

    fn decode(text: &str) -> Option<Self> {
        let bytes = hex::decode(text.strip_prefix(CURSOR_PREFIX)?).ok()?;
        serde_json::from_slice(&bytes).ok()
    }
}

/// The file a delta is read from.
pub(crate) struct DeltaSource<'a> {
    /// Entries after the header, in file order.
    pub records: &'a [Record],
    /// The active branch: indices into `records` from the root to the leaf.
    pub branch: &'a [usize],
    /// The header's session id.
    pub session_id: &'a str,
    /// The file's generation.
    pub generation: u64,
    /// The session id of the transcript this one continues, if it is a
    /// rotation (to say so when an old cursor arrives).
    pub predecessor: Option<&'a str>,
}

/// Page limits (already clamped to the host's defaults and caps).
#[derive(Debug, Clone, Copy)]
pub(crate) struct PageLimits {
    pub max_messages: u32,
    /// What the caller asked for.
    pub max_bytes: u64,
    /// The hard cap no page exceeds ([`MAX_PAGE_BYTES`]).
    pub cap_bytes: u64,
    /// What a next entry larger than `max_bytes` gets.
    pub oversized: OversizedEntry,
}

impl PageLimits {
    /// The limits an engine asked for, clamped: at least one message and
    /// one byte, at most [`MAX_PAGE_BYTES`].
    pub(crate) fn asked(max_messages: u32, max_bytes: u64, oversized: OversizedEntry) -> Self {
        Self {
            max_messages: max_messages.max(1),
            max_bytes: max_bytes.clamp(1, MAX_PAGE_BYTES),
            cap_bytes: MAX_PAGE_BYTES,
            oversized,
        }
    }
}

/// The generation of a file: a digest of its header line and, where the
/// platform has them, its device and inode numbers.
pub(crate) fn generation(header_line: &str, file_identity: Option<(u64, u64)>) -> u64 {
    let mut hasher = Sha256::new();
    hasher.update(header_line.as_bytes());
    if let Some((device, inode)) = file_identity {
        hasher.update(device.to_le_bytes());
        hasher.update(inode.to_le_bytes());
    }
    let digest = hasher.finalize();
    let mut first = [0u8; 8];
    first.copy_from_slice(&digest[..8]);
    u64::from_le_bytes(first)
}

/// The page after `cursor` (from the start when `None`), or a reset.
///
/// Entries are measured by their line in the file. A page holds at most
/// `max_bytes` of them. When its first entry alone is larger (up to
/// `cap_bytes`), [`OversizedEntry::DeliverAlone`] delivers it anyway, and
/// [`OversizedEntry::AskForBudget`] answers an empty page whose
/// `required_bytes` is the entry's size and whose cursor reads it next. An
/// entry larger than `cap_bytes` is never returned: a page ends before it,
/// and when it is the next entry the answer is a reset whose reason names it
/// and whose cursor continues right after it (everything before it was
/// delivered already).
///
/// `fence` is the id of the current turn's first entry during the calls
/// that build its prompt (the reference's current-turn fence): the read
/// stops before it. A cursor already past it (read during an earlier call
/// of the same turn) gets an empty page and keeps its place.
pub(crate) fn read(
    source: &DeltaSource<'_>,
    cursor: Option<&str>,
    limits: PageLimits,
    fence: Option<&str>,
) -> TranscriptDelta {
    let start = match cursor {
        None => 0,
        Some(text) => match check(source, text) {
            Ok(position) => position,
            Err(reason) => {
                return TranscriptDelta::Reset {
                    cursor: cursor_at(source, 0),
                    reason,
                };
            }
        },
    };
    let end = fence
        .and_then(|fence| position_of(source, fence))
        .unwrap_or(source.branch.len());
    if start > end {
        return TranscriptDelta::Page {
            cursor: cursor_at(source, start),
            entries: Vec::new(),
            has_more: false,
            required_bytes: None,
            serialized_bytes: 0,
        };
    }
    let mut entries = Vec::new();
    let mut bytes = 0u64;
    let mut required_bytes = None;
    let mut position = start;
    while position < end {
        let record = &source.records[source.branch[position]];
        if let Some(entry) = message_of(record) {
            let size = record.raw.len() as u64;
            if size > limits.cap_bytes {
                if !entries.is_empty() {
                    break;
                }
                return TranscriptDelta::Reset {
                    cursor: cursor_at(source, position + 1),
                    reason: format!(
                        "entry `{}` ({size} bytes) is larger than the {}-byte page cap and was skipped; \
                         the cursor continues after it",
                        entry.id, limits.cap_bytes
                    ),
                };
            }
            if entries.len() as u32 >= limits.max_messages {
                break;
            }
            if bytes + size > limits.max_bytes {
                let alone = entries.is_empty() && limits.oversized == OversizedEntry::DeliverAlone;
                if !alone {
                    if entries.is_empty() {
                        required_bytes = Some(size);
                    }
                    break;
                }
            }
            bytes += size;
            entries.push(entry);
        }
        position += 1;
    }
    let has_more = source.branch[position..end]
        .iter()
        .any(|&index| message_of(&source.records[index]).is_some());
    TranscriptDelta::Page {
        cursor: cursor_at(source, position),
        entries,
        has_more,
        required_bytes,
        serialized_bytes: bytes,
    }
}

/// The position on the branch of the entry with `id`.
fn position_of(source: &DeltaSource<'_>, id: &str) -> Option<usize> {
    source.branch.iter().position(|&index| {
        source.records[index]
            .node
            .as_ref()
            .is_some_and(|node| node.id == id)
    })
}

/// Where a cursor resumes, or why it no longer applies.
fn check(source: &DeltaSource<'_>, text: &str) -> Result<usize, String> {
    let Some(cursor) = Cursor::decode(text) else {
        return Err("invalid_cursor: the cursor was not issued by this host".into());
    };
    if cursor.session != source.session_id {
        return Err(if source.predecessor == Some(cursor.session.as_str()) {
            format!(
                "scope_mismatch: the transcript rotated after a compaction: session `{}` continues as `{}`",
                cursor.session, source.session_id
            )
        } else {
            format!(
                "scope_mismatch: the cursor belongs to session `{}`, not `{}`",
                cursor.session, source.session_id
            )
        });
    }
    if cursor.generation != source.generation {
        return Err("generation_mismatch: the transcript file was replaced".into());
    }
    let position = usize::try_from(cursor.position).unwrap_or(usize::MAX);
    let Some(anchor) = cursor.anchor else {
        return if position == 0 {
            Ok(0)
        } else {
            Err("invalid_cursor: the cursor has a position but no anchor".into())
        };
    };
    let at = |position: usize| {
        source
            .branch
            .get(position)
            .map(|&index| &source.records[index])
    };
    match position.checked_sub(1).and_then(at) {
        Some(last) if record_id(last) == Some(anchor.id.as_str()) => {
            if digest(last) == anchor.digest {
                Ok(position)
            } else {
                Err(format!(
                    "generation_mismatch: entry `{}` was rewritten since the cursor was issued",
                    anchor.id
                ))
            }
        }
        _ => Err(match position_of(source, &anchor.id) {
            Some(moved) => format!(
                "anchor_moved: entry `{}` is now at position {} of the active branch, not {}",
                anchor.id,
                moved + 1,
                position
            ),
            None => format!(
                "anchor_missing: entry `{}` is no longer on the active branch (a rolled-back turn or \
                 an abandoned branch); read the active branch again from its start",
                anchor.id
            ),
        }),
    }
}

fn cursor_at(source: &DeltaSource<'_>, position: usize) -> String {
    Cursor {
        session: source.session_id.to_owned(),
        generation: source.generation,
        position: position as u64,
        anchor: position
            .checked_sub(1)
            .and_then(|last| source.branch.get(last))
            .map(|&index| &source.records[index])
            .and_then(|record| {
                Some(Anchor {
                    id: record_id(record)?.to_owned(),
                    digest: digest(record),
                })
            }),
    }
    .encode()
}

fn record_id(record: &Record) -> Option<&str> {
    record.node.as_ref().map(|node| node.id.as_str())
}

/// A short digest of a line.
fn digest(record: &Record) -> String {
    hex::encode(&Sha256::digest(record.raw.as_bytes())[..8])
}

/// The message a record contributes to a delta: context messages (not
/// runtime-context carriers) and compaction summaries (so an engine learns
/// about compactions).
fn message_of(record: &Record) -> Option<MessageEntry> {
    let node = record.node.as_ref()?;
    match &node.kind {
        NodeKind::Message { entry, .. } if !entry.message.is_runtime_context_carrier() => {
            Some(entry.clone())
        }
        NodeKind::Compaction(compaction) => Some(MessageEntry {
            id: node.id.clone(),
            parent_id: node.parent_id.clone(),
            timestamp_ms: compaction.timestamp_ms,
            message: compaction.message(),
        }),
        NodeKind::Message { .. } | NodeKind::Other { .. } | NodeKind::Rotated(_) => None,
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::transcript::record;

    fn records(lines: &[&str]) -> Vec<Record> {
        lines
            .iter()
            .map(|line| Record {
                raw: (*line).into(),
                node: record::parse(line, crate::contract::tokens::Tokenizer::Estimate)
                    .expect("valid line"),
            })
            .collect()
    }

    /// The records of `lines` and the branch through all of them, in order.
    fn linear(lines: &[String]) -> (Vec<Record>, Vec<usize>) {
        let lines: Vec<&str> = lines.iter().map(String::as_str).collect();
        let all = records(&lines);
        let branch = (0..all.len()).collect();
        (all, branch)
    }

    /// Session `s`'s first generation, read along `branch`.
    fn session_s<'a>(records: &'a [Record], branch: &'a [usize]) -> DeltaSource<'a> {
        DeltaSource {
            records,
            branch,
            session_id: "s",
            generation: 1,
            predecessor: None,
        }
    }

    fn user(id: &str, parent: &str, text: &str) -> String {
        format!(
            r#"{{"type":"message","id":"{id}","parentId":"{parent}","timestamp":"2026-01-01T00:00:00.000Z","message":{{"role":"user","content":"{text}"}}}}"#
        )
    }

    /// A page's cursor, entry ids and `has_more`; panics on anything else.
    pub(crate) fn page(delta: TranscriptDelta) -> (String, Vec<String>, bool) {
        match delta {
            TranscriptDelta::Page {
                cursor,
                entries,
                has_more,
                ..
            } => (
                cursor,
                entries.into_iter().map(|e| e.id).collect(),
                has_more,
            ),
            other => panic!("expected a page, got {other:?}"),
        }
    }

    const LIMITS: PageLimits = PageLimits {
        max_messages: 1_000,
        max_bytes: 1 << 20,
        cap_bytes: MAX_PAGE_BYTES,
        oversized: OversizedEntry::DeliverAlone,
    };

    #[test]
    fn pages_through_appends_and_skips_other_entries() {
        let lines = [
            user("a", "", "one"),
            r#"{"type":"model_change","id":"m","parentId":"a","provider":"p","modelId":"x"}"#
                .into(),
            user("b", "m", "two"),
            user("c", "b", "three"),
        ];
        let lines: Vec<&str> = lines.iter().map(String::as_str).collect();
        let all = records(&lines);
        let branch: Vec<usize> = (0..all.len()).collect();
        let source = DeltaSource {
            records: &all,
            branch: &branch[..3],
            session_id: "s",
            generation: 7,
            predecessor: None,
        };
        let two = PageLimits {
            max_messages: 1,
            ..LIMITS
        };
        let (cursor, ids, more) = page(read(&source, None, two, None));
        assert_eq!((ids, more), (vec!["a".to_owned()], true));
        let (cursor, ids, more) = page(read(&source, Some(&cursor), LIMITS, None));
        assert_eq!((ids, more), (vec!["b".to_owned()], false));

        // The file grows; the cursor picks up where it stopped.
        let grown = DeltaSource {
            branch: &branch,
            ..source
        };
        let (_, ids, more) = page(read(&grown, Some(&cursor), LIMITS, None));
        assert_eq!((ids, more), (vec!["c".to_owned()], false));
    }

    #[test]
    fn a_page_holds_at_least_one_entry_whatever_its_size() {
        let lines = [user("a", "", "one"), user("b", "a", "two")];
        let (all, branch) = linear(&lines);
        let source = session_s(&all, &branch);
        let tiny = PageLimits {
            max_bytes: 1,
            ..LIMITS
        };
        let (_, ids, more) = page(read(&source, None, tiny, None));
        assert_eq!((ids, more), (vec!["a".to_owned()], true));
    }

    #[test]
    fn an_entry_over_max_bytes_is_answered_with_the_bytes_it_needs() {
        let big = user("big", "m", &"x".repeat(300));
        let lines = [
            user("a", "", "one"),
            r#"{"type":"model_change","id":"m","parentId":"a","provider":"p","modelId":"x"}"#
                .into(),
            big.clone(),
            user("c", "big", "three"),
        ];
        let (all, branch) = linear(&lines);
        let source = session_s(&all, &branch);
        let small = PageLimits {
            max_bytes: 200,
            oversized: OversizedEntry::AskForBudget,
            ..LIMITS
        };
        let bounded = |cursor: Option<&str>, limits| match read(&source, cursor, limits, None) {
            TranscriptDelta::Page {
                cursor,
                entries,
                has_more,
                required_bytes,
                serialized_bytes,
            } => {
                let ids: Vec<String> = entries.into_iter().map(|entry| entry.id).collect();
                (cursor, ids, has_more, required_bytes, serialized_bytes)
            }
            other => panic!("expected a page, got {other:?}"),
        };
        // The page stops before the large entry; nothing is required yet.
        let (cursor, ids, more, required, serialized) = bounded(None, small);
        assert_eq!(ids, ["a"]);
        assert!(more && required.is_none());
        assert_eq!(serialized, lines[0].len() as u64);
        // Next: an empty page naming the entry's size, however often asked.
        let (same, ids, more, required, serialized) = bounded(Some(&cursor), small);
        assert!(ids.is_empty() && more && serialized == 0);
        assert_eq!(required, Some(big.len() as u64));
        let (again, _, _, required_again, _) = bounded(Some(&same), small);
        assert_eq!(required_again, required);
        // With that budget the same cursor reads it, and the page holds exactly it.
        let enough = PageLimits {
            max_bytes: big.len() as u64,
            ..small
        };
        let (after, ids, more, required, serialized) = bounded(Some(&again), enough);
        assert_eq!((ids, more, required), (vec!["big".to_owned()], true, None));
        assert_eq!(serialized, big.len() as u64);
        let (_, ids, more, _, _) = bounded(Some(&after), small);
        assert_eq!((ids, more), (vec!["c".to_owned()], false));
        // The delta of old delivers the same entry alone, over the budget.
        let alone = PageLimits {
            oversized: OversizedEntry::DeliverAlone,
            ..small
        };
        let (_, ids, _, required, serialized) = bounded(Some(&cursor), alone);
        assert_eq!((ids, required), (vec!["big".to_owned()], None));
        assert_eq!(serialized, big.len() as u64);
    }

    #[test]
    fn an_entry_over_the_cap_is_skipped_with_a_reset_naming_it() {
        let big = user("big", "a", &"x".repeat(500));
        let lines = [user("a", "", "one"), big.clone(), user("c", "big", "three")];
        let (all, branch) = linear(&lines);
        let source = session_s(&all, &branch);
        let capped = PageLimits {
            cap_bytes: 400,
            ..LIMITS
        };
        // The page stops before it ...
        let (cursor, ids, more) = page(read(&source, None, capped, None));
        assert_eq!((ids, more), (vec!["a".to_owned()], true));
        // ... and the next read skips it, saying so, however small max_bytes is.
        let (cursor, reason) = match read(
            &source,
            Some(&cursor),
            PageLimits {
                max_bytes: 1,
                ..capped
            },
            None,
        ) {
            TranscriptDelta::Reset { cursor, reason } => (cursor, reason),
            other => panic!("expected a reset, got {other:?}"),
        };
        assert!(
            reason.contains("`big`") && reason.contains(&format!("{} bytes", big.len())),
            "{reason}"
        );
        // A read that asks for budgets skips it the same way: no budget fits it.
        let asking = PageLimits {
            oversized: OversizedEntry::AskForBudget,
            ..capped
        };
        let before_big = page(read(&source, None, asking, None)).0;
        assert!(matches!(
            read(&source, Some(&before_big), asking, None),
            TranscriptDelta::Reset { cursor: skipped, .. } if skipped == cursor
        ));
        let (_, ids, more) = page(read(&source, Some(&cursor), capped, None));
        assert_eq!((ids, more), (vec!["c".to_owned()], false));
    }

    #[test]
    fn resets_cursors_that_no_longer_apply() {
        let lines = [user("a", "", "one"), user("b", "a", "two")];
        let lines: Vec<&str> = lines.iter().map(String::as_str).collect();
        let all = records(&lines);
        let branch: Vec<usize> = (0..all.len()).collect();
        let source = DeltaSource {
            records: &all,
            branch: &branch,
            session_id: "new",
            generation: 1,
            predecessor: Some("old"),
        };
        let reset = |cursor: &str| match read(&source, Some(cursor), LIMITS, None) {
            TranscriptDelta::Reset { reason, cursor } => {
                assert!(Cursor::decode(&cursor).is_some_and(|c| c.position == 0));
                reason
            }
            other => panic!("expected a reset, got {other:?}"),
        };
        let foreign = |session: &str, generation, position, anchor: Option<(&str, &str)>| {
            Cursor {
                session: session.into(),
                generation,
                position,
                anchor: anchor.map(|(id, digest)| Anchor {
                    id: id.into(),
                    digest: digest.into(),
                }),
            }
            .encode()
        };
        assert!(reset("garbage").starts_with("invalid_cursor:"));
        assert!(reset(&foreign("new", 1, 1, None)).starts_with("invalid_cursor:"));
        let rotated = reset(&foreign("old", 1, 1, None));
        assert!(rotated.starts_with("scope_mismatch:") && rotated.contains("rotated"));
        assert!(reset(&foreign("other", 1, 1, None)).contains("belongs to session `other`"));
        assert!(reset(&foreign("new", 2, 0, None)).starts_with("generation_mismatch:"));
        let rewritten = reset(&foreign("new", 1, 1, Some(("a", "00"))));
        assert!(rewritten.starts_with("generation_mismatch:") && rewritten.contains("rewritten"));
        assert!(reset(&foreign("new", 1, 9, Some(("zz", "00")))).starts_with("anchor_missing:"));
        let moved = reset(&foreign("new", 1, 2, Some(("a", "00"))));
        assert!(moved.starts_with("anchor_moved:"), "{moved}");
    }

    fn entry_ids(delta: TranscriptDelta) -> Vec<String> {
        page(delta).1
    }

    #[test]
    fn the_cursor_follows_the_active_branch_and_resets_when_its_branch_is_abandoned() {
        // a → b → c, then c is rolled back: the marker `r` continues from b,
        // and d follows it. c stays in the file on a branch of its own.
        let lines = [
            user("a", "", "one"),
            user("b", "a", "two"),
            user("c", "b", "three"),
            r#"{"type":"custom","id":"r","parentId":"b","customType":"ctxbox.turn-rolled-back","data":{}}"#.into(),
            user("d", "r", "four"),
        ];
        let lines: Vec<&str> = lines.iter().map(String::as_str).collect();
        let all = records(&lines);
        let before: Vec<usize> = vec![0, 1, 2];
        let source = DeltaSource {
            records: &all,
            branch: &before,
            session_id: "s",
            generation: 1,
            predecessor: None,
        };
        let (read_c, ids, _) = page(read(&source, None, LIMITS, None));
        assert_eq!(ids, ["a", "b", "c"]);
        let one = PageLimits {
            max_messages: 2,
            ..LIMITS
        };
        let (read_b, _, _) = page(read(&source, None, one, None));

        let after: Vec<usize> = vec![0, 1, 3, 4];
        let rolled_back = DeltaSource {
            branch: &after,
            ..source
        };
        // A cursor that had read b goes on along the branch: d, never c.
        assert_eq!(
            entry_ids(read(&rolled_back, Some(&read_b), LIMITS, None)),
            ["d"]
        );
        // One that had read the abandoned c is told so, and starts again.
        match read(&rolled_back, Some(&read_c), LIMITS, None) {
            TranscriptDelta::Reset { cursor, reason } => {
                assert!(
                    reason.starts_with("anchor_missing:") && reason.contains("`c`"),
                    "{reason}"
                );
                assert_eq!(
                    entry_ids(read(&rolled_back, Some(&cursor), LIMITS, None)),
                    ["a", "b", "d"]
                );
            }
            other => panic!("expected a reset, got {other:?}"),
        }
    }

    #[test]
    fn a_fenced_read_stops_before_the_current_turns_entry() {
        let lines = [
            user("a", "", "one"),
            user("b", "a", "two"),
            user("t", "b", "this turn"),
        ];
        let (all, branch) = linear(&lines);
        let source = session_s(&all, &branch);
        let (cursor, ids, more) = page(read(&source, None, LIMITS, Some("t")));
        assert_eq!((ids, more), (vec!["a".to_owned(), "b".to_owned()], false));
        // Unfenced (after the turn), the same cursor reads the turn's entry.
        let (past, ids, _) = page(read(&source, Some(&cursor), LIMITS, None));
        assert_eq!(ids, ["t"]);
        // A cursor already past the fence keeps its place with nothing new.
        let (kept, ids, more) = page(read(&source, Some(&past), LIMITS, Some("t")));
        assert_eq!((kept, ids.len(), more), (past, 0, false));
    }

    #[test]
    fn runtime_context_carriers_are_not_delivered() {
        let carrier = r#"{"type":"custom_message","id":"rc","parentId":"a","customType":"openclaw.runtime-context","content":"cwd: /w","display":false,"details":{"source":"openclaw-runtime-context"},"timestamp":"2026-01-01T00:00:00.000Z"}"#;
        let lines = [user("a", "", "one"), carrier.into(), user("b", "rc", "two")];
        let lines: Vec<&str> = lines.iter().map(String::as_str).collect();
        let all = records(&lines);
        assert!(matches!(
            all[1].node.as_ref().map(|node| &node.kind),
            Some(NodeKind::Message { .. })
        ));
        let branch: Vec<usize> = (0..all.len()).collect();
        let source = DeltaSource {
            records: &all,
            branch: &branch,
            session_id: "s",
            generation: 1,
            predecessor: None,
        };
        assert_eq!(entry_ids(read(&source, None, LIMITS, None)), ["a", "b"]);
    }
}
