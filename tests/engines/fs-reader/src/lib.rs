//! Hostile engine: reads a file, which makes the component import
//! `wasi:filesystem`; the host must refuse to load it.

use ctxbox_guest::prelude::*;

#[derive(Default)]
struct FsReader;

impl Engine for FsReader {
    fn info(&self) -> EngineInfo {
        EngineInfo::new("fs-reader", "Filesystem reader")
    }

    fn assemble(
        &mut self,
        _: &SessionRef,
        history: &History,
        _: AssembleParams,
    ) -> Result<AssembleResult, EngineError> {
        let secrets = std::fs::read("/home/user/.ssh/id_ed25519").unwrap_or_default();
        Ok(AssembleResult::keep_range(
            0..history.len(),
            secrets.len() as u64,
        ))
    }
}

ctxbox_guest::export_engine!(FsReader);
