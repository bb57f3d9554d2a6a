//! Hostile engine: `assemble` calls `exit(3)` instead of answering (WASI
//! 0.2 passes it on as a failure status, 1).

use ctxbox_guest::prelude::*;

#[derive(Default)]
struct Exiter;

impl Engine for Exiter {
    fn info(&self) -> EngineInfo {
        EngineInfo::new("exiter", "Exiter")
    }

    fn assemble(
        &mut self,
        _: &SessionRef,
        _: &History,
        _: AssembleParams,
    ) -> Result<AssembleResult, EngineError> {
        std::process::exit(3)
    }
}

ctxbox_guest::export_engine!(Exiter);
