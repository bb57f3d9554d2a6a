//! Hostile engine: `assemble` writes ten million log records. With prompt
//! `records <n>` it writes `n` short records instead, and with `long <n>` one
//! record of `n` bytes, so tests can watch the limits short of a flood.

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
        params: AssembleParams,
    ) -> Result<AssembleResult, EngineError> {
        let prompt = params.prompt.unwrap_or_default();
        let count = |prefix: &str| {
            prompt
                .strip_prefix(prefix)
                .and_then(|n| n.trim().parse::<u32>().ok())
        };
        if let Some(bytes) = count("long ") {
            host::log(LogLevel::Info, &"y".repeat(bytes as usize));
        } else {
            for record in 0..count("records ").unwrap_or(10_000_000) {
                host::log(LogLevel::Info, &format!("record {record}"));
            }
        }
        Ok(AssembleResult::keep_range(
            0..history.len(),
            history.tokens(0..history.len()),
        ))
    }
}

ctxbox_guest::export_engine!(LogFlood);
