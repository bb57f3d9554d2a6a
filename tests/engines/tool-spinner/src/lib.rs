//! Hostile engine: offers the model two tools, `echo` (answers its
//! arguments) and `spin`, which never returns. The host must cut `spin` at
//! its deadline, quarantine the engine and answer the model with an error;
//! the turn goes on.

use ctxbox_guest::prelude::*;

#[derive(Default)]
struct ToolSpinner;

impl Engine for ToolSpinner {
    fn info(&self) -> EngineInfo {
        EngineInfo::new("tool-spinner", "Tool spinner")
    }

    fn assemble(
        &mut self,
        _: &SessionRef,
        history: &History,
        _: AssembleParams,
    ) -> Result<AssembleResult, EngineError> {
        let len = history.len();
        Ok(AssembleResult::keep_range(0..len, history.tokens(0..len)))
    }

    fn tools(&self) -> Vec<ToolDefinition> {
        vec![
            ToolDefinition::new("echo", "Answers its arguments.", r#"{"type":"object"}"#),
            ToolDefinition::new("spin", "Never answers.", r#"{"type":"object"}"#),
        ]
    }

    fn call_tool(
        &mut self,
        _: &SessionRef,
        name: &str,
        arguments: &str,
    ) -> Result<String, EngineError> {
        if name == "echo" {
            return Ok(format!("echo {arguments}"));
        }
        let mut counter = 0u64;
        loop {
            counter = std::hint::black_box(counter.wrapping_add(1));
        }
    }
}

ctxbox_guest::export_engine!(ToolSpinner);
