//! Hostile engine: `assemble` recurses without end until the wasm stack
//! overflows. Frames hold only scalars: an array per frame would live on
//! Rust's shadow stack in linear memory and overflow that first (an
//! out-of-bounds trap, not a stack overflow).

use ctxbox_guest::prelude::*;

#[derive(Default)]
struct DeepRecursion;

fn descend(depth: u64) -> u64 {
    // black_box keeps the call out of tail position, so it cannot become a loop.
    std::hint::black_box(descend(depth + 1)).wrapping_add(depth)
}

impl Engine for DeepRecursion {
    fn info(&self) -> EngineInfo {
        EngineInfo::new("deep-recursion", "Deep recursion")
    }

    fn assemble(
        &mut self,
        _: &SessionRef,
        history: &History,
        _: AssembleParams,
    ) -> Result<AssembleResult, EngineError> {
        let depth = descend(0);
        Ok(AssembleResult::keep_range(0..history.len(), depth))
    }
}

ctxbox_guest::export_engine!(DeepRecursion);
