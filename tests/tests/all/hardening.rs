//! Hardening, round two (issue 25): answers that used to slip past the guard
//! — a rotation the host never performed, prompts that can never fit,
//! compactions that lie, a caller's budget blamed on the engine, state kept
//! from a refused answer. Each engine runs in a whole host (`Runtime`) under
//! the guard, and each must end as the engine's failure (quarantine,
//! `legacy` serves) or, when it is not the engine's doing, as nobody's.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use ctxbox_host::contract::engine::{CallOptions, ContextEngine};
use ctxbox_host::contract::failure::FailureKind;
use ctxbox_host::contract::history::History;
use ctxbox_host::contract::types::{AgentMessage, AssembleParams};
use ctxbox_host::engines::guard::{GuardAction, GuardPolicy, GuardedEngine};
use ctxbox_host::engines::selection::Engines;
use ctxbox_host::provider::{FixedToolResults, ProviderError, ScriptedProvider};
use ctxbox_host::runner::{Session, TurnError, TurnReport, TurnRunner};
use ctxbox_host::runtime::Runtime;
use ctxbox_host::runtime::config::Config;
use ctxbox_host::sandbox::SandboxConfig;
use ctxbox_host::services::state::{EngineState, StateConfig, StateStore};
use ctxbox_host::transcript::NewSession;
use ctxbox_tests::{conversation, guests, session, zoo_host, zoo_host_in};
use tokio_util::sync::CancellationToken;

/// The model's window in these tests.
const WINDOW: u64 = 32_768;

/// A host with the hardening test engines registered (plus `extra`, more
/// `ctxbox.toml` text).
fn host(dir: &Path, extra: &str) -> Runtime {
    let text = format!(
        "dataDir = {data:?}\n{extra}\n\
         [plugins.engines.rotation-forger]\npath = {forger:?}\n\
         [plugins.engines.idle-compactor]\npath = {idle:?}\n\
         [plugins.engines.idle-owner]\npath = {idle:?}\n\
         [sandbox]\ncallTimeoutMs = 4000\nmaxInstances = 16\n",
        data = dir.join("data").display().to_string(),
        forger = guests::ROTATION_FORGER,
        idle = guests::IDLE_COMPACTOR,
    );
    Runtime::new(
        Config::parse(&text)
            .unwrap_or_else(|(line, error)| panic!("test config line {line:?}: {error}")),
    )
    .expect("runtime")
}

/// A session file `name` in `dir`, holding `messages`.
fn session_file(runtime: &Runtime, dir: &Path, name: &str, messages: &[AgentMessage]) -> Session {
    let transcript = runtime
        .transcripts()
        .create(&dir.join(format!("{name}.jsonl")), NewSession::default())
        .expect("session");
    if !messages.is_empty() {
        transcript.append(messages).expect("append");
    }
    transcript.commit().expect("commit");
    Session::new(transcript, None)
}

/// A runner of `engine` with a model answering `answers`.
fn runner(
    runtime: &Runtime,
    engine: Arc<GuardedEngine>,
    answers: Vec<Result<AgentMessage, ProviderError>>,
) -> TurnRunner {
    runtime.runner(
        engine,
        Arc::new(ScriptedProvider::new(answers)),
        Arc::new(FixedToolResults::new("ok")),
        WINDOW,
        Vec::new(),
    )
}

async fn turn(
    runner: &TurnRunner,
    session: &mut Session,
    text: &str,
) -> Result<TurnReport, TurnError> {
    runner
        .run_turn(
            session,
            vec![AgentMessage::user_text(text)],
            &CancellationToken::new(),
        )
        .await
}

fn overflow() -> Result<AgentMessage, ProviderError> {
    Err(ProviderError::ContextOverflow {
        prompt_tokens: WINDOW + 1,
        window: WINDOW,
    })
}

fn answer(text: &str) -> Result<AgentMessage, ProviderError> {
    Ok(AgentMessage::assistant_text(text))
}

/// `engine`'s quarantine classification in `runtime`, if it is quarantined.
fn quarantined(runtime: &Runtime, engine: &str) -> Option<String> {
    runtime
        .engines()
        .quarantine()
        .get(engine)
        .map(|record| record.classification)
}

/// `engine`'s quarantine classification in `engines`, if it is quarantined.
fn quarantined_in(engines: &Engines, engine: &str) -> Option<String> {
    engines
        .quarantine()
        .get(engine)
        .map(|record| record.classification)
}

/// `assemble` parameters with a budget of `tokens`.
fn budget(tokens: u64) -> AssembleParams {
    AssembleParams {
        token_budget: Some(tokens),
        ..AssembleParams::default()
    }
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|error| panic!("{}: {error}", path.display()))
}

// --- 1. an engine never chooses which file the session continues in --------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rotation_the_host_did_not_perform_is_the_engines_failure() {
    let dir = tempfile::tempdir().expect("temp dir");
    let runtime = host(dir.path(), "");
    let sessions = dir.path().join("sessions");
    std::fs::create_dir_all(&sessions).expect("sessions dir");
    // Another session in the same data dir: the engine names its file.
    let victim = session_file(
        &runtime,
        &sessions,
        "victim",
        &[AgentMessage::user_text("the victim's own words")],
    );
    let victim_path: PathBuf = victim.transcript().path().to_owned();
    drop(victim);
    let victim_before = read(&victim_path);

    let engine = runtime.select(Some("rotation-forger")).await;
    let runner = runner(&runtime, engine, vec![overflow(), answer("served")]);
    let mut session = session_file(&runtime, &sessions, "s", &[]);
    let own_path = session.transcript().path().to_owned();
    let report = turn(&runner, &mut session, "hi")
        .await
        .expect("legacy serves the turn");

    assert_eq!(
        read(&victim_path),
        victim_before,
        "nothing is appended to another session's transcript"
    );
    assert_eq!(
        session.transcript().path(),
        own_path,
        "the session stays put"
    );
    assert!(
        read(&own_path).contains("served"),
        "the answer is the session's"
    );
    assert_eq!(
        quarantined(&runtime, "rotation-forger").as_deref(),
        Some(FailureKind::InvalidOutput.as_str())
    );
    assert_eq!(report.served_by, "legacy");
    let event = report
        .guard_events
        .iter()
        .find(|event| event.classification == FailureKind::InvalidOutput)
        .expect("the guard says why");
    assert!(
        event.reason.contains("not a rotation the host performed"),
        "{event:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rotation_into_a_missing_file_fails_the_engine_not_the_session() {
    let dir = tempfile::tempdir().expect("temp dir");
    let runtime = host(dir.path(), "");
    let engine = runtime.select(Some("rotation-forger")).await;
    let runner = runner(&runtime, engine, vec![answer("served")]);
    let mut session = session_file(
        &runtime,
        dir.path(),
        "s",
        &[
            AgentMessage::user_text("hello"),
            AgentMessage::assistant_text("hi"),
        ],
    );
    let result = runner
        .compact_now(
            &mut session,
            Some("missing".into()),
            &CancellationToken::new(),
        )
        .await
        .expect("a refused answer is not a transcript error");
    assert!(!result.ok, "{result:?}");
    assert_eq!(
        quarantined(&runtime, "rotation-forger").as_deref(),
        Some(FailureKind::InvalidOutput.as_str())
    );
    turn(&runner, &mut session, "next")
        .await
        .expect("the session goes on in its own file");
}

// --- 2. everything an engine adds to the prompt counts against the budget --

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_system_prompt_addition_no_prompt_can_hold_is_the_engines_failure() {
    let (_dir, engines) = zoo_host(SandboxConfig::default(), GuardPolicy::default());
    let engine = engines.select(Some("prompt-stuffer")).await;
    let answer = engine
        .assemble(
            &CallOptions::default(),
            &session("s"),
            &History::new(conversation(4)),
            &budget(10_000),
        )
        .await
        .expect("legacy serves the call");
    assert_eq!(answer.system_prompt_addition, None, "legacy's answer");
    let record = engines
        .quarantine()
        .get("prompt-stuffer")
        .expect("quarantined");
    assert_eq!(record.classification, FailureKind::InvalidOutput.as_str());
    assert!(
        record.reason.contains("system-prompt addition"),
        "{}",
        record.reason
    );
}

// --- 3. compactions that lie ----------------------------------------------

/// A session with some history to compact, and a runner whose model refuses
/// the first prompt as too large, then answers.
async fn refused_once(runtime: &Runtime, dir: &Path, id: &str) -> (TurnRunner, Session) {
    let engine = runtime.select(Some(id)).await;
    let runner = runner(runtime, engine, vec![overflow(), answer("served")]);
    let history: Vec<AgentMessage> = (0..6)
        .flat_map(|turn| {
            [
                AgentMessage::user_text(format!("question {turn} {}", "words ".repeat(50))),
                AgentMessage::assistant_text(format!("answer {turn}")),
            ]
        })
        .collect();
    (runner, session_file(runtime, dir, id, &history))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_compaction_that_changed_nothing_is_the_engines_failure() {
    let dir = tempfile::tempdir().expect("temp dir");
    let runtime = host(dir.path(), "");
    let (runner, mut session) = refused_once(&runtime, dir.path(), "idle-compactor").await;
    let report = turn(&runner, &mut session, "hi")
        .await
        .expect("legacy serves the turn");
    assert_eq!(report.served_by, "legacy");
    assert_eq!(
        quarantined(&runtime, "idle-compactor").as_deref(),
        Some(FailureKind::InvalidOutput.as_str())
    );
    let event = report
        .guard_events
        .iter()
        .find(|event| event.classification == FailureKind::InvalidOutput)
        .expect("the guard says why");
    assert!(event.reason.contains("changed nothing"), "{event:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_owners_compaction_that_claims_more_than_its_prompt_shows_is_its_failure() {
    let dir = tempfile::tempdir().expect("temp dir");
    let runtime = host(
        dir.path(),
        "[plugins.entries.idle-owner.config]\nowns = true\n",
    );
    assert!(
        runtime
            .select(Some("idle-owner"))
            .await
            .info()
            .owns_compaction
    );
    let (runner, mut session) = refused_once(&runtime, dir.path(), "idle-owner").await;
    let report = turn(&runner, &mut session, "hi")
        .await
        .expect("legacy serves the turn");
    assert_eq!(report.served_by, "legacy");
    assert_eq!(
        quarantined(&runtime, "idle-owner").as_deref(),
        Some(FailureKind::InvalidOutput.as_str())
    );
    let event = report
        .guard_events
        .iter()
        .find(|event| event.classification == FailureKind::InvalidOutput)
        .expect("the guard says why");
    // The claim (a million tokens down to ten) and both measured figures.
    assert!(
        event.reason.contains(
            "claims to have freed 100% of its context (1000000 → 10 tokens by its count)"
        ),
        "{event:?}"
    );
    assert!(
        event
            .reason
            .contains("but the prompt it assembled next is ~")
            && event
                .reason
                .contains("before it (0% freed, as the host measures)"),
        "{event:?}"
    );
}

/// A session of 30 short turns, and a runner whose model refuses every
/// prompt as too large: the turn about to run is larger than the window on
/// its own.
async fn a_turn_larger_than_the_window(
    runtime: &Runtime,
    dir: &Path,
    id: &str,
) -> (Arc<GuardedEngine>, TurnRunner, Session) {
    let engine = runtime.select(Some(id)).await;
    let refusals = (0..8).map(|_| overflow()).collect();
    let runner = runner(runtime, engine.clone(), refusals);
    let history: Vec<AgentMessage> = (0..30)
        .flat_map(|turn| {
            [
                AgentMessage::user_text(format!("question {turn} {}", "words ".repeat(100))),
                AgentMessage::assistant_text(format!("answer {turn} {}", "words ".repeat(100))),
            ]
        })
        .collect();
    (engine, runner, session_file(runtime, dir, id, &history))
}

/// The newest turn alone is larger than the window: no compaction can make
/// it fit, and none is the engine's failure. Its compaction is a low-yield
/// pass for the progress guard, which stops compacting, and the turn ends
/// as an overflow, with the engine still serving.
async fn a_turn_no_compaction_can_fit_ends_as_an_overflow_with(id: &str) {
    let dir = tempfile::tempdir().expect("temp dir");
    let runtime = host(dir.path(), "");
    let (engine, runner, mut session) =
        a_turn_larger_than_the_window(&runtime, dir.path(), id).await;
    let huge = format!("one question {}", "words ".repeat(2 * WINDOW as usize));
    let error = turn(&runner, &mut session, &huge)
        .await
        .expect_err("nothing makes it fit");
    assert_eq!(error.kind(), "context_overflow", "{id}: {error}");
    assert_eq!(quarantined(&runtime, id), None, "{id}: nothing to blame");
    assert!(engine.serving_selected(), "{id}");
    assert_eq!(engine.calls_served_by_legacy(), 0, "{id}");
    assert!(
        engine
            .take_events()
            .iter()
            .all(|event| event.classification != FailureKind::InvalidOutput),
        "{id}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turn_larger_than_the_window_does_not_quarantine_lossless() {
    a_turn_no_compaction_can_fit_ends_as_an_overflow_with("lossless").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turn_larger_than_the_window_does_not_quarantine_keep_recent() {
    a_turn_no_compaction_can_fit_ends_as_an_overflow_with("keep-recent").await;
}

// --- 4. a caller's budget no answer fits is nobody's failure ---------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tiny_budget_from_the_caller_does_not_quarantine_keep_recent() {
    let (_dir, engines) = zoo_host(SandboxConfig::default(), GuardPolicy::default());
    let engine = engines.select(Some("keep-recent")).await;
    let history = History::new(conversation(20));
    for tokens in [0, 20] {
        engine
            .assemble(
                &CallOptions::default(),
                &session("s"),
                &history,
                &budget(tokens),
            )
            .await
            .expect("answered the legacy way");
    }
    assert!(engines.quarantine().get("keep-recent").is_none());
    let events = engine.take_events();
    assert_eq!(events.len(), 2, "{events:?}");
    assert!(
        events
            .iter()
            .all(|event| event.action == GuardAction::Declined),
        "{events:?}"
    );
    assert!(
        events[0].reason.contains("the caller's budget"),
        "{events:?}"
    );
    let answer = engine
        .assemble(
            &CallOptions::default(),
            &session("s"),
            &history,
            &budget(200),
        )
        .await
        .expect("answered");
    assert!(engine.serving_selected(), "keep-recent still serves");
    assert!(
        answer.items.len() > 1,
        "keep-recent's own answer: {answer:?}"
    );
}

// --- 5. a refused answer's state writes are dropped -------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn state_written_by_a_refused_answer_does_not_persist() {
    let dir = tempfile::tempdir().expect("temp dir");
    let engines = zoo_host_in(dir.path(), SandboxConfig::default(), GuardPolicy::default());
    let engine = engines.select(Some("state-then-lie")).await;
    engine
        .assemble(
            &CallOptions::default(),
            &session("s"),
            &History::new(conversation(2)),
            &budget(10_000),
        )
        .await
        .expect("legacy serves the call");
    assert_eq!(
        quarantined_in(&engines, "state-then-lie").as_deref(),
        Some(FailureKind::InvalidOutput.as_str())
    );
    let state = StateStore::open_in(dir.path(), &StateConfig::default()).expect("state store");
    assert_eq!(
        state.get("state-then-lie", "lie/mark").expect("reads"),
        None,
        "a call that fails leaves none of its writes"
    );
}

/// A caller's large batch, sibling of a caller's tiny budget: one `ingest`
/// of more messages than a correct engine's memory budget holds at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_larger_than_the_engines_memory_is_handed_over_in_parts() {
    let (_dir, host) = zoo_host(
        SandboxConfig {
            memory_limit_mib: 8,
            ..SandboxConfig::default()
        },
        GuardPolicy::default(),
    );
    // The SDK's default `ingest-batch`: it lifts every message it is given.
    let engine = host.select(Some("abort-heeder")).await;
    let entries = ctxbox_host::check::cases::conversation(15_000);
    let result = engine
        .ingest_batch(&CallOptions::default(), &session("big"), &entries, false)
        .await
        .expect("ingested");
    assert!(
        engine.take_events().is_empty(),
        "the engine kept serving: {result:?}"
    );
    assert!(engine.serving_selected());
    assert!(host.quarantine().get("abort-heeder").is_none());
}
