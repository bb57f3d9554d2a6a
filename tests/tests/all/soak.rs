//! Load with faults: many concurrent sessions on one host run turns through
//! an engine that traps, hangs or answers invalidly on a tenth of its calls.
//! Every turn completes (on `legacy` where it must), and afterwards every
//! acknowledged entry is in its transcript on disk, in order.

use std::sync::Arc;
use std::time::Duration;

use ctxbox_host::contract::types::MessageKind;
use ctxbox_host::engines::guard::{GuardAction, GuardPolicy};
use ctxbox_host::engines::quarantine::QuarantineStore;
use ctxbox_host::runner::{RunnerConfig, Session, TurnRunner};
use ctxbox_host::sandbox::SandboxConfig;
use ctxbox_host::transcript::{NewSession, TranscriptConfig, TranscriptStore};
use ctxbox_host::{AgentMessage, ContentBlock, FixedToolResults, ScriptedProvider};
use ctxbox_tests::zoo_host_with;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

const SESSIONS: usize = 200;
const TURNS: usize = 10;
const CONCURRENT: usize = 16;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_turn_completes_and_every_entry_is_kept_under_random_engine_faults() {
    let dir = tempfile::tempdir().expect("temp dir");
    // A 1 ms back-off: a failed engine is retried almost at once, so it
    // keeps failing a tenth of the calls instead of being set aside.
    let quarantine = QuarantineStore::open(
        &dir.path().join("quarantine.sqlite3"),
        Some(Duration::from_millis(1)),
    )
    .expect("quarantine store");
    let config = SandboxConfig {
        call_timeout_ms: 300,
        ..SandboxConfig::default()
    };
    let host = zoo_host_with(dir.path(), config, GuardPolicy::default(), quarantine);
    let engine = host.select(Some("chaos")).await;
    let transcripts = TranscriptStore::new(TranscriptConfig::default());
    let slots = Arc::new(Semaphore::new(CONCURRENT));

    let mut tasks = Vec::new();
    for number in 0..SESSIONS {
        let (engine, transcripts, slots) = (engine.clone(), transcripts.clone(), slots.clone());
        let path = dir.path().join(format!("session-{number}.jsonl"));
        tasks.push(tokio::spawn(async move {
            let _slot = slots.acquire_owned().await.expect("semaphore open");
            let answers = (0..TURNS).map(|turn| format!("answer {turn} of {number}"));
            let runner = TurnRunner::new(
                engine,
                Arc::new(ScriptedProvider::texts(answers)),
                Arc::new(FixedToolResults::new("ok")),
                transcripts.clone(),
                RunnerConfig {
                    window: 16_384,
                    reserve_tokens: 2_048,
                    proactive_compaction: true,
                    system_prompt: "soak".into(),
                    model: None,
                    tools: Vec::new(),
                },
            );
            let transcript = transcripts
                .create(&path, NewSession::default())
                .expect("new session file");
            let mut session = Session::new(transcript, None);
            let mut events = Vec::new();
            for turn in 0..TURNS {
                let ask = AgentMessage::user_text(format!("question {turn} of {number}"));
                let report = runner
                    .run_turn(&mut session, vec![ask], &CancellationToken::new())
                    .await
                    .unwrap_or_else(|error| panic!("session {number} turn {turn}: {error}"));
                assert_eq!(report.model_calls, 1, "session {number} turn {turn}");
                events.extend(report.guard_events);
            }
            (path, events)
        }));
    }

    // A store of its own: the transcripts are read back from disk.
    let reader = TranscriptStore::new(TranscriptConfig::default());
    let mut events = engine.take_events();
    for task in tasks {
        let (path, reported) = task.await.expect("session task");
        events.extend(reported);
        let number: usize = path
            .file_stem()
            .and_then(|stem| stem.to_str())
            .and_then(|stem| stem.strip_prefix("session-"))
            .and_then(|n| n.parse().ok())
            .expect("numbered file");
        let transcript = reader.open_read_only(&path).expect("readable");
        let kept: Vec<(MessageKind, String)> = transcript
            .history()
            .entries()
            .iter()
            .map(|entry| (entry.message.kind(), text_of(&entry.message)))
            .collect();
        let expected: Vec<(MessageKind, String)> = (0..TURNS)
            .flat_map(|turn| {
                [
                    (MessageKind::User, format!("question {turn} of {number}")),
                    (MessageKind::Assistant, format!("answer {turn} of {number}")),
                ]
            })
            .collect();
        assert_eq!(kept, expected, "{}", path.display());
    }

    // The faults happened (each turn reports the guard's decisions), and the
    // engine served again after its back-offs.
    events.extend(engine.take_events());
    let count = |action: GuardAction| events.iter().filter(|e| e.action == action).count();
    assert!(
        count(GuardAction::FellBack) > 0,
        "some calls failed: {events:?}"
    );
    assert!(count(GuardAction::Recovered) > 0, "the engine came back");
}

fn text_of(message: &AgentMessage) -> String {
    message
        .content()
        .iter()
        .filter_map(|block| match block {
            ContentBlock::Text { text } => Some(text.as_str()),
            _ => None,
        })
        .collect()
}
