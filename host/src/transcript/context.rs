//! Rebuilding the model's context from the entry tree, as the reference's
//! `buildSessionContext` does: walk `parentId` back from the leaf, then, if a
//! compaction lies on that path, start with its summary followed by the
//! entries from its `firstKeptEntryId` on.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use super::record::{NodeKind, Record};
use crate::contract::history::History;
use crate::contract::types::MessageEntry;

/// The active context of a transcript and what compaction needs to know
/// about how it was built.
#[derive(Debug, Clone)]
pub struct ActiveContext {
    /// The context, oldest entry first, with cached token estimates.
    pub history: History,
    /// Whether entry 0 is the latest compaction's summary.
    pub starts_with_summary: bool,
    /// The first entry appended after the latest compaction (entries before it
    /// were counted in the compacted context, so their reported usage is
    /// stale). 0 when there was no compaction.
    pub fresh_from: usize,
    /// The latest compaction on the active path.
    pub previous_compaction: Option<PreviousCompaction>,
}

/// What a new compaction folds in from the one before it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PreviousCompaction {
    /// Its summary.
    pub summary: String,
    /// Files it recorded as read.
    pub read_files: Vec<String>,
    /// Files it recorded as modified.
    pub modified_files: Vec<String>,
}

/// Record indices from the root to `leaf` (inclusive), following `parentId`.
/// The walk stops at a parent that is not in the file (or a cycle), as the
/// reference's does.
pub(crate) fn active_path(
    records: &[Record],
    by_id: &HashMap<String, usize>,
    leaf: Option<usize>,
) -> Vec<usize> {
    let mut path = Vec::new();
    let mut seen = HashSet::new();
    let mut current = leaf;
    while let Some(index) = current {
        if !seen.insert(index) {
            tracing::warn!(
                entry = index,
                "transcript entries form a parentId cycle; the walk stops there"
            );
            break;
        }
        path.push(index);
        current = records[index]
            .node
            .as_ref()
            .and_then(|node| node.parent_id.as_deref())
            .and_then(|parent| by_id.get(parent).copied());
    }
    path.reverse();
    path
}

/// The context the path leads to.
pub(crate) fn build(records: &[Record], path: &[usize]) -> ActiveContext {
    let latest_compaction = path
        .iter()
        .enumerate()
        .rev()
        .find_map(|(position, &index)| {
            let node = records[index].node.as_ref()?;
            match &node.kind {
                NodeKind::Compaction(compaction) => Some((position, node, compaction)),
                _ => None,
            }
        });
    let mut messages = Messages::default();
    let Some((position, node, compaction)) = latest_compaction else {
        messages.extend(records, path);
        return messages.into_context(false, 0, None);
    };
    messages.entries.push(MessageEntry {
        id: node.id.clone(),
        parent_id: node.parent_id.clone(),
        timestamp_ms: compaction.timestamp_ms,
        message: compaction.message(),
    });
    messages.estimates.push(compaction.tokens);
    let first_kept = path[..position].iter().position(|&index| {
        records[index]
            .node
            .as_ref()
            .is_some_and(|node| node.id == compaction.first_kept_entry_id)
    });
    if let Some(first_kept) = first_kept {
        messages.extend(records, &path[first_kept..position]);
    }
    let fresh_from = messages.entries.len();
    messages.extend(records, &path[position + 1..]);
    let previous = PreviousCompaction {
        summary: compaction.summary.clone(),
        read_files: compaction.read_files.clone(),
        modified_files: compaction.modified_files.clone(),
    };
    messages.into_context(true, fresh_from, Some(previous))
}

/// The context [`build`] answers once `records[first_new..]` are added to a
/// transcript whose context was `previous`, built for the path ending at
/// `previous_leaf`: when the new entries continue that path one after the
/// other and none is a compaction, `previous` with their messages appended
/// (reusing its messages in place when no one else holds it, so a turn's
/// appends cost the new messages, not a copy of the conversation); `None`
/// otherwise (the context is then built anew). `by_id` already holds the new
/// entries.
pub(crate) fn grown(
    previous: Arc<ActiveContext>,
    records: &[Record],
    by_id: &HashMap<String, usize>,
    previous_leaf: Option<usize>,
    first_new: usize,
) -> Option<ActiveContext> {
    let mut leaf = previous_leaf;
    let mut messages = Messages::default();
    for (index, record) in records.iter().enumerate().skip(first_new) {
        let Some(node) = &record.node else {
            continue;
        };
        let parent = node
            .parent_id
            .as_deref()
            .and_then(|parent| by_id.get(parent).copied());
        if parent != leaf || matches!(node.kind, NodeKind::Compaction(_)) {
            return None;
        }
        leaf = Some(index);
        messages.extend(records, &[index]);
    }
    let previous = Arc::try_unwrap(previous).unwrap_or_else(|shared| ActiveContext::clone(&shared));
    let keep = previous.history.len();
    Some(ActiveContext {
        history: previous
            .history
            .edited(keep, messages.entries, &messages.estimates),
        ..previous
    })
}

/// The context's messages with their cached estimates, as they are collected.
#[derive(Default)]
struct Messages {
    entries: Vec<MessageEntry>,
    estimates: Vec<u64>,
}

impl Messages {
    /// Adds the messages among `indices` (other entries add nothing, and
    /// neither do runtime-context carriers: no engine or later prompt sees
    /// one).
    fn extend(&mut self, records: &[Record], indices: &[usize]) {
        for &index in indices {
            if let Some(NodeKind::Message { entry, tokens }) =
                records[index].node.as_ref().map(|node| &node.kind)
                && !entry.message.is_runtime_context_carrier()
            {
                self.entries.push(entry.clone());
                self.estimates.push(*tokens);
            }
        }
    }

    fn into_context(
        self,
        starts_with_summary: bool,
        fresh_from: usize,
        previous_compaction: Option<PreviousCompaction>,
    ) -> ActiveContext {
        ActiveContext {
            history: History::with_estimates(self.entries, &self.estimates),
            starts_with_summary,
            fresh_from,
            previous_compaction,
        }
    }
}
