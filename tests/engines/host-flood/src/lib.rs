//! Hostile engine: `assemble` hands the host the same 1 MiB message for
//! estimation again and again, far past the per-call input budget.

use ctxbox_guest::prelude::*;

#[derive(Default)]
struct HostFlood;

impl Engine for HostFlood {
    fn info(&self) -> EngineInfo {
        EngineInfo::new("host-flood", "Host flood")
    }

    fn assemble(
        &mut self,
        _: &SessionRef,
        history: &History,
        _: AssembleParams,
    ) -> Result<AssembleResult, EngineError> {
        let payload = MessageEntry {
            id: "flood".into(),
            parent_id: None,
            timestamp_ms: 0,
            message: AgentMessage::user_text("y".repeat(1 << 20)),
        };
        let batch = [payload];
        let mut tokens = 0;
        for _ in 0..10_000 {
            tokens += host::estimate_tokens(&batch);
        }
        Ok(AssembleResult::keep_range(0..history.len(), tokens))
    }
}

ctxbox_guest::export_engine!(HostFlood);
