//! Hostile engine: `assemble` sleeps for an hour in a WASI clock poll, where
//! it burns no fuel and never reaches a fuel yield; the host's own timer must.

use ctxbox_guest::prelude::*;

#[derive(Default)]
struct Sleeper;

impl Engine for Sleeper {
    fn info(&self) -> EngineInfo {
        EngineInfo::new("sleeper", "Sleeper")
    }

    fn assemble(
        &mut self,
        _: &SessionRef,
        history: &History,
        _: AssembleParams,
    ) -> Result<AssembleResult, EngineError> {
        std::thread::sleep(std::time::Duration::from_secs(3600));
        Ok(AssembleResult::keep_range(0..history.len(), 0))
    }
}

ctxbox_guest::export_engine!(Sleeper);
