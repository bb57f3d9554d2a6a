//! Hostile engine: `assemble` runs a finite but enormous computation (naive
//! Fibonacci), so its fuel budget runs out long before it would finish.

use ctxbox_guest::prelude::*;

#[derive(Default)]
struct FuelBomb;

fn fibonacci(n: u64) -> u64 {
    if n < 2 {
        n
    } else {
        fibonacci(n - 1).wrapping_add(fibonacci(n - 2))
    }
}

impl Engine for FuelBomb {
    fn info(&self) -> EngineInfo {
        EngineInfo::new("fuel-bomb", "Fuel bomb")
    }

    fn assemble(
        &mut self,
        _: &SessionRef,
        history: &History,
        _: AssembleParams,
    ) -> Result<AssembleResult, EngineError> {
        let estimate = fibonacci(std::hint::black_box(90));
        Ok(AssembleResult::keep_range(0..history.len(), estimate))
    }
}

ctxbox_guest::export_engine!(FuelBomb);
