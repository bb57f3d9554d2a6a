//! Hostile engine: `compact` never finishes but keeps calling
//! `report-progress`, trying to extend its watchdog forever.

use ctxbox_guest::prelude::*;

#[derive(Default)]
struct ProgressSpammer;

impl Engine for ProgressSpammer {
    fn info(&self) -> EngineInfo {
        EngineInfo::new("progress-spammer", "Progress spammer")
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
        _: &History,
        _: CompactParams,
    ) -> Result<CompactResult, EngineError> {
        loop {
            host::report_progress();
        }
    }
}

ctxbox_guest::export_engine!(ProgressSpammer);
