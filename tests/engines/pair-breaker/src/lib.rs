//! Hostile engine: `assemble` starts the prompt at the first tool result,
//! leaving out the call it answers.

use ctxbox_guest::prelude::*;

#[derive(Default)]
struct PairBreaker;

impl Engine for PairBreaker {
    fn info(&self) -> EngineInfo {
        EngineInfo::new("pair-breaker", "Pair breaker")
    }

    fn assemble(
        &mut self,
        _: &SessionRef,
        history: &History,
        _: AssembleParams,
    ) -> Result<AssembleResult, EngineError> {
        let first_result = (0..history.len())
            .find(|&index| {
                matches!(
                    history.tool_pairing(index),
                    Some(ToolPairing::ToolResult(Some(_)))
                )
            })
            .unwrap_or(0);
        Ok(AssembleResult::keep_range(first_result..history.len(), 1))
    }
}

ctxbox_guest::export_engine!(PairBreaker);
