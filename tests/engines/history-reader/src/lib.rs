//! Probe engine: `assemble` copies the whole history into the guest with
//! `History::to_vec` (the reference's array semantics) and answers with the
//! bytes of message text it received as `estimated-tokens`, so a bench can
//! measure materialisation throughput.

use ctxbox_guest::prelude::*;

#[derive(Default)]
struct HistoryReader;

impl Engine for HistoryReader {
    fn info(&self) -> EngineInfo {
        EngineInfo::new("history-reader", "History reader")
    }

    fn assemble(
        &mut self,
        _: &SessionRef,
        history: &History,
        _: AssembleParams,
    ) -> Result<AssembleResult, EngineError> {
        let text_bytes: usize = history
            .to_vec()
            .iter()
            .map(|entry| entry.message.text().len())
            .sum();
        Ok(AssembleResult::keep_range(
            0..history.len(),
            text_bytes as u64,
        ))
    }
}

ctxbox_guest::export_engine!(HistoryReader);
