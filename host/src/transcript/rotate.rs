//! The contents of the transcript a compaction rotates into
//! (`truncateAfterCompaction`): a new header whose `parentSession` is the old
//! file, the latest model, thinking-level and session-info entries from
//! before the cut (so the session keeps its settings), then the active path
//! from the first kept entry to the compaction. Entries are copied byte for
//! byte except where their `parentId` must change to keep the chain whole.

use std::path::Path;

use serde_json::{Map, Value};

use super::error::{CorruptLine, TranscriptError};
use super::record::{NodeKind, Record};
use super::wire::SessionHeader;

/// Entry types whose latest instance before the cut is carried over.
const CARRIED_SETTINGS: [&str; 3] = ["model_change", "thinking_level_change", "session_info"];

/// The new file's text (each line ending in `\n`).
pub(crate) fn compose(
    old_path: &Path,
    header: &SessionHeader,
    records: &[Record],
    path: &[usize],
    first_kept_entry_id: &str,
) -> Result<String, TranscriptError> {
    let first_kept = path
        .iter()
        .position(|&index| {
            records[index]
                .node
                .as_ref()
                .is_some_and(|node| node.id == first_kept_entry_id)
        })
        .ok_or_else(|| TranscriptError::UnknownEntry {
            path: old_path.to_owned(),
            id: first_kept_entry_id.to_owned(),
        })?;

    // The latest of each carried setting before the cut, in path order.
    let mut carried: Vec<usize> = CARRIED_SETTINGS
        .iter()
        .filter_map(|wanted| {
            path[..first_kept].iter().rposition(|&index| {
                matches!(
                    records[index].node.as_ref().map(|node| &node.kind),
                    Some(NodeKind::Other { entry_type }) if entry_type == wanted
                )
            })
        })
        .collect();
    carried.sort_unstable();

    let header_line =
        serde_json::to_string(header).map_err(|error| invalid(old_path, 1, &error))?;
    let mut contents = header_line;
    contents.push('\n');
    let mut previous_id: Option<&str> = None;
    for &position in carried.iter().chain(std::iter::once(&first_kept)) {
        let record = &records[path[position]];
        contents.push_str(&reparented(
            old_path,
            path[position] + 2,
            &record.raw,
            previous_id,
        )?);
        contents.push('\n');
        previous_id = record.node.as_ref().map(|node| node.id.as_str());
    }
    for &index in &path[first_kept + 1..] {
        contents.push_str(&records[index].raw);
        contents.push('\n');
    }
    Ok(contents)
}

/// `raw` (file line `line`) with its `parentId` set to `parent`, other
/// fields in their order.
fn reparented(
    old_path: &Path,
    line: usize,
    raw: &str,
    parent: Option<&str>,
) -> Result<String, TranscriptError> {
    let mut entry: Map<String, Value> =
        serde_json::from_str(raw).map_err(|error| invalid(old_path, line, &error))?;
    entry.insert("parentId".into(), parent.map_or(Value::Null, Value::from));
    serde_json::to_string(&entry).map_err(|error| invalid(old_path, line, &error))
}

fn invalid(path: &Path, line: usize, error: &serde_json::Error) -> TranscriptError {
    TranscriptError::InvalidAppend {
        path: path.to_owned(),
        reason: CorruptLine {
            path: path.to_owned(),
            line,
            reason: format!("cannot be copied into the rotated transcript: {error}"),
        }
        .to_string(),
    }
}
