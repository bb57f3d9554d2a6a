//! Hostile engine: `assemble` writes ten million log records.

use ctxbox_guest::prelude::*;

#[derive(Default)]
struct LogFlood;

impl Engine for LogFlood {
    fn info(&self) -> EngineInfo {
        EngineInfo::new("log-flood", "Log flood")
    }

    fn assemble(
        &mut self,
        _: &SessionRef,
        history: &History,
        _: AssembleParams,
    ) -> Result<AssembleResult, EngineError> {
        for record in 0..10_000_000u32 {
            host::log(LogLevel::Info, &format!("record {record}"));
        }
        Ok(AssembleResult::keep_range(
            0..history.len(),
            history.tokens(0..history.len()),
        ))
    }
}

ctxbox_guest::export_engine!(LogFlood);
