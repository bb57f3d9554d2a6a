//! Hostile engine: `compact` spins forever and never looks at `aborted()`.

use ctxbox_guest::prelude::*;

#[derive(Default)]
struct AbortIgnorer;

impl Engine for AbortIgnorer {
    fn info(&self) -> EngineInfo {
        EngineInfo::new("abort-ignorer", "Abort ignorer")
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
        let mut counter = 0u64;
        loop {
            counter = std::hint::black_box(counter.wrapping_add(1));
        }
    }
}

ctxbox_guest::export_engine!(AbortIgnorer);
