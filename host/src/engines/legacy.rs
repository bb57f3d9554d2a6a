//! The built-in `legacy` engine (ARCHITECTURE.md §6): what every session falls back
//! to. It keeps nothing of its own — the transcript store persists messages —
//! passes the whole history through to the prompt, and compacts with the
//! host's native compaction (the same [`Compactor`] the `delegate-compaction`
//! import runs).

use std::sync::Arc;

use async_trait::async_trait;

use crate::contract::engine::{CallOptions, ContextEngine, EngineResult};
use crate::contract::failure::{EngineFailure, FailureKind, Operation};
use crate::contract::history::History;
use crate::contract::types::{
    AfterTurnParams, AssembleParams, AssembleResult, AssembledItem, BootstrapResult, CompactParams,
    CompactResult, EngineInfo, IngestBatchResult, IngestResult, MaintainReason, MaintainResult,
    MessageEntry, SessionRef, SubagentEndReason, SubagentSpawn,
};
use crate::services::compaction::{CompactionError, Compactor, NoProgress};

/// The native engine every other engine falls back to.
#[derive(Debug)]
pub struct LegacyEngine {
    info: EngineInfo,
    compactor: Arc<Compactor>,
}

impl LegacyEngine {
    /// The engine's id.
    pub const ID: &'static str = "legacy";

    /// The engine, compacting with `compactor`.
    pub fn new(compactor: Arc<Compactor>) -> Self {
        Self {
            info: EngineInfo {
                id: Self::ID.to_owned(),
                name: "Legacy (native)".to_owned(),
                version: Some(env!("CARGO_PKG_VERSION").to_owned()),
                owns_compaction: false,
                accepted_host_params: None,
                turn_maintenance_mode: None,
            },
            compactor,
        }
    }
}

#[async_trait]
impl ContextEngine for LegacyEngine {
    fn info(&self) -> &EngineInfo {
        &self.info
    }

    async fn bootstrap(
        &self,
        _call: &CallOptions,
        _session: &SessionRef,
        _history: &History,
    ) -> EngineResult<BootstrapResult> {
        Ok(BootstrapResult::default())
    }

    async fn ingest(
        &self,
        _call: &CallOptions,
        _session: &SessionRef,
        _entry: &MessageEntry,
        _is_heartbeat: bool,
    ) -> EngineResult<IngestResult> {
        Ok(IngestResult { ingested: false })
    }

    async fn ingest_batch(
        &self,
        _call: &CallOptions,
        _session: &SessionRef,
        _entries: &[MessageEntry],
        _is_heartbeat: bool,
    ) -> EngineResult<IngestBatchResult> {
        Ok(IngestBatchResult { ingested_count: 0 })
    }

    async fn assemble(
        &self,
        _call: &CallOptions,
        _session: &SessionRef,
        history: &History,
        _params: &AssembleParams,
    ) -> EngineResult<AssembleResult> {
        let items = if history.is_empty() {
            Vec::new()
        } else {
            vec![AssembledItem::Keep {
                start: 0,
                end: u32::try_from(history.len()).unwrap_or(u32::MAX),
            }]
        };
        Ok(AssembleResult {
            items,
            estimated_tokens: history.total_tokens(),
            system_prompt_addition: None,
            context_projection: None,
        })
    }

    /// Compacts the session's transcript natively. The history argument is
    /// not needed: the transcript is the source of truth. A compaction that
    /// fails is answered `ok: false` with the reason; only a caller abort is
    /// an error.
    async fn compact(
        &self,
        call: &CallOptions,
        session: &SessionRef,
        _history: &History,
        params: &CompactParams,
    ) -> EngineResult<CompactResult> {
        match self
            .compactor
            .compact_session(
                session,
                params,
                &NoProgress,
                &call.abort,
                call.compaction_window,
            )
            .await
        {
            Ok(result) => Ok(result),
            Err(CompactionError::Aborted) => Err(EngineFailure::new(
                Self::ID,
                Operation::Compact,
                FailureKind::Aborted,
                "the caller cancelled the compaction",
            )),
            Err(error) => {
                tracing::warn!(engine = Self::ID, session = %session.session_id, %error, "native compaction failed");
                Ok(CompactResult::failed(error.to_string()))
            }
        }
    }

    async fn after_turn(
        &self,
        _call: &CallOptions,
        _session: &SessionRef,
        _history: &History,
        _params: &AfterTurnParams,
    ) -> EngineResult<()> {
        Ok(())
    }

    async fn maintain(
        &self,
        _call: &CallOptions,
        _session: &SessionRef,
        _history: &History,
        _reason: MaintainReason,
        _runtime_context: Option<&str>,
    ) -> EngineResult<MaintainResult> {
        Ok(MaintainResult::default())
    }

    async fn prepare_subagent_spawn(
        &self,
        _call: &CallOptions,
        _spawn: &SubagentSpawn,
    ) -> EngineResult<Option<String>> {
        Ok(None)
    }

    async fn rollback_subagent_spawn(
        &self,
        _call: &CallOptions,
        _preparation_id: &str,
    ) -> EngineResult<()> {
        Ok(())
    }

    async fn on_subagent_ended(
        &self,
        _call: &CallOptions,
        _child_session_key: &str,
        _reason: SubagentEndReason,
    ) -> EngineResult<()> {
        Ok(())
    }

    async fn dispose(&self) -> EngineResult<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::contract::types::{AgentMessage, CompactionTarget};
    use crate::services::compaction::CompactionConfig;
    use crate::services::summarize::ExtractiveSummarizer;
    use crate::transcript::{NewSession, TranscriptConfig, TranscriptStore};

    fn engine(store: &TranscriptStore) -> LegacyEngine {
        LegacyEngine::new(Arc::new(Compactor::new(
            store.clone(),
            Arc::new(ExtractiveSummarizer),
            CompactionConfig::default(),
        )))
    }

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime")
    }

    #[test]
    fn passes_the_history_through_and_stores_nothing() {
        let store = TranscriptStore::new(TranscriptConfig::default());
        let engine = engine(&store);
        assert_eq!(engine.info().id, "legacy");
        assert!(!engine.info().owns_compaction);
        let history = History::new(vec![MessageEntry {
            id: "a".into(),
            parent_id: None,
            timestamp_ms: 0,
            message: AgentMessage::user_text("hi"),
        }]);
        let session = SessionRef::new("s", "/nowhere.jsonl");
        let call = CallOptions::default();
        let runtime = runtime();
        let assembled = runtime
            .block_on(engine.assemble(&call, &session, &history, &AssembleParams::default()))
            .expect("assemble");
        assert_eq!(assembled.items, [AssembledItem::Keep { start: 0, end: 1 }]);
        assert_eq!(assembled.estimated_tokens, history.total_tokens());
        assert_eq!(
            history.materialize(&assembled.items),
            [AgentMessage::user_text("hi")]
        );
        let ingested = runtime
            .block_on(engine.ingest(&call, &session, &history.entries()[0], false))
            .expect("ingest");
        assert!(!ingested.ingested);
    }

    #[test]
    fn compacts_the_session_transcript_and_reports_failures_as_results() {
        let dir = tempfile::tempdir().expect("temp dir");
        let store = TranscriptStore::new(TranscriptConfig::default());
        let transcript = store
            .create(&dir.path().join("s.jsonl"), NewSession::default())
            .expect("create");
        for turn in 0..30 {
            transcript
                .append(&[
                    AgentMessage::user_text(format!("question {turn} {}", "words ".repeat(200))),
                    AgentMessage::assistant_text(format!("answer {turn} {}", "words ".repeat(200))),
                ])
                .expect("append");
        }
        let engine = engine(&store);
        let params = CompactParams {
            token_budget: Some(4_000),
            force: true,
            compaction_target: CompactionTarget::Budget,
            ..CompactParams::default()
        };
        let runtime = runtime();
        let result = runtime
            .block_on(engine.compact(
                &CallOptions::default(),
                &transcript.session_ref(),
                &transcript.history(),
                &params,
            ))
            .expect("compact");
        assert!(result.ok && result.compacted, "{result:?}");
        assert!(result.tokens_after.is_some_and(|after| after <= 4_000));

        let missing = SessionRef::new("gone", dir.path().join("missing.jsonl").to_string_lossy());
        let result = runtime
            .block_on(engine.compact(
                &CallOptions::default(),
                &missing,
                &History::new(vec![]),
                &params,
            ))
            .expect("a failed compaction is a result");
        assert!(!result.ok);
        assert!(
            result
                .reason
                .is_some_and(|reason| reason.contains("does not exist"))
        );
    }
}
