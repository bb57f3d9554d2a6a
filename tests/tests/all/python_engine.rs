//! The Python example engine (`examples/python-engine`, built with
//! componentize-py) loads and runs in the host like a Rust engine, plans
//! exactly what the Rust `keep-recent` engine plans, and every answer passes
//! the host's output validation.
//!
//! The tests crate's build script builds the component when componentize-py
//! and wasm-tools are installed (`examples/python-engine/build.sh` installs
//! them under the target dir). Without them these tests pass after printing how
//! to enable them, unless `CTXBOX_REQUIRE_PYTHON_ENGINE` is set (CI sets it),
//! in which case they fail.

use std::ops::Range;
use std::path::Path;
use std::sync::{Arc, OnceLock};
use std::time::Instant;

use ctxbox_host::contract::engine::{CallOptions, ContextEngine};
use ctxbox_host::contract::history::{History, ToolPairing};
use ctxbox_host::contract::services::NoServices;
use ctxbox_host::contract::types::{
    AfterTurnParams, AgentMessage, AssembleParams, AssembleResult, AssembledItem, CompactParams,
    ContentBlock, ContextMode, HostParam, MaintainReason, MessageEntry, MessageKind, SessionRef,
    StopReason, SubagentEndReason, SubagentSpawn,
};
use ctxbox_host::sandbox::{LoadedComponent, Sandbox, SandboxConfig, WasmEngine};
use ctxbox_tests::guests::KEEP_RECENT_PY;

/// The component, or `None` (after saying how to enable it) when it was not
/// built and CI did not ask for it.
fn component_path() -> Option<&'static Path> {
    match KEEP_RECENT_PY {
        Ok(path) => Some(Path::new(path)),
        Err(why) if std::env::var_os("CTXBOX_REQUIRE_PYTHON_ENGINE").is_some() => {
            panic!("CTXBOX_REQUIRE_PYTHON_ENGINE is set but {why}")
        }
        Err(why) => {
            eprintln!(
                "skipping the Python engine test: {why} (set CTXBOX_REQUIRE_PYTHON_ENGINE=1 to make this a failure)"
            );
            None
        }
    }
}

/// One sandbox and one load for every test of this file. Compiling the ~18 MB
/// component takes tens of seconds in a debug build, so the compilation is
/// cached next to the component (the first run after each rebuild compiles).
fn loaded() -> Option<&'static (Sandbox, LoadedComponent)> {
    static LOADED: OnceLock<(Sandbox, LoadedComponent)> = OnceLock::new();
    let path = component_path()?;
    Some(LOADED.get_or_init(|| {
        let sandbox = Sandbox::new(SandboxConfig {
            cache_dir: path.parent().map(|dir| dir.join("compiled")),
            compile_timeout_ms: ctxbox_tests::LARGE_COMPONENT_COMPILE_TIMEOUT_MS,
            ..SandboxConfig::default()
        })
        .expect("sandbox");
        let started = Instant::now();
        let component = sandbox
            .load_file(path)
            .unwrap_or_else(|error| panic!("the host refused the Python engine: {error}"));
        eprintln!(
            "keep-recent-py: {} bytes, loaded ({}) in {:.0} ms",
            std::fs::metadata(path).map(|meta| meta.len()).unwrap_or(0),
            if component.from_cache() {
                "from cache"
            } else {
                "compiled"
            },
            started.elapsed().as_secs_f64() * 1e3
        );
        (sandbox, component)
    }))
}

async fn engine() -> Option<WasmEngine> {
    let (sandbox, component) = loaded()?;
    let started = Instant::now();
    let engine = sandbox
        .instantiate(component, Arc::new(NoServices))
        .await
        .unwrap_or_else(|error| panic!("instantiating the Python engine failed: {error}"));
    eprintln!(
        "keep-recent-py: first instance + info in {:.2} ms",
        started.elapsed().as_secs_f64() * 1e3
    );
    Some(engine)
}

fn session() -> SessionRef {
    SessionRef::new("s1", "/sessions/s1.jsonl")
}

fn entry(index: usize, message: AgentMessage) -> MessageEntry {
    MessageEntry {
        id: format!("e{index}"),
        parent_id: index.checked_sub(1).map(|parent| format!("e{parent}")),
        timestamp_ms: 1_700_000_000_000 + index as i64,
        message,
    }
}

fn assistant_calling(call_ids: &[&str]) -> AgentMessage {
    AgentMessage::Assistant {
        content: call_ids
            .iter()
            .map(|id| ContentBlock::ToolCall {
                id: (*id).to_owned(),
                name: "read".to_owned(),
                arguments_json: "{\"path\":\"notes.md\"}".to_owned(),
            })
            .collect(),
        model: Some("test-model".to_owned()),
        provider: None,
        usage: None,
        stop_reason: StopReason::ToolUse,
        error_message: None,
    }
}

fn tool_result(call_id: &str, text: &str) -> AgentMessage {
    AgentMessage::tool_result(call_id, "read", text)
}

/// `turns` user/assistant exchanges of varied length.
fn chat(turns: usize) -> Vec<AgentMessage> {
    let mut messages = Vec::new();
    for turn in 0..turns {
        messages.push(AgentMessage::user_text(format!(
            "question {turn}: {}",
            "why ".repeat(5 + turn % 17)
        )));
        messages.push(AgentMessage::assistant_text(format!(
            "answer {turn}: {}",
            "because ".repeat(8 + turn % 23)
        )));
    }
    messages
}

fn history(messages: Vec<AgentMessage>) -> History {
    History::new(
        messages
            .into_iter()
            .enumerate()
            .map(|(index, message)| entry(index, message))
            .collect(),
    )
}

fn params(token_budget: Option<u64>) -> AssembleParams {
    AssembleParams {
        token_budget,
        available_tools: vec!["read".to_owned()],
        citations_mode: None,
        model: Some("test-model".to_owned()),
        prompt: None,
        runtime_settings: None,
    }
}

fn kept(result: &AssembleResult) -> Vec<Range<u32>> {
    result
        .items
        .iter()
        .filter_map(|item| match item {
            AssembledItem::Keep { start, end } => Some(*start..*end),
            AssembledItem::Insert(_) => None,
        })
        .collect()
}

/// The text of the one inserted note, if there is one.
fn note(result: &AssembleResult) -> Option<String> {
    let notes: Vec<String> = result
        .items
        .iter()
        .filter_map(|item| match item {
            AssembledItem::Insert(AgentMessage::Custom {
                custom_type,
                content,
                display,
                ..
            }) => {
                assert_eq!(custom_type, "keep-recent-py");
                assert!(!display, "the note is hidden from UIs");
                match content.as_slice() {
                    [ContentBlock::Text { text }] => Some(text.clone()),
                    other => panic!("the note should be one text block, got {other:?}"),
                }
            }
            AssembledItem::Insert(other) => panic!("unexpected insert {other:?}"),
            AssembledItem::Keep { .. } => None,
        })
        .collect();
    assert!(notes.len() <= 1, "at most one note: {notes:?}");
    notes.into_iter().next()
}

/// What the Rust `keep-recent` engine plans for the same history, run
/// natively: the Python engine is a port of it and must agree.
fn rust_plan(history: &History, token_budget: Option<u64>) -> ctxbox_guest::AssembleResult {
    keep_recent::plan(&HostView(history), token_budget)
}

/// The host's history as the guest SDK's `HistoryView`.
struct HostView<'a>(&'a History);

impl ctxbox_guest::HistoryView for HostView<'_> {
    fn len(&self) -> u32 {
        self.0.len() as u32
    }
    fn entry(&self, _index: u32) -> Option<ctxbox_guest::MessageEntry> {
        None
    }
    fn kind(&self, index: u32) -> Option<ctxbox_guest::MessageKind> {
        use ctxbox_guest::MessageKind as Guest;
        self.0.kind(index as usize).map(|kind| match kind {
            MessageKind::User => Guest::User,
            MessageKind::Assistant => Guest::Assistant,
            MessageKind::ToolResult => Guest::ToolResult,
            MessageKind::Custom => Guest::Custom,
            MessageKind::CompactionSummary => Guest::CompactionSummary,
            MessageKind::BranchSummary => Guest::BranchSummary,
        })
    }
    fn tool_pairing(&self, index: u32) -> Option<ctxbox_guest::ToolPairing> {
        use ctxbox_guest::ToolPairing as Guest;
        self.0
            .tool_pairing(index as usize)
            .map(|pairing| match pairing {
                ToolPairing::None => Guest::None,
                ToolPairing::ToolCalls { last_result } => Guest::ToolCalls(last_result),
                ToolPairing::ToolResult { call } => Guest::ToolResult(call),
            })
    }
    fn tokens(&self, range: Range<u32>) -> u64 {
        self.0.tokens(range.start as usize..range.end as usize)
    }
}

/// Checks the Python answer against the Rust plan: same kept ranges, same
/// estimate, and the same note apart from the engine's name.
fn assert_matches_rust(history: &History, token_budget: Option<u64>, python: &AssembleResult) {
    // The rules the host enforces on every answer (and `ctxbox check` asserts).
    if let Err(violation) = ctxbox_host::contract::validate::check_assemble(history, python) {
        panic!("the Python engine's answer breaks the contract: {violation}");
    }
    let rust = rust_plan(history, token_budget);
    let rust_kept: Vec<Range<u32>> = rust
        .items
        .iter()
        .filter_map(|item| match item {
            ctxbox_guest::AssembledItem::Keep(range) => Some(range.start..range.end),
            ctxbox_guest::AssembledItem::Insert(_) => None,
        })
        .collect();
    let rust_note = rust.items.iter().find_map(|item| match item {
        ctxbox_guest::AssembledItem::Insert(message) => Some(message.text()),
        ctxbox_guest::AssembledItem::Keep(_) => None,
    });
    assert_eq!(
        kept(python),
        rust_kept,
        "kept ranges, budget {token_budget:?}"
    );
    assert_eq!(
        python.estimated_tokens, rust.estimated_tokens,
        "estimate, budget {token_budget:?}"
    );
    assert_eq!(
        note(python),
        rust_note.map(|text| text.replace("[keep-recent:", "[keep-recent-py:")),
        "note, budget {token_budget:?}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn info_names_the_python_engine() {
    let Some(engine) = engine().await else { return };
    let info = engine.info();
    assert_eq!(info.id, "keep-recent-py");
    assert_eq!(info.name, "Keep recent (Python)");
    assert_eq!(info.version.as_deref(), Some("0.1.0"));
    assert!(!info.owns_compaction);
    assert_eq!(info.accepted_host_params, Some(Vec::<HostParam>::new()));
    assert_eq!(info.turn_maintenance_mode, None);
}

#[tokio::test(flavor = "multi_thread")]
async fn assemble_keeps_the_newest_suffix_with_a_note() {
    let Some(engine) = engine().await else { return };
    let call = CallOptions::default();
    let history = history(chat(20));
    let len = history.len() as u32;
    // Room for the note and the last 6 messages, not 7.
    let budget = keep_recent::NOTE_TOKENS + history.tokens(34..40);
    assert!(history.tokens(33..40) + keep_recent::NOTE_TOKENS > budget);

    let result = engine
        .assemble(&call, &session(), &history, &params(Some(budget)))
        .await
        .unwrap();
    assert_eq!(kept(&result), vec![34..len]);
    assert!(
        matches!(result.items[0], AssembledItem::Insert(_)),
        "the note comes first"
    );
    let omitted_tokens = history.tokens(0..34);
    assert_eq!(
        note(&result).as_deref(),
        Some(
            format!(
                "[keep-recent-py: 34 earlier messages (about {omitted_tokens} tokens) were left out to fit the context window.]"
            )
            .as_str()
        )
    );
    assert_eq!(
        result.estimated_tokens,
        history.tokens(34..40) + keep_recent::NOTE_TOKENS
    );
    assert_eq!(result.system_prompt_addition, None);
    assert_eq!(result.context_projection, None);
    assert_matches_rust(&history, Some(budget), &result);
}

#[tokio::test(flavor = "multi_thread")]
async fn assemble_keeps_everything_that_fits_without_a_note() {
    let Some(engine) = engine().await else { return };
    let call = CallOptions::default();
    let history = history(chat(5));
    let total = history.total_tokens();
    for budget in [None, Some(total), Some(total * 10)] {
        let result = engine
            .assemble(&call, &session(), &history, &params(budget))
            .await
            .unwrap();
        assert_eq!(kept(&result), vec![0..10], "budget {budget:?}");
        assert_eq!(note(&result), None);
        assert_eq!(result.estimated_tokens, total);
    }
    let empty = History::new(Vec::new());
    let result = engine
        .assemble(&call, &session(), &empty, &params(Some(0)))
        .await
        .unwrap();
    assert_matches_rust(&empty, Some(0), &result);
}

#[tokio::test(flavor = "multi_thread")]
async fn assemble_never_separates_a_tool_call_from_its_results() {
    let Some(engine) = engine().await else { return };
    let call = CallOptions::default();
    let mut messages = chat(3); // 0..6
    messages.push(assistant_calling(&["c1", "c2"])); // 6
    messages.push(tool_result("c1", &"line ".repeat(40))); // 7
    messages.push(tool_result("c2", &"line ".repeat(40))); // 8
    messages.push(AgentMessage::assistant_text("done")); // 9
    let history = history(messages);

    // The suffix 7..10 fits, but 7 and 8 answer the call at 6: keep 9..10.
    let budget = keep_recent::NOTE_TOKENS + history.tokens(7..10);
    let result = engine
        .assemble(&call, &session(), &history, &params(Some(budget)))
        .await
        .unwrap();
    assert_eq!(kept(&result), vec![9..10]);
    assert!(note(&result).unwrap().contains("9 earlier messages"));
    assert_matches_rust(&history, Some(budget), &result);

    // Room for the whole pair: it is kept whole.
    let budget = keep_recent::NOTE_TOKENS + history.tokens(6..10);
    let result = engine
        .assemble(&call, &session(), &history, &params(Some(budget)))
        .await
        .unwrap();
    assert_eq!(kept(&result), vec![6..10]);

    // When the results are the newest entries and nothing fits, the newest
    // call is kept with its results rather than dropped.
    let history = history_of_trailing_results();
    let result = engine
        .assemble(&call, &session(), &history, &params(Some(1)))
        .await
        .unwrap();
    assert_eq!(kept(&result), vec![6..9]);
    assert_matches_rust(&history, Some(1), &result);

    // Every budget agrees with the Rust engine.
    let total = history.total_tokens();
    for budget in (0..=total + 10).step_by(7) {
        let result = engine
            .assemble(&call, &session(), &history, &params(Some(budget)))
            .await
            .unwrap();
        assert_matches_rust(&history, Some(budget), &result);
    }
}

fn history_of_trailing_results() -> History {
    let mut messages = chat(3);
    messages.push(assistant_calling(&["c1", "c2"]));
    messages.push(tool_result("c1", &"line ".repeat(40)));
    messages.push(tool_result("c2", &"line ".repeat(40)));
    history(messages)
}

#[tokio::test(flavor = "multi_thread")]
async fn assemble_pins_a_leading_compaction_summary() {
    let Some(engine) = engine().await else { return };
    let call = CallOptions::default();
    let mut messages = vec![AgentMessage::CompactionSummary {
        summary: "Earlier: the user set up the project.".to_owned(),
        tokens_before: 12_000,
    }];
    messages.extend(chat(10));
    let history = history(messages);
    let budget = history.tokens(0..1) * 2 + keep_recent::NOTE_TOKENS + history.tokens(15..21);
    let result = engine
        .assemble(&call, &session(), &history, &params(Some(budget)))
        .await
        .unwrap();
    assert_eq!(kept(&result).first(), Some(&(0..1)), "the summary is kept");
    assert_matches_rust(&history, Some(budget), &result);
}

#[tokio::test(flavor = "multi_thread")]
async fn compact_reports_truthfully_that_the_host_could_not_compact() {
    let Some(engine) = engine().await else { return };
    let history = history(chat(10));
    // `NoServices` has no native compaction to delegate to.
    let result = engine
        .compact(
            &CallOptions::default(),
            &session(),
            &history,
            &CompactParams::default(),
        )
        .await
        .unwrap();
    if let Err(violation) = ctxbox_host::contract::validate::check_compact(&history, &result) {
        panic!("the Python engine's compact answer breaks the contract: {violation}");
    }
    assert!(!result.ok);
    assert!(!result.compacted);
    let reason = result.reason.expect("a reason");
    assert!(
        reason.starts_with("host compaction unavailable:"),
        "{reason}"
    );
    assert_eq!(result.tokens_before, history.total_tokens());
    assert_eq!(result.tokens_after, None);
    assert_eq!(result.first_kept_entry_id, None);
}

#[tokio::test(flavor = "multi_thread")]
async fn the_other_exports_answer_the_reference_defaults() {
    let Some(engine) = engine().await else { return };
    let call = CallOptions::default();
    let session = session();
    let history = history(chat(2));

    let bootstrap = engine.bootstrap(&call, &session, &history).await.unwrap();
    assert!(!bootstrap.bootstrapped);
    assert_eq!(bootstrap.imported_messages, None);

    let new = entry(4, AgentMessage::user_text("hello"));
    assert!(
        !engine
            .ingest(&call, &session, &new, false)
            .await
            .unwrap()
            .ingested
    );
    let batch = engine
        .ingest_batch(&call, &session, &[new.clone(), new], true)
        .await
        .unwrap();
    assert_eq!(batch.ingested_count, 0);

    let after_turn = AfterTurnParams {
        pre_prompt_message_count: 2,
        token_budget: Some(1_000),
        is_heartbeat: false,
        runtime_context: Some("{}".to_owned()),
        runtime_settings: Some(r#"{"schemaVersion":1}"#.to_owned()),
    };
    engine
        .after_turn(&call, &session, &history, &after_turn)
        .await
        .unwrap();
    for reason in [
        MaintainReason::Bootstrap,
        MaintainReason::Turn,
        MaintainReason::Compaction,
    ] {
        let maintained = engine
            .maintain(&call, &session, &history, reason, None)
            .await
            .unwrap();
        assert!(!maintained.changed);
        assert_eq!(maintained.rewritten_entries, 0);
    }

    let spawn = SubagentSpawn {
        parent_session_key: "parent".to_owned(),
        child_session_key: "child".to_owned(),
        context_mode: ContextMode::Fork,
        ttl_ms: Some(60_000),
    };
    assert_eq!(
        engine.prepare_subagent_spawn(&call, &spawn).await.unwrap(),
        None
    );
    engine
        .rollback_subagent_spawn(&call, "nothing")
        .await
        .unwrap();
    engine
        .on_subagent_ended(&call, "child", SubagentEndReason::Completed)
        .await
        .unwrap();
    engine.dispose().await.unwrap();
}

/// Not a benchmark (no assertion on time): prints the round trip of
/// `assemble` over 1,000 messages, for the README's numbers.
#[tokio::test(flavor = "multi_thread")]
async fn assemble_on_a_thousand_messages() {
    let Some(engine) = engine().await else { return };
    let call = CallOptions::default();
    let history = history(chat(500));
    let budget = history.total_tokens() / 3;
    let mut times = Vec::new();
    let mut result = None;
    for _ in 0..50 {
        let started = Instant::now();
        result = Some(
            engine
                .assemble(&call, &session(), &history, &params(Some(budget)))
                .await
                .unwrap(),
        );
        times.push(started.elapsed().as_secs_f64() * 1e3);
    }
    let result = result.unwrap();
    assert_matches_rust(&history, Some(budget), &result);
    let first = times[0];
    times.sort_by(f64::total_cmp);
    eprintln!(
        "keep-recent-py: assemble over 1,000 messages: first call {first:.2} ms, median {:.2} ms, min {:.2} ms (50 calls)",
        times[times.len() / 2],
        times[0]
    );
}

/// A Python engine's instance holds many more core wasm instances than a
/// Rust one (interpreter, libc, adapters, the deny shims); a pool sized for
/// N engine instances still fits N of them.
#[tokio::test(flavor = "multi_thread")]
async fn a_full_pool_of_python_sessions_fits() {
    let Some(path) = component_path() else { return };
    const SLOTS: u32 = 4;
    let sandbox = Sandbox::new(SandboxConfig {
        max_instances: SLOTS,
        cache_dir: path.parent().map(|dir| dir.join("compiled")),
        compile_timeout_ms: ctxbox_tests::LARGE_COMPONENT_COMPILE_TIMEOUT_MS,
        ..SandboxConfig::default()
    })
    .expect("sandbox");
    let component = sandbox.load_file(path).expect("loads");
    let engine = sandbox
        .instantiate(&component, Arc::new(NoServices))
        .await
        .expect("instantiates");
    // The engine's control instance takes one slot; every other slot gets a
    // session.
    for index in 1..SLOTS {
        engine
            .prewarm(&format!("session-{index}"))
            .await
            .unwrap_or_else(|error| panic!("session {index} of {SLOTS}: {error}"));
    }
    assert_eq!(sandbox.live_instances(), SLOTS);
}
