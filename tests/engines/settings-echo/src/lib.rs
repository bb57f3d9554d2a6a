//! Probe engine: accepts every host parameter and echoes what
//! `host::runtime_settings` answers (and, for `compact`, the runtime context
//! and settings in its params), so a test can see them arrive through the
//! sandbox.

use ctxbox_guest::prelude::*;

#[derive(Default)]
struct SettingsEcho;

impl Engine for SettingsEcho {
    fn info(&self) -> EngineInfo {
        EngineInfo::new("settings-echo", "Settings echo")
    }

    fn assemble(
        &mut self,
        _: &SessionRef,
        history: &History,
        _: AssembleParams,
    ) -> Result<AssembleResult, EngineError> {
        let mut result = AssembleResult::keep_all(history);
        result.system_prompt_addition = Some(format!("settings={:?}", host::runtime_settings()));
        Ok(result)
    }

    fn compact(
        &mut self,
        _: &SessionRef,
        _: &History,
        params: CompactParams,
    ) -> Result<CompactResult, EngineError> {
        Ok(CompactResult {
            ok: true,
            compacted: false,
            reason: Some(format!(
                "settings={:?} params.settings={:?} params.context={:?}",
                host::runtime_settings(),
                params.runtime_settings,
                params.runtime_context
            )),
            summary: None,
            first_kept_entry_id: None,
            tokens_before: 0,
            tokens_after: None,
            rotated_session: None,
            details: None,
        })
    }
}

ctxbox_guest::export_engine!(SettingsEcho);
