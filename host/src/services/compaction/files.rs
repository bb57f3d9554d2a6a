//! The files a compacted history read and modified, from its tool calls and
//! the previous compaction's lists (the summary's `<read-files>` and
//! `<modified-files>`, and the entry's `details`).

use std::collections::BTreeSet;

use serde_json::Value;

use crate::contract::types::{AgentMessage, ContentBlock, MessageEntry};
use crate::transcript::PreviousCompaction;

/// Argument names tools use for the file they work on.
const PATH_ARGUMENTS: [&str; 4] = ["path", "file_path", "filePath", "file"];

/// Files read (and not modified) and files modified, each sorted.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct FileLists {
    pub read: Vec<String>,
    pub modified: Vec<String>,
}

/// The file lists of `entries`, with the previous compaction's folded in.
pub(crate) fn collect(
    entries: &[MessageEntry],
    previous: Option<&PreviousCompaction>,
) -> FileLists {
    let mut read = BTreeSet::new();
    let mut modified = BTreeSet::new();
    if let Some(previous) = previous {
        read.extend(previous.read_files.iter().cloned());
        modified.extend(previous.modified_files.iter().cloned());
    }
    for entry in entries {
        let AgentMessage::Assistant { content, .. } = &entry.message else {
            continue;
        };
        for block in content {
            let ContentBlock::ToolCall {
                name,
                arguments_json,
                ..
            } = block
            else {
                continue;
            };
            let Some(path) = path_argument(arguments_json) else {
                continue;
            };
            match name.as_str() {
                "read" => {
                    read.insert(path);
                }
                "write" | "edit" | "multi_edit" | "apply_patch" => {
                    modified.insert(path);
                }
                _ => {}
            }
        }
    }
    FileLists {
        read: read.difference(&modified).cloned().collect(),
        modified: modified.into_iter().collect(),
    }
}

fn path_argument(arguments_json: &str) -> Option<String> {
    let arguments: Value = serde_json::from_str(arguments_json).ok()?;
    PATH_ARGUMENTS
        .iter()
        .find_map(|key| arguments.get(key).and_then(Value::as_str))
        .filter(|path| !path.is_empty())
        .map(str::to_owned)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::contract::types::StopReason;

    fn call(name: &str, arguments: &str) -> MessageEntry {
        MessageEntry {
            id: "a".into(),
            parent_id: None,
            timestamp_ms: 0,
            message: AgentMessage::Assistant {
                content: vec![ContentBlock::ToolCall {
                    id: "c".into(),
                    name: name.into(),
                    arguments_json: arguments.into(),
                }],
                model: None,
                provider: None,
                usage: None,
                stop_reason: StopReason::ToolUse,
                error_message: None,
            },
        }
    }

    #[test]
    fn files_read_then_edited_count_as_modified() {
        let previous = PreviousCompaction {
            summary: String::new(),
            read_files: vec!["old.rs".into()],
            modified_files: vec![],
        };
        let lists = collect(
            &[
                call("read", r#"{"path":"a.rs"}"#),
                call("read", r#"{"file_path":"b.rs","limit":5}"#),
                call("edit", r#"{"file":"a.rs","oldText":"x","newText":"y"}"#),
                call("exec", r#"{"command":"cat c.rs"}"#),
            ],
            Some(&previous),
        );
        assert_eq!(lists.read, ["b.rs", "old.rs"]);
        assert_eq!(lists.modified, ["a.rs"]);
    }
}
