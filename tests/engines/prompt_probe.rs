// Shared by the SQL test engines, each of which `include!`s it: the engine
// skeleton of a probe whose `assemble` keeps the whole history and appends
// a note (custom type: the engine's id) with what `answer(prompt)` reports.
// An error from `answer` fails the call.

/// Defines `$engine` (id `$id`, name `$name`) answering with `$answer` and
/// exports it.
macro_rules! prompt_probe_engine {
    ($engine:ident, $id:literal, $name:literal, $answer:path) => {
        #[derive(Default)]
        struct $engine;

        impl Engine for $engine {
            fn info(&self) -> EngineInfo {
                EngineInfo::new($id, $name)
            }

            fn assemble(
                &mut self,
                _: &SessionRef,
                history: &History,
                params: AssembleParams,
            ) -> Result<AssembleResult, EngineError> {
                let report = $answer(params.prompt.as_deref().unwrap_or(""))?;
                Ok(AssembleResult::keep_all(history).with_appended(AgentMessage::note($id, report)))
            }
        }

        ctxbox_guest::export_engine!($engine);
    };
}
