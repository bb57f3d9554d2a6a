//! Probe engine: overrides only `info`, `assemble` and `ingest`, which records
//! each entry id it is given under `ingested/<id>` in its state, so tests see
//! which messages the SDK's defaults (`ingest-batch`, `after-turn`) pass on.

use ctxbox_guest::prelude::*;

#[derive(Default)]
struct IngestRecorder;

impl Engine for IngestRecorder {
    fn info(&self) -> EngineInfo {
        EngineInfo::new("ingest-recorder", "Ingest recorder")
    }

    fn assemble(
        &mut self,
        _: &SessionRef,
        history: &History,
        _: AssembleParams,
    ) -> Result<AssembleResult, EngineError> {
        let all = 0..history.len();
        Ok(AssembleResult::keep_range(all.clone(), history.tokens(all)))
    }

    fn ingest(
        &mut self,
        _: &SessionRef,
        entry: MessageEntry,
        _: bool,
    ) -> Result<IngestResult, EngineError> {
        host::state::set(&format!("ingested/{}", entry.id), b"")?;
        Ok(IngestResult { ingested: true })
    }
}

ctxbox_guest::export_engine!(IngestRecorder);
