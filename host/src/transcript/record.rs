//! One line of a transcript as the store holds it: the original text (written
//! back byte for byte) and what the line means for the conversation tree.

use serde_json::Value;

use super::wire::{
    LineHead, WireBranchSummary, WireCompaction, WireCustomMessage, WireMessage, timestamp_millis,
};
use crate::contract::tokens::{self, Tokenizer};
use crate::contract::types::{AgentMessage, MessageEntry, RotatedSession};

/// `customType` of the `custom` entry that records a rotation in the old file.
pub(crate) const ROTATION_MARKER: &str = "ctxbox.rotated";
/// `customType` of the `custom` entry that takes a failed turn's messages
/// off the active branch (they stay in the file, on a branch of their own).
pub(crate) const ROLLBACK_MARKER: &str = "ctxbox.turn-rolled-back";

/// A line of the transcript after the header.
#[derive(Debug)]
pub(crate) struct Record {
    /// The line as it is in the file, without its newline.
    pub raw: Box<str>,
    /// The entry, when the line is one; blank and unreadable lines are kept
    /// only as text.
    pub node: Option<Node>,
}

/// An entry of the conversation tree.
#[derive(Debug)]
pub(crate) struct Node {
    pub id: String,
    pub parent_id: Option<String>,
    pub kind: NodeKind,
    /// Why an entry of a known type was not understood (it is then
    /// [`NodeKind::Other`]: kept in the tree, out of the context).
    pub misshapen: Option<String>,
}

/// What an entry contributes.
#[derive(Debug)]
pub(crate) enum NodeKind {
    /// A message of the model's context (`message`, `custom_message`,
    /// `branch_summary`), with its cached token estimate.
    Message { entry: MessageEntry, tokens: u64 },
    /// A `compaction` entry.
    Compaction(Compaction),
    /// The marker ctxbox appends to a transcript it rotated away from.
    Rotated(RotatedSession),
    /// Any other entry (`model_change`, `thinking_level_change`, `custom`,
    /// `label`, `session_info`, types this host does not know, and messages
    /// that stay out of the context).
    Other { entry_type: String },
}

/// A `compaction` entry's meaning.
#[derive(Debug)]
pub(crate) struct Compaction {
    pub summary: String,
    pub first_kept_entry_id: String,
    pub tokens_before: u64,
    pub timestamp_ms: i64,
    /// `details.readFiles` / `details.modifiedFiles`, when present.
    pub read_files: Vec<String>,
    pub modified_files: Vec<String>,
    /// Estimated tokens of the summary as a context message.
    pub tokens: u64,
}

impl Compaction {
    /// The summary as the message that stands in for the compacted history.
    pub fn message(&self) -> AgentMessage {
        AgentMessage::CompactionSummary {
            summary: self.summary.clone(),
            tokens_before: self.tokens_before,
        }
    }
}

/// Why a line is not an entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct LineError(pub String);

/// Parses one line after the header. Blank lines are kept without a node; a
/// line that is not a JSON object with a `type` is an error. A known entry
/// type whose fields do not have the expected shape stays in the tree (its
/// children must not be cut off) but contributes no message, and says why in
/// [`Node::misshapen`].
/// Message estimates are counted with `tokenizer` and cached in the node.
pub(crate) fn parse(raw: &str, tokenizer: Tokenizer) -> Result<Option<Node>, LineError> {
    if raw.trim().is_empty() {
        return Ok(None);
    }
    let head: LineHead = serde_json::from_str(raw)
        .map_err(|error| LineError(format!("not a JSON entry: {error}")))?;
    let Some(id) = head.id else {
        return Err(LineError(format!(
            "a `{}` entry without an id",
            head.entry_type
        )));
    };
    if head.entry_type == "session" {
        return Err(LineError("a second session header".into()));
    }
    let entry_timestamp = head.timestamp.as_ref().and_then(timestamp_millis);
    let (kind, misshapen) = match kind(
        &head.entry_type,
        raw,
        &id,
        &head.parent_id,
        entry_timestamp,
        tokenizer,
    ) {
        Ok(kind) => (kind, None),
        Err(reason) => (
            NodeKind::Other {
                entry_type: head.entry_type.clone(),
            },
            Some(format!(
                "a `{}` entry (`{id}`) of an unknown shape, left out of the context: {reason}",
                head.entry_type
            )),
        ),
    };
    Ok(Some(Node {
        id,
        parent_id: head.parent_id,
        kind,
        misshapen,
    }))
}

/// What the entry contributes, or why an entry of a known type could not be
/// read as one.
fn kind(
    entry_type: &str,
    raw: &str,
    id: &str,
    parent_id: &Option<String>,
    entry_timestamp: Option<i64>,
    tokenizer: Tokenizer,
) -> Result<NodeKind, String> {
    let message = |message: AgentMessage, timestamp: Option<i64>| {
        let tokens = tokens::count_message(&message, tokenizer);
        NodeKind::Message {
            entry: MessageEntry {
                id: id.to_owned(),
                parent_id: parent_id.clone(),
                timestamp_ms: timestamp.or(entry_timestamp).unwrap_or(0),
                message,
            },
            tokens,
        }
    };
    let other = || NodeKind::Other {
        entry_type: entry_type.to_owned(),
    };
    let misshapen = |error: serde_json::Error| error.to_string();
    Ok(match entry_type {
        "message" => {
            #[derive(serde::Deserialize)]
            struct Line {
                message: WireMessage,
            }
            let line = serde_json::from_str::<Line>(raw).map_err(misshapen)?;
            match line.message.into_message() {
                Some((parsed, timestamp)) => message(parsed, timestamp),
                // Kept out of the context on purpose (e.g. excluded commands).
                None => other(),
            }
        }
        "custom_message" => {
            let custom = serde_json::from_str::<WireCustomMessage>(raw).map_err(misshapen)?;
            message(custom.into_message(), None)
        }
        "branch_summary" => {
            let branch = serde_json::from_str::<WireBranchSummary>(raw).map_err(misshapen)?;
            // The reference leaves empty branch summaries out of the context.
            if branch.summary.is_empty() {
                other()
            } else {
                message(
                    AgentMessage::BranchSummary {
                        summary: branch.summary,
                        from_id: branch.from_id,
                    },
                    None,
                )
            }
        }
        "compaction" => match serde_json::from_str::<WireCompaction>(raw) {
            Ok(compaction) => {
                let tokens_before = compaction.tokens_before();
                let (read_files, modified_files) = file_lists(compaction.details.as_ref());
                let mut compaction = Compaction {
                    summary: compaction.summary,
                    first_kept_entry_id: compaction.first_kept_entry_id,
                    tokens_before,
                    timestamp_ms: entry_timestamp.unwrap_or(0),
                    read_files,
                    modified_files,
                    tokens: 0,
                };
                compaction.tokens = tokens::count_message(&compaction.message(), tokenizer);
                NodeKind::Compaction(compaction)
            }
            Err(error) => return Err(misshapen(error)),
        },
        "custom" => {
            #[derive(serde::Deserialize)]
            #[serde(rename_all = "camelCase")]
            struct Marker {
                custom_type: String,
                data: Data,
            }
            #[derive(serde::Deserialize)]
            #[serde(rename_all = "camelCase")]
            struct Data {
                session_id: String,
                session_file: String,
            }
            match serde_json::from_str::<Marker>(raw) {
                Ok(marker) if marker.custom_type == ROTATION_MARKER => {
                    NodeKind::Rotated(RotatedSession {
                        session_id: marker.data.session_id,
                        session_file: marker.data.session_file,
                    })
                }
                // Any other `custom` entry is the extension's business.
                _ => other(),
            }
        }
        _ => other(),
    })
}

/// `readFiles` and `modifiedFiles` of a compaction's details.
fn file_lists(details: Option<&Value>) -> (Vec<String>, Vec<String>) {
    let list = |key: &str| -> Vec<String> {
        details
            .and_then(|details| details.get(key))
            .and_then(Value::as_array)
            .map(|items| {
                items
                    .iter()
                    .filter_map(Value::as_str)
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default()
    };
    (list("readFiles"), list("modifiedFiles"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(raw: &str) -> Result<Option<Node>, LineError> {
        super::parse(raw, Tokenizer::Estimate)
    }

    #[test]
    fn reads_message_entries_with_cached_estimates() {
        let node = parse(
            r#"{"type":"message","id":"a","parentId":null,"timestamp":"2026-01-01T00:00:00.000Z","message":{"role":"user","content":"hello","timestamp":7}}"#,
        )
        .expect("valid line")
        .expect("an entry");
        assert_eq!(node.id, "a");
        let NodeKind::Message { entry, tokens } = node.kind else {
            panic!("a message")
        };
        assert_eq!(entry.timestamp_ms, 7, "the message's own timestamp wins");
        assert_eq!(tokens, tokens::estimate_message(&entry.message));
    }

    #[test]
    fn keeps_unknown_and_misshapen_entries_in_the_tree() {
        let node = parse(r#"{"type":"future_thing","id":"x","parentId":"a","payload":[1]}"#)
            .expect("valid line")
            .expect("an entry");
        assert_eq!(node.parent_id.as_deref(), Some("a"));
        assert!(
            matches!(node.kind, NodeKind::Other { ref entry_type } if entry_type == "future_thing")
        );
        assert_eq!(node.misshapen, None, "unknown types are not a problem");

        let node =
            parse(r#"{"type":"message","id":"y","parentId":"x","message":{"role":"alien"}}"#)
                .expect("valid line")
                .expect("an entry");
        assert!(matches!(node.kind, NodeKind::Other { .. }));
        assert!(
            node.misshapen
                .is_some_and(|why| why.contains("`message` entry (`y`)"))
        );

        let node = parse(
            r#"{"type":"message","id":"z","parentId":"y","message":{"role":"assistant","content":[{"type":"toolCall","name":"read","arguments":{}}]}}"#,
        )
        .expect("valid line")
        .expect("an entry");
        assert!(matches!(node.kind, NodeKind::Other { .. }));
        assert!(
            node.misshapen.is_some_and(|why| why.contains("`id`")),
            "a tool call without an id is reported"
        );
    }

    #[test]
    fn reads_compactions_with_their_file_lists() {
        let node = parse(
            r#"{"type":"compaction","id":"c","parentId":"b","timestamp":"2026-01-01T00:00:00.000Z","summary":"s","firstKeptEntryId":"a","tokensBefore":123,"details":{"readFiles":["r"],"modifiedFiles":["m"]},"fromHook":true}"#,
        )
        .expect("valid line")
        .expect("an entry");
        let NodeKind::Compaction(compaction) = node.kind else {
            panic!("a compaction")
        };
        assert_eq!(compaction.first_kept_entry_id, "a");
        assert_eq!(compaction.tokens_before, 123);
        assert_eq!(compaction.read_files, ["r"]);
        assert_eq!(compaction.modified_files, ["m"]);
        assert_eq!(
            compaction.tokens,
            tokens::estimate_message(&compaction.message())
        );
    }

    #[test]
    fn rejects_lines_that_are_not_entries() {
        assert!(parse("{not json").is_err());
        assert!(parse(r#"{"type":"message"}"#).is_err(), "no id");
        assert!(parse(r#"{"type":"session","id":"s"}"#).is_err());
        assert_eq!(parse("   ").expect("blank is fine").map(|n| n.id), None);
    }
}
