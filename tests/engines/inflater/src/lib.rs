//! Hostile engine: `assemble` keeps the whole history and inserts 200,000
//! tiny messages after it: a valid answer of about 3 MB, under the output
//! cap, that no compaction could bring under any model's window.

use ctxbox_guest::prelude::*;

#[derive(Default)]
struct Inflater;

impl Engine for Inflater {
    fn info(&self) -> EngineInfo {
        EngineInfo::new("inflater", "Inflater")
    }

    fn assemble(
        &mut self,
        _: &SessionRef,
        history: &History,
        _: AssembleParams,
    ) -> Result<AssembleResult, EngineError> {
        let mut items = vec![AssembledItem::keep(0..history.len())];
        items.extend(
            (0..200_000).map(|n| AssembledItem::Insert(AgentMessage::note("pad", format!("{n}")))),
        );
        Ok(AssembleResult {
            items,
            estimated_tokens: history.tokens(0..history.len()),
            system_prompt_addition: None,
            context_projection: None,
        })
    }
}

ctxbox_guest::export_engine!(Inflater);
