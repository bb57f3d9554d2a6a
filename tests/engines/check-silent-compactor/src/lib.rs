//! Test engine for `ctxbox check`: owns compaction and writes its summary
//! with the host's summarizer, one call per slice of the history, without
//! ever calling `report-progress`. Everything else is right: it checks
//! `aborted()` between summaries, keeps prompts within budget and answers
//! a truthful compaction. With a fast summarizer it passes; when each
//! summary takes a while, the compaction outlasts the watchdog's window.

use ctxbox_guest::prelude::*;

/// Summarizer calls one compaction makes.
const SLICES: u32 = 8;

#[derive(Default)]
struct SilentCompactor;

impl Engine for SilentCompactor {
    fn info(&self) -> EngineInfo {
        EngineInfo::new("check-silent-compactor", "Silent compactor").owning_compaction()
    }

    fn assemble(
        &mut self,
        _: &SessionRef,
        history: &History,
        params: AssembleParams,
    ) -> Result<AssembleResult, EngineError> {
        // The newest turns that fit, starting at a user message (so no tool
        // result loses its call), or just the newest message.
        let len = history.len();
        let budget = params.token_budget.unwrap_or(u64::MAX);
        let start = (0..len)
            .filter(|&index| history.kind(index) == Some(MessageKind::User))
            .find(|&index| history.tokens(index..len) <= budget)
            .unwrap_or(len.saturating_sub(1));
        Ok(AssembleResult::keep_range(
            start..len,
            history.tokens(start..len),
        ))
    }

    fn compact(
        &mut self,
        _: &SessionRef,
        history: &History,
        _: CompactParams,
    ) -> Result<CompactResult, EngineError> {
        let len = history.len();
        let tokens_before = history.tokens(0..len);
        // Keep from the user message nearest three quarters in.
        let Some(first_kept) = (1..=len * 3 / 4)
            .rev()
            .find(|&index| history.kind(index) == Some(MessageKind::User))
        else {
            return Ok(nothing(
                true,
                "nothing before the newest turn",
                tokens_before,
            ));
        };
        let mut summary = String::new();
        let slice = first_kept.div_ceil(SLICES).max(1);
        let mut start = 0;
        while start < first_kept {
            if host::aborted() {
                return Ok(nothing(false, "aborted by the caller", tokens_before));
            }
            let end = (start + slice).min(first_kept);
            let text: Vec<String> = history
                .range(start..end)
                .iter()
                .map(|entry| format!("{:?}", entry.message))
                .collect();
            summary.push_str(&host::summarize(&text.join("\n"), None, 64)?);
            summary.push('\n');
            start = end;
        }
        let kept = history.tokens(first_kept..len);
        let summary_tokens = (summary.len() as u64).div_ceil(4) + 18;
        Ok(CompactResult {
            ok: true,
            compacted: true,
            reason: None,
            summary: Some(summary),
            first_kept_entry_id: history.entry(first_kept).map(|entry| entry.id),
            tokens_before,
            tokens_after: Some((kept + summary_tokens).min(tokens_before)),
            rotated_session: None,
            details: None,
        })
    }
}

/// A compaction that compacted nothing, and why.
fn nothing(ok: bool, reason: &str, tokens_before: u64) -> CompactResult {
    CompactResult {
        ok,
        compacted: false,
        reason: Some(reason.into()),
        summary: None,
        first_kept_entry_id: None,
        tokens_before,
        tokens_after: None,
        rotated_session: None,
        details: None,
    }
}

ctxbox_guest::export_engine!(SilentCompactor);
