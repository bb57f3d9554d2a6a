//! Hostile engine: `assemble` passes the history through, and `dispose`
//! sleeps for an hour (in a WASI clock poll: a host wait, burning no fuel).

use ctxbox_guest::prelude::*;

#[derive(Default)]
struct SlowDisposer;

impl Engine for SlowDisposer {
    fn info(&self) -> EngineInfo {
        EngineInfo::new("slow-disposer", "Slow disposer")
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

    fn dispose(&mut self) -> Result<(), EngineError> {
        std::thread::sleep(std::time::Duration::from_secs(3600));
        Ok(())
    }
}

ctxbox_guest::export_engine!(SlowDisposer);
