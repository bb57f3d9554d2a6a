//! Compaction lifecycle events for the host that embeds the runner, where
//! the reference runs its `before_compaction` and `after_compaction` plugin
//! hooks: around every compaction the runner asks for (the native one, an
//! engine's own, a manual one). `after` follows only a compaction that
//! answered `ok` (one that compacted nothing says so with `compacted:
//! false`, as the reference's skipped-compaction hooks report
//! `compactedCount: 0`); a failed one has no `after`.

use crate::contract::types::SessionRef;

/// A compaction about to run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompactionStarting {
    /// The session, as engines see it.
    pub session: SessionRef,
    /// Messages in its context.
    pub message_count: usize,
    /// Its context's size, tokens (compaction's count).
    pub token_count: u64,
    /// What asked for it (`budget`, `overflow`, `manual`, `timeout_recovery`).
    pub trigger: Option<String>,
}

/// A compaction that answered `ok`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompactionFinished {
    /// The session now: the successor when the compaction rotated it.
    pub session: SessionRef,
    /// The session it rotated away from, if it did.
    pub previous_session_id: Option<String>,
    /// Whether anything was compacted.
    pub compacted: bool,
    /// Messages in its context now.
    pub message_count: usize,
    /// Its context's size now, tokens.
    pub token_count: u64,
    /// What asked for it.
    pub trigger: Option<String>,
}

/// Listens to a runner's compactions ([`TurnRunner::with_compaction_hooks`]).
/// Called inline: keep it quick.
///
/// [`TurnRunner::with_compaction_hooks`]: super::TurnRunner::with_compaction_hooks
pub trait CompactionHooks: Send + Sync {
    /// Before a compaction runs.
    fn before_compaction(&self, event: &CompactionStarting);
    /// After a compaction answered `ok`.
    fn after_compaction(&self, event: &CompactionFinished);
}
