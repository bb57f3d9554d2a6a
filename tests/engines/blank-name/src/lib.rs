//! Hostile engine: its `info` has an id but a blank name, which the host
//! refuses at selection. Its `dispose` logs `disposed`, so tests see that
//! the refused instance was disposed.

use ctxbox_guest::prelude::*;

#[derive(Default)]
struct BlankName;

impl Engine for BlankName {
    fn info(&self) -> EngineInfo {
        EngineInfo::new("blank-name", "  ")
    }

    fn assemble(
        &mut self,
        _: &SessionRef,
        history: &History,
        _: AssembleParams,
    ) -> Result<AssembleResult, EngineError> {
        Ok(AssembleResult::keep_range(0..history.len(), 0))
    }

    fn dispose(&mut self) -> Result<(), EngineError> {
        ctxbox_guest::host::log(LogLevel::Info, "disposed");
        Ok(())
    }
}

ctxbox_guest::export_engine!(BlankName);
