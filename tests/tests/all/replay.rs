//! The main job end to end: every fixture transcript replayed with `legacy`
//! and `keep-recent` at 8k, 16k and 32k windows. Every turn completes, no
//! accepted prompt exceeds the window or orphans a tool call, and the
//! written session is a valid JSONL v3 file the store reads back.

use std::collections::HashSet;
use std::path::Path;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use ctxbox_host::contract::types::AgentMessage;
use ctxbox_host::engines::GuardedEngine;
use ctxbox_host::provider::{
    ModelReply, ModelRequest, Provider, ProviderError, Replay, ReplayScript,
};
use ctxbox_host::runner::{RunReport, Session, TurnRunner};
use ctxbox_host::runtime::Runtime;
use ctxbox_host::runtime::config::Config;
use ctxbox_host::services::state::{EngineState, StateConfig, StateStore};
use ctxbox_host::transcript::{NewSession, TranscriptStore};
use ctxbox_tests::fixture_script;
use tokio_util::sync::CancellationToken;

/// Every fixture is replayed with each of these engines at each window.
const RUNS: [(&str, &[u64]); 4] = [
    ("legacy", &[8_192, 16_384, 32_768]),
    ("keep-recent", &[8_192, 16_384, 32_768]),
    ("lossless", &[16_384]),
    ("delegating", &[16_384]),
];

/// The replaying provider, checking every prompt it accepts.
struct Checked {
    replay: Arc<Replay>,
    largest_accepted: Mutex<u64>,
}

#[async_trait]
impl Provider for Checked {
    async fn complete(
        &self,
        request: ModelRequest<'_>,
        abort: &CancellationToken,
    ) -> Result<ModelReply, ProviderError> {
        let reply = self.replay.complete(request, abort).await?;
        let tokens = ctxbox_host::provider::prompt_tokens(&request);
        assert!(
            tokens <= self.replay.window(),
            "an accepted prompt of {tokens} tokens"
        );
        assert_pairs_intact(request.messages);
        let mut largest = self.largest_accepted.lock().expect("lock");
        *largest = (*largest).max(tokens);
        Ok(reply)
    }

    fn continues_turn(&self) -> bool {
        self.replay.continues_turn()
    }
}

/// Every tool result follows its call, and every call is answered, in the
/// prompt as sent.
fn assert_pairs_intact(messages: &[AgentMessage]) {
    let mut open: HashSet<&str> = HashSet::new();
    for message in messages {
        if let AgentMessage::ToolResult { tool_call_id, .. } = message {
            assert!(
                open.remove(tool_call_id.as_str()),
                "result for `{tool_call_id}` without its call"
            );
        }
        open.extend(message.tool_call_ids());
    }
    assert!(open.is_empty(), "calls without results: {open:?}");
}

/// One replay of a fixture's `script` with `engine_id` at `window`, its
/// session written to `output`.
struct Replayed {
    report: RunReport,
    engine: Arc<GuardedEngine>,
    session: Session,
    runner: TurnRunner,
    /// The largest prompt the model accepted.
    largest_accepted: u64,
}

async fn replay_once(
    runtime: &Runtime,
    script: &ReplayScript,
    engine_id: &str,
    window: u64,
    output: &Path,
) -> Replayed {
    let transcript = runtime
        .transcripts()
        .create(
            output,
            NewSession {
                session_id: None,
                cwd: "/work".into(),
                parent_session: None,
            },
        )
        .expect("create session");
    let replay = Arc::new(Replay::new(window));
    let checked = Arc::new(Checked {
        replay: replay.clone(),
        largest_accepted: Mutex::new(0),
    });
    let engine = runtime.select(Some(engine_id)).await;
    let runner = runtime.runner(
        engine.clone(),
        checked.clone(),
        replay.clone(),
        window,
        script.tool_names(),
    );
    let mut session = Session::new(transcript, None);
    let report = runner
        .run_script(
            &mut session,
            &replay,
            script,
            &CancellationToken::new(),
            &mut |_, _| {},
        )
        .await
        .expect("the session is written");
    let largest_accepted = *checked.largest_accepted.lock().expect("lock");
    Replayed {
        report,
        engine,
        session,
        runner,
        largest_accepted,
    }
}

/// A runtime with its data in `dir`.
fn runtime_in(dir: &Path) -> Runtime {
    Runtime::new(Config {
        data_dir: Some(dir.to_owned()),
        ..Config::default()
    })
    .expect("runtime")
}

async fn replay_fixture(name: &str) {
    let dir = tempfile::tempdir().expect("temp dir");
    let runtime = runtime_in(dir.path());
    let script = fixture_script(runtime.transcripts(), name);
    for (engine_id, windows) in RUNS {
        for &window in windows {
            let label = format!("{name} with {engine_id} at {window}");
            let output = dir.path().join(format!("{engine_id}-{window}.jsonl"));
            let Replayed {
                report,
                engine,
                session,
                runner,
                largest_accepted,
            } = replay_once(&runtime, &script, engine_id, window, &output).await;

            assert!(
                report.failed_turns.is_empty(),
                "{label}: {:?}",
                report.failed_turns
            );
            assert_eq!(report.turns.len(), script.turns.len(), "{label}");
            assert_eq!(
                report.model_calls as usize,
                script.model_calls(),
                "{label}: every recorded answer given"
            );
            assert!(report.largest_prompt_tokens <= window, "{label}");
            assert_eq!(report.fallbacks, 0, "{label}: {:?}", report.quarantined);
            assert!(engine.serving_selected(), "{label}");
            assert_eq!(engine.serving_id(), engine_id, "{label}");
            assert_eq!(
                largest_accepted, report.largest_prompt_tokens,
                "{label}: the report counts what was sent"
            );
            if engine_id == "lossless" {
                assert_lossless_kept_everything(dir.path(), &session, &label);
            }
            // Release the session's writer lock, then read it back afresh.
            drop((session, runner));
            assert_valid_session_file(&output, &label);
        }
    }
}

/// The lossless engine's store holds every message of the session once,
/// however often it compacted (its layout: `s/<session id>/m/<sequence>`).
fn assert_lossless_kept_everything(data_dir: &Path, session: &Session, label: &str) {
    let state = StateStore::open_in(data_dir, &StateConfig::default()).expect("state store");
    let prefix = format!("s/{}/m/", session.session_ref().session_id);
    let mut stored = 0;
    let mut after: Option<String> = None;
    loop {
        let page = state
            .scan("lossless", &prefix, after.as_deref(), 1_000)
            .expect("scan");
        stored += page.len();
        match page.last() {
            Some((key, _)) if page.len() == 1_000 => after = Some(key.clone()),
            _ => break,
        }
    }
    let messages = session.transcript().active_branch().len();
    assert_eq!(
        stored, messages,
        "{label}: every message is in the lossless store"
    );
}

/// The written session re-reads in a fresh store: JSONL, a version 3 header,
/// every entry with a type and an id, and an active context whose pairs hold.
fn assert_valid_session_file(path: &Path, label: &str) {
    let text = std::fs::read_to_string(path).expect("session file");
    let mut lines = text.lines();
    let header: serde_json::Value =
        serde_json::from_str(lines.next().expect("header")).expect("header JSON");
    assert_eq!(header["type"], "session", "{label}");
    assert_eq!(header["version"], 3, "{label}");
    let mut ids = HashSet::new();
    for line in lines {
        let entry: serde_json::Value = serde_json::from_str(line).expect("every line is JSON");
        assert!(entry["type"].is_string(), "{label}: {line}");
        let id = entry["id"].as_str().expect("an id").to_owned();
        assert!(ids.insert(id), "{label}: ids are unique");
    }
    let reread = TranscriptStore::new(Default::default())
        .open(path)
        .expect("re-reads");
    assert!(
        reread.open_report().torn_tail.is_none(),
        "{label}: no torn tail"
    );
    // Every result follows its call. A call the recording never answered
    // stays unanswered in the session, as recorded (nothing is invented;
    // prompts show it as unavailable, which `Checked` sees); that every
    // recorded entry is written as it was is `replay_fidelity`'s to check.
    let history = reread.history();
    let mut called: HashSet<&str> = HashSet::new();
    for entry in history.entries() {
        if let AgentMessage::ToolResult { tool_call_id, .. } = &entry.message {
            assert!(
                called.contains(tool_call_id.as_str()),
                "{label}: result for `{tool_call_id}` without its call"
            );
        }
        called.extend(entry.message.tool_call_ids());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replays_the_english_web_dev_session() {
    replay_fixture("claude-opus46-bedrock-subagent-webdev-en.jsonl").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replays_the_chinese_windows_ops_session() {
    replay_fixture("deepseek-chat-windows-ops-zh-3-compactions.jsonl").await;
}

/// Issue 34: at 32k one tool-heavy turn of this session is larger than the
/// budget on its own. `lossless`'s compaction rightly cannot free it; that
/// is no lie, so `lossless` serves every call (the turn goes on the ordinary
/// overflow path), and no call is served by `legacy`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lossless_serves_the_chinese_windows_ops_session_at_32k_without_legacy() {
    let dir = tempfile::tempdir().expect("temp dir");
    let runtime = runtime_in(dir.path());
    let name = "deepseek-chat-windows-ops-zh-3-compactions.jsonl";
    let script = fixture_script(runtime.transcripts(), name);
    let replayed = replay_once(
        &runtime,
        &script,
        "lossless",
        32_768,
        &dir.path().join("lossless-32k.jsonl"),
    )
    .await;
    let report = &replayed.report;
    assert_eq!(report.fallbacks, 0, "{:?}", report.quarantined);
    assert!(report.quarantined.is_empty(), "{:?}", report.quarantined);
    assert_eq!(replayed.engine.serving_id(), "lossless");
    assert!(replayed.largest_accepted <= 32_768);
    let served: Vec<&str> = report
        .turns
        .iter()
        .map(|turn| turn.served_by.as_str())
        .collect();
    assert!(served.iter().all(|id| *id == "lossless"), "{served:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replays_the_german_rust_coding_session() {
    replay_fixture("kimi-k2-thinking-rust-coding-de-1-compaction.jsonl").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replays_the_arabic_discord_bot_session() {
    replay_fixture("pi-termux-deepseek-v4-discord-bot-ar.jsonl").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replays_the_feishu_session_with_hook_compactions() {
    replay_fixture("qwen-minimax-feishu-zh-3-hook-compactions.jsonl").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replays_the_branching_delivery_mirror_session() {
    replay_fixture("qwen35-feishu-delivery-mirror-branching-zh.jsonl").await;
}

/// The lossless engine's `grep` tool, through the host's index
/// (`NativeServices` over the SQLite store on disk): after a real session
/// was replayed and compacted, a message compacted out of the context is
/// still found by a word of its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lossless_recalls_a_compacted_message_through_the_hosts_index() {
    use ctxbox_host::contract::engine::{CallOptions, ContextEngine};
    use ctxbox_host::contract::guest_view::guest_message;
    use ctxbox_host::contract::types::{AssembleParams, AssembledItem};

    let name = "qwen35-feishu-delivery-mirror-branching-zh.jsonl";
    let window = 8_192;
    let dir = tempfile::tempdir().expect("temp dir");
    let runtime = runtime_in(dir.path());
    let script = fixture_script(runtime.transcripts(), name);
    let Replayed {
        report,
        engine,
        session,
        ..
    } = replay_once(
        &runtime,
        &script,
        "lossless",
        window,
        &dir.path().join("lossless.jsonl"),
    )
    .await;
    assert!(report.failed_turns.is_empty(), "{:?}", report.failed_turns);
    // What the engine puts before the model now: its summaries and the
    // messages it keeps.
    let history = session.history();
    let assembled = engine
        .assemble(
            &CallOptions::default(),
            session.session_ref(),
            &history,
            &AssembleParams {
                token_budget: Some(window),
                ..AssembleParams::default()
            },
        )
        .await
        .expect("assembled");
    let context: Vec<String> = assembled
        .items
        .iter()
        .flat_map(|item| match item {
            AssembledItem::Insert(message) => vec![message.clone()],
            AssembledItem::Keep { start, end } => history.entries()[*start as usize..*end as usize]
                .iter()
                .map(|entry| entry.message.clone())
                .collect(),
        })
        .map(|message| guest_message(&message).text().to_lowercase())
        .collect();
    assert!(
        context.len() < history.len(),
        "the engine compacted: {} of {} messages",
        context.len(),
        history.len()
    );
    let word = session
        .transcript()
        .active_branch()
        .iter()
        .filter(|entry| matches!(entry.message, AgentMessage::User { .. }))
        .find_map(|entry| {
            let text: String = guest_message(&entry.message)
                .text()
                .chars()
                .take(2_000)
                .collect();
            text.split(|c: char| !c.is_alphanumeric())
                .filter(|word| (4..=16).contains(&word.chars().count()))
                .map(str::to_lowercase)
                .find(|word| !context.iter().any(|kept| kept.contains(word.as_str())))
        })
        .expect("a user message compacted away, with a word no message of the context has");

    let answer = engine
        .call_tool(
            &CallOptions::default(),
            session.session_ref(),
            "grep",
            &serde_json::json!({ "query": word }).to_string(),
        )
        .await
        .expect("grep answers");
    assert!(
        answer.starts_with("Messages containing all of:") && answer.contains("[message "),
        "`{word}`: {answer}"
    );
    assert!(
        answer.to_lowercase().contains(&format!("[{word}")),
        "`{word}` marked: {answer}"
    );
}
