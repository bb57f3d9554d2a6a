//! The turn runner's rules with a scripted provider and a spying engine:
//! overflow recovery and its per-turn attempt limit (more in
//! `reference_overflow`), the pre-prompt check, after-turn as the engine's news of the turn, background
//! maintenance ordering, thread-bootstrap projections, and subagent rollback
//! exactly once.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use ctxbox_host::contract::engine::{CallOptions, ContextEngine, EngineResult};
use ctxbox_host::contract::failure::{EngineFailure, FailureKind, Operation};
use ctxbox_host::contract::history::History;
use ctxbox_host::contract::types::{
    AfterTurnParams, AgentMessage, AssembleParams, AssembleResult, AssembledItem, BootstrapResult,
    CompactParams, CompactResult, CompactionTarget, ContextMode, ContextProjection, EngineInfo,
    IngestBatchResult, IngestResult, MaintainReason, MaintainResult, MessageEntry, SessionRef,
    SubagentEndReason, SubagentSpawn, TurnMaintenanceMode,
};
use ctxbox_host::engines::guard::{GuardPolicy, GuardedEngine, Selected};
use ctxbox_host::engines::legacy::LegacyEngine;
use ctxbox_host::engines::quarantine::QuarantineStore;
use ctxbox_host::engines::registry::Owner;
use ctxbox_host::provider::{ProviderError, Replay, ReplayScript, ScriptedProvider, ToolExecutor};
use ctxbox_host::runner::{RunnerConfig, Session, SpawnOutcome, TurnError, TurnRunner};
use ctxbox_host::services::compaction::{CompactionConfig, Compactor, NoProgress};
use ctxbox_host::transcript::{NewSession, TranscriptStore};
use tokio_util::sync::CancellationToken;

pub(crate) const WINDOW: u64 = 8_192;

/// A native engine that passes history through (or, when given an epoch,
/// answers a thread-bootstrap projection led by a "view N" message), answers
/// `compact` from a script, and records what it was asked.
pub(crate) struct Spy {
    info: EngineInfo,
    compact_answers: Mutex<VecDeque<CompactResult>>,
    pub(crate) compactions: Mutex<Vec<CompactParams>>,
    rollbacks: Mutex<Vec<String>>,
    /// Calls in the order they finished.
    calls: Mutex<Vec<Operation>>,
    /// What each `after-turn` was told was new.
    after_turn_news: Mutex<Vec<Vec<AgentMessage>>>,
    fail_prepare: bool,
    projection_epoch: Mutex<Option<u64>>,
    /// Compacts the transcript in place during `after-turn` when set.
    after_turn_compactor: Mutex<Option<Arc<Compactor>>>,
    /// Answers `compact` with native compaction in place when set (instead
    /// of the scripted answers).
    compactor: Mutex<Option<Arc<Compactor>>>,
    /// The runtime settings and context each call was given, in order.
    runtime: Mutex<Vec<Seen>>,
    /// Padding `assemble` inserts before the history, which every
    /// `compact` shrinks: an engine whose compactions really shrink its
    /// prompt (the runner measures them).
    padding: Mutex<Option<Padding>>,
    /// The transcript fence each `assemble` was given.
    assemble_fences: Mutex<Vec<Option<String>>>,
    /// Whether each `maintain` was allowed to pay deferred compaction.
    deferred_compaction: Mutex<Vec<bool>>,
}

/// The padding of a [`Spy::padded`]: `chars` now, `step` fewer after each
/// compaction, back to `full` when the history has grown since the last
/// compaction (new history is something to compact again).
#[derive(Debug, Clone, Copy)]
struct Padding {
    full: usize,
    chars: usize,
    step: usize,
    history_at_compaction: usize,
}

/// What one call was told about the run.
#[derive(Debug, Clone)]
struct Seen {
    operation: Operation,
    settings: Option<serde_json::Value>,
    /// The runtime context without its `sessionTarget`, …
    context: Option<serde_json::Value>,
    /// … which is here.
    target: Option<serde_json::Value>,
}

fn parse_json(json: &Option<String>) -> Option<serde_json::Value> {
    json.as_deref()
        .map(|json| serde_json::from_str(json).expect("the host passes JSON"))
}

impl Spy {
    pub(crate) fn new(owns_compaction: bool, compact_answers: Vec<CompactResult>) -> Arc<Self> {
        Self::build(owns_compaction, compact_answers, false, None)
    }

    fn build(
        owns_compaction: bool,
        compact_answers: Vec<CompactResult>,
        fail_prepare: bool,
        turn_maintenance_mode: Option<TurnMaintenanceMode>,
    ) -> Arc<Self> {
        Arc::new(Self {
            info: EngineInfo {
                id: "spy".into(),
                name: "Spy".into(),
                version: None,
                owns_compaction,
                accepted_host_params: None,
                turn_maintenance_mode,
            },
            compact_answers: Mutex::new(compact_answers.into()),
            compactions: Mutex::new(Vec::new()),
            rollbacks: Mutex::new(Vec::new()),
            calls: Mutex::new(Vec::new()),
            after_turn_news: Mutex::new(Vec::new()),
            fail_prepare,
            projection_epoch: Mutex::new(None),
            after_turn_compactor: Mutex::new(None),
            compactor: Mutex::new(None),
            runtime: Mutex::new(Vec::new()),
            padding: Mutex::new(None),
            assemble_fences: Mutex::new(Vec::new()),
            deferred_compaction: Mutex::new(Vec::new()),
        })
    }

    /// A spy whose prompts carry 24,000 characters of padding (about 6,000
    /// tokens, nearly the whole budget of the harness's window), of which
    /// each compaction takes off a third (about a third of the budget: an
    /// effective pass) until the history grows again, answering `compact`
    /// from `compact_answers`.
    pub(crate) fn padded(owns_compaction: bool, compact_answers: Vec<CompactResult>) -> Arc<Self> {
        Self::padded_in_steps(owns_compaction, compact_answers, 8_400)
    }

    /// [`Spy::padded`], each compaction taking `step` characters off.
    pub(crate) fn padded_in_steps(
        owns_compaction: bool,
        compact_answers: Vec<CompactResult>,
        step: usize,
    ) -> Arc<Self> {
        let spy = Self::new(owns_compaction, compact_answers);
        *spy.padding.lock().expect("lock") = Some(Padding {
            full: 24_000,
            chars: 24_000,
            step,
            history_at_compaction: 0,
        });
        spy
    }

    /// From now on answers `compact` with native compaction of the
    /// transcripts in `store`, in place (the default configuration).
    pub(crate) fn compact_natively(&self, store: &TranscriptStore) {
        *self.compactor.lock().expect("lock") = Some(Arc::new(
            Compactor::from_config(store.clone(), CompactionConfig::default()).expect("compactor"),
        ));
    }

    fn note_runtime(
        &self,
        operation: Operation,
        settings: &Option<String>,
        context: &Option<String>,
    ) {
        let mut context = parse_json(context);
        let target = context
            .as_mut()
            .and_then(|context| context.as_object_mut()?.remove("sessionTarget"));
        self.runtime.lock().expect("lock").push(Seen {
            operation,
            settings: parse_json(settings),
            context: context.filter(|context| context.as_object().is_none_or(|o| !o.is_empty())),
            target,
        });
    }

    fn runtime_of(&self, operation: Operation) -> Vec<Seen> {
        self.runtime
            .lock()
            .expect("lock")
            .iter()
            .filter(|seen| seen.operation == operation)
            .cloned()
            .collect()
    }

    /// Where the `nth` (0-based) call of `operation` finished in the log.
    fn position(&self, operation: Operation, nth: usize) -> usize {
        let calls = self.calls.lock().expect("lock");
        calls
            .iter()
            .enumerate()
            .filter(|(_, op)| **op == operation)
            .nth(nth)
            .map(|(index, _)| index)
            .unwrap_or_else(|| panic!("no call {nth} of {operation:?} in {calls:?}"))
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
        options: &CallOptions,
        _: &SessionRef,
        history: &History,
        params: &AssembleParams,
    ) -> EngineResult<AssembleResult> {
        self.saw(Operation::Assemble);
        self.assemble_fences
            .lock()
            .expect("lock")
            .push(options.transcript_fence.clone());
        self.note_runtime(Operation::Assemble, &params.runtime_settings, &None);
        let keep = AssembledItem::Keep {
            start: 0,
            end: history.len() as u32,
        };
        let epoch = *self.projection_epoch.lock().expect("lock");
        let padding = self.padding.lock().expect("lock").as_mut().map(|padding| {
            if history.len() > padding.history_at_compaction {
                padding.chars = padding.full;
            }
            padding.chars
        });
        let (items, context_projection) = match (epoch, padding) {
            (None, Some(chars)) => (
                vec![
                    AssembledItem::Insert(AgentMessage::user_text("x".repeat(chars))),
                    keep,
                ],
                None,
            ),
            (None, None) => (vec![keep], None),
            (Some(epoch), _) => {
                let view =
                    AgentMessage::user_text(format!("view {}", self.count(Operation::Assemble)));
                (
                    vec![AssembledItem::Insert(view), keep],
                    Some(ContextProjection::ThreadBootstrap { epoch }),
                )
            }
        };
        Ok(AssembleResult {
            items,
            estimated_tokens: history.total_tokens(),
            system_prompt_addition: None,
            context_projection,
        })
    }

    async fn compact(
        &self,
        call: &CallOptions,
        session: &SessionRef,
        history: &History,
        params: &CompactParams,
    ) -> EngineResult<CompactResult> {
        self.saw(Operation::Compact);
        self.note_runtime(
            Operation::Compact,
            &params.runtime_settings,
            &params.runtime_context,
        );
        self.compactions.lock().expect("lock").push(params.clone());
        if let Some(padding) = self.padding.lock().expect("lock").as_mut() {
            padding.chars = padding.chars.saturating_sub(padding.step);
            padding.history_at_compaction = history.len();
        }
        let compactor = self.compactor.lock().expect("lock").clone();
        if let Some(compactor) = compactor {
            return Ok(compactor
                .compact_session(session, params, &NoProgress, &call.abort, None)
                .await
                .expect("native compaction"));
        }
        Ok(self
            .compact_answers
            .lock()
            .expect("lock")
            .pop_front()
            .unwrap_or_else(|| CompactResult::failed("no scripted answer")))
    }

    async fn after_turn(
        &self,
        call: &CallOptions,
        session: &SessionRef,
        history: &History,
        params: &AfterTurnParams,
    ) -> EngineResult<()> {
        self.saw(Operation::AfterTurn);
        self.note_runtime(
            Operation::AfterTurn,
            &params.runtime_settings,
            &params.runtime_context,
        );
        let news = history.entries()[params.pre_prompt_message_count as usize..]
            .iter()
            .map(|entry| entry.message.clone())
            .collect();
        self.after_turn_news.lock().expect("lock").push(news);
        let compactor = self.after_turn_compactor.lock().expect("lock").clone();
        if let Some(compactor) = compactor {
            let params = CompactParams {
                token_budget: Some(WINDOW),
                force: true,
                ..CompactParams::default()
            };
            let result = compactor
                .compact_session(session, &params, &NoProgress, &call.abort, None)
                .await
                .expect("native compaction");
            assert!(result.compacted, "{result:?}");
        }
        Ok(())
    }

    async fn maintain(
        &self,
        call: &CallOptions,
        _: &SessionRef,
        _: &History,
        _: MaintainReason,
        context: Option<&str>,
    ) -> EngineResult<MaintainResult> {
        self.note_runtime(Operation::Maintain, &None, &context.map(str::to_owned));
        self.deferred_compaction
            .lock()
            .expect("lock")
            .push(call.deferred_compaction);
        // Long enough work that anything running alongside gets a turn.
        for _ in 0..50 {
            tokio::task::yield_now().await;
        }
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
        call: &CallOptions,
        preparation_id: &str,
    ) -> EngineResult<()> {
        // As a sandboxed engine would be: interrupted once the caller aborts.
        if call.abort.is_cancelled() {
            return Err(EngineFailure::new(
                "spy",
                Operation::RollbackSubagentSpawn,
                FailureKind::Aborted,
                "aborted",
            ));
        }
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

/// A provider answering from a script of results, recording the prompts.
pub(crate) fn scripted(answers: Vec<Result<AgentMessage, ProviderError>>) -> Arc<ScriptedProvider> {
    Arc::new(ScriptedProvider::new(answers))
}

/// Tools that answer every call with "ok".
pub(crate) struct Echo;

#[async_trait]
impl ToolExecutor for Echo {
    async fn execute(&self, assistant: &AgentMessage, _: &CancellationToken) -> Vec<AgentMessage> {
        assistant
            .tool_call_ids()
            .map(|id| AgentMessage::tool_result(id, "exec", "ok"))
            .collect()
    }
}

pub(crate) fn overflow() -> Result<AgentMessage, ProviderError> {
    Err(ProviderError::ContextOverflow {
        prompt_tokens: 9_000,
        window: WINDOW,
    })
}

pub(crate) fn answer() -> Result<AgentMessage, ProviderError> {
    Ok(AgentMessage::assistant_text("done"))
}

/// An assistant message calling the `exec` tool once.
pub(crate) fn tool_call(id: &str) -> AgentMessage {
    AgentMessage::tool_call(id, "exec", "{}")
}

pub(crate) fn compacted() -> CompactResult {
    CompactResult {
        ok: true,
        compacted: true,
        tokens_before: 9_000,
        tokens_after: Some(4_000),
        ..CompactResult::default()
    }
}

pub(crate) fn nothing_to_compact() -> CompactResult {
    CompactResult {
        ok: true,
        compacted: false,
        reason: Some("nothing to cut".into()),
        tokens_before: 9_000,
        ..CompactResult::default()
    }
}

pub(crate) struct Harness {
    _dir: tempfile::TempDir,
    store: TranscriptStore,
    pub(crate) runner: TurnRunner,
    pub(crate) session: Session,
}

pub(crate) fn harness(spy: Arc<Spy>, provider: Arc<ScriptedProvider>, proactive: bool) -> Harness {
    harness_with_tools(spy, provider, proactive, Arc::new(Echo))
}

/// [`harness`] with its own tools.
pub(crate) fn harness_with_tools(
    spy: Arc<Spy>,
    provider: Arc<ScriptedProvider>,
    proactive: bool,
    tools: Arc<dyn ToolExecutor>,
) -> Harness {
    harness_sized(spy, provider, proactive, tools, WINDOW)
}

/// [`harness_with_tools`] for a model with a `window`-token window.
pub(crate) fn harness_sized(
    spy: Arc<Spy>,
    provider: Arc<ScriptedProvider>,
    proactive: bool,
    tools: Arc<dyn ToolExecutor>,
    window: u64,
) -> Harness {
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
    // The spy is trusted like the host's own engines: its scripted answers
    // are shorthand (a `compacted()` that wrote nothing to the transcript),
    // which the guard refuses from a plugin (`hardening`); here the runner's
    // own rules (overflow recovery, the progress guard) are under test.
    let engine = Arc::new(GuardedEngine::new(
        Selected {
            id: "spy".into(),
            owner: Owner::Core,
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
        tools,
        store.clone(),
        RunnerConfig {
            window,
            reserve_tokens: 1_024,
            proactive_compaction: proactive,
            system_prompt: "be brief".into(),
            model: None,
            tools: vec!["exec".into()],
            compaction_window: None,
            agent: ctxbox_host::runner::AgentIdentity {
                id: Some("main".into()),
                workspace_dir: Some("/work/space".into()),
                agent_dir: None,
            },
        },
    );
    Harness {
        _dir: dir,
        store,
        runner,
        session: Session::new(transcript, Some("agent:main".into())),
    }
}

impl Harness {
    /// The transcript store the session lives in.
    pub(crate) fn store(&self) -> &TranscriptStore {
        &self.store
    }

    /// Appends a user message and an answer to the session, no model call
    /// made: history to compact.
    pub(crate) fn append_turn(&mut self, text: &str) -> Result<(), ctxbox_host::TranscriptError> {
        self.session.transcript().append(&[
            AgentMessage::user_text(text),
            AgentMessage::assistant_text("noted"),
        ])?;
        Ok(())
    }

    pub(crate) async fn turn(
        &mut self,
        text: &str,
    ) -> Result<ctxbox_host::runner::TurnReport, TurnError> {
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
    let provider = scripted(vec![overflow(), answer()]);
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
    assert_eq!(
        params.token_budget,
        Some(harness.runner.config().prompt_budget())
    );
    assert_eq!(provider.prompts().len(), 2, "asked again after compacting");
}

#[tokio::test]
async fn at_most_three_compactions_then_an_error_when_no_tool_result_is_oversized() {
    // Compactions that really shrink the prompt (the progress guard stops
    // ones that do not, see `compaction_convergence`), yet the model keeps
    // refusing.
    let spy = Spy::padded(
        true,
        vec![compacted(), compacted(), compacted(), compacted()],
    );
    let provider = scripted(vec![overflow(); 10]);
    let mut harness = harness(spy.clone(), provider.clone(), false);
    let error = harness.turn("hi").await.expect_err("never fits");
    assert!(
        matches!(
            error,
            TurnError::ContextOverflow {
                prompt_tokens: 9_000,
                window: WINDOW,
                ..
            }
        ),
        "{error}"
    );
    assert_eq!(
        spy.compactions.lock().expect("lock").len(),
        3,
        "three compactions per turn at most"
    );
    // 3 compactions, no truncation pass (nothing to truncate), the final
    // refusal.
    assert_eq!(provider.prompts().len(), 4);
}

#[tokio::test]
async fn a_model_answer_gives_overflow_recovery_its_three_attempts_back() {
    let spy = Spy::padded(true, vec![compacted(); 6]);
    // Two overflows, a tool call (the model answered), then overflows
    // again: three more compactions, then the fourth overflow ends the turn.
    let provider = scripted(vec![
        overflow(),
        overflow(),
        Ok(tool_call("c1")),
        overflow(),
        overflow(),
        overflow(),
        overflow(),
        answer(),
    ]);
    let mut harness = harness(spy.clone(), provider.clone(), false);
    let error = harness.turn("hi").await.expect_err("out of attempts");
    assert!(
        matches!(error, TurnError::ContextOverflow { .. }),
        "{error}"
    );
    assert_eq!(spy.compactions.lock().expect("lock").len(), 5);
    assert_eq!(provider.prompts().len(), 7);
}

#[tokio::test]
async fn a_turn_calls_the_engine_in_the_reference_order() {
    let spy = Spy::new(false, vec![]);
    let provider = scripted(vec![Ok(tool_call("c1")), answer(), answer()]);
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
            Operation::Assemble,
            Operation::Assemble,
            Operation::AfterTurn,
            Operation::Maintain,
        ],
        "after-turn, not also ingest or ingest-batch, hears of the turn"
    );
    let news = spy.after_turn_news.lock().expect("lock").clone();
    let done = AgentMessage::assistant_text("done");
    assert_eq!(news.len(), 1);
    assert_eq!(news[0].len(), 4, "{:?}", news[0]);
    assert_eq!(news[0][0], AgentMessage::user_text("hi"));
    assert_eq!(news[0][1], tool_call("c1"));
    assert!(
        matches!(&news[0][2], AgentMessage::ToolResult { tool_call_id, .. } if tool_call_id == "c1")
    );
    assert_eq!(news[0][3], done);
    // The second turn does not bootstrap again.
    harness.turn("again").await.expect("second turn");
    assert_eq!(spy.count(Operation::Bootstrap), 1);
    assert_eq!(harness.session.transcript().active_branch().len(), 6);
}

#[tokio::test]
async fn the_pre_prompt_check_compacts_before_a_too_large_prompt() {
    let spy = Spy::new(false, vec![compacted()]);
    let provider = scripted(vec![answer()]);
    let mut harness = harness(spy.clone(), provider, true);
    let big = "word ".repeat(8_000);
    let report = harness.turn(&big).await.expect("turn");
    assert_eq!(report.compactions, 1, "compacted before asking the model");
    assert_eq!(report.overflow_retries, 0);
    assert!(!report.truncated_tool_traffic, "no tool result to truncate");
    // As the reference's context-budget recovery: forced, at the budget.
    let params = spy.compactions.lock().expect("lock")[0].clone();
    assert!(params.force);
    assert_eq!(params.compaction_target, CompactionTarget::Budget);
    assert_eq!(
        params.token_budget,
        Some(harness.runner.config().prompt_budget())
    );
}

#[tokio::test]
async fn an_engine_owning_compaction_skips_the_pre_prompt_check() {
    let spy = Spy::new(true, vec![compacted()]);
    let provider = scripted(vec![answer()]);
    let mut harness = harness(spy.clone(), provider, true);
    harness.turn(&"word ".repeat(8_000)).await.expect("turn");
    assert_eq!(spy.count(Operation::Compact), 0);
}

#[tokio::test]
async fn after_turn_is_told_the_turns_messages_after_a_compaction_moved_them() {
    let spy = Spy::new(false, vec![]);
    let provider = scripted(vec![answer(), overflow(), answer()]);
    let mut harness = harness(spy.clone(), provider, false);
    harness.turn(&long_ask()).await.expect("first turn");
    // The second turn's overflow compacts the transcript in place: the
    // context is rebuilt (a summary, then the kept tail) mid-turn.
    *spy.compactor.lock().expect("lock") = Some(small_compactor(&harness.store));
    let report = harness.turn("second").await.expect("second turn");
    assert_eq!(report.compactions, 1);
    let news = spy.after_turn_news.lock().expect("lock").clone();
    assert_eq!(
        news[1],
        vec![
            AgentMessage::user_text("second"),
            AgentMessage::assistant_text("done")
        ]
    );
}

/// A first message long enough that a summary of it is smaller (native
/// compaction writes none that would grow the context).
fn long_ask() -> String {
    "Please look at the cache layer and the retry loop around it. ".repeat(40)
}

/// Native compaction that keeps almost nothing verbatim, so a forced one
/// always has something to summarize.
fn small_compactor(store: &TranscriptStore) -> Arc<Compactor> {
    let config = CompactionConfig {
        keep_recent_tokens: 1,
        ..CompactionConfig::default()
    };
    Arc::new(Compactor::from_config(store.clone(), config).expect("compactor"))
}

#[tokio::test]
async fn background_maintenance_ends_before_the_next_turn_reaches_the_engine() {
    let spy = Spy::build(false, vec![], false, Some(TurnMaintenanceMode::Background));
    let provider = scripted(vec![answer(), answer()]);
    let mut harness = harness(spy.clone(), provider, false);
    harness.turn("first").await.expect("first turn");
    harness.turn("second").await.expect("second turn");
    // Maintain 0 is the bootstrap's, 1 the first turn's; assemble 1 is the
    // second turn's first engine call.
    assert!(
        spy.position(Operation::Maintain, 1) < spy.position(Operation::Assemble, 1),
        "{:?}",
        spy.calls.lock().expect("lock")
    );
    harness.session.wait_for_maintenance().await;
    assert_eq!(spy.count(Operation::Maintain), 3);
}

#[tokio::test]
async fn only_background_maintenance_is_budgeted_to_pay_deferred_compaction() {
    for (mode, turns) in [
        (Some(TurnMaintenanceMode::Background), true),
        (Some(TurnMaintenanceMode::Foreground), false),
        (None, false),
    ] {
        let spy = Spy::build(false, vec![], false, mode);
        let provider = scripted(vec![answer(), answer()]);
        let mut harness = harness(spy.clone(), provider, false);
        harness.turn("first").await.expect("first turn");
        harness.turn("second").await.expect("second turn");
        harness.session.wait_for_maintenance().await;
        // The bootstrap's maintenance is awaited; each turn's runs after
        // the turn only in the background, and only there may it compact
        // (its runtime context says so too).
        let deferred = spy.deferred_compaction.lock().expect("lock").clone();
        assert_eq!(deferred, [false, turns, turns], "{mode:?}");
        let allowed: Vec<bool> = spy
            .runtime_of(Operation::Maintain)
            .iter()
            .map(|seen| {
                seen.context
                    .as_ref()
                    .is_some_and(|context| context["allowDeferredCompactionExecution"] == true)
            })
            .collect();
        assert_eq!(allowed, deferred, "{mode:?}");
    }
}

#[tokio::test]
async fn a_replay_ends_after_its_last_background_maintenance() {
    let spy = Spy::build(false, vec![], false, Some(TurnMaintenanceMode::Background));
    let provider = scripted(vec![answer(), answer()]);
    let mut harness = harness(spy.clone(), provider, false);
    let script = ReplayScript::from_messages([
        AgentMessage::user_text("first"),
        AgentMessage::assistant_text("done"),
        AgentMessage::user_text("second"),
        AgentMessage::assistant_text("done"),
    ]);
    let report = harness
        .runner
        .run_script(
            &mut harness.session,
            &Replay::new(WINDOW),
            &script,
            &CancellationToken::new(),
            &mut |_, _| {},
        )
        .await
        .expect("replayed");
    assert_eq!(report.turns.len(), 2);
    assert_eq!(
        spy.count(Operation::Maintain),
        3,
        "bootstrap's and both turns' maintenance ran before the replay returned"
    );
}

#[tokio::test]
async fn a_thread_bootstrap_projection_is_reused_while_its_epoch_holds() {
    let spy = Spy::new(false, vec![]);
    *spy.projection_epoch.lock().expect("lock") = Some(1);
    let provider = scripted(vec![answer(), answer(), answer()]);
    let mut harness = harness(spy.clone(), provider.clone(), false);
    harness.turn("hi").await.expect("first turn");
    harness.turn("again").await.expect("second turn");
    let done = AgentMessage::assistant_text("done");
    let view = |n: usize| AgentMessage::user_text(format!("view {n}"));
    {
        let prompts = provider.prompts();
        assert_eq!(prompts[0], vec![view(1), AgentMessage::user_text("hi")]);
        assert_eq!(
            prompts[1],
            vec![
                view(1),
                AgentMessage::user_text("hi"),
                done.clone(),
                AgentMessage::user_text("again")
            ],
            "the first projection, and what came since"
        );
    }
    *spy.projection_epoch.lock().expect("lock") = Some(2);
    harness.turn("third").await.expect("third turn");
    let prompts = provider.prompts();
    assert_eq!(prompts[2][0], view(3), "a new epoch builds afresh");
    assert_eq!(prompts[2].len(), 6);
}

#[tokio::test]
async fn a_compaction_under_a_projection_invalidates_it() {
    let spy = Spy::new(false, vec![]);
    *spy.projection_epoch.lock().expect("lock") = Some(1);
    let provider = scripted(vec![answer(), answer(), answer()]);
    let mut harness = harness(spy.clone(), provider.clone(), false);
    harness.turn(&long_ask()).await.expect("first turn");
    // The engine compacts in place in the second turn's after-turn, keeping
    // its epoch.
    *spy.after_turn_compactor.lock().expect("lock") = Some(small_compactor(&harness.store));
    harness.turn("again").await.expect("second turn");
    *spy.after_turn_compactor.lock().expect("lock") = None;
    harness.turn("third").await.expect("third turn");
    let prompts = provider.prompts();
    assert_eq!(prompts[1][0], AgentMessage::user_text("view 1"), "reused");
    assert_eq!(
        prompts[2][0],
        AgentMessage::user_text("view 3"),
        "rebuilt from the compacted context"
    );
    assert!(
        prompts[2]
            .iter()
            .any(|message| matches!(message, AgentMessage::CompactionSummary { .. })),
        "{:?}",
        prompts[2]
    );
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
    let harness = harness(spy.clone(), scripted(vec![]), false);
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
    let spy = Spy::build(false, vec![], true, None);
    let harness = harness(spy.clone(), scripted(vec![]), false);
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

#[tokio::test]
async fn a_spawn_failed_by_the_callers_abort_is_still_rolled_back_once() {
    let spy = Spy::new(false, vec![]);
    let harness = harness(spy.clone(), scripted(vec![]), false);
    let abort = CancellationToken::new();
    let outcome = harness
        .runner
        .spawn_subagent(&spawn(), &abort, async {
            abort.cancel();
            Err::<(), _>(SpawnFailed)
        })
        .await;
    let Err(SpawnOutcome::SpawnFailed { rollback, .. }) = outcome else {
        panic!("the spawn failed");
    };
    assert!(matches!(rollback, Some(Ok(()))), "{rollback:?}");
    assert_eq!(
        *spy.rollbacks.lock().expect("lock"),
        vec!["prep-sub-1".to_owned()],
        "rolled back exactly once, not aborted with the caller"
    );
}

#[tokio::test]
async fn overflow_compactions_tell_the_engine_their_trigger_and_attempt() {
    let spy = Spy::padded(true, vec![compacted(), compacted()]);
    let provider = scripted(vec![overflow(), overflow(), answer()]);
    let mut harness = harness(spy.clone(), provider, false);
    harness.turn("hi").await.expect("recovers");
    let seen = spy.runtime_of(Operation::Compact);
    assert_eq!(seen.len(), 2);
    for (index, seen) in seen.iter().enumerate() {
        assert_eq!(
            seen.context,
            Some(serde_json::json!({
                "trigger": "overflow",
                "currentTokenCount": 9_000,
                "attempt": index + 1,
                "maxAttempts": 3,
            }))
        );
        let settings = seen.settings.as_ref().expect("settings");
        assert_eq!(settings["schemaVersion"], 1);
        assert_eq!(settings["runtime"]["mode"], "degraded");
        assert_eq!(
            settings["diagnostics"]["degradedReason"],
            "context_overflow"
        );
        assert_eq!(settings["contextEngineSelection"]["selectedId"], "spy");
    }
}

#[tokio::test]
async fn a_manual_compaction_and_a_pre_prompt_one_say_which_they_are() {
    let spy = Spy::new(false, vec![compacted(), compacted()]);
    let provider = scripted(vec![answer()]);
    let mut harness = harness(spy.clone(), provider, true);
    harness
        .runner
        .compact_now(&mut harness.session, None, &CancellationToken::new())
        .await
        .expect("compacts");
    harness.turn(&"word ".repeat(8_000)).await.expect("answers");
    let seen = spy.runtime_of(Operation::Compact);
    assert_eq!(
        seen[0].context,
        Some(serde_json::json!({"trigger": "manual", "forceReason": "manual"}))
    );
    assert_eq!(
        seen[0].settings.as_ref().expect("settings")["runtime"]["mode"],
        "normal"
    );
    // The pre-prompt check's compaction is the reference's context-budget
    // recovery: its estimate and its overflow attempt go along.
    let budget = seen
        .get(1)
        .and_then(|seen| seen.context.clone())
        .expect("the pre-prompt check's compaction");
    assert_eq!(budget["trigger"], "budget");
    assert!(
        budget["currentTokenCount"]
            .as_u64()
            .is_some_and(|count| count > 8_000)
    );
    assert_eq!(
        (budget["attempt"].as_u64(), budget["maxAttempts"].as_u64()),
        (Some(1), Some(3))
    );
}

#[tokio::test]
async fn assemble_and_after_turn_get_runtime_settings_and_the_prompt_size() {
    let spy = Spy::new(false, Vec::new());
    let mut reply = AgentMessage::assistant_text("done");
    if let AgentMessage::Assistant { usage, .. } = &mut reply {
        *usage = Some(ctxbox_host::contract::types::Usage {
            input: 1_200,
            output: 30,
            cache_read: 300,
            cache_write: 0,
            total: 1_530,
        });
    }
    let provider = scripted(vec![Ok(reply)]);
    let mut harness = harness(spy.clone(), provider, false);
    harness.turn("hi").await.expect("answers");
    let assembled = spy.runtime_of(Operation::Assemble);
    let settings = assembled[0].settings.as_ref().expect("settings");
    // The reserve as the reference computes it: 1,024 configured, raised to
    // 20,000, capped at a quarter of the 8,192-token window.
    assert_eq!(settings["limits"]["promptTokenBudget"], WINDOW - 2_048);
    assert_eq!(settings["limits"]["maxOutputTokens"], 2_048);
    assert_eq!(settings["runtime"]["host"], "ctxbox");
    let after = spy.runtime_of(Operation::AfterTurn);
    assert_eq!(
        after[0].context,
        Some(serde_json::json!({"currentTokenCount": 1_500})),
        "input plus cached prompt tokens of the last call"
    );
    assert!(after[0].settings.is_some());
}

#[tokio::test]
async fn runtime_settings_reach_only_engines_that_accept_them() {
    let mut spy = Spy::new(false, vec![compacted()]);
    Arc::get_mut(&mut spy)
        .expect("not shared yet")
        .info
        .accepted_host_params = Some(vec![ctxbox_host::contract::types::HostParam::SessionKey]);
    let provider = scripted(vec![overflow(), answer()]);
    let mut harness = harness(spy.clone(), provider, false);
    harness.turn("hi").await.expect("recovers");
    let seen = spy.runtime.lock().expect("lock").clone();
    assert!(seen.len() >= 3, "{seen:?}");
    assert!(
        seen.iter()
            .all(|seen| seen.settings.is_none() && seen.context.is_none()),
        "{seen:?}"
    );
}

/// `host-param-projection.test.ts`: an engine declaring a subset gets that
/// subset, one declaring all four gets all of them.
#[tokio::test]
async fn engines_declaring_a_subset_of_host_params_get_that_subset() {
    use ctxbox_host::contract::types::HostParam;
    let all = vec![
        HostParam::SessionKey,
        HostParam::Prompt,
        HostParam::RuntimeSettings,
        HostParam::RuntimeContext,
    ];
    for (accepted, settings, context) in [
        (vec![HostParam::Prompt], false, false),
        (vec![HostParam::RuntimeSettings], true, false),
        (all, true, true),
    ] {
        let mut spy = Spy::new(false, vec![compacted()]);
        Arc::get_mut(&mut spy)
            .expect("not shared yet")
            .info
            .accepted_host_params = Some(accepted.clone());
        let provider = scripted(vec![overflow(), answer()]);
        let mut harness = harness(spy.clone(), provider, false);
        harness.turn("hi").await.expect("recovers");
        let seen = spy.runtime.lock().expect("lock").clone();
        assert!(seen.len() >= 3, "{accepted:?}: {seen:?}");
        for call in &seen {
            // `maintain` has no runtime settings; `assemble` no context.
            if call.operation != Operation::Maintain {
                assert_eq!(call.settings.is_some(), settings, "{accepted:?}: {call:?}");
            }
            if !context {
                assert!(call.context.is_none(), "{accepted:?}: {call:?}");
            }
        }
        if context {
            assert!(
                seen.iter().any(|call| call.context.is_some()),
                "{accepted:?}: {seen:?}"
            );
        }
    }
}

/// The text blocks of `message`, joined.
fn text_of(message: &AgentMessage) -> String {
    message
        .content()
        .iter()
        .filter_map(|block| match block {
            ctxbox_host::contract::types::ContentBlock::Text { text } => Some(text.as_str()),
            _ => None,
        })
        .collect()
}

fn user_texts(messages: &[AgentMessage]) -> Vec<String> {
    messages
        .iter()
        .filter(|message| matches!(message, AgentMessage::User { .. }))
        .map(text_of)
        .collect()
}

/// The reference drops an orphaned trailing user message: a turn that
/// failed before the model answered leaves nothing on the branch the next
/// prompt is built from, and nothing is deleted from the file.
#[tokio::test]
async fn a_failed_turns_unanswered_message_is_rolled_back() {
    let spy = Spy::new(false, Vec::new());
    let provider = scripted(vec![
        Err(ProviderError::Failed("upstream 500".into())),
        answer(),
    ]);
    let mut harness = harness(spy.clone(), provider.clone(), false);
    let error = harness
        .turn("first, never answered")
        .await
        .expect_err("fails");
    assert!(error.to_string().contains("upstream 500"), "{error}");
    let branch = harness.session.transcript().active_branch();
    assert!(branch.is_empty(), "rolled back: {branch:?}");
    assert_eq!(
        spy.count(Operation::AfterTurn),
        0,
        "the engine never hears of the failed turn"
    );

    harness.turn("second").await.expect("answers");
    let prompts = provider.prompts();
    assert_eq!(user_texts(prompts.last().expect("a prompt")), ["second"]);

    // Durable: the file, opened afresh, continues from the rollback, and it
    // still holds the rolled-back message.
    let path = harness.session.transcript().path().to_owned();
    let reopened = harness.store.open(&path).expect("reopen");
    let texts: Vec<String> = reopened
        .history()
        .entries()
        .iter()
        .map(|entry| text_of(&entry.message))
        .collect();
    assert_eq!(texts, ["second", "done"]);
    let raw = std::fs::read_to_string(&path).expect("read");
    assert!(raw.contains("first, never answered"), "kept in the file");
    assert!(raw.contains("ctxbox.turn-rolled-back"));
}

#[tokio::test]
async fn a_failed_turn_the_model_answered_keeps_its_messages() {
    let spy = Spy::new(false, Vec::new());
    let provider = scripted(vec![
        Ok(tool_call("c1")),
        Err(ProviderError::Failed("upstream 500".into())),
    ]);
    let mut harness = harness(spy, provider, false);
    harness
        .turn("run it")
        .await
        .expect_err("fails after a tool call");
    let branch = harness.session.transcript().active_branch();
    assert_eq!(
        branch.len(),
        3,
        "the ask, the call and its result: {branch:?}"
    );
}

#[tokio::test]
async fn a_subagent_starts_isolated_unless_a_fork_is_asked_for() {
    use ctxbox_host::runner::SubagentRequest;
    let harness = harness(Spy::new(false, Vec::new()), scripted(Vec::new()), false);
    let default = harness
        .runner
        .plan_subagent(&harness.session, &SubagentRequest::default());
    assert_eq!(default.context_mode, ContextMode::Isolated);
    assert!(default.prepare_engine);
    assert_eq!(default.note, None);
    let fork = harness.runner.plan_subagent(
        &harness.session,
        &SubagentRequest {
            context: Some(ContextMode::Fork),
            light_context: true,
        },
    );
    assert_eq!(fork.context_mode, ContextMode::Fork, "a small parent forks");
    assert!(fork.prepare_engine, "a forked child is always prepared for");
}

#[tokio::test]
async fn a_fork_of_a_parent_too_large_starts_isolated_with_a_note() {
    use ctxbox_host::runner::{PARENT_FORK_MAX_TOKENS, SubagentRequest};
    let harness = harness(Spy::new(false, Vec::new()), scripted(Vec::new()), false);
    let big = "word ".repeat(PARENT_FORK_MAX_TOKENS as usize);
    harness
        .session
        .transcript()
        .append(&[AgentMessage::user_text(big)])
        .expect("append");
    let plan = harness.runner.plan_subagent(
        &harness.session,
        &SubagentRequest {
            context: Some(ContextMode::Fork),
            light_context: false,
        },
    );
    assert_eq!(plan.context_mode, ContextMode::Isolated);
    let note = plan.note.expect("a note");
    assert!(
        note.starts_with("Parent context is too large to fork (")
            && note.ends_with(&format!(
                "/{PARENT_FORK_MAX_TOKENS} tokens); starting with isolated context instead."
            )),
        "{note}"
    );
}

#[tokio::test]
async fn a_light_isolated_subagent_is_spawned_without_asking_the_engine() {
    use ctxbox_host::runner::SubagentRequest;
    let spy = Spy::new(false, Vec::new());
    let harness = harness(spy.clone(), scripted(Vec::new()), false);
    let light = harness.runner.plan_subagent(
        &harness.session,
        &SubagentRequest {
            context: None,
            light_context: true,
        },
    );
    assert!(!light.prepare_engine);
    let spawned = harness
        .runner
        .spawn_planned_subagent(&light, &spawn(), &CancellationToken::new(), async {
            Ok::<_, SpawnFailed>("child")
        })
        .await
        .expect("spawned");
    assert_eq!(spawned, "child");
    assert_eq!(spy.count(Operation::PrepareSubagentSpawn), 0);

    let full = harness
        .runner
        .plan_subagent(&harness.session, &SubagentRequest::default());
    harness
        .runner
        .spawn_planned_subagent(&full, &spawn(), &CancellationToken::new(), async {
            Ok::<_, SpawnFailed>("child")
        })
        .await
        .expect("spawned");
    assert_eq!(spy.count(Operation::PrepareSubagentSpawn), 1);
}

/// A runtime-context carrier as OpenClaw writes one.
fn carrier(text: &str) -> AgentMessage {
    AgentMessage::Custom {
        custom_type: ctxbox_host::contract::types::RUNTIME_CONTEXT_CUSTOM_TYPE.into(),
        content: vec![ctxbox_host::contract::types::ContentBlock::text(text)],
        display: false,
        details: Some(r#"{"source":"openclaw-runtime-context"}"#.into()),
    }
}

/// The reference keeps hidden runtime-context carriers out of every engine
/// hook (`context-engine-lifecycle.test.ts`) and moves the current turn's to
/// the end of the prompt; older ones reach no prompt.
#[tokio::test]
async fn runtime_context_carriers_reach_no_engine_and_only_their_turns_prompts_last() {
    let spy = Spy::new(false, Vec::new());
    let provider = scripted(vec![answer(), answer()]);
    let mut harness = harness(spy.clone(), provider.clone(), false);
    for (context, ask) in [("turn one context", "one"), ("turn two context", "two")] {
        harness
            .runner
            .run_turn(
                &mut harness.session,
                vec![carrier(context), AgentMessage::user_text(ask)],
                &CancellationToken::new(),
            )
            .await
            .expect("answers");
    }
    let carriers_in = |prompt: &[AgentMessage]| -> Vec<String> {
        prompt
            .iter()
            .filter(|message| message.is_runtime_context_carrier())
            .map(text_of)
            .collect()
    };
    let prompts = provider.prompts();
    assert_eq!(prompts.len(), 2);
    // The spy keeps its whole history: a carrier in a prompt is the
    // runner's, never one the engine was given.
    assert_eq!(carriers_in(&prompts[0]), ["turn one context"]);
    assert_eq!(carriers_in(&prompts[1]), ["turn two context"]);
    for prompt in &prompts {
        assert!(
            prompt
                .last()
                .is_some_and(AgentMessage::is_runtime_context_carrier),
            "{prompt:?}"
        );
    }
    assert_eq!(user_texts(&prompts[1]), ["one", "two"]);
    let news = spy.after_turn_news.lock().expect("lock").clone();
    assert_eq!(news.len(), 2);
    assert!(
        news.iter()
            .flatten()
            .all(|message| !message.is_runtime_context_carrier()),
        "{news:?}"
    );
    assert_eq!(user_texts(&news[1]), ["two"]);
    // The transcript keeps them, as OpenClaw's does.
    let raw = std::fs::read_to_string(harness.session.transcript().path()).expect("read");
    assert!(raw.contains("turn one context") && raw.contains("turn two context"));
}

/// The reference's current-turn fence: transcript reads made while a turn's
/// prompt is built stop before the turn's first entry (the service itself:
/// `host_services::a_delta_follows_the_active_branch_and_stops_at_the_current_turn`).
#[tokio::test]
async fn assemble_is_fenced_before_the_current_turns_first_entry() {
    let spy = Spy::new(false, Vec::new());
    let provider = scripted(vec![answer(), answer()]);
    let mut harness = harness(spy.clone(), provider, false);
    harness.turn("one").await.expect("answers");
    harness
        .runner
        .run_turn(
            &mut harness.session,
            vec![carrier("context"), AgentMessage::user_text("two")],
            &CancellationToken::new(),
        )
        .await
        .expect("answers");
    let branch = harness.session.transcript().active_branch();
    let first_of = |text: &str| {
        branch
            .iter()
            .position(|entry| text_of(&entry.message) == text)
            .map(|at| branch[at].id.clone())
    };
    let fences = spy.assemble_fences.lock().expect("lock").clone();
    // The second turn's first entry is its carrier, just before "two".
    let carrier_id = branch
        .iter()
        .find(|entry| entry.message.is_runtime_context_carrier())
        .map(|entry| entry.id.clone());
    assert_eq!(fences, [first_of("one"), carrier_id]);
    assert!(fences.iter().all(Option::is_some));
}

fn fork_request() -> ctxbox_host::runner::SubagentStart {
    ctxbox_host::runner::SubagentStart {
        agent_id: "main".into(),
        request: ctxbox_host::runner::SubagentRequest {
            context: Some(ContextMode::Fork),
            light_context: false,
        },
        ttl_ms: None,
    }
}

/// The reference's parent fork (`session-accessor.sqlite-parent-fork.ts`):
/// the child gets its own key and session id, and its transcript copies the
/// parent's active branch up to the last completed answer — no abandoned
/// branch, no turn in progress (the spawning tool call).
#[tokio::test]
async fn a_forked_subagent_gets_its_own_session_holding_the_parents_active_branch() {
    let spy = Spy::new(false, vec![]);
    let provider = scripted(vec![
        answer(),
        Err(ProviderError::Failed("upstream 500".into())),
        answer(),
    ]);
    let mut harness = harness(spy.clone(), provider, false);
    harness.turn("one").await.expect("answers");
    harness.turn("rolled back").await.expect_err("fails");
    harness.turn("two").await.expect("answers");
    harness
        .session
        .transcript()
        .append(&[
            AgentMessage::user_text("spawn a helper"),
            AgentMessage::tool_call("c1", "sessions_spawn", "{}"),
        ])
        .expect("append");

    let mut seen = None;
    let child = harness
        .runner
        .start_subagent(
            &harness.session,
            &fork_request(),
            &CancellationToken::new(),
            |session| {
                seen = Some(session);
                async { Ok::<_, SpawnFailed>("child") }
            },
        )
        .await
        .expect("spawned");
    let child_ref = child.session.session_ref().clone();
    assert_eq!(
        seen.as_ref(),
        Some(&child_ref),
        "the spawn runs the child's session"
    );
    let key = child_ref.session_key.clone().expect("a key");
    let uuid = key
        .strip_prefix("agent:main:subagent:")
        .expect("the reference's key shape");
    assert!(
        uuid.len() == 36
            && uuid.split('-').map(str::len).eq([8, 4, 4, 4, 12])
            && uuid.chars().all(|c| c == '-' || c.is_ascii_hexdigit()),
        "{key}"
    );
    let parent = harness.session.session_ref();
    assert_ne!(child_ref.session_id, parent.session_id);
    assert_ne!(child_ref.session_file, parent.session_file);
    assert_eq!(child.plan.context_mode, ContextMode::Fork);

    let transcript = child.session.transcript();
    assert_eq!(
        transcript.header().parent_session.as_deref(),
        Some(parent.session_file.as_str())
    );
    let texts: Vec<String> = transcript
        .active_branch()
        .iter()
        .map(|entry| text_of(&entry.message))
        .collect();
    assert_eq!(texts, ["one", "done", "two", "done"]);
    let raw = std::fs::read_to_string(&child_ref.session_file).expect("read");
    assert!(!raw.contains("rolled back") && !raw.contains("spawn a helper"));
    assert_eq!(
        spy.count(Operation::PrepareSubagentSpawn),
        1,
        "a forked child is prepared for"
    );

    harness
        .runner
        .end_subagent(
            child,
            SubagentEndReason::Completed,
            &CancellationToken::new(),
        )
        .await
        .expect("ended");
    assert_eq!(spy.count(Operation::OnSubagentEnded), 1);
    assert!(
        std::path::Path::new(&child_ref.session_file).exists(),
        "an ended child keeps its transcript"
    );
}

/// The reference's spawn rollback (`subagent-spawn.fork-cleanup.test.ts`:
/// "removes the failed child … and preserves the parent"): the engine's
/// preparation is rolled back once and the child's session deleted.
#[tokio::test]
async fn a_failed_subagent_spawn_rolls_back_once_and_deletes_the_childs_transcript() {
    let spy = Spy::new(false, vec![]);
    let mut harness = harness(spy.clone(), scripted(vec![answer()]), false);
    harness.turn("one").await.expect("answers");
    let parent_before = std::fs::read(harness.session.transcript().path()).expect("read");

    let mut child_file = None;
    let outcome = harness
        .runner
        .start_subagent(
            &harness.session,
            &fork_request(),
            &CancellationToken::new(),
            |session| {
                assert!(std::path::Path::new(&session.session_file).exists());
                child_file = Some((session.session_file, session.session_key));
                async { Err::<(), _>(SpawnFailed) }
            },
        )
        .await;
    let Err(SpawnOutcome::SpawnFailed { rollback, .. }) = outcome else {
        panic!("the spawn failed");
    };
    assert!(matches!(rollback, Some(Ok(()))));
    let (file, key) = child_file.expect("the spawn was attempted");
    assert_eq!(
        *spy.rollbacks.lock().expect("lock"),
        vec![format!("prep-{}", key.expect("a key"))]
    );
    assert!(
        !std::path::Path::new(&file).exists(),
        "the child's transcript is gone"
    );
    assert_eq!(
        std::fs::read(harness.session.transcript().path()).expect("read"),
        parent_before,
        "the parent is untouched"
    );

    // An isolated child starts empty, its header still naming the parent.
    let isolated = harness
        .runner
        .start_subagent(
            &harness.session,
            &ctxbox_host::runner::SubagentStart {
                request: ctxbox_host::runner::SubagentRequest::default(),
                ..fork_request()
            },
            &CancellationToken::new(),
            |_| async { Ok::<_, SpawnFailed>(()) },
        )
        .await
        .expect("spawned");
    assert!(isolated.session.transcript().active_branch().is_empty());
    assert_eq!(
        isolated
            .session
            .transcript()
            .header()
            .parent_session
            .as_deref(),
        Some(harness.session.session_ref().session_file.as_str())
    );
}

/// The reference's session target (`agentId`, `sessionId`, `sessionKey`,
/// `storePath`) reaches compact, after-turn and maintain in their runtime
/// context; maintain's also names the agent's workspace, the session's cwd,
/// a compaction's trigger and, after a rotation, the session it continues.
#[tokio::test]
async fn engines_are_told_the_session_target_and_maintain_its_runtime_context() {
    let spy = Spy::new(false, vec![compacted()]);
    let provider = scripted(vec![answer()]);
    let mut harness = harness(spy.clone(), provider, false);
    harness
        .runner
        .compact_now(&mut harness.session, None, &CancellationToken::new())
        .await
        .expect("compacts");
    harness.turn("hi").await.expect("answers");
    let session = harness.session.session_ref().clone();
    let store = std::path::Path::new(&session.session_file)
        .parent()
        .expect("a directory")
        .to_string_lossy()
        .into_owned();
    let expected = serde_json::json!({
        "agentId": "main",
        "sessionId": session.session_id,
        "sessionKey": "agent:main",
        "storePath": store,
    });
    for operation in [
        Operation::Compact,
        Operation::AfterTurn,
        Operation::Maintain,
    ] {
        let seen = spy.runtime_of(operation);
        assert!(!seen.is_empty(), "{operation:?}");
        for seen in seen {
            assert_eq!(seen.target.as_ref(), Some(&expected), "{operation:?}");
        }
    }
    let maintained = spy.runtime_of(Operation::Maintain);
    // compaction, bootstrap (at the first turn), turn.
    assert_eq!(maintained.len(), 3, "{maintained:?}");
    for seen in &maintained {
        let context = seen.context.as_ref().expect("a context");
        assert_eq!(context["workspaceDir"], "/work/space");
        assert_eq!(context["cwd"], "/");
        assert!(context.get("allowDeferredCompactionExecution").is_none());
    }
    let triggers: Vec<&serde_json::Value> = maintained
        .iter()
        .map(|seen| &seen.context.as_ref().expect("context")["trigger"])
        .collect();
    assert_eq!(
        triggers,
        [
            &serde_json::json!("manual"),
            &serde_json::Value::Null,
            &serde_json::Value::Null
        ]
    );
}

/// Listens to a runner's compactions.
#[derive(Default)]
struct HookLog(Mutex<Vec<String>>);

impl ctxbox_host::runner::CompactionHooks for HookLog {
    fn before_compaction(&self, event: &ctxbox_host::runner::CompactionStarting) {
        self.0.lock().expect("lock").push(format!(
            "before {} {}",
            event.trigger.as_deref().unwrap_or("-"),
            event.message_count
        ));
    }

    fn after_compaction(&self, event: &ctxbox_host::runner::CompactionFinished) {
        self.0.lock().expect("lock").push(format!(
            "after {} compacted={} rotated={}",
            event.trigger.as_deref().unwrap_or("-"),
            event.compacted,
            event.previous_session_id.is_some()
        ));
    }
}

/// The reference's `before_compaction` / `after_compaction` hooks: before
/// every compaction, after one that answered `ok` (a skipped one says it
/// compacted nothing), none after a failure.
#[tokio::test]
async fn compaction_hooks_hear_before_and_after_each_compaction() {
    let failed = CompactResult {
        ok: false,
        compacted: false,
        reason: Some("no room".into()),
        ..nothing_to_compact()
    };
    let spy = Spy::new(false, vec![compacted(), nothing_to_compact(), failed]);
    let mut harness = harness(spy, scripted(vec![]), false);
    harness.append_turn("something to compact").expect("append");
    let hooks = Arc::new(HookLog::default());
    let Harness {
        _dir,
        store,
        runner,
        mut session,
    } = harness;
    let runner = runner.with_compaction_hooks(hooks.clone());
    for _ in 0..3 {
        let _ = runner
            .compact_now(&mut session, None, &CancellationToken::new())
            .await;
    }
    drop((store, _dir));
    assert_eq!(
        *hooks.0.lock().expect("lock"),
        [
            "before manual 2",
            "after manual compacted=true rotated=false",
            "before manual 2",
            "after manual compacted=false rotated=false",
            "before manual 2",
        ]
    );
}

/// A compaction that rotates the session (`truncateAfterCompaction`): the
/// maintenance after it is told the successor's target and the session it
/// continues, and the hooks hear of the rotation.
#[tokio::test]
async fn after_a_rotation_maintain_gets_the_successors_target() {
    let spy = Spy::new(false, vec![]);
    let mut harness = harness(spy.clone(), scripted(vec![]), false);
    for turn in 0..6 {
        harness
            .append_turn(&format!("turn {turn}: {}", "context words ".repeat(200)))
            .expect("append");
    }
    let config = CompactionConfig {
        keep_recent_tokens: 1,
        truncate_after_compaction: true,
        ..CompactionConfig::default()
    };
    *spy.compactor.lock().expect("lock") = Some(Arc::new(
        Compactor::from_config(harness.store().clone(), config).expect("compactor"),
    ));
    let before = harness.session.session_ref().clone();
    let hooks = Arc::new(HookLog::default());
    let Harness {
        _dir,
        store,
        runner,
        mut session,
    } = harness;
    let runner = runner.with_compaction_hooks(hooks.clone());
    let result = runner
        .compact_now(&mut session, None, &CancellationToken::new())
        .await
        .expect("compacts");
    assert!(result.compacted, "{result:?}");
    let after = session.session_ref().clone();
    assert_ne!(after.session_id, before.session_id, "rotated");
    let maintained = spy.runtime_of(Operation::Maintain);
    let last = maintained.last().expect("maintain(compaction)");
    assert_eq!(
        last.target.as_ref().expect("a target")["sessionId"],
        after.session_id.as_str()
    );
    assert_eq!(
        last.context.as_ref().expect("a context")["previousSessionId"],
        before.session_id.as_str()
    );
    assert_eq!(
        hooks.0.lock().expect("lock").last().map(String::as_str),
        Some("after manual compacted=true rotated=true")
    );
    drop((store, _dir));
}
