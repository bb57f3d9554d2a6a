//! `ctxbox run` tells the truth (issue 16): a recording replayed through
//! `Runtime::replay` (what `ctxbox run` calls) writes every entry of the
//! recording's active branch, in order and as it was — extension messages,
//! OpenClaw's copies of delivered messages, failed answers, results without
//! a call, the rest of a turn that could not be answered — without a model
//! call for what was none, and the report's figures are those of the session
//! it wrote.
//!
//! Every small shape (`tests/fixtures/shapes`, and a parallel tool loop
//! built here) and every real session (`tests/fixtures/sessions`) runs with
//! every bundled engine at 4k, 16k and 64k: the whole matrix, one test per
//! engine for the real sessions so they run side by side (about two minutes
//! of CPU in a debug build).

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use ctxbox_host::contract::engine::ContextEngine;
use ctxbox_host::contract::tokens;
use ctxbox_host::contract::types::{AgentMessage, ContentBlock, StopReason};
use ctxbox_host::provider::{ReplayScript, is_model_answer};
use ctxbox_host::runner::RunReport;
use ctxbox_host::runtime::Runtime;
use ctxbox_host::runtime::config::Config;
use ctxbox_host::transcript::NewSession;
use ctxbox_tests::{FIXTURE_SESSIONS, fixture};
use tokio_util::sync::CancellationToken;

const ENGINES: [&str; 4] = ["legacy", "keep-recent", "lossless", "delegating"];
const WINDOWS: [u64; 3] = [4_096, 16_384, 65_536];

fn shape(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures/shapes")
        .join(name)
}

const SHAPES: [&str; 4] = [
    "runtime-context.jsonl",
    "delivery-mirror.jsonl",
    "errored-answers.jsonl",
    "orphan-results.jsonl",
];

fn runtime(dir: &Path) -> Runtime {
    Runtime::new(Config {
        data_dir: Some(dir.join("data")),
        ..Config::default()
    })
    .expect("runtime")
}

/// A turn reading five whole files at once (~3,200 tokens each, ~16k in
/// all), then a dozen short turns after it.
fn parallel_reads(runtime: &Runtime, dir: &Path) -> PathBuf {
    let path = dir.join("parallel-reads.jsonl");
    let transcript = runtime
        .transcripts()
        .create(&path, NewSession::default())
        .expect("create");
    let files = ["a.rs", "b.rs", "c.rs", "d.rs", "e.rs"];
    let mut turn = vec![
        AgentMessage::user_text("Read the five modules and tell me what they share."),
        AgentMessage::Assistant {
            content: files
                .iter()
                .map(|file| ContentBlock::ToolCall {
                    id: format!("read-{file}"),
                    name: "read".into(),
                    arguments_json: format!(r#"{{"path":"src/{file}"}}"#),
                })
                .collect(),
            model: Some("acme-large".into()),
            provider: Some("acme".into()),
            usage: None,
            stop_reason: StopReason::ToolUse,
            error_message: None,
        },
    ];
    for file in files {
        turn.push(AgentMessage::ToolResult {
            tool_call_id: format!("read-{file}"),
            tool_name: "read".into(),
            content: vec![ContentBlock::text(
                format!("fn {}() {{ let shared = cache(); }}\n", &file[..1]).repeat(400),
            )],
            is_error: false,
            details: None,
        });
    }
    turn.push(AgentMessage::assistant_text(
        "They all go through the cache.",
    ));
    transcript.append(&turn).expect("append");
    for n in 0..12 {
        transcript
            .append(&[
                AgentMessage::user_text(format!("Follow-up {n}: and module {n}?")),
                AgentMessage::assistant_text(format!("Module {n} uses the cache too.")),
            ])
            .expect("append");
    }
    path
}

/// The message as the replay must write it: a model's answer carries the
/// replay's own usage (what its prompt cost), everything else is as
/// recorded.
fn comparable(message: &AgentMessage) -> AgentMessage {
    match message {
        AgentMessage::Assistant {
            content,
            model,
            provider,
            stop_reason,
            error_message,
            ..
        } if is_model_answer(message) => AgentMessage::Assistant {
            content: content.clone(),
            model: model.clone(),
            provider: provider.clone(),
            usage: None,
            stop_reason: *stop_reason,
            error_message: error_message.clone(),
        },
        other => other.clone(),
    }
}

/// Tool results on `branch` whose call is nowhere before them.
fn orphans(branch: &[AgentMessage]) -> usize {
    let mut calls: HashSet<&str> = HashSet::new();
    let mut orphans = 0;
    for message in branch {
        if let AgentMessage::ToolResult { tool_call_id, .. } = message
            && !calls.contains(tool_call_id.as_str())
        {
            orphans += 1;
        }
        calls.extend(message.tool_call_ids());
    }
    orphans
}

/// Replays `recording` with `engine` at `window` and checks the written
/// session against it and the report against the session.
async fn check(runtime: &Runtime, dir: &Path, recording: &Path, engine_id: &str, window: u64) {
    let name = recording.file_name().expect("name").to_string_lossy();
    let label = format!("{name} with {engine_id} at {window}");
    let recorded: Vec<AgentMessage> = runtime
        .transcripts()
        .open_read_only(recording)
        .expect("recording opens")
        .active_branch()
        .into_iter()
        .map(|entry| entry.message)
        .collect();
    let script = ReplayScript::from_messages(recorded.clone());
    let output = dir.join(format!("{name}-{engine_id}-{window}.jsonl"));
    let engine = runtime.select(Some(engine_id)).await;
    let report: RunReport = runtime
        .replay(
            &script,
            engine.clone(),
            window,
            &output,
            &CancellationToken::new(),
            &mut |_, _| {},
        )
        .await
        .unwrap_or_else(|error| panic!("{label}: the session is written: {error}"));

    let written = runtime
        .transcripts()
        .open_read_only(&output)
        .expect("the written session opens");
    assert!(written.open_report().is_clean(), "{label}");
    let branch: Vec<AgentMessage> = written
        .active_branch()
        .into_iter()
        .map(|entry| entry.message)
        .collect();

    // Nothing lost, nothing invented, nothing moved.
    for (index, (want, got)) in recorded.iter().zip(&branch).enumerate() {
        assert_eq!(
            comparable(want),
            comparable(got),
            "{label}: entry {index} of the active branch"
        );
    }
    assert_eq!(
        branch.len(),
        recorded.len(),
        "{label}: every active-branch entry, no more"
    );

    // The report's figures are the written session's.
    assert_eq!(report.transcript_messages, branch.len(), "{label}");
    assert_eq!(
        report.transcript_tokens,
        branch.iter().map(tokens::estimate_message).sum::<u64>(),
        "{label}"
    );
    assert_eq!(
        report.transcript_context_tokens,
        written.history().total_tokens(),
        "{label}"
    );
    let compaction_entries = std::fs::read_to_string(&output)
        .expect("read")
        .lines()
        .filter(|line| line.starts_with(r#"{"type":"compaction""#))
        .count();
    if engine.info().owns_compaction {
        // Its compactions are in its own store: the transcript keeps
        // everything.
        assert_eq!(compaction_entries, 0, "{label}");
    } else {
        crate::compaction_convergence::assert_each_compaction_frees_a_third(
            &report, window, &label,
        );
        assert_eq!(
            report.compactions as usize, compaction_entries,
            "{label}: compactions reported are the compaction entries written"
        );
    }
    assert_eq!(report.orphan_tool_results, orphans(&branch), "{label}");
    let answers = branch.iter().filter(|m| is_model_answer(m)).count();
    assert_eq!(answers, script.model_calls(), "{label}");
    if report.failed_turns.is_empty() {
        assert_eq!(
            report.model_calls as usize, answers,
            "{label}: a model call per recorded answer, none for OpenClaw's copies"
        );
    } else {
        assert!(report.model_calls as usize <= answers, "{label}");
    }
    assert!(report.largest_prompt_tokens <= window, "{label}");
    assert!(
        report.last_prompt_tokens <= report.largest_prompt_tokens,
        "{label}"
    );
    assert_eq!(
        (report.fallbacks, report.quarantined.len()),
        (0, 0),
        "{label}: {:?}",
        report.quarantined
    );
    assert!(engine.serving_selected(), "{label}");
    for failed in &report.failed_turns {
        assert!(!failed.error.is_empty(), "{label}");
    }
}

async fn check_all(recordings: &[PathBuf], engines: &[&str], runtime: &Runtime, dir: &Path) {
    for recording in recordings {
        for engine in engines {
            for window in WINDOWS {
                check(runtime, dir, recording, engine, window).await;
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_shape_with_every_engine_at_every_window() {
    let dir = tempfile::tempdir().expect("temp dir");
    let runtime = runtime(dir.path());
    let mut recordings: Vec<PathBuf> = SHAPES.iter().map(|name| shape(name)).collect();
    recordings.push(parallel_reads(&runtime, dir.path()));
    check_all(&recordings, &ENGINES, &runtime, dir.path()).await;
}

/// Every real session with `engine` at every window.
async fn real_sessions_with(engine: &str) {
    let dir = tempfile::tempdir().expect("temp dir");
    let runtime = runtime(dir.path());
    let recordings: Vec<PathBuf> = FIXTURE_SESSIONS.iter().map(|name| fixture(name)).collect();
    check_all(&recordings, &[engine], &runtime, dir.path()).await;
}

// One test per engine, so the test harness runs them side by side.

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_real_session_with_legacy_at_every_window() {
    real_sessions_with("legacy").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_real_session_with_keep_recent_at_every_window() {
    real_sessions_with("keep-recent").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_real_session_with_lossless_at_every_window() {
    real_sessions_with("lossless").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_real_session_with_delegating_at_every_window() {
    real_sessions_with("delegating").await;
}
