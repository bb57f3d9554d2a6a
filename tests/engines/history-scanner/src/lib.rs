//! Probe engine: `assemble` reads the whole history in place with
//! `HistoryView::scan` (the packed bulk path) and answers with the bytes of
//! message text it read as `estimated-tokens`, as `history-reader` does for
//! `History::to_vec`, so a bench can compare the two paths.

use ctxbox_guest::prelude::*;

#[derive(Default)]
struct HistoryScanner;

impl Engine for HistoryScanner {
    fn info(&self) -> EngineInfo {
        EngineInfo::new("history-scanner", "History scanner")
    }

    fn assemble(
        &mut self,
        _: &SessionRef,
        history: &History,
        _: AssembleParams,
    ) -> Result<AssembleResult, EngineError> {
        let mut text_bytes = 0usize;
        let mut unreadable = None;
        history.scan(0..history.len(), |entry| match entry.text() {
            Ok(text) => text_bytes += text.len(),
            Err(error) => unreadable = Some(error),
        })?;
        if let Some(error) = unreadable {
            return Err(error.into());
        }
        Ok(AssembleResult::keep_range(
            0..history.len(),
            text_bytes as u64,
        ))
    }
}

ctxbox_guest::export_engine!(HistoryScanner);
