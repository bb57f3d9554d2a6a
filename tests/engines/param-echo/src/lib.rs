//! Probe engine: accepts only the `session-key` host parameter and echoes
//! what reached it, so a test can see the guard's projection, and its
//! configured settings (`host::engine_config`), when it has any.

use ctxbox_guest::prelude::*;

#[derive(Default)]
struct ParamEcho;

impl Engine for ParamEcho {
    fn info(&self) -> EngineInfo {
        let mut info = EngineInfo::new("param-echo", "Parameter echo");
        info.accepted_host_params = Some(vec![HostParam::SessionKey]);
        info
    }

    fn assemble(
        &mut self,
        session: &SessionRef,
        history: &History,
        params: AssembleParams,
    ) -> Result<AssembleResult, EngineError> {
        let mut result = AssembleResult::keep_all(history);
        let mut addition = format!("key={:?} prompt={:?}", session.session_key, params.prompt);
        if let Some(config) = host::engine_config() {
            addition.push_str(&format!(" config={config}"));
        }
        result.system_prompt_addition = Some(addition);
        Ok(result)
    }

    fn maintain(
        &mut self,
        _: &SessionRef,
        _: &History,
        _: MaintainReason,
        runtime_context: Option<String>,
    ) -> Result<MaintainResult, EngineError> {
        Ok(MaintainResult {
            changed: false,
            rewritten_entries: 0,
            reason: Some(format!("runtime-context={runtime_context:?}")),
        })
    }
}

ctxbox_guest::export_engine!(ParamEcho);
