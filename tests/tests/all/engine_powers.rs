//! Engine powers (issue 29): the host's model (`host.complete`), engine
//! tools and searchable memory, each bounded, each tried by a hostile
//! engine. The engines run in a whole host (`Runtime`) under the guard;
//! `powers-probe` uses the model and the index as its prompt says and
//! reports what happened, `tool-spinner` and `tool-liar` offer tools that
//! break the rules.

use std::path::Path;
use std::sync::Arc;

use async_trait::async_trait;
use ctxbox_host::contract::engine::{CallOptions, ContextEngine};
use ctxbox_host::contract::history::History;
use ctxbox_host::contract::types::{
    AgentMessage, AssembleParams, AssembledItem, ContentBlock, SessionRef,
};
use ctxbox_host::engines::guard::GuardedEngine;
use ctxbox_host::provider::{ProviderError, ScriptedProvider, ToolExecutor};
use ctxbox_host::runner::Session;
use ctxbox_host::runtime::Runtime;
use ctxbox_host::runtime::config::Config;
use ctxbox_host::transcript::NewSession;
use ctxbox_tests::guests;
use tokio_util::sync::CancellationToken;

use crate::pg_cluster;

/// A host whose `ctxbox.toml` is `config` plus the test engines registered
/// (`powers-probe` twice: as itself and as `powers-twin`, a second engine
/// with a store of its own).
pub(crate) fn host(dir: &Path, config: &str) -> Runtime {
    host_with_timeout(dir, config, 4000)
}

/// [`host`] with calls of `call_timeout_ms`.
pub(crate) fn host_with_timeout(dir: &Path, config: &str, call_timeout_ms: u64) -> Runtime {
    let text = format!(
        "dataDir = {data:?}\n{config}\n\
         [plugins.engines.powers-probe]\npath = {probe:?}\n\
         [plugins.engines.powers-twin]\npath = {probe:?}\n\
         [plugins.engines.tool-spinner]\npath = {spinner:?}\n\
         [plugins.engines.tool-liar]\npath = {liar:?}\n\
         [sandbox]\ncallTimeoutMs = {call_timeout_ms}\nmaxInstances = 16\n",
        data = dir.join("data").display().to_string(),
        probe = guests::POWERS_PROBE,
        spinner = guests::TOOL_SPINNER,
        liar = guests::TOOL_LIAR,
    );
    Runtime::new(
        Config::parse(&text)
            .unwrap_or_else(|(line, error)| panic!("test config line {line:?}: {error}")),
    )
    .expect("runtime")
}

/// The text blocks of `message`, joined.
fn text_of(message: &AgentMessage) -> String {
    message
        .content()
        .iter()
        .filter_map(|block| match block {
            ContentBlock::Text { text } => Some(text.as_str()),
            _ => None,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Numbers the session files of one test process.
static SESSIONS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

pub(crate) fn session(id: &str) -> SessionRef {
    SessionRef::new(id, format!("/sessions/{id}.jsonl"))
}

/// What `powers-probe` reports after running `command` in an `assemble`.
pub(crate) async fn probe(engine: &GuardedEngine, session: &SessionRef, command: &str) -> String {
    try_probe(engine, session, command)
        .await
        .unwrap_or_else(|answer| panic!("no report from the probe: {answer}"))
}

/// [`probe`], or (`Err`) the answer that is not the probe's: the call
/// failed and the guard answered from `legacy`.
pub(crate) async fn try_probe(
    engine: &GuardedEngine,
    session: &SessionRef,
    command: &str,
) -> Result<String, String> {
    let params = AssembleParams {
        prompt: Some(command.to_owned()),
        token_budget: Some(100_000),
        ..AssembleParams::default()
    };
    let result = engine
        .assemble(
            &CallOptions::default(),
            session,
            &History::new(vec![]),
            &params,
        )
        .await
        .expect("assembled");
    match result.items.first() {
        Some(AssembledItem::Insert(message)) => text_of(message)
            .strip_prefix("powers: ")
            .map(str::to_owned)
            .ok_or_else(|| format!("{message:?}")),
        other => Err(format!("{other:?}")),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn completions_come_from_the_hosts_model_within_the_calls_budget() {
    let dir = tempfile::tempdir().expect("temp dir");
    let runtime = host(dir.path(), "[completions]\nmaxPerCall = 3\n");
    let engine = runtime.select(Some("powers-probe")).await;
    let report = probe(&engine, &session("s"), "complete 5").await;
    assert_eq!(
        report,
        "completed=3 error=HostErrorKind::QuotaExceeded: quota exceeded: 4 completions in one call, over completions.maxPerCall (3)"
    );
    // A refused completion is the engine's answer to handle, not a failure.
    assert!(engine.serving_selected(), "not quarantined");
    let totals = runtime.completions().totals_of("powers-probe");
    assert_eq!((totals.completions, totals.refused), (3, 1));
    assert!(totals.input_tokens > 0 && totals.output_tokens > 0);
    // The next call has its own budget.
    assert_eq!(
        probe(&engine, &session("s"), "complete 2").await,
        "completed=2"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turns_report_counts_the_completions_its_engine_had() {
    let dir = tempfile::tempdir().expect("temp dir");
    let runtime = host(dir.path(), "");
    let engine = runtime.select(Some("powers-probe")).await;
    // The probe runs its prompt (the user's message) in `assemble`: two
    // completions before the one model call.
    let (_, _, outcome) = turn_asking(
        &runtime,
        dir.path(),
        engine,
        "complete 2",
        vec![Ok(AgentMessage::assistant_text("done"))],
    )
    .await;
    let report = outcome.expect("the turn completes");
    assert_eq!(
        report.completions.completions, 2,
        "{:?}",
        report.completions
    );
    assert!(report.completions.input_tokens > 0 && report.completions.output_tokens > 0);
    assert_eq!(
        report.completions,
        runtime.completions().totals_of("powers-probe"),
        "the turn's share is all the engine had"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_hourly_budget_holds_across_calls() {
    let dir = tempfile::tempdir().expect("temp dir");
    let runtime = host(
        dir.path(),
        "[completions]\nmaxTokensPerHour = 300\nmaxOutputTokens = 64\n",
    );
    let engine = runtime.select(Some("powers-probe")).await;
    let mut completed = 0;
    for _ in 0..10 {
        let report = probe(&engine, &session("s"), "complete 1").await;
        if report == "completed=1" {
            completed += 1;
        } else {
            assert!(report.contains("maxTokensPerHour"), "{report}");
            break;
        }
    }
    assert!(
        (1..10).contains(&completed),
        "{completed} before the hour's budget ran out"
    );
}

/// A model that answers every request with its whole output cap, after a
/// pause long enough for concurrent engine calls to ask together.
#[derive(Debug)]
struct SlowFullAnswers;

#[async_trait]
impl ctxbox_host::provider::completion::ModelCompletions for SlowFullAnswers {
    fn id(&self) -> &str {
        "slow-full-answers"
    }

    async fn complete(
        &self,
        _context: ctxbox_host::provider::completion::CompletionContext<'_>,
        request: &ctxbox_host::contract::completion::CompletionRequest,
    ) -> Result<
        ctxbox_host::contract::completion::Completion,
        ctxbox_host::provider::completion::CompletionError,
    > {
        tokio::time::sleep(std::time::Duration::from_millis(1_000)).await;
        Ok(ctxbox_host::contract::completion::Completion {
            text: "word ".repeat(request.max_tokens as usize),
            input_tokens: 10,
            output_tokens: u64::from(request.max_tokens),
            model: None,
        })
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_calls_cannot_spend_the_hourly_budget_twice() {
    let dir = tempfile::tempdir().expect("temp dir");
    let runtime = host(
        dir.path(),
        "[completions]\nmaxTokensPerHour = 300\nmaxOutputTokens = 64\n",
    );
    runtime.completions().set_model(Arc::new(SlowFullAnswers));
    let engine = runtime.select(Some("powers-probe")).await;
    // Twelve sessions ask at once; each completion's worst case is ~70
    // tokens, so the hour holds four of them (and a fifth lowered to what
    // is left) whatever the timing.
    let asking: Vec<_> = (0..12)
        .map(|n| {
            let engine = engine.clone();
            tokio::spawn(
                async move { probe(&engine, &session(&format!("s{n}")), "complete 1").await },
            )
        })
        .collect();
    let mut completed = 0;
    for report in asking {
        let report = report.await.expect("joins");
        if report == "completed=1" {
            completed += 1;
        } else {
            assert!(report.contains("maxTokensPerHour"), "{report}");
        }
    }
    let totals = runtime.completions().totals_of("powers-probe");
    assert!(
        (1..=5).contains(&completed),
        "{completed} completions answered under a 300-token hour: {totals:?}"
    );
    assert!(totals.output_tokens <= 300, "{totals:?}");
    assert!(engine.serving_selected(), "a refusal is not a failure");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_model_a_completion_is_unavailable_and_said_so() {
    let dir = tempfile::tempdir().expect("temp dir");
    let runtime = host(dir.path(), "");
    runtime
        .completions()
        .set_model(Arc::new(ctxbox_host::provider::completion::NoModel(
            "no model here".into(),
        )));
    let engine = runtime.select(Some("powers-probe")).await;
    let report = probe(&engine, &session("s"), "complete 1").await;
    assert!(
        report.starts_with("completed=0 error=HostErrorKind::Unavailable"),
        "{report}"
    );
}

// --- searchable memory --------------------------------------------------------
//
// Each test runs on the embedded store and, when a PostgreSQL test server
// is available, on a shared one (`[store] kind = "postgres"`).

/// `(name, [store] config)` of each store the index tests run on.
fn stores(test: &str) -> Vec<(&'static str, String)> {
    backends(test)
        .into_iter()
        .map(|(name, url)| (name, url.as_deref().map_or_else(String::new, store_config)))
        .collect()
}

/// `(name, PostgreSQL URL)` of each store the index tests run on: the
/// embedded one, and a fresh database when a PostgreSQL test server is
/// available.
pub(crate) fn backends(test: &str) -> Vec<(&'static str, Option<String>)> {
    let mut backends = vec![("embedded", None)];
    if let Some(url) = pg_cluster::database(test) {
        backends.push(("postgres", Some(url)));
    }
    backends
}

/// The `[store]` config of the PostgreSQL database at `url`.
pub(crate) fn store_config(url: &str) -> String {
    format!("[store]\nkind = \"postgres\"\nurl = {url:?}\n")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn documents_are_searchable_after_their_call_and_survive_a_restart() {
    for (backend, store) in stores("documents_are_searchable_after") {
        eprintln!("documents_are_searchable_after_their_call_and_survive_a_restart: {backend}");
        documents_are_searchable_after_their_call_and_survive_a_restart_on(&store).await;
    }
}

async fn documents_are_searchable_after_their_call_and_survive_a_restart_on(store: &str) {
    let dir = tempfile::tempdir().expect("temp dir");
    let (s1, s2) = (session("s1"), session("s2"));
    {
        let runtime = host(dir.path(), store);
        let engine = runtime.select(Some("powers-probe")).await;
        assert_eq!(
            probe(
                &engine,
                &s1,
                "put session m1 the deploy key rotates on Fridays"
            )
            .await,
            "put=ok"
        );
        assert_eq!(
            probe(
                &engine,
                &s1,
                "put engine n1 Rotation runbook: rotate keys weekly"
            )
            .await,
            "put=ok"
        );
        // The next call sees the committed documents.
        assert_eq!(
            probe(&engine, &s1, "search session ROTATES fridays").await,
            "hits=m1"
        );
        assert_eq!(
            sorted(&probe(&engine, &s1, "search engine rotat").await),
            "hits=m1,n1"
        );
    }
    // A new host on the same data directory: the store is reopened.
    let runtime = host(dir.path(), store);
    let engine = runtime.select(Some("powers-probe")).await;
    assert_eq!(
        probe(&engine, &s1, "search session deploy key").await,
        "hits=m1"
    );
    // Session scope: another session's documents are not its own...
    assert_eq!(probe(&engine, &s2, "search session deploy").await, "hits=");
    assert_eq!(
        probe(&engine, &s2, "delete session m1").await,
        "deleted=false"
    );
    // ...the engine scope reaches them all.
    assert_eq!(
        sorted(&probe(&engine, &s2, "search engine rotat").await),
        "hits=m1,n1"
    );
    // Another engine (the same component, registered under another id)
    // has a store of its own.
    let twin = runtime.select(Some("powers-twin")).await;
    assert_eq!(probe(&twin, &s1, "search engine rotat").await, "hits=");
    assert_eq!(probe(&twin, &s1, "search session deploy").await, "hits=");
    // A delete answers whether the document exists, and takes effect when
    // its call commits.
    assert_eq!(
        probe(&engine, &s1, "delete session m1").await,
        "deleted=true"
    );
    assert_eq!(probe(&engine, &s1, "search engine rotat").await, "hits=n1");
}

/// `hits=…` with the ids in order (ranking between equal hits is the
/// store's business).
fn sorted(report: &str) -> String {
    match report.strip_prefix("hits=") {
        Some(ids) => {
            let mut ids: Vec<&str> = ids.split(',').filter(|id| !id.is_empty()).collect();
            ids.sort_unstable();
            format!("hits={}", ids.join(","))
        }
        None => report.to_owned(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_calls_documents_are_dropped() {
    for (backend, store) in stores("a_failed_calls_documents_are_d") {
        eprintln!("a_failed_calls_documents_are_dropped: {backend}");
        a_failed_calls_documents_are_dropped_on(&store).await;
    }
}

async fn a_failed_calls_documents_are_dropped_on(store: &str) {
    let dir = tempfile::tempdir().expect("temp dir");
    let runtime = host(dir.path(), store);
    let engine = runtime.select(Some("powers-probe")).await;
    let s = session("s");
    assert_eq!(
        probe(&engine, &s, "put session kept stays here").await,
        "put=ok"
    );
    let params = AssembleParams {
        prompt: Some("put-then-trap session lost never committed".to_owned()),
        token_budget: Some(100_000),
        ..AssembleParams::default()
    };
    // The guard answers with the fallback; the engine is quarantined.
    engine
        .assemble(&CallOptions::default(), &s, &History::new(vec![]), &params)
        .await
        .expect("the fallback answers");
    let record = runtime
        .engines()
        .quarantine()
        .get("powers-probe")
        .expect("quarantined");
    assert_eq!(record.operation, "assemble");
    runtime
        .engines()
        .quarantine()
        .clear("powers-probe")
        .expect("cleared");
    assert_eq!(
        probe(&engine, &s, "search session never committed").await,
        "hits="
    );
    assert_eq!(
        probe(&engine, &s, "search session stays").await,
        "hits=kept"
    );
    assert_eq!(
        probe(&engine, &s, "delete session lost").await,
        "deleted=false"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_of_documents_stops_at_the_quota_and_the_next_turn_works() {
    for (backend, store) in stores("a_flood_of_documents_stops_at_") {
        eprintln!("a_flood_of_documents_stops_at_the_quota_and_the_next_turn_works: {backend}");
        a_flood_of_documents_stops_at_the_quota_and_the_next_turn_works_on(&store).await;
    }
}

async fn a_flood_of_documents_stops_at_the_quota_and_the_next_turn_works_on(store: &str) {
    let dir = tempfile::tempdir().expect("temp dir");
    // About 60 documents of 4 KiB (each counts its text four times). The
    // default call time: a search is stopped at its deadline notice, and
    // PostgreSQL's scoring of these texts takes seconds on a loaded machine.
    let runtime = host_with_timeout(
        dir.path(),
        &format!("{store}[state]\nquotaBytes = 1048576\n"),
        10_000,
    );
    let engine = runtime.select(Some("powers-probe")).await;
    let s = session("s");
    let report = probe(&engine, &s, "flood").await;
    let (flooded, error) = report
        .strip_prefix("flooded=")
        .and_then(|rest| rest.split_once(" error="))
        .unwrap_or_else(|| panic!("{report}"));
    let flooded: usize = flooded.parse().expect("a count");
    assert!((50..70).contains(&flooded), "{report}");
    assert!(
        error.starts_with("HostErrorKind::QuotaExceeded") && error.contains("state.quotaBytes"),
        "{report}"
    );
    assert!(engine.serving_selected(), "a refused put is not a failure");
    // What fitted was committed with the call's answer; the store is full.
    let hits = probe(&engine, &s, "search session xxxx").await;
    assert_eq!(hits.matches("flood-").count(), flooded.min(100), "{hits}");
    let big = format!("put session one-more {}", "y".repeat(4096));
    let refused = probe(&engine, &s, &big).await;
    assert!(
        refused.starts_with("put error=HostErrorKind::QuotaExceeded"),
        "{refused}"
    );
    // Deleting makes room again.
    assert_eq!(
        probe(&engine, &s, "delete session flood-0").await,
        "deleted=true"
    );
    assert_eq!(probe(&engine, &s, &big).await, "put=ok");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn index_arguments_out_of_their_rules_are_refused_by_name() {
    for (backend, store) in stores("index_arguments_out_of_their_r") {
        eprintln!("index_arguments_out_of_their_rules_are_refused_by_name: {backend}");
        index_arguments_out_of_their_rules_are_refused_by_name_on(&store).await;
    }
}

async fn index_arguments_out_of_their_rules_are_refused_by_name_on(store: &str) {
    let dir = tempfile::tempdir().expect("temp dir");
    let runtime = host(dir.path(), store);
    let engine = runtime.select(Some("powers-probe")).await;
    let s = session("s");
    for (command, named) in [
        (
            "search engine",
            "InvalidArgument: invalid argument: a query has 1 to 32 words, not 0",
        ),
        (
            "search engine a\0b",
            "InvalidArgument: invalid argument: cannot search the index: a query cannot contain NUL",
        ),
        (
            "put engine d1 nul\0inside",
            "InvalidArgument: invalid argument: cannot index the document: document `d1` contains NUL",
        ),
    ] {
        let report = probe(&engine, &s, command).await;
        assert!(
            report.ends_with(&format!("error=HostErrorKind::{named}")),
            "{command:?}: {report}"
        );
    }
    let words = (0..33)
        .map(|n| format!("w{n}"))
        .collect::<Vec<_>>()
        .join(" ");
    let report = probe(&engine, &s, &format!("search session {words}")).await;
    assert!(
        report.contains("a query has 1 to 32 words, not 33"),
        "{report}"
    );
    assert!(
        engine.serving_selected(),
        "refusals are answers, not failures"
    );
}

// --- tools -------------------------------------------------------------------

/// Host tools: `read`, answered `read ok`.
struct HostTools;

#[async_trait]
impl ToolExecutor for HostTools {
    async fn execute(&self, assistant: &AgentMessage, _: &CancellationToken) -> Vec<AgentMessage> {
        assistant
            .tool_call_ids()
            .map(|id| AgentMessage::tool_result(id, "read", "read ok"))
            .collect()
    }

    fn definitions(&self) -> Vec<ctxbox_host::provider::ToolDefinition> {
        vec![ctxbox_host::provider::ToolDefinition {
            name: "read".into(),
            description: "Reads a file.".into(),
            parameters: serde_json::json!({"type": "object"}),
        }]
    }
}

fn call(id: &str, name: &str, arguments: &str) -> Result<AgentMessage, ProviderError> {
    Ok(AgentMessage::tool_call(id, name, arguments))
}

/// Runs one turn of `engine` with `answers`, in a fresh session; answers
/// the provider (its prompts and the tools it was offered) and the session.
async fn turn(
    runtime: &Runtime,
    dir: &Path,
    engine: Arc<GuardedEngine>,
    answers: Vec<Result<AgentMessage, ProviderError>>,
) -> (
    Arc<ScriptedProvider>,
    Session,
    Result<ctxbox_host::runner::TurnReport, ctxbox_host::runner::TurnError>,
) {
    turn_asking(runtime, dir, engine, "go", answers).await
}

/// [`turn`] with the user's message `ask`.
async fn turn_asking(
    runtime: &Runtime,
    dir: &Path,
    engine: Arc<GuardedEngine>,
    ask: &str,
    answers: Vec<Result<AgentMessage, ProviderError>>,
) -> (
    Arc<ScriptedProvider>,
    Session,
    Result<ctxbox_host::runner::TurnReport, ctxbox_host::runner::TurnError>,
) {
    let provider = Arc::new(ScriptedProvider::new(answers));
    let runner = runtime.runner(
        engine,
        provider.clone(),
        Arc::new(HostTools),
        32_768,
        vec!["read".into()],
    );
    let transcript = runtime
        .transcripts()
        .create(
            &dir.join(format!(
                "session-{}.jsonl",
                SESSIONS.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
            )),
            NewSession::default(),
        )
        .expect("session");
    let mut session = Session::new(transcript, None);
    let outcome = runner
        .run_turn(
            &mut session,
            vec![AgentMessage::user_text(ask)],
            &CancellationToken::new(),
        )
        .await;
    (provider, session, outcome)
}

/// The tool results of the session's branch, by tool name.
fn results(session: &Session) -> Vec<(String, String, bool)> {
    session
        .transcript()
        .active_branch()
        .into_iter()
        .filter_map(|entry| match entry.message {
            AgentMessage::ToolResult {
                ref tool_name,
                is_error,
                ..
            } => Some((tool_name.clone(), text_of(&entry.message), is_error)),
            _ => None,
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn engine_tools_are_offered_beside_the_hosts_and_answered_by_the_engine() {
    let dir = tempfile::tempdir().expect("temp dir");
    let runtime = host(dir.path(), "");
    let engine = runtime.select(Some("tool-spinner")).await;
    let (provider, session, outcome) = turn(
        &runtime,
        dir.path(),
        engine.clone(),
        vec![
            call("c1", "echo", r#"{"say":"hi"}"#),
            call("c2", "read", "{}"),
            Ok(AgentMessage::assistant_text("done")),
        ],
    )
    .await;
    let report = outcome.expect("the turn completes");
    assert_eq!(
        (report.engine_tool_calls, report.engine_tool_errors),
        (1, 0)
    );
    let offered: Vec<String> = provider.tool_definitions()[0]
        .iter()
        .map(|tool| tool.name.clone())
        .collect();
    assert_eq!(
        offered,
        ["read", "echo", "spin"],
        "the host's first, then the engine's"
    );
    let results = results(&session);
    assert_eq!(
        results[0],
        ("echo".into(), r#"echo {"say":"hi"}"#.into(), false)
    );
    assert_eq!(results[1], ("read".into(), "read ok".into(), false));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_that_spins_is_cut_the_model_told_and_the_engine_quarantined() {
    let dir = tempfile::tempdir().expect("temp dir");
    let runtime = host(dir.path(), "");
    let engine = runtime.select(Some("tool-spinner")).await;
    let (provider, session, outcome) = turn(
        &runtime,
        dir.path(),
        engine.clone(),
        vec![
            call("c1", "spin", "{}"),
            Ok(AgentMessage::assistant_text("the tool failed, moving on")),
        ],
    )
    .await;
    let report = outcome.expect("the turn completes");
    assert_eq!(
        (report.engine_tool_calls, report.engine_tool_errors),
        (1, 1)
    );
    let (name, text, is_error) = results(&session).remove(0);
    assert_eq!(name, "spin");
    assert!(
        is_error && text.starts_with("error: the tool failed:"),
        "{text}"
    );
    assert!(
        text.contains("deadline") || text.contains("fuel"),
        "cut by its limits: {text}"
    );
    let record = runtime
        .engines()
        .quarantine()
        .get("tool-spinner")
        .expect("quarantined");
    assert_eq!(record.operation, "call-tool");
    assert_eq!(provider.prompts().len(), 2, "the model heard and answered");

    // Quarantined: its tools are withdrawn from the next turn.
    let (provider, _, outcome) = turn(
        &runtime,
        dir.path(),
        engine,
        vec![Ok(AgentMessage::assistant_text("ok"))],
    )
    .await;
    outcome.expect("the next turn completes");
    let offered: Vec<String> = provider.tool_definitions()[0]
        .iter()
        .map(|tool| tool.name.clone())
        .collect();
    assert_eq!(offered, ["read"]);
}

/// `tool-liar` in `mode`.
fn liar(dir: &Path, mode: &str) -> Runtime {
    host(
        dir,
        &format!("[plugins.entries.tool-liar]\nconfig = {{ mode = \"{mode}\" }}\n"),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tool_definitions_against_the_contract_quarantine_the_engine() {
    for mode in ["many", "bad-name", "bloated"] {
        let dir = tempfile::tempdir().expect("temp dir");
        let runtime = liar(dir.path(), mode);
        let engine = runtime.select(Some("tool-liar")).await;
        let tools = engine
            .tools(&CallOptions::default())
            .await
            .expect("answered");
        assert!(tools.is_empty(), "{mode}: none offered");
        let record = runtime
            .engines()
            .quarantine()
            .get("tool-liar")
            .unwrap_or_else(|| panic!("{mode}: quarantined"));
        assert_eq!(record.classification, "invalid-output", "{mode}");
        assert!(!record.reason.contains('\u{1b}'), "{mode}: escaped");
        if mode == "bloated" {
            assert!(
                record
                    .reason
                    .contains("whole tool set's cap of 32768 bytes and 8000 tokens"),
                "{}",
                record.reason
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_engine_cannot_shadow_a_host_tool() {
    let dir = tempfile::tempdir().expect("temp dir");
    let runtime = liar(dir.path(), "shadow");
    let engine = runtime.select(Some("tool-liar")).await;
    let (provider, session, outcome) = turn(
        &runtime,
        dir.path(),
        engine.clone(),
        vec![
            call("c1", "read", "{}"),
            Ok(AgentMessage::assistant_text("done")),
        ],
    )
    .await;
    let report = outcome.expect("the turn completes");
    assert_eq!(report.engine_tool_calls, 0, "the host's `read` answered");
    assert_eq!(results(&session)[0].1, "read ok");
    let offered: Vec<String> = provider.tool_definitions()[0]
        .iter()
        .map(|tool| tool.name.clone())
        .collect();
    assert_eq!(offered, ["read"], "offered once, the host's");
    assert!(engine.serving_selected(), "not a failure: just not offered");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_answer_over_its_cap_is_the_engines_failure() {
    let dir = tempfile::tempdir().expect("temp dir");
    let runtime = liar(dir.path(), "huge");
    let engine = runtime.select(Some("tool-liar")).await;
    let (_, session, outcome) = turn(
        &runtime,
        dir.path(),
        engine,
        vec![
            call("c1", "huge", "{}"),
            Ok(AgentMessage::assistant_text("done")),
        ],
    )
    .await;
    outcome.expect("the turn completes");
    let (_, text, is_error) = results(&session).remove(0);
    assert!(is_error && text.contains("262144 byte limit"), "{text}");
    let record = runtime
        .engines()
        .quarantine()
        .get("tool-liar")
        .expect("quarantined");
    assert_eq!(record.classification, "invalid-output");
}
