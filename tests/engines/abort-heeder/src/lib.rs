//! Well-behaved engine: `compact` works until the caller aborts, checking
//! `aborted()` as it goes, and then returns at once with `ok: false`.

use ctxbox_guest::prelude::*;

#[derive(Default)]
struct AbortHeeder;

impl Engine for AbortHeeder {
    fn info(&self) -> EngineInfo {
        EngineInfo::new("abort-heeder", "Abort heeder")
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
        let mut rounds = 0u64;
        while !host::aborted() {
            for _ in 0..10_000 {
                rounds = std::hint::black_box(rounds.wrapping_add(1));
            }
        }
        Ok(CompactResult {
            ok: false,
            compacted: false,
            reason: Some(format!("aborted by the caller after {rounds} rounds")),
            summary: None,
            first_kept_entry_id: None,
            tokens_before: history.tokens(0..history.len()),
            tokens_after: None,
            rotated_session: None,
            details: None,
        })
    }
}

ctxbox_guest::export_engine!(AbortHeeder);
