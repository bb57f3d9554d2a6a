//! Test engine for `ctxbox check`: claims to own compaction, so the host
//! never compacts for it, yet its prompt is always the whole history,
//! whatever the budget. Its compaction is honest: nothing compacted.

use ctxbox_guest::prelude::*;

#[derive(Default)]
struct GreedyOwner;

impl Engine for GreedyOwner {
    fn info(&self) -> EngineInfo {
        EngineInfo::new("check-greedy-owner", "Greedy owner").owning_compaction()
    }

    fn assemble(
        &mut self,
        _: &SessionRef,
        history: &History,
        _: AssembleParams,
    ) -> Result<AssembleResult, EngineError> {
        Ok(AssembleResult::keep_range(
            0..history.len(),
            history.tokens(0..history.len()),
        ))
    }

    fn compact(
        &mut self,
        _: &SessionRef,
        history: &History,
        _: CompactParams,
    ) -> Result<CompactResult, EngineError> {
        Ok(CompactResult {
            ok: true,
            compacted: false,
            reason: Some("this engine keeps everything".into()),
            summary: None,
            first_kept_entry_id: None,
            tokens_before: history.tokens(0..history.len()),
            tokens_after: None,
            rotated_session: None,
            details: None,
        })
    }
}

ctxbox_guest::export_engine!(GreedyOwner);
