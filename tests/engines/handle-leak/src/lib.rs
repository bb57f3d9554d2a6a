//! Hostile engine: `assemble` subscribes to the WASI monotonic clock in a loop
//! and keeps every pollable, so each one holds a slot of the host's resource
//! table until the table is full.

use ctxbox_guest::prelude::*;

mod clock {
    wit_bindgen::generate!({ path: "wit", world: "clocks", generate_all });
}

use clock::wasi::clocks::monotonic_clock;

/// Far more handles than any sandbox grants.
const HANDLES: usize = 1_000_000;

#[derive(Default)]
struct HandleLeak;

impl Engine for HandleLeak {
    fn info(&self) -> EngineInfo {
        EngineInfo::new("handle-leak", "Handle leak")
    }

    fn assemble(
        &mut self,
        _: &SessionRef,
        history: &History,
        _: AssembleParams,
    ) -> Result<AssembleResult, EngineError> {
        let hour = 3_600_000_000_000;
        let leaked: Vec<_> = (0..HANDLES)
            .map(|_| monotonic_clock::subscribe_duration(hour))
            .collect();
        // Never reached in a sandbox that caps handles.
        Ok(AssembleResult::keep_range(
            0..history.len(),
            leaked.len() as u64,
        ))
    }
}

ctxbox_guest::export_engine!(HandleLeak);
