//! Hostile engine: `assemble` keeps allocating 1 MiB blocks until the host's
//! memory budget stops it.

use ctxbox_guest::prelude::*;

#[derive(Default)]
struct MemoryBomb;

impl Engine for MemoryBomb {
    fn info(&self) -> EngineInfo {
        EngineInfo::new("memory-bomb", "Memory bomb")
    }

    fn assemble(
        &mut self,
        _: &SessionRef,
        _: &History,
        _: AssembleParams,
    ) -> Result<AssembleResult, EngineError> {
        let mut hoard: Vec<Vec<u8>> = Vec::new();
        loop {
            hoard.push(std::hint::black_box(vec![1u8; 1 << 20]));
        }
    }
}

ctxbox_guest::export_engine!(MemoryBomb);
