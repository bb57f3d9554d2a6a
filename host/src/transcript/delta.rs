//! `read-transcript-delta`: pages of the entries appended after a cursor.
//!
//! A cursor is opaque to engines. It names the session, the generation of the
//! file (its identity: a file replaced on disk, even with the same session,
//! has another), the position (entries read so far, in file order) and an
//! anchor (a digest of the last line read), so a cursor that no longer fits
//! the file is answered with a reset instead of wrong entries.

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::record::{NodeKind, Record};
use crate::contract::services::TranscriptDelta;
use crate::contract::types::MessageEntry;

/// Prefix of every cursor this host issues.
const CURSOR_PREFIX: &str = "ctxbox1.";

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
    anchor: Option<String>,
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
    /// What the caller asked for; a page's first entry may exceed it.
    pub max_bytes: u64,
    /// The hard cap no page exceeds ([`MAX_PAGE_BYTES`]).
    pub cap_bytes: u64,
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
/// `max_bytes` of them, except that its first entry may be larger, up to
/// `cap_bytes`. An entry larger than `cap_bytes` is never returned: a page
/// ends before it, and when it is the next entry the answer is a reset whose
/// reason names it and whose cursor continues right after it (everything
/// before it was delivered already).
pub(crate) fn read(
    source: &DeltaSource<'_>,
    cursor: Option<&str>,
    limits: PageLimits,
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
    let mut entries = Vec::new();
    let mut bytes = 0u64;
    let mut position = start;
    while let Some(record) = source.records.get(position) {
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
            let full = entries.len() as u32 >= limits.max_messages
                || (!entries.is_empty() && bytes + size > limits.max_bytes);
            if full {
                break;
            }
            bytes += size;
            entries.push(entry);
        }
        position += 1;
    }
    let has_more = source.records[position..]
        .iter()
        .any(|record| message_of(record).is_some());
    TranscriptDelta::Page {
        cursor: cursor_at(source, position),
        entries,
        has_more,
    }
}

/// Where a cursor resumes, or why it no longer applies.
fn check(source: &DeltaSource<'_>, text: &str) -> Result<usize, String> {
    let Some(cursor) = Cursor::decode(text) else {
        return Err("the cursor was not issued by this host".into());
    };
    if cursor.session != source.session_id {
        return Err(if source.predecessor == Some(cursor.session.as_str()) {
            format!(
                "the transcript rotated after a compaction: session `{}` continues as `{}`",
                cursor.session, source.session_id
            )
        } else {
            format!(
                "the cursor belongs to session `{}`, not `{}`",
                cursor.session, source.session_id
            )
        });
    }
    if cursor.generation != source.generation {
        return Err("the transcript file was replaced".into());
    }
    let position = usize::try_from(cursor.position).unwrap_or(usize::MAX);
    let anchor_matches = match position.checked_sub(1) {
        None => cursor.anchor.is_none(),
        Some(last) => source
            .records
            .get(last)
            .is_some_and(|record| cursor.anchor.as_deref() == Some(anchor(record).as_str())),
    };
    if !anchor_matches {
        return Err("the transcript was rewritten since the cursor was issued".into());
    }
    Ok(position)
}

fn cursor_at(source: &DeltaSource<'_>, position: usize) -> String {
    Cursor {
        session: source.session_id.to_owned(),
        generation: source.generation,
        position: position as u64,
        anchor: position
            .checked_sub(1)
            .and_then(|last| source.records.get(last))
            .map(anchor),
    }
    .encode()
}

/// A short digest of a line.
fn anchor(record: &Record) -> String {
    hex::encode(&Sha256::digest(record.raw.as_bytes())[..8])
}

/// The message a record contributes to a delta: context messages and
/// compaction summaries (so an engine learns about compactions).
fn message_of(record: &Record) -> Option<MessageEntry> {
    let node = record.node.as_ref()?;
    match &node.kind {
        NodeKind::Message { entry, .. } => Some(entry.clone()),
        NodeKind::Compaction(compaction) => Some(MessageEntry {
            id: node.id.clone(),
            parent_id: node.parent_id.clone(),
            timestamp_ms: compaction.timestamp_ms,
            message: compaction.message(),
        }),
        NodeKind::Other { .. } | NodeKind::Rotated(_) => None,
    }
}

#[cfg(test)]
mod tests {
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

    fn user(id: &str, parent: &str, text: &str) -> String {
        format!(
            r#"{{"type":"message","id":"{id}","parentId":"{parent}","timestamp":"2026-01-01T00:00:00.000Z","message":{{"role":"user","content":"{text}"}}}}"#
        )
    }

    fn page(delta: TranscriptDelta) -> (String, Vec<String>, bool) {
        match delta {
            TranscriptDelta::Page {
                cursor,
                entries,
                has_more,
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
        let source = DeltaSource {
            records: &all[..3],
            session_id: "s",
            generation: 7,
            predecessor: None,
        };
        let two = PageLimits {
            max_messages: 1,
            ..LIMITS
        };
        let (cursor, ids, more) = page(read(&source, None, two));
        assert_eq!((ids, more), (vec!["a".to_owned()], true));
        let (cursor, ids, more) = page(read(&source, Some(&cursor), LIMITS));
        assert_eq!((ids, more), (vec!["b".to_owned()], false));

        // The file grows; the cursor picks up where it stopped.
        let grown = DeltaSource {
            records: &all,
            ..source
        };
        let (_, ids, more) = page(read(&grown, Some(&cursor), LIMITS));
        assert_eq!((ids, more), (vec!["c".to_owned()], false));
    }

    #[test]
    fn a_page_holds_at_least_one_entry_whatever_its_size() {
        let lines = [user("a", "", "one"), user("b", "a", "two")];
        let lines: Vec<&str> = lines.iter().map(String::as_str).collect();
        let all = records(&lines);
        let source = DeltaSource {
            records: &all,
            session_id: "s",
            generation: 1,
            predecessor: None,
        };
        let tiny = PageLimits {
            max_bytes: 1,
            ..LIMITS
        };
        let (_, ids, more) = page(read(&source, None, tiny));
        assert_eq!((ids, more), (vec!["a".to_owned()], true));
    }

    #[test]
    fn an_entry_over_the_cap_is_skipped_with_a_reset_naming_it() {
        let big = user("big", "a", &"x".repeat(500));
        let lines = [user("a", "", "one"), big.clone(), user("c", "big", "three")];
        let lines: Vec<&str> = lines.iter().map(String::as_str).collect();
        let all = records(&lines);
        let source = DeltaSource {
            records: &all,
            session_id: "s",
            generation: 1,
            predecessor: None,
        };
        let capped = PageLimits {
            cap_bytes: 400,
            ..LIMITS
        };
        // The page stops before it ...
        let (cursor, ids, more) = page(read(&source, None, capped));
        assert_eq!((ids, more), (vec!["a".to_owned()], true));
        // ... and the next read skips it, saying so, however small max_bytes is.
        let (cursor, reason) = match read(
            &source,
            Some(&cursor),
            PageLimits {
                max_bytes: 1,
                ..capped
            },
        ) {
            TranscriptDelta::Reset { cursor, reason } => (cursor, reason),
            other => panic!("expected a reset, got {other:?}"),
        };
        assert!(
            reason.contains("`big`") && reason.contains(&format!("{} bytes", big.len())),
            "{reason}"
        );
        let (_, ids, more) = page(read(&source, Some(&cursor), capped));
        assert_eq!((ids, more), (vec!["c".to_owned()], false));
    }

    #[test]
    fn resets_cursors_that_no_longer_apply() {
        let lines = [user("a", "", "one"), user("b", "a", "two")];
        let lines: Vec<&str> = lines.iter().map(String::as_str).collect();
        let all = records(&lines);
        let source = DeltaSource {
            records: &all,
            session_id: "new",
            generation: 1,
            predecessor: Some("old"),
        };
        let reset = |cursor: &str| match read(&source, Some(cursor), LIMITS) {
            TranscriptDelta::Reset { reason, cursor } => {
                assert!(Cursor::decode(&cursor).is_some_and(|c| c.position == 0));
                reason
            }
            other => panic!("expected a reset, got {other:?}"),
        };
        let foreign = |session: &str, generation, position, anchor: Option<&str>| {
            Cursor {
                session: session.into(),
                generation,
                position,
                anchor: anchor.map(str::to_owned),
            }
            .encode()
        };
        assert!(reset("garbage").contains("not issued"));
        assert!(reset(&foreign("old", 1, 1, None)).contains("rotated"));
        assert!(reset(&foreign("other", 1, 1, None)).contains("belongs to session `other`"));
        assert!(reset(&foreign("new", 2, 0, None)).contains("replaced"));
        assert!(reset(&foreign("new", 1, 1, Some("00"))).contains("rewritten"));
        assert!(reset(&foreign("new", 1, 9, None)).contains("rewritten"));
    }
}
