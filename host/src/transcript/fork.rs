//! The transcript a subagent's forked context starts from: a new header
//! naming the parent's file, then the parent's active branch up to its last
//! completed answer (an assistant message that did not stop to call a tool),
//! as the reference's parent fork copies it. An abandoned branch, and a turn
//! still in progress (the tool call spawning the child among it), stay
//! behind. Entries are copied byte for byte: on the active branch each
//! entry's parent is the one before it, so the chain stays whole.

use super::record::{NodeKind, Record};
use super::wire::SessionHeader;
use crate::contract::types::{AgentMessage, StopReason};

/// The new file's text (each line ending in `\n`).
pub(crate) fn compose(
    header: &SessionHeader,
    records: &[Record],
    branch: &[usize],
) -> Result<String, serde_json::Error> {
    let completed = branch
        .iter()
        .rposition(|&index| is_completed_answer(&records[index]))
        .map_or(0, |position| position + 1);
    let mut contents = serde_json::to_string(header)?;
    contents.push('\n');
    for &index in &branch[..completed] {
        contents.push_str(&records[index].raw);
        contents.push('\n');
    }
    Ok(contents)
}

fn is_completed_answer(record: &Record) -> bool {
    matches!(
        record.node.as_ref().map(|node| &node.kind),
        Some(NodeKind::Message { entry, .. }) if matches!(
            entry.message,
            AgentMessage::Assistant { stop_reason, .. } if stop_reason != StopReason::ToolUse
        )
    )
}
