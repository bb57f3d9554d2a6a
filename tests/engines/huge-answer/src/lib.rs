//! Hostile engine: `assemble` inserts a 24 MiB message, over the host's
//! 16 MiB answer cap.

use ctxbox_guest::prelude::*;

#[derive(Default)]
struct HugeAnswer;

impl Engine for HugeAnswer {
    fn info(&self) -> EngineInfo {
        EngineInfo::new("huge-answer", "Huge answer")
    }

    fn assemble(
        &mut self,
        _: &SessionRef,
        _: &History,
        _: AssembleParams,
    ) -> Result<AssembleResult, EngineError> {
        let blob = "x".repeat(24 << 20);
        Ok(AssembleResult {
            items: vec![AssembledItem::Insert(AgentMessage::user_text(blob))],
            estimated_tokens: 1,
            system_prompt_addition: None,
            context_projection: None,
        })
    }
}

ctxbox_guest::export_engine!(HugeAnswer);
