//! Hostile engine for soak tests: `assemble` passes the history through, but
//! a tenth of its calls, at random, panic, spin until the deadline, or
//! answer a keep range outside the history.

use std::collections::hash_map::RandomState;
use std::hash::BuildHasher;

use ctxbox_guest::prelude::*;

#[derive(Default)]
struct Chaos;

/// A random number from the host's randomness (WASI `random`).
fn roll() -> u64 {
    RandomState::new().hash_one(0u8)
}

impl Engine for Chaos {
    fn info(&self) -> EngineInfo {
        EngineInfo::new("chaos", "Chaos")
    }

    fn assemble(
        &mut self,
        _: &SessionRef,
        history: &History,
        _: AssembleParams,
    ) -> Result<AssembleResult, EngineError> {
        let len = history.len();
        match roll() % 30 {
            0 => panic!("chaos: a random trap"),
            1 => loop {
                std::hint::spin_loop();
            },
            2 => Ok(AssembleResult::keep_range(0..len + 7, 0)),
            _ => Ok(AssembleResult::keep_range(0..len, history.tokens(0..len))),
        }
    }
}

ctxbox_guest::export_engine!(Chaos);
