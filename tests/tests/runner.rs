//! The turn runner's rules with a scripted provider and a spying engine:
//! overflow recovery, its attempt limit, the no-op rule, the pre-prompt
//! check, and subagent rollback exactly once.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use ctxbox_host::compaction::{CompactionConfig, Compactor};
use ctxbox_host::engine::{CallOptions, ContextEngine, EngineResult};
use ctxbox_host::error::{EngineFailure, FailureKind, Operation};
use ctxbox_host::guard::{GuardPolicy, GuardedEngine, Selected};
use ctxbox_host::history::History;
use ctxbox_host::legacy::LegacyEngine;
use ctxbox_host::provider::{ModelReply, ModelRequest, Provider, ProviderError, ToolExecutor};
use ctxbox_host::quarantine::QuarantineStore;
use ctxbox_host::registry::Owner;
use ctxbox_host::runner::{RunnerConfig, Session, SpawnOutcome, TurnError, TurnRunner};
use ctxbox_host::transcript::{NewSession, TranscriptStore};
use ctxbox_host::types::{
    AfterTurnParams, AgentMessage, AssembleParams, AssembleResult, AssembledItem, BootstrapResult,
    CompactParams, CompactResult, CompactionTarget, ContextMode, EngineInfo, IngestBatchResult,
    IngestResult, MaintainReason, MaintainResult, MessageEntry, SessionRef, SubagentEndReason,
    SubagentSpawn,
};
use tokio_util::sync::CancellationToken;

const WINDOW: u64 = 8_192;

/// A native engine that passes history through, answers `compact` from a
/// script, and records what it was asked.
struct Spy {
    info: EngineInfo,
    compact_answers: Mutex<VecDeque<CompactResult>>,
    compactions: Mutex<Vec<CompactParams>>,
    rollbacks: Mutex<Vec<String>>,
    calls: Mutex<Vec<Operation>>,
    fail_prepare: bool,
}

impl Spy {
    fn new(owns_compaction: bool, compact_answers: Vec<CompactResult>) -> Arc<Self> {
        Self::build(owns_compaction, compact_answers, false)
    }

    fn build(
        owns_compaction: bool,
        compact_answers: Vec<CompactResult>,
        fail_prepare: bool,
    ) -> Arc<Self> {
        Arc::new(Self {
            info: EngineInfo {
                id: "spy".into(),
                name: "Spy".into(),
                version: None,
                owns_compaction,
                accepted_host_params: None,
                turn_maintenance_mode: None,
            },
            compact_answers: Mutex::new(compact_answers.into()),
            compactions: Mutex::new(Vec::new()),
            rollbacks: Mutex::new(Vec::new()),
            calls: Mutex::new(Vec::new()),
            fail_prepare,
        })
    }

    fn saw(&self, operation: Operation) {
        self.calls.lock().expect("lock").push(operation);
    }

    fn count(&self, operation: Operation) -> usize {
        self.calls
            .lock()
            .expect("lock")
            .iter()
            .filter(|op| **op == operation)
            .count()
    }
}

#[async_trait]
impl ContextEngine for Spy {
    fn info(&self) -> &EngineInfo {
        &self.info
    }

    async fn bootstrap(
        &self,
        _: &CallOptions,
        _: &SessionRef,
        _: &History,
    ) -> EngineResult<BootstrapResult> {
        self.saw(Operation::Bootstrap);
        Ok(BootstrapResult::default())
    }

    async fn ingest(
        &self,
        _: &CallOptions,
        _: &SessionRef,
        _: &MessageEntry,
        _: bool,
    ) -> EngineResult<IngestResult> {
        self.saw(Operation::Ingest);
        Ok(IngestResult::default())
    }

    async fn ingest_batch(
        &self,
        _: &CallOptions,
        _: &SessionRef,
        entries: &[MessageEntry],
        _: bool,
    ) -> EngineResult<IngestBatchResult> {
        self.saw(Operation::IngestBatch);
        Ok(IngestBatchResult {
            ingested_count: entries.len() as u32,
        })
    }

    async fn assemble(
        &self,
        _: &CallOptions,
        _: &SessionRef,
        history: &History,
        _: &AssembleParams,
    ) -> EngineResult<AssembleResult> {
        self.saw(Operation::Assemble);
        Ok(AssembleResult {
            items: vec![AssembledItem::Keep {
                start: 0,
                end: history.len() as u32,
            }],
            estimated_tokens: history.total_tokens(),
            system_prompt_addition: None,
            context_projection: None,
        })
    }

    async fn compact(
        &self,
        _: &CallOptions,
        _: &SessionRef,
        _: &History,
        params: &CompactParams,
    ) -> EngineResult<CompactResult> {
        self.saw(Operation::Compact);
        self.compactions.lock().expect("lock").push(params.clone());
        Ok(self
            .compact_answers
            .lock()
            .expect("lock")
            .pop_front()
            .unwrap_or_else(|| CompactResult::failed("no scripted answer")))
    }

    async fn after_turn(
        &self,
        _: &CallOptions,
        _: &SessionRef,
        _: &History,
        _: &AfterTurnParams,
    ) -> EngineResult<()> {
        self.saw(Operation::AfterTurn);
        Ok(())
    }

    async fn maintain(
        &self,
        _: &CallOptions,
        _: &SessionRef,
        _: &History,
        _: MaintainReason,
        _: Option<&str>,
    ) -> EngineResult<MaintainResult> {
        self.saw(Operation::Maintain);
        Ok(MaintainResult::default())
    }

    async fn prepare_subagent_spawn(
        &self,
        _: &CallOptions,
        spawn: &SubagentSpawn,
    ) -> EngineResult<Option<String>> {
        self.saw(Operation::PrepareSubagentSpawn);
        if self.fail_prepare {
            return Err(EngineFailure::new(
                "spy",
                Operation::PrepareSubagentSpawn,
                FailureKind::EngineError,
                "no room",
            ));
        }
        Ok(Some(format!("prep-{}", spawn.child_session_key)))
    }

    async fn rollback_subagent_spawn(
        &self,
        _: &CallOptions,
        preparation_id: &str,
    ) -> EngineResult<()> {
        self.rollbacks
            .lock()
            .expect("lock")
            .push(preparation_id.to_owned());
        Ok(())
    }

    async fn on_subagent_ended(
        &self,
        _: &CallOptions,
        _: &str,
        _: SubagentEndReason,
    ) -> EngineResult<()> {
        self.saw(Operation::OnSubagentEnded);
        Ok(())
    }

    async fn dispose(&self) -> EngineResult<()> {
        Ok(())
    }
}

/// A provider answering from a script of results, recording prompt sizes.
struct Scripted {
    answers: Mutex<VecDeque<Result<AgentMessage, ProviderError>>>,
    prompts: Mutex<Vec<usize>>,
}

impl Scripted {
    fn new(answers: Vec<Result<AgentMessage, ProviderError>>) -> Arc<Self> {
        Arc::new(Self {
            answers: Mutex::new(answers.into()),
            prompts: Mutex::new(Vec::new()),
        })
    }
}

#[async_trait]
impl Provider for Scripted {
    async fn complete(
        &self,
        request: ModelRequest<'_>,
        _: &CancellationToken,
    ) -> Result<ModelReply, ProviderError> {
        self.prompts
            .lock()
            .expect("lock")
            .push(request.messages.len());
        let answer = self
            .answers
            .lock()
            .expect("lock")
            .pop_front()
            .unwrap_or(Err(ProviderError::Exhausted))?;
        Ok(ModelReply {
            message: answer,
            usage: None,
        })
    }
}

/// Tools that answer every call with "ok".
struct Echo;

#[async_trait]
impl ToolExecutor for Echo {
    async fn execute(&self, assistant: &AgentMessage, _: &CancellationToken) -> Vec<AgentMessage> {
        assistant
            .tool_call_ids()
            .map(|id| AgentMessage::ToolResult {
                tool_call_id: id.to_owned(),
                tool_name: "exec".into(),
                content: vec![ctxbox_host::types::ContentBlock::text("ok")],
                is_error: false,
                details: None,
            })
            .collect()
    }
}

fn overflow() -> Result<AgentMessage, ProviderError> {
    Err(ProviderError::ContextOverflow {
        prompt_tokens: 9_000,
        window: WINDOW,
    })
}

fn answer() -> Result<AgentMessage, ProviderError> {
    Ok(AgentMessage::assistant_text("done"))
}

fn compacted() -> CompactResult {
    CompactResult {
        ok: true,
        compacted: true,
        tokens_before: 9_000,
        tokens_after: Some(4_000),
        ..CompactResult::default()
    }
}

fn nothing_to_compact() -> CompactResult {
    CompactResult {
        ok: true,
        compacted: false,
        reason: Some("nothing to cut".into()),
        tokens_before: 9_000,
        ..CompactResult::default()
    }
}

struct Harness {
    _dir: tempfile::TempDir,
    runner: TurnRunner,
    session: Session,
}

fn harness(spy: Arc<Spy>, provider: Arc<Scripted>, proactive: bool) -> Harness {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = TranscriptStore::new(Default::default());
    let transcript = store
        .create(
            &dir.path().join("s.jsonl"),
            NewSession {
                session_id: None,
                cwd: "/".into(),
                parent_session: None,
            },
        )
        .expect("session");
    let compactor = Arc::new(
        Compactor::from_config(store.clone(), CompactionConfig::default()).expect("compactor"),
    );
    let quarantine =
        Arc::new(QuarantineStore::open(&dir.path().join("q.sqlite3"), None).expect("quarantine"));
    let engine = Arc::new(GuardedEngine::new(
        Selected {
            id: "spy".into(),
            owner: Owner::Plugin("test".into()),
            fingerprint: None,
        },
        spy,
        Arc::new(LegacyEngine::new(compactor)),
        quarantine,
        GuardPolicy::default(),
    ));
    let runner = TurnRunner::new(
        engine,
        provider,
        Arc::new(Echo),
        store,
        RunnerConfig {
            window: WINDOW,
            reserve_tokens: 1_024,
            proactive_compaction: proactive,
            system_prompt: "be brief".into(),
            model: None,
            tools: vec!["exec".into()],
        },
    );
    Harness {
        _dir: dir,
        runner,
        session: Session::new(transcript, Some("agent:main".into())),
    }
}

impl Harness {
    async fn turn(&mut self, text: &str) -> Result<ctxbox_host::runner::TurnReport, TurnError> {
        self.runner
            .run_turn(
                &mut self.session,
                vec![AgentMessage::user_text(text)],
                &CancellationToken::new(),
            )
            .await
    }
}

#[tokio::test]
async fn an_overflow_is_compacted_with_the_providers_count_and_retried() {
    let spy = Spy::new(false, vec![compacted()]);
    let provider = Scripted::new(vec![overflow(), answer()]);
    let mut harness = harness(spy.clone(), provider.clone(), false);
    let report = harness.turn("hi").await.expect("recovers");
    assert_eq!(report.overflow_retries, 1);
    assert_eq!(report.compactions, 1);
    assert!(!report.truncated_tool_traffic);
    let compactions = spy.compactions.lock().expect("lock");
    assert_eq!(compactions.len(), 1);
    let params = &compactions[0];
    assert!(params.force);
    assert_eq!(params.compaction_target, CompactionTarget::Budget);
    assert_eq!(params.current_token_count, Some(9_000));
    assert_eq!(params.token_budget, Some(WINDOW - 1_024));
    assert_eq!(
        provider.prompts.lock().expect("lock").len(),
        2,
        "asked again after compacting"
    );
}

#[tokio::test]
async fn at_most_three_compactions_then_one_truncation_then_an_error() {
    let spy = Spy::new(
        false,
        vec![compacted(), compacted(), compacted(), compacted()],
    );
    let provider = Scripted::new(vec![overflow(); 10]);
    let mut harness = harness(spy.clone(), provider.clone(), false);
    let error = harness.turn("hi").await.expect_err("never fits");
    assert!(
        matches!(
            error,
            TurnError::ContextOverflow {
                prompt_tokens: 9_000,
                window: WINDOW
            }
        ),
        "{error}"
    );
    assert_eq!(
        spy.compactions.lock().expect("lock").len(),
        3,
        "three compactions per turn at most"
    );
    // 3 compactions + 1 truncation pass + the final refusal.
    assert_eq!(provider.prompts.lock().expect("lock").len(), 5);
}

#[tokio::test]
async fn a_noop_compaction_does_not_burn_an_attempt_and_falls_through_to_truncation() {
    let spy = Spy::new(false, vec![nothing_to_compact(), compacted()]);
    let provider = Scripted::new(vec![overflow(), overflow(), answer()]);
    let mut harness = harness(spy.clone(), provider.clone(), false);
    let report = harness
        .turn("hi")
        .await
        .expect("truncation, then a real compaction, fits");
    assert!(
        report.truncated_tool_traffic,
        "the no-op fell through to truncation"
    );
    assert_eq!(report.compactions, 1, "only the real compaction counts");
    assert_eq!(spy.compactions.lock().expect("lock").len(), 2);
}

#[tokio::test]
async fn two_noops_in_a_row_end_the_turn_after_one_truncation() {
    let spy = Spy::new(false, vec![nothing_to_compact(), nothing_to_compact()]);
    let provider = Scripted::new(vec![overflow(); 5]);
    let mut harness = harness(spy.clone(), provider, false);
    let error = harness.turn("hi").await.expect_err("cannot fit");
    assert!(
        matches!(error, TurnError::ContextOverflow { .. }),
        "{error}"
    );
    assert_eq!(spy.compactions.lock().expect("lock").len(), 2);
}

#[tokio::test]
async fn a_turn_calls_the_engine_in_the_reference_order() {
    let spy = Spy::new(false, vec![]);
    let tool_call = AgentMessage::Assistant {
        content: vec![ctxbox_host::types::ContentBlock::ToolCall {
            id: "c1".into(),
            name: "exec".into(),
            arguments_json: "{}".into(),
        }],
        model: None,
        provider: None,
        usage: None,
        stop_reason: ctxbox_host::types::StopReason::ToolUse,
        error_message: None,
    };
    let provider = Scripted::new(vec![Ok(tool_call), answer(), answer()]);
    let mut harness = harness(spy.clone(), provider.clone(), true);
    let report = harness.turn("hi").await.expect("turn");
    assert_eq!(
        report.model_calls, 2,
        "one call, its tool result, then the answer"
    );
    assert_eq!(report.messages_appended, 4, "user, call, result, answer");
    let calls = spy.calls.lock().expect("lock").clone();
    assert_eq!(
        calls,
        vec![
            Operation::Bootstrap,
            Operation::Maintain,
            Operation::Ingest,
            Operation::Assemble,
            Operation::Assemble,
            Operation::IngestBatch,
            Operation::AfterTurn,
            Operation::Maintain,
        ]
    );
    // The second turn does not bootstrap again.
    harness.turn("again").await.expect("second turn");
    assert_eq!(spy.count(Operation::Bootstrap), 1);
    assert_eq!(harness.session.transcript().branch().len(), 6);
}

#[tokio::test]
async fn the_pre_prompt_check_compacts_before_a_too_large_prompt() {
    let spy = Spy::new(false, vec![compacted()]);
    let provider = Scripted::new(vec![answer()]);
    let mut harness = harness(spy.clone(), provider, true);
    let big = "word ".repeat(8_000);
    let report = harness.turn(&big).await.expect("turn");
    assert_eq!(report.compactions, 1, "compacted before asking the model");
    assert_eq!(report.overflow_retries, 0);
    let params = spy.compactions.lock().expect("lock")[0].clone();
    assert!(!params.force);
    assert_eq!(params.compaction_target, CompactionTarget::Threshold);
}

#[tokio::test]
async fn an_engine_owning_compaction_skips_the_pre_prompt_check() {
    let spy = Spy::new(true, vec![compacted()]);
    let provider = Scripted::new(vec![answer()]);
    let mut harness = harness(spy.clone(), provider, true);
    harness.turn(&"word ".repeat(8_000)).await.expect("turn");
    assert_eq!(spy.count(Operation::Compact), 0);
}

#[derive(Debug, thiserror::Error)]
#[error("the sandbox for the subagent could not start")]
struct SpawnFailed;

fn spawn() -> SubagentSpawn {
    SubagentSpawn {
        parent_session_key: "agent:main".into(),
        child_session_key: "sub-1".into(),
        context_mode: ContextMode::Fork,
        ttl_ms: None,
    }
}

#[tokio::test]
async fn a_failed_spawn_is_rolled_back_exactly_once() {
    let spy = Spy::new(false, vec![]);
    let harness = harness(spy.clone(), Scripted::new(vec![]), false);
    let outcome = harness
        .runner
        .spawn_subagent(&spawn(), &CancellationToken::new(), async {
            Err::<(), _>(SpawnFailed)
        })
        .await;
    let Err(SpawnOutcome::SpawnFailed { rollback, .. }) = outcome else {
        panic!("the spawn failed");
    };
    assert!(matches!(rollback, Some(Ok(()))));
    assert_eq!(
        *spy.rollbacks.lock().expect("lock"),
        vec!["prep-sub-1".to_owned()]
    );

    let spawned = harness
        .runner
        .spawn_subagent(&spawn(), &CancellationToken::new(), async {
            Ok::<_, SpawnFailed>("child")
        })
        .await
        .expect("spawned");
    assert_eq!(spawned, "child");
    assert_eq!(
        spy.rollbacks.lock().expect("lock").len(),
        1,
        "a successful spawn is not rolled back"
    );

    harness
        .runner
        .subagent_ended(
            "sub-1",
            SubagentEndReason::Completed,
            &CancellationToken::new(),
        )
        .await
        .expect("ended");
    assert_eq!(spy.count(Operation::OnSubagentEnded), 1);
}

#[tokio::test]
async fn a_failed_preparation_spawns_nothing() {
    let spy = Spy::build(false, vec![], true);
    let harness = harness(spy.clone(), Scripted::new(vec![]), false);
    let started = std::sync::atomic::AtomicBool::new(false);
    let outcome = harness
        .runner
        .spawn_subagent(&spawn(), &CancellationToken::new(), async {
            started.store(true, std::sync::atomic::Ordering::SeqCst);
            Ok::<(), SpawnFailed>(())
        })
        .await;
    let Err(SpawnOutcome::PrepareFailed(failure)) = outcome else {
        panic!("the preparation failed");
    };
    assert_eq!(failure.operation, Operation::PrepareSubagentSpawn);
    assert!(
        !started.load(std::sync::atomic::Ordering::SeqCst),
        "nothing was spawned"
    );
    assert!(
        spy.rollbacks.lock().expect("lock").is_empty(),
        "nothing to roll back"
    );
}
