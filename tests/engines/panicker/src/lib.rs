//! Hostile engine: `assemble` panics when the user's prompt is `panic`, and
//! otherwise passes the history through, so a test can see a failed instance
//! replaced by a working one. `prepare-subagent-spawn` always panics.

use ctxbox_guest::prelude::*;

#[derive(Default)]
struct Panicker;

impl Engine for Panicker {
    fn info(&self) -> EngineInfo {
        EngineInfo::new("panicker", "Panicker")
    }

    fn assemble(
        &mut self,
        _: &SessionRef,
        history: &History,
        params: AssembleParams,
    ) -> Result<AssembleResult, EngineError> {
        if params.prompt.as_deref() == Some("panic") {
            panic!("engine exploded on a history of {} entries", history.len());
        }
        Ok(AssembleResult::keep_range(
            0..history.len(),
            history.tokens(0..history.len()),
        ))
    }

    fn prepare_subagent_spawn(
        &mut self,
        spawn: ctxbox_guest::SubagentSpawn,
    ) -> Result<Option<String>, EngineError> {
        panic!("cannot prepare {}", spawn.child_session_key);
    }
}

ctxbox_guest::export_engine!(Panicker);
