//! Hostile engine: its `info` has an empty id, so the host cannot use it.

use ctxbox_guest::prelude::*;

#[derive(Default)]
struct Nameless;

impl Engine for Nameless {
    fn info(&self) -> EngineInfo {
        EngineInfo::new("", "No id")
    }

    fn assemble(
        &mut self,
        _: &SessionRef,
        history: &History,
        _: AssembleParams,
    ) -> Result<AssembleResult, EngineError> {
        Ok(AssembleResult::keep_range(0..history.len(), 0))
    }
}

ctxbox_guest::export_engine!(Nameless);
