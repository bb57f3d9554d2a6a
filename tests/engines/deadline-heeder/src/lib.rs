//! Well-behaved engine under time pressure: `assemble` and `compact` work
//! until `aborted()` turns true — no caller aborts, so only the call's
//! deadline notice can make it — then stop at once: `assemble` with an
//! error (it has nothing worth answering), `compact` with `ok: false`.

use ctxbox_guest::prelude::*;

#[derive(Default)]
struct DeadlineHeeder;

/// Spins until the host says to stop; how many rounds it ran.
fn work_until_told_to_stop() -> u64 {
    let mut rounds = 0u64;
    while !host::aborted() {
        for _ in 0..10_000 {
            rounds = std::hint::black_box(rounds.wrapping_add(1));
        }
    }
    rounds
}

impl Engine for DeadlineHeeder {
    fn info(&self) -> EngineInfo {
        EngineInfo::new("deadline-heeder", "Deadline heeder")
    }

    fn assemble(
        &mut self,
        _: &SessionRef,
        _: &History,
        _: AssembleParams,
    ) -> Result<AssembleResult, EngineError> {
        let rounds = work_until_told_to_stop();
        Err(EngineError::internal(format!(
            "stopped at the deadline notice after {rounds} rounds"
        )))
    }

    fn compact(
        &mut self,
        _: &SessionRef,
        history: &History,
        _: CompactParams,
    ) -> Result<CompactResult, EngineError> {
        let rounds = work_until_told_to_stop();
        Ok(CompactResult {
            ok: false,
            compacted: false,
            reason: Some(format!(
                "stopped at the deadline notice after {rounds} rounds"
            )),
            summary: None,
            first_kept_entry_id: None,
            tokens_before: history.tokens(0..history.len()),
            tokens_after: None,
            rotated_session: None,
            details: None,
        })
    }
}

ctxbox_guest::export_engine!(DeadlineHeeder);
