//! The main job end to end: every fixture transcript replayed with `legacy`
//! and `keep-recent` at 8k, 16k and 32k windows. Every turn completes, no
//! accepted prompt exceeds the window or orphans a tool call, and the
//! written session is a valid JSONL v3 file the store reads back.

use std::collections::HashSet;
use std::path::Path;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use ctxbox_host::contract::types::AgentMessage;
use ctxbox_host::provider::{ModelReply, ModelRequest, Provider, ProviderError, Replay};
use ctxbox_host::runner::Session;
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

async fn replay_fixture(name: &str) {
    let dir = tempfile::tempdir().expect("temp dir");
    let runtime = Runtime::new(Config {
        data_dir: Some(dir.path().to_owned()),
        ..Config::default()
    })
    .expect("runtime");
    let script = fixture_script(runtime.transcripts(), name);
    for (engine_id, windows) in RUNS {
        for &window in windows {
            let label = format!("{name} with {engine_id} at {window}");
            let output = dir.path().join(format!("{engine_id}-{window}.jsonl"));
            let transcript = runtime
                .transcripts()
                .create(
                    &output,
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
                    &script,
                    &CancellationToken::new(),
                    &mut |_, _| {},
                )
                .await
                .expect("the session is written");

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
            let largest_accepted = *checked.largest_accepted.lock().expect("lock");
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
