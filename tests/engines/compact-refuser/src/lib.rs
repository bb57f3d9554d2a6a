//! Probe engine: owns compaction; its first `compact` (and every second
//! after) answers an `engine-error`, the others answer "nothing to do". A
//! compaction whose instructions say `panic` panics.

use ctxbox_guest::prelude::*;

#[derive(Default)]
struct CompactRefuser {
    compactions: u32,
}

impl Engine for CompactRefuser {
    fn info(&self) -> EngineInfo {
        let mut info = EngineInfo::new("compact-refuser", "Compact refuser");
        info.owns_compaction = true;
        info
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
        if params.custom_instructions.as_deref() == Some("panic") {
            panic!("compaction asked to panic");
        }
        self.compactions += 1;
        if self.compactions % 2 == 1 {
            return Err(EngineError {
                kind: EngineErrorKind::Internal,
                message: format!(
                    "partially mutated frontier (compaction {})",
                    self.compactions
                ),
            });
        }
        Ok(CompactResult {
            ok: true,
            compacted: false,
            reason: Some(format!("nothing to do (compaction {})", self.compactions)),
            summary: None,
            first_kept_entry_id: None,
            tokens_before: history.tokens(0..history.len()),
            tokens_after: None,
            rotated_session: None,
            details: None,
        })
    }
}

ctxbox_guest::export_engine!(CompactRefuser);
