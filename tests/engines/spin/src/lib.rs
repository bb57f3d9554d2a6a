//! Hostile engine: `assemble` loops forever. The host must stop it at its
//! deadline (timeout), or at its fuel budget when that is smaller.

use ctxbox_guest::prelude::*;

#[derive(Default)]
struct Spin;

impl Engine for Spin {
    fn info(&self) -> EngineInfo {
        EngineInfo::new("spin", "Spin")
    }

    fn assemble(
        &mut self,
        _: &SessionRef,
        _: &History,
        _: AssembleParams,
    ) -> Result<AssembleResult, EngineError> {
        let mut counter = 0u64;
        loop {
            counter = std::hint::black_box(counter.wrapping_add(1));
        }
    }
}

ctxbox_guest::export_engine!(Spin);
