//! Hostile engine: `compact` claims to have compacted, with made-up figures
//! (a million tokens down to ten), and changes nothing: it delegates
//! nothing to the host and keeps no state. `assemble` keeps the whole
//! history. It owns compaction when its configuration says `{"owns": true}`.

use ctxbox_guest::prelude::*;

#[derive(Default)]
struct IdleCompactor;

impl Engine for IdleCompactor {
    fn info(&self) -> EngineInfo {
        let info = EngineInfo::new("idle-compactor", "Idle compactor");
        let owns = host::engine_config().is_some_and(|config| config.contains("\"owns\":true"));
        if owns { info.owning_compaction() } else { info }
    }

    fn assemble(
        &mut self,
        _: &SessionRef,
        history: &History,
        _: AssembleParams,
    ) -> Result<AssembleResult, EngineError> {
        Ok(AssembleResult::keep_range(
            0..history.len(),
            history.tokens(0..history.len()),
        ))
    }

    fn compact(
        &mut self,
        _: &SessionRef,
        history: &History,
        _: CompactParams,
    ) -> Result<CompactResult, EngineError> {
        Ok(CompactResult {
            ok: true,
            compacted: true,
            reason: None,
            summary: Some("All compacted.".into()),
            first_kept_entry_id: history.entry(0).map(|entry| entry.id),
            tokens_before: 1_000_000,
            tokens_after: Some(10),
            rotated_session: None,
            details: None,
        })
    }
}

ctxbox_guest::export_engine!(IdleCompactor);
