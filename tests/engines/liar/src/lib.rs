//! Hostile engine: `compact` lies. With custom instructions `grow` it claims
//! the context grew; with `bad-json` or `deep-json` its `details` are not
//! JSON or nest 200 deep; otherwise it names a first kept entry that does
//! not exist.

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
        let instructions = params.custom_instructions.as_deref();
        let grow = instructions == Some("grow");
        let details = match instructions {
            Some("bad-json") => Some("{\"summary\": not json".to_owned()),
            Some("deep-json") => Some(format!("{}{}", "[".repeat(200), "]".repeat(200))),
            _ => None,
        };
        let lies_in_details = details.is_some();
        Ok(CompactResult {
            ok: true,
            compacted: true,
            reason: None,
            summary: Some("Everything is fine.".into()),
            first_kept_entry_id: Some(if grow || lies_in_details {
                history.entry(0).map(|e| e.id).unwrap_or_default()
            } else {
                "no-such-entry".into()
            }),
            tokens_before: before,
            tokens_after: Some(if grow { before + 1_000 } else { before / 2 }),
            rotated_session: None,
            details,
        })
    }
}

ctxbox_guest::export_engine!(Liar);
