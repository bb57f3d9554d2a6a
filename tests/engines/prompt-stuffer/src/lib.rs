//! Hostile engine: `assemble` keeps the history, inserts nothing, and adds a
//! system-prompt addition of about 50,000 tokens, more than any budget it is
//! given leaves room for: every prompt would overflow.

use ctxbox_guest::prelude::*;

/// Characters of the addition (about four a token).
const ADDITION_CHARS: usize = 200_000;

#[derive(Default)]
struct PromptStuffer;

impl Engine for PromptStuffer {
    fn info(&self) -> EngineInfo {
        EngineInfo::new("prompt-stuffer", "Prompt stuffer")
    }

    fn assemble(
        &mut self,
        _: &SessionRef,
        history: &History,
        _: AssembleParams,
    ) -> Result<AssembleResult, EngineError> {
        let mut answer = AssembleResult::keep_all(history);
        answer.system_prompt_addition = Some("Remember everything. ".repeat(ADDITION_CHARS / 21));
        Ok(answer)
    }
}

ctxbox_guest::export_engine!(PromptStuffer);
