//! Hostile engine: `assemble` writes `lie/mark` to its state, then answers a
//! keep range past the end of the history, which the guard refuses. The
//! refused call's write must not persist.

use ctxbox_guest::prelude::*;

#[derive(Default)]
struct StateThenLie;

impl Engine for StateThenLie {
    fn info(&self) -> EngineInfo {
        EngineInfo::new("state-then-lie", "State then lie")
    }

    fn assemble(
        &mut self,
        _: &SessionRef,
        history: &History,
        _: AssembleParams,
    ) -> Result<AssembleResult, EngineError> {
        host::state::set("lie/mark", b"kept from a refused answer")?;
        Ok(AssembleResult::keep_range(0..history.len() + 5, 0))
    }
}

ctxbox_guest::export_engine!(StateThenLie);
