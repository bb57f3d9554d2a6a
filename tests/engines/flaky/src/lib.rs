//! Hostile engine: passes the history through, but its fifth `assemble` on
//! an instance panics.

use ctxbox_guest::prelude::*;

#[derive(Default)]
struct Flaky {
    calls: u32,
}

impl Engine for Flaky {
    fn info(&self) -> EngineInfo {
        EngineInfo::new("flaky", "Flaky")
    }

    fn assemble(
        &mut self,
        _: &SessionRef,
        history: &History,
        _: AssembleParams,
    ) -> Result<AssembleResult, EngineError> {
        self.calls += 1;
        if self.calls == 5 {
            panic!("fifth call");
        }
        Ok(AssembleResult::keep_range(
            0..history.len(),
            history.tokens(0..history.len()),
        ))
    }
}

ctxbox_guest::export_engine!(Flaky);
