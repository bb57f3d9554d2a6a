//! The conformance checker behind `ctxbox check` (DESIGN §9): loads an
//! engine in the sandbox with the host's real services, calls every export
//! with valid and edge-case input, and checks each answer against the
//! contract's rules. Each check is a named pass or fail; a failure says what
//! was expected and what came back.

pub mod cases;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use serde::Serialize;
use tokio_util::sync::CancellationToken;

use crate::compaction::{CompactionConfig, Compactor};
use crate::engine::{CallOptions, ContextEngine};
use crate::error::{EngineFailure, FailureKind};
use crate::history::History;
use crate::native_services::NativeServices;
use crate::sandbox::{Sandbox, SandboxConfig, WasmEngine};
use crate::services::{HostServices, ProgressSink, ServiceCall, ServiceError, TranscriptDelta};
use crate::state_store::{StateConfig, StateStore};
use crate::tokens;
use crate::transcript::{NewSession, Transcript, TranscriptStore};
use crate::types::{
    AfterTurnParams, AgentMessage, AssembleParams, AssembleResult, AssembledItem, CompactParams,
    CompactResult, CompactionTarget, ContextMode, EngineInfo, MaintainReason, SessionRef,
    SubagentEndReason, SubagentSpawn,
};
use crate::validate;

/// How long an aborted compaction may take to return before it counts as
/// ignoring the abort.
const ABORT_GRACE: Duration = Duration::from_millis(500);

/// One check.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CheckResult {
    /// What was checked.
    pub name: String,
    /// Whether the engine passed.
    pub passed: bool,
    /// What the contract expects.
    pub expected: String,
    /// What the engine did.
    pub got: String,
}

/// Every check run on one engine.
#[derive(Debug, Clone, Serialize)]
pub struct CheckReport {
    /// What was checked (a path or label).
    pub source: String,
    /// The engine's info, once it loaded.
    pub engine: Option<EngineInfo>,
    /// The checks, in the order run.
    pub checks: Vec<CheckResult>,
}

impl CheckReport {
    /// Whether every check passed.
    pub fn passed(&self) -> bool {
        self.checks.iter().all(|check| check.passed)
    }

    /// The failed checks.
    pub fn failures(&self) -> impl Iterator<Item = &CheckResult> {
        self.checks.iter().filter(|check| !check.passed)
    }
}

/// Why the checker itself could not run (not the engine's fault).
#[derive(Debug, thiserror::Error)]
#[error("cannot set up the checker: {0}")]
pub struct CheckSetupError(String);

/// How the checker runs.
#[derive(Debug, Clone, Default)]
pub struct CheckOptions {
    /// Where compiled engines are cached, so checking the same build again
    /// skips compilation (large components take seconds to compile).
    pub cache_dir: Option<PathBuf>,
}

/// Checks the component at `path`.
pub async fn check_file(
    path: &Path,
    options: &CheckOptions,
) -> Result<CheckReport, CheckSetupError> {
    let bytes = std::fs::read(path)
        .map_err(|error| CheckSetupError(format!("cannot read `{}`: {error}", path.display())))?;
    check_bytes(&path.display().to_string(), &bytes, options).await
}

/// Checks a component given as bytes, labelled `source`.
pub async fn check_bytes(
    source: &str,
    bytes: &[u8],
    options: &CheckOptions,
) -> Result<CheckReport, CheckSetupError> {
    let mut checker = Checker::new(source, options)?;
    checker.run(bytes).await;
    Ok(checker.report)
}

/// Host services that count progress reports, over the real ones.
struct Observed {
    inner: NativeServices,
    progress: Arc<AtomicUsize>,
}

struct CountingSink<'a> {
    inner: &'a dyn ProgressSink,
    count: &'a AtomicUsize,
}

impl ProgressSink for CountingSink<'_> {
    fn progress(&self) {
        self.count.fetch_add(1, Ordering::Relaxed);
        self.inner.progress();
    }
}

#[async_trait]
impl HostServices for Observed {
    fn progress_reported(&self, _call: ServiceCall<'_>) {
        self.progress.fetch_add(1, Ordering::Relaxed);
    }

    async fn delegate_compaction(
        &self,
        call: ServiceCall<'_>,
        params: &CompactParams,
        progress: &dyn ProgressSink,
    ) -> Result<CompactResult, ServiceError> {
        let counting = CountingSink {
            inner: progress,
            count: &self.progress,
        };
        self.inner
            .delegate_compaction(call, params, &counting)
            .await
    }

    async fn summarize(
        &self,
        call: ServiceCall<'_>,
        text: &str,
        instructions: Option<&str>,
        max_tokens: u32,
    ) -> Result<String, ServiceError> {
        self.inner
            .summarize(call, text, instructions, max_tokens)
            .await
    }

    async fn read_transcript_delta(
        &self,
        call: ServiceCall<'_>,
        cursor: Option<&str>,
        max_messages: u32,
        max_bytes: u64,
    ) -> Result<TranscriptDelta, ServiceError> {
        self.inner
            .read_transcript_delta(call, cursor, max_messages, max_bytes)
            .await
    }

    async fn state_get(
        &self,
        call: ServiceCall<'_>,
        key: &str,
    ) -> Result<Option<Vec<u8>>, ServiceError> {
        self.inner.state_get(call, key).await
    }

    async fn state_set(
        &self,
        call: ServiceCall<'_>,
        key: &str,
        value: &[u8],
    ) -> Result<(), ServiceError> {
        self.inner.state_set(call, key, value).await
    }

    async fn state_delete(&self, call: ServiceCall<'_>, key: &str) -> Result<bool, ServiceError> {
        self.inner.state_delete(call, key).await
    }

    async fn state_scan(
        &self,
        call: ServiceCall<'_>,
        prefix: &str,
        start_after: Option<&str>,
        limit: u32,
    ) -> Result<Vec<(String, Vec<u8>)>, ServiceError> {
        self.inner
            .state_scan(call, prefix, start_after, limit)
            .await
    }
}

struct Checker {
    report: CheckReport,
    scratch: tempfile::TempDir,
    transcripts: TranscriptStore,
    sandbox: Sandbox,
    services: Arc<Observed>,
}

impl Checker {
    fn new(source: &str, options: &CheckOptions) -> Result<Self, CheckSetupError> {
        let setup = |error: &dyn std::fmt::Display| CheckSetupError(error.to_string());
        let scratch = tempfile::tempdir().map_err(|error| setup(&error))?;
        let transcripts = TranscriptStore::new(Default::default());
        let compactor = Arc::new(
            Compactor::from_config(transcripts.clone(), CompactionConfig::default())
                .map_err(|error| setup(&error))?,
        );
        let state = Arc::new(
            StateStore::open_in(scratch.path(), &StateConfig::default())
                .map_err(|error| setup(&error))?,
        );
        let sandbox = Sandbox::new(SandboxConfig {
            max_instances: 16,
            cache_dir: options.cache_dir.clone(),
            ..SandboxConfig::default()
        })
        .map_err(|error| setup(&error))?;
        Ok(Self {
            report: CheckReport {
                source: source.to_owned(),
                engine: None,
                checks: Vec::new(),
            },
            scratch,
            transcripts,
            sandbox,
            services: Arc::new(Observed {
                inner: NativeServices::new(compactor, state),
                progress: Arc::new(AtomicUsize::new(0)),
            }),
        })
    }

    fn record(&mut self, name: &str, expected: &str, outcome: Result<String, String>) {
        let (passed, got) = match outcome {
            Ok(got) => (true, got),
            Err(got) => (false, got),
        };
        self.report.checks.push(CheckResult {
            name: name.to_owned(),
            passed,
            expected: expected.to_owned(),
            got,
        });
    }

    /// A session whose transcript holds `entries`' messages.
    fn session(
        &self,
        name: &str,
        messages: Vec<AgentMessage>,
    ) -> Result<(SessionRef, History, Transcript), String> {
        let path = self.scratch.path().join(format!("{name}.jsonl"));
        let transcript = self
            .transcripts
            .create(
                &path,
                NewSession {
                    session_id: None,
                    cwd: "/check".into(),
                    parent_session: None,
                },
            )
            .map_err(|error| error.to_string())?;
        if !messages.is_empty() {
            transcript
                .append(&messages)
                .map_err(|error| error.to_string())?;
        }
        Ok((transcript.session_ref(), transcript.history(), transcript))
    }

    async fn run(&mut self, bytes: &[u8]) {
        let component = match self.sandbox.load_bytes(&self.report.source, bytes) {
            Ok(component) => {
                self.record(
                    "load",
                    "a ctxbox:engine@0.1.0 component with only granted imports",
                    Ok(format!(
                        "loads; {} imports allowed",
                        component.imports().len()
                    )),
                );
                component
            }
            Err(error) => {
                return self.record(
                    "load",
                    "a ctxbox:engine@0.1.0 component with only granted imports",
                    Err(error.to_string()),
                );
            }
        };
        let engine = match self
            .sandbox
            .instantiate(&component, self.services.clone())
            .await
        {
            Ok(engine) => engine,
            Err(failure) => {
                return self.record(
                    "info",
                    "an info with a non-empty id and name",
                    Err(failure.to_string()),
                );
            }
        };
        let info = engine.info().clone();
        self.record(
            "info",
            "an info with a non-empty id and name",
            Ok(format!("{} ({})", info.id, info.name)),
        );
        self.report.engine = Some(info);

        let conversation: Vec<AgentMessage> = cases::conversation(12)
            .into_iter()
            .map(|entry| entry.message)
            .collect();
        let (session, history, _transcript) = match self.session("main", conversation) {
            Ok(session) => session,
            Err(error) => return self.record("setup", "a scratch session", Err(error)),
        };
        self.lifecycle(&engine, &session, &history).await;
        self.assemble_cases(&engine, &session, &history).await;
        self.compaction(&engine).await;
        self.subagents(&engine).await;
        let disposed = engine
            .dispose()
            .await
            .map(|()| "disposed".to_owned())
            .map_err(failure_text);
        self.record("dispose", "the instance disposes cleanly", disposed);
    }

    async fn lifecycle(&mut self, engine: &WasmEngine, session: &SessionRef, history: &History) {
        let call = CallOptions::default();
        let bootstrap = engine.bootstrap(&call, session, history).await;
        self.record(
            "bootstrap",
            "an answer for a session with history",
            bootstrap
                .map(|r| format!("bootstrapped: {}", r.bootstrapped))
                .map_err(failure_text),
        );

        let entry = &history.entries()[history.len() - 1];
        let ingest = engine.ingest(&call, session, entry, false).await;
        self.record(
            "ingest",
            "an answer for a new message",
            ingest
                .map(|r| format!("ingested: {}", r.ingested))
                .map_err(failure_text),
        );
        let heartbeat = engine.ingest(&call, session, entry, true).await;
        self.record(
            "ingest: heartbeat",
            "an answer for a heartbeat message",
            heartbeat
                .map(|r| format!("ingested: {}", r.ingested))
                .map_err(failure_text),
        );
        let batch = engine
            .ingest_batch(
                &call,
                session,
                &history.entries()[history.len() - 4..],
                false,
            )
            .await;
        let batch = match batch {
            Ok(result) if result.ingested_count <= 4 => {
                Ok(format!("ingested {} of 4", result.ingested_count))
            }
            Ok(result) => Err(format!("claims {} ingested of 4", result.ingested_count)),
            Err(failure) => Err(failure_text(failure)),
        };
        self.record("ingest-batch", "a count no larger than the batch", batch);

        let after = AfterTurnParams {
            pre_prompt_message_count: (history.len() - 4) as u32,
            token_budget: Some(4_000),
            is_heartbeat: false,
            runtime_context: Some(r#"{"channel":"check"}"#.into()),
        };
        let after_turn = engine.after_turn(&call, session, history, &after).await;
        self.record(
            "after-turn",
            "the turn's end handled",
            after_turn.map(|()| "ok".to_owned()).map_err(failure_text),
        );
        for reason in [
            MaintainReason::Bootstrap,
            MaintainReason::Turn,
            MaintainReason::Compaction,
        ] {
            let maintained = engine.maintain(&call, session, history, reason, None).await;
            self.record(
                &format!("maintain: {reason:?}").to_lowercase(),
                "an answer",
                maintained
                    .map(|r| format!("changed: {}", r.changed))
                    .map_err(failure_text),
            );
        }
    }

    async fn assemble_cases(
        &mut self,
        engine: &WasmEngine,
        session: &SessionRef,
        history: &History,
    ) {
        let total = history.total_tokens();
        self.assemble_case(engine, "assemble: no budget", session, history, None)
            .await;
        self.assemble_case(
            engine,
            "assemble: huge budget",
            session,
            history,
            Some(10_000_000),
        )
        .await;
        self.assemble_case(engine, "assemble: zero budget", session, history, Some(0))
            .await;
        self.assemble_case(
            engine,
            "assemble: half the history",
            session,
            history,
            Some(total / 2),
        )
        .await;
        // Budgets ending between every call and its result.
        let mut straddling = Vec::new();
        for position in 1..history.len() {
            if history.splits_pair(position) {
                straddling.push(history.tokens(position..history.len()) + 32);
            }
        }
        let mut failures = Vec::new();
        for budget in &straddling {
            if let Err(problem) = self
                .assemble_answer(engine, session, history, Some(*budget))
                .await
            {
                failures.push(format!("budget {budget}: {problem}"));
            }
        }
        let straddle = if failures.is_empty() {
            Ok(format!(
                "{} budgets ending inside tool pairs, all valid",
                straddling.len()
            ))
        } else {
            Err(failures.join("; "))
        };
        self.record(
            "assemble: tool pairs straddling the budget",
            "no tool call separated from its result, and the prompt within budget",
            straddle,
        );

        let empty = History::new(Vec::new());
        self.assemble_case(
            engine,
            "assemble: empty history",
            session,
            &empty,
            Some(1_000),
        )
        .await;
        let one = History::new(vec![cases::entry("only", AgentMessage::user_text("hello"))]);
        self.assemble_case(engine, "assemble: one message", session, &one, Some(1_000))
            .await;
        let chinese = History::new(cases::chinese_conversation(30));
        let chinese_budget = chinese.total_tokens() / 3;
        self.assemble_case(
            engine,
            "assemble: CJK text",
            session,
            &chinese,
            Some(chinese_budget),
        )
        .await;
        let stranger = SessionRef::new("never-seen", "/check/never-seen.jsonl");
        self.assemble_case(
            engine,
            "assemble: a session it has never seen",
            &stranger,
            history,
            Some(total / 2),
        )
        .await;

        let estimate = match engine
            .assemble(
                &CallOptions::default(),
                session,
                history,
                &AssembleParams::default(),
            )
            .await
        {
            Ok(result) => {
                let actual = prompt_tokens(history, &result);
                if result.estimated_tokens * 2 + 64 >= actual {
                    Ok(format!(
                        "estimated {} for {actual}",
                        result.estimated_tokens
                    ))
                } else {
                    Err(format!(
                        "estimated {} tokens for a prompt the host counts at {actual}",
                        result.estimated_tokens
                    ))
                }
            }
            Err(failure) => Err(failure_text(failure)),
        };
        self.record(
            "assemble: estimated-tokens",
            "not under half the host's count",
            estimate,
        );
    }

    async fn assemble_case(
        &mut self,
        engine: &WasmEngine,
        name: &str,
        session: &SessionRef,
        history: &History,
        budget: Option<u64>,
    ) {
        let outcome = self.assemble_answer(engine, session, history, budget).await;
        self.record(
            name,
            "a valid prompt (within the budget if the engine owns compaction)",
            outcome,
        );
    }

    /// Asks for a prompt and checks it: valid, and — for an engine that owns
    /// compaction, which the host does not compact for — within budget unless
    /// it keeps only the newest message (or tool pair), which may alone be
    /// over. Other engines may go over: the host compacts for them.
    async fn assemble_answer(
        &self,
        engine: &WasmEngine,
        session: &SessionRef,
        history: &History,
        budget: Option<u64>,
    ) -> Result<String, String> {
        let params = AssembleParams {
            token_budget: budget,
            available_tools: vec!["exec".into()],
            prompt: Some("Please check config file number 12.".into()),
            ..AssembleParams::default()
        };
        let result = engine
            .assemble(&CallOptions::default(), session, history, &params)
            .await
            .map_err(failure_text)?;
        validate::check_assemble(history, &result).map_err(|violation| violation.to_string())?;
        let tokens = prompt_tokens(history, &result);
        let over = budget.filter(|budget| tokens > *budget && !only_the_newest(history, &result));
        match over {
            Some(budget) if engine.info().owns_compaction => Err(format!(
                "a prompt of {tokens} tokens for a budget of {budget}, from an engine that owns compaction"
            )),
            Some(budget) => Ok(format!(
                "{} items, {tokens} tokens (over the {budget} budget: the host compacts for this engine)",
                result.items.len()
            )),
            None => Ok(format!("{} items, {tokens} tokens", result.items.len())),
        }
    }

    async fn compaction(&mut self, engine: &WasmEngine) {
        let conversation: Vec<AgentMessage> = cases::conversation(40)
            .into_iter()
            .map(|entry| entry.message)
            .collect();
        let (session, history, _transcript) = match self.session("compact", conversation.clone()) {
            Ok(session) => session,
            Err(error) => return self.record("compact", "a scratch session", Err(error)),
        };
        let params = CompactParams {
            token_budget: Some(history.total_tokens() / 3),
            force: true,
            compaction_target: CompactionTarget::Budget,
            ..CompactParams::default()
        };
        self.services.progress.store(0, Ordering::Relaxed);
        let started = Instant::now();
        let compacted = engine
            .compact(&CallOptions::default(), &session, &history, &params)
            .await;
        let took = started.elapsed();
        let progress = self.services.progress.load(Ordering::Relaxed);
        let outcome = match &compacted {
            Ok(result) => validate::check_compact(&history, result)
                .map_err(|violation| violation.to_string())
                .and_then(|()| consistent(result))
                .map(|()| describe_compaction(result)),
            Err(failure) => Err(failure_text(failure.clone())),
        };
        self.record(
            "compact",
            "a truthful result: a real first kept entry, tokens-after <= tokens-before",
            outcome,
        );
        let reported = match &compacted {
            Ok(result) if result.compacted && progress == 0 && took > Duration::from_secs(1) => {
                Err(format!(
                    "compacted for {} ms without reporting progress",
                    took.as_millis()
                ))
            }
            Ok(_) => Ok(format!(
                "{progress} progress reports in {} ms",
                took.as_millis()
            )),
            Err(_) => Err("compaction failed".to_owned()),
        };
        self.record(
            "compact: progress",
            "progress reported during a long compaction",
            reported,
        );

        // A session long enough that the abort lands mid-compaction.
        let long: Vec<AgentMessage> = cases::conversation(400)
            .into_iter()
            .map(|entry| entry.message)
            .collect();
        let (session, history, _transcript) = match self.session("abort", long) {
            Ok(session) => session,
            Err(error) => return self.record("compact: abort", "a scratch session", Err(error)),
        };
        let params = CompactParams {
            token_budget: Some(history.total_tokens() / 3),
            ..params
        };
        let abort = CancellationToken::new();
        let trigger = abort.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(5)).await;
            trigger.cancel();
        });
        let started = Instant::now();
        let answer = engine
            .compact(&CallOptions::with_abort(abort), &session, &history, &params)
            .await;
        let took = started.elapsed();
        let outcome = match answer {
            Err(failure) if failure.kind == FailureKind::Aborted && took > ABORT_GRACE => {
                Err(format!(
                    "kept running after the abort and was interrupted after {} ms",
                    took.as_millis()
                ))
            }
            Ok(result) => Ok(format!(
                "returned after {} ms ({})",
                took.as_millis(),
                describe_compaction(&result)
            )),
            Err(failure) => Ok(format!(
                "stopped after {} ms: {}",
                took.as_millis(),
                failure.message
            )),
        };
        self.record(
            "compact: abort",
            "returns soon after the caller aborts",
            outcome,
        );
    }

    async fn subagents(&mut self, engine: &WasmEngine) {
        let call = CallOptions::default();
        let spawn = SubagentSpawn {
            parent_session_key: "agent:main".into(),
            child_session_key: "agent:main:sub:check".into(),
            context_mode: ContextMode::Isolated,
            ttl_ms: Some(60_000),
        };
        let prepared = engine.prepare_subagent_spawn(&call, &spawn).await;
        let outcome = match prepared {
            Ok(Some(id)) => engine
                .rollback_subagent_spawn(&call, &id)
                .await
                .map(|()| format!("prepared `{id}` and rolled it back"))
                .map_err(failure_text),
            Ok(None) => Ok("nothing to prepare".to_owned()),
            Err(failure) => Err(failure_text(failure)),
        };
        self.record(
            "subagent spawn and rollback",
            "a preparation that can be rolled back",
            outcome,
        );
        let ended = engine
            .on_subagent_ended(&call, "agent:main:sub:check", SubagentEndReason::Completed)
            .await
            .map(|()| "ok".to_owned())
            .map_err(failure_text);
        self.record("on-subagent-ended", "an answer", ended);
    }
}

fn failure_text(failure: EngineFailure) -> String {
    let mut text = format!("{}: {}", failure.kind, failure.message);
    if let Some(gist) = stderr_gist(&failure.stderr_tail) {
        text.push_str(&format!(" (stderr: {gist})"));
    }
    text
}

/// The telling part of a guest's stderr: a Rust panic's location and
/// message, else its last line (Rust's backtrace hint left out).
fn stderr_gist(tail: &str) -> Option<String> {
    let lines: Vec<&str> = tail
        .lines()
        .map(str::trim)
        .filter(|line| !line.is_empty() && !line.starts_with("note: run with `RUST_BACKTRACE"))
        .collect();
    match lines.iter().rposition(|line| line.contains("panicked at")) {
        Some(start) => Some(
            lines[start..]
                .iter()
                .take(2)
                .copied()
                .collect::<Vec<_>>()
                .join(" "),
        ),
        None => lines.last().map(|line| (*line).to_owned()),
    }
}

/// The host's count of the prompt an answer describes.
fn prompt_tokens(history: &History, result: &AssembleResult) -> u64 {
    history
        .materialize(&result.items)
        .iter()
        .map(tokens::estimate_message)
        .sum()
}

/// Whether the answer keeps only the newest entry (or the newest tool pair)
/// plus at most one note: the least a prompt can hold.
fn only_the_newest(history: &History, result: &AssembleResult) -> bool {
    let len = history.len() as u32;
    let mut kept = 0u32;
    let mut inserted = 0;
    for item in &result.items {
        match item {
            AssembledItem::Keep { start, end } => {
                if *end < len.saturating_sub(2) {
                    return false;
                }
                kept += end - start;
            }
            AssembledItem::Insert(_) => inserted += 1,
        }
    }
    kept <= 2 && inserted <= 1
}

/// `ok` and `compacted` agree with the rest of the answer.
fn consistent(result: &CompactResult) -> Result<(), String> {
    if result.compacted && !result.ok {
        return Err("compacted: true with ok: false".to_owned());
    }
    if result.compacted && result.tokens_after.is_none() {
        return Err("compacted: true without tokens-after".to_owned());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_stderr_gist_is_the_panic_and_its_message() {
        let tail = "starting\nthread '<unnamed>' panicked at src/lib.rs:19:13:\nfifth call\nnote: run with `RUST_BACKTRACE=1` environment variable to display a backtrace\n";
        assert_eq!(
            super::stderr_gist(tail).as_deref(),
            Some("thread '<unnamed>' panicked at src/lib.rs:19:13: fifth call")
        );
        assert_eq!(super::stderr_gist("one\ntwo\n").as_deref(), Some("two"));
        assert_eq!(super::stderr_gist("  \n"), None);
    }
}

fn describe_compaction(result: &CompactResult) -> String {
    match (result.ok, result.compacted) {
        (true, true) => format!(
            "compacted {} -> {} tokens",
            result.tokens_before,
            result.tokens_after.unwrap_or_default()
        ),
        (true, false) => format!(
            "nothing compacted: {}",
            result.reason.as_deref().unwrap_or("no reason given")
        ),
        _ => format!(
            "failed: {}",
            result.reason.as_deref().unwrap_or("no reason given")
        ),
    }
}
