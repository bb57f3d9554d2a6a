//! Hostile engine: `assemble` answers `keep(0..len)` a hundred thousand times.
//! The answer is small (a few bytes per item, well under the output cap), but
//! a host that built the prompt it describes would copy the whole history a
//! hundred thousand times.

use ctxbox_guest::prelude::*;

/// Copies of the whole history in the answer.
const COPIES: usize = 100_000;

#[derive(Default)]
struct Amplifier;

impl Engine for Amplifier {
    fn info(&self) -> EngineInfo {
        EngineInfo::new("amplifier", "Amplifier")
    }

    fn assemble(
        &mut self,
        _: &SessionRef,
        history: &History,
        _: AssembleParams,
    ) -> Result<AssembleResult, EngineError> {
        let len = history.len();
        Ok(AssembleResult {
            items: vec![AssembledItem::keep(0..len); COPIES],
            estimated_tokens: history.tokens(0..len),
            system_prompt_addition: None,
            context_projection: None,
        })
    }
}

ctxbox_guest::export_engine!(Amplifier);
