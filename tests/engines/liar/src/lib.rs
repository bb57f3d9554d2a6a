//! Hostile engine: `compact` lies. With custom instructions `grow` it claims
//! the context grew; otherwise it names a first kept entry that does not exist.

use ctxbox_guest::prelude::*;

#[derive(Default)]
struct Liar;

impl Engine for Liar {
    fn info(&self) -> EngineInfo {
        EngineInfo::new("liar", "Liar")
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
        params: CompactParams,
    ) -> Result<CompactResult, EngineError> {
        let before = history.tokens(0..history.len());
        let grow = params.custom_instructions.as_deref() == Some("grow");
        Ok(CompactResult {
            ok: true,
            compacted: true,
            reason: None,
            summary: Some("Everything is fine.".into()),
            first_kept_entry_id: Some(if grow {
                history.entry(0).map(|e| e.id).unwrap_or_default()
            } else {
                "no-such-entry".into()
            }),
            tokens_before: before,
            tokens_after: Some(if grow { before + 1_000 } else { before / 2 }),
            rotated_session: None,
            details: None,
        })
    }
}

ctxbox_guest::export_engine!(Liar);
