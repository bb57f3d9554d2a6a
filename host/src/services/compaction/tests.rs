//! Native compaction end to end on synthetic transcripts.

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use tokio_util::sync::CancellationToken;

use super::*;
use crate::contract::history::History;
use crate::contract::types::{
    AgentMessage, CompactParams, CompactResult, CompactionTarget, ContentBlock, MessageKind,
    StopReason,
};
use crate::services::summarize::{
    MergeRequest, REQUIRED_SECTIONS, SummarizeError, Summarizer, SummaryRequest,
};
use crate::transcript::{NewSession, Transcript, TranscriptConfig, TranscriptStore};

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime")
}

fn tool_call(id: &str, path: &str) -> AgentMessage {
    AgentMessage::Assistant {
        content: vec![
            ContentBlock::text(format!("I will use the cache layer and read {path}.")),
            ContentBlock::ToolCall {
                id: id.into(),
                name: if id.ends_with('w') { "write" } else { "read" }.into(),
                arguments_json: format!(r#"{{"path":"{path}"}}"#),
            },
        ],
        model: Some("m".into()),
        provider: Some("p".into()),
        usage: None,
        stop_reason: StopReason::ToolUse,
        error_message: None,
    }
}

fn tool_result(id: &str, size: usize) -> AgentMessage {
    AgentMessage::tool_result(
        id,
        "read",
        format!("line of output {id}\n").repeat(size / 20),
    )
}

/// `turns` turns: a user ask, a tool call with its (large) result, an answer.
fn session(dir: &std::path::Path, store: &TranscriptStore, turns: usize) -> Transcript {
    let transcript = store
        .create(&dir.join("session.jsonl"), NewSession::default())
        .expect("create");
    for turn in 0..turns {
        let id = format!("call{turn}{}", if turn % 3 == 0 { "w" } else { "" });
        transcript
            .append(&[
                AgentMessage::user_text(format!(
                    "Please look at module {turn}. Never delete tests."
                )),
                tool_call(&id, &format!("src/module{turn}.rs")),
                tool_result(&id, 2_000),
                AgentMessage::assistant_text(format!(
                    "Module {turn} is fine. TODO: benchmark module {turn}."
                )),
            ])
            .expect("append");
    }
    transcript
}

fn params(budget: u64, target: CompactionTarget, force: bool) -> CompactParams {
    CompactParams {
        token_budget: Some(budget),
        force,
        compaction_target: target,
        ..CompactParams::default()
    }
}

fn compactor(
    store: &TranscriptStore,
    summarizer: Arc<dyn Summarizer>,
    config: CompactionConfig,
) -> Compactor {
    Compactor::new(store.clone(), summarizer, config)
}

/// Compacts `transcript` once with the extractive summarizer and `config`.
fn compact_extractively(
    store: &TranscriptStore,
    transcript: &Transcript,
    config: CompactionConfig,
    params: &CompactParams,
) -> CompactResult {
    let compactor = compactor(
        store,
        Arc::new(crate::services::summarize::ExtractiveSummarizer),
        config,
    );
    runtime()
        .block_on(compactor.compact(transcript, params, &NoProgress, &CancellationToken::new()))
        .expect("compaction runs")
}

/// Every tool result in `history` follows the assistant message that called it.
fn assert_paired(history: &History) {
    let mut calls = HashSet::new();
    for entry in history.entries() {
        match &entry.message {
            AgentMessage::Assistant { .. } => {
                calls.extend(entry.message.tool_call_ids().map(str::to_owned))
            }
            AgentMessage::ToolResult { tool_call_id, .. } => {
                assert!(
                    calls.contains(tool_call_id),
                    "orphaned tool result {tool_call_id}"
                )
            }
            _ => {}
        }
    }
}

#[test]
fn skips_a_context_within_the_threshold() {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = TranscriptStore::new(TranscriptConfig::default());
    let transcript = session(dir.path(), &store, 2);
    let lines = transcript.line_count();
    let result = compact_extractively(
        &store,
        &transcript,
        CompactionConfig::default(),
        &params(200_000, CompactionTarget::Threshold, false),
    );
    assert!(result.ok && !result.compacted, "{result:?}");
    assert!(
        result
            .reason
            .is_some_and(|reason| reason.contains("within the compaction threshold"))
    );
    assert_eq!(transcript.line_count(), lines, "nothing written");
}

#[test]
fn compacts_to_the_budget_without_orphaning_tool_calls() {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = TranscriptStore::new(TranscriptConfig::default());
    let transcript = session(dir.path(), &store, 40);
    let before = transcript.history().total_tokens();
    let compactor = compactor(
        &store,
        Arc::new(crate::services::summarize::ExtractiveSummarizer),
        CompactionConfig::default(),
    );
    let progress = CountingProgress::default();
    let result = runtime()
        .block_on(compactor.compact(
            &transcript,
            &params(8_000, CompactionTarget::Budget, true),
            &progress,
            &CancellationToken::new(),
        ))
        .expect("compaction runs");
    assert!(result.ok && result.compacted, "{result:?}");
    assert_eq!(result.reason, None);
    assert!(
        progress.0.load(Ordering::Relaxed) >= 4,
        "every stage reports progress"
    );

    let history = transcript.history();
    let after = result.tokens_after.expect("tokens after");
    assert_eq!(after, history.total_tokens());
    assert!(
        after <= TargetShare::DEFAULT.of(8_000),
        "well under the budget: {after}"
    );
    assert!(result.tokens_before >= before && after < result.tokens_before);
    assert_eq!(history.kind(0), Some(MessageKind::CompactionSummary));
    assert_eq!(
        history.entry(1).map(|e| e.id.clone()),
        result.first_kept_entry_id
    );
    assert_paired(&history);

    let summary = result.summary.expect("summary");
    assert!(summary.chars().count() <= MAX_SUMMARY_CHARS);
    let mut cursor = 0;
    for title in REQUIRED_SECTIONS {
        cursor += summary[cursor..]
            .find(&format!("## {title}"))
            .expect("sections in order");
    }
    assert!(
        summary.contains("Never delete tests"),
        "constraints survive"
    );
    assert!(
        summary.contains("<modified-files>\nsrc/module0.rs"),
        "{summary}"
    );
    let details: serde_json::Value =
        serde_json::from_str(&result.details.expect("details")).expect("JSON");
    assert!(
        details["readFiles"]
            .as_array()
            .is_some_and(|files| files.contains(&"src/module1.rs".into()))
    );
}

#[test]
fn a_larger_target_share_keeps_more() {
    let store = TranscriptStore::new(TranscriptConfig::default());
    let mut kept = Vec::new();
    for share in [0.2, 0.6] {
        let dir = tempfile::tempdir().expect("temp dir");
        let transcript = session(dir.path(), &store, 40);
        let config = CompactionConfig {
            target_share: TargetShare::try_from(share).expect("in range"),
            ..CompactionConfig::default()
        };
        let result = compact_extractively(
            &store,
            &transcript,
            config,
            &params(10_000, CompactionTarget::Budget, true),
        );
        let after = result.tokens_after.expect("compacted");
        assert!(after <= (10_000.0 * share) as u64, "{share}: {after}");
        kept.push(after);
    }
    assert!(kept[0] < kept[1], "{kept:?}");
}

#[test]
fn the_threshold_target_gets_under_the_trigger() {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = TranscriptStore::new(TranscriptConfig::default());
    let transcript = session(dir.path(), &store, 60);
    let window = 40_000;
    let threshold = window - CompactionConfig::default().reserve_tokens;
    assert!(
        transcript.history().total_tokens() > threshold,
        "the session needs compacting"
    );
    let result = compact_extractively(
        &store,
        &transcript,
        CompactionConfig::default(),
        &params(window, CompactionTarget::Threshold, false),
    );
    assert!(result.compacted, "over the threshold, unforced: {result:?}");
    assert!(
        result.tokens_after.is_some_and(|after| after <= threshold),
        "{result:?}"
    );
    assert_paired(&transcript.history());
}

#[test]
fn a_second_compaction_folds_in_the_first() {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = TranscriptStore::new(TranscriptConfig::default());
    let transcript = session(dir.path(), &store, 30);
    let compactor = compactor(
        &store,
        Arc::new(crate::services::summarize::ExtractiveSummarizer),
        CompactionConfig::default(),
    );
    let runtime = runtime();
    let compact = |budget| {
        runtime
            .block_on(compactor.compact(
                &transcript,
                &params(budget, CompactionTarget::Budget, true),
                &NoProgress,
                &CancellationToken::new(),
            ))
            .expect("compaction runs")
    };
    let first = compact(10_000);
    assert!(first.compacted);
    for turn in 30..34 {
        let id = format!("late{turn}");
        transcript
            .append(&[
                AgentMessage::user_text("more"),
                tool_call(&id, "src/late.rs"),
                tool_result(&id, 400),
            ])
            .expect("append");
    }
    let second = compact(6_000);
    assert!(second.compacted, "{second:?}");
    assert!(second.tokens_after.is_some_and(|after| after <= 6_000));
    let details: serde_json::Value =
        serde_json::from_str(&second.details.expect("details")).expect("JSON");
    let read = details["readFiles"].as_array().expect("read files");
    assert!(
        read.contains(&"src/module1.rs".into()),
        "the first compaction's files are kept"
    );
    let history = transcript.history();
    assert_eq!(history.kind(0), Some(MessageKind::CompactionSummary));
    assert_paired(&history);
}

#[test]
fn a_cut_inside_a_turn_gets_a_turn_prefix_summary_and_keeps_its_ask_verbatim() {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = TranscriptStore::new(TranscriptConfig::default());
    let transcript = store
        .create(&dir.path().join("s.jsonl"), NewSession::default())
        .expect("create");
    transcript
        .append(&[
            AgentMessage::user_text("first ask"),
            AgentMessage::assistant_text("ok"),
        ])
        .expect("append");
    // One long turn: a single ask followed by many tool rounds.
    let ask = "Refactor everything, keep the API stable.";
    let mut turn = vec![AgentMessage::user_text(ask)];
    for round in 0..30 {
        let id = format!("r{round}");
        turn.push(tool_call(&id, &format!("src/r{round}.rs")));
        turn.push(tool_result(&id, 1_500));
    }
    transcript.append(&turn).expect("append");
    let result = compact_extractively(
        &store,
        &transcript,
        CompactionConfig::default(),
        &params(8_000, CompactionTarget::Budget, true),
    );
    assert!(result.compacted);
    let summary = result.summary.expect("summary");
    assert!(
        summary.contains("## Turn context (split turn)"),
        "{summary}"
    );
    assert!(
        summary.starts_with(&format!(
            "## Latest unresolved user request\n{}\n\n",
            serde_json::Value::from(ask)
        )),
        "the pending ask leads, verbatim: {summary}"
    );
    let details: serde_json::Value =
        serde_json::from_str(result.details.as_deref().expect("details")).expect("JSON");
    assert_eq!(details["latestUnresolvedUserRequest"], ask);
    let history = transcript.history();
    assert_eq!(
        history.kind(1),
        Some(MessageKind::Assistant),
        "the cut is before an assistant message"
    );
    assert_paired(&history);
}

#[test]
fn chunks_are_summarized_in_parallel_and_merged_in_order() {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = TranscriptStore::new(TranscriptConfig::default());
    let transcript = session(dir.path(), &store, 60);
    let recorder = Arc::new(Recorder::default());
    let config = CompactionConfig {
        summary_concurrency: RECORDER_CONCURRENCY,
        ..CompactionConfig::default()
    };
    let compactor = compactor(&store, recorder.clone(), config);
    // A small window makes small chunks: many of them.
    let result = runtime()
        .block_on(compactor.compact(
            &transcript,
            &params(16_000, CompactionTarget::Budget, true),
            &NoProgress,
            &CancellationToken::new(),
        ))
        .expect("compaction runs");
    assert!(result.compacted);
    let chunks = recorder.chunks.load(Ordering::Relaxed);
    assert!(chunks > 3, "{chunks} chunks");
    assert_eq!(
        recorder.max_in_flight.load(Ordering::Relaxed),
        RECORDER_CONCURRENCY
    );
    let merged = recorder.merged.lock().expect("lock").clone();
    assert_eq!(merged.len(), chunks);
    let firsts: Vec<u32> = merged
        .iter()
        .map(|part| {
            part.trim_start_matches("part ")
                .parse()
                .expect("a module number")
        })
        .collect();
    assert!(
        firsts.windows(2).all(|pair| pair[0] < pair[1]),
        "merged in order: {firsts:?}"
    );
}

#[test]
fn an_abort_stops_compaction_before_anything_is_written() {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = TranscriptStore::new(TranscriptConfig::default());
    let transcript = session(dir.path(), &store, 20);
    let lines = transcript.line_count();
    let compactor = compactor(&store, Arc::new(Stuck), CompactionConfig::default());
    let abort = CancellationToken::new();
    let runtime = runtime();
    let cancel = abort.clone();
    runtime.spawn(async move {
        tokio::task::yield_now().await;
        cancel.cancel();
    });
    let error = runtime
        .block_on(compactor.compact(
            &transcript,
            &params(8_000, CompactionTarget::Budget, true),
            &NoProgress,
            &abort,
        ))
        .expect_err("aborted");
    assert!(matches!(error, CompactionError::Aborted), "{error}");
    assert_eq!(transcript.line_count(), lines);
}

#[test]
fn a_summarizer_making_progress_outlasts_the_window() {
    // Each chunk takes 0.4 s, one at a time; the whole runs well past the
    // 1 s window, which every chunk re-arms.
    let dir = tempfile::tempdir().expect("temp dir");
    let store = TranscriptStore::new(TranscriptConfig::default());
    let transcript = session(dir.path(), &store, 60);
    let config = CompactionConfig {
        timeout_seconds: 1,
        summary_concurrency: 1,
        ..CompactionConfig::default()
    };
    let compactor = compactor(&store, Arc::new(Slow(Duration::from_millis(400))), config);
    let started = Instant::now();
    let result = runtime()
        .block_on(compactor.compact(
            &transcript,
            &params(16_000, CompactionTarget::Budget, true),
            &NoProgress,
            &CancellationToken::new(),
        ))
        .expect("progress keeps the window open");
    assert!(result.compacted);
    assert!(
        started.elapsed() > Duration::from_secs(1),
        "ran past the window"
    );
}

#[test]
fn a_summarizer_quiet_for_the_window_times_out() {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = TranscriptStore::new(TranscriptConfig::default());
    let transcript = session(dir.path(), &store, 20);
    let lines = transcript.line_count();
    let config = CompactionConfig {
        timeout_seconds: 1,
        ..CompactionConfig::default()
    };
    let compactor = compactor(&store, Arc::new(Stuck), config);
    let error = runtime()
        .block_on(compactor.compact(
            &transcript,
            &params(8_000, CompactionTarget::Budget, true),
            &NoProgress,
            &CancellationToken::new(),
        ))
        .expect_err("no progress");
    assert!(
        matches!(error, CompactionError::Timeout { seconds: 1 }),
        "{error}"
    );
    assert_eq!(transcript.line_count(), lines, "nothing written");
}

#[test]
fn a_failing_summarizer_is_stood_in_for() {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = TranscriptStore::new(TranscriptConfig::default());
    let transcript = session(dir.path(), &store, 20);
    let compactor = compactor(&store, Arc::new(Failing), CompactionConfig::default());
    let result = runtime()
        .block_on(compactor.compact(
            &transcript,
            &params(8_000, CompactionTarget::Budget, true),
            &NoProgress,
            &CancellationToken::new(),
        ))
        .expect("compaction runs");
    assert!(result.compacted);
    assert!(
        result
            .summary
            .is_some_and(|summary| summary.contains("Never delete tests"))
    );
}

#[test]
fn rotates_into_a_new_transcript_when_configured() {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = TranscriptStore::new(TranscriptConfig::default());
    let transcript = session(dir.path(), &store, 20);
    let config = CompactionConfig {
        truncate_after_compaction: true,
        ..CompactionConfig::default()
    };
    let result = compact_extractively(
        &store,
        &transcript,
        config,
        &params(8_000, CompactionTarget::Budget, true),
    );
    let rotated = result.rotated_session.expect("rotated");
    let successor = store
        .open(std::path::Path::new(&rotated.session_file))
        .expect("open successor");
    assert_eq!(successor.session_id(), rotated.session_id);
    let ids = |history: History| {
        history
            .entries()
            .iter()
            .map(|e| e.id.clone())
            .collect::<Vec<_>>()
    };
    assert_eq!(ids(successor.history()), ids(transcript.history()));
    assert!(successor.line_count() < transcript.line_count());
    assert_eq!(transcript.successor(), Some(rotated));
}

#[test]
fn a_summary_that_would_grow_the_context_is_not_written() {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = TranscriptStore::new(TranscriptConfig::default());
    let transcript = store
        .create(&dir.path().join("session.jsonl"), NewSession::default())
        .expect("create");
    // Two tiny turns: a summary's sections alone outweigh what it would
    // replace.
    for turn in 0..2 {
        transcript
            .append(&[
                AgentMessage::user_text(format!("q{turn}")),
                AgentMessage::assistant_text(format!("a{turn}")),
            ])
            .expect("append");
    }
    let lines = transcript.line_count();
    let before = transcript.history().total_tokens();
    let result = compact_extractively(
        &store,
        &transcript,
        CompactionConfig::default(),
        &params(before / 2, CompactionTarget::Budget, true),
    );
    assert!(result.ok && !result.compacted, "{result:?}");
    assert!(
        result
            .reason
            .as_deref()
            .is_some_and(|reason| reason.starts_with("no progress")),
        "{result:?}"
    );
    assert_eq!(transcript.line_count(), lines, "nothing written");
    assert_eq!(transcript.history().total_tokens(), before);
}

#[test]
fn the_entry_records_tokens_before_and_after_in_the_callers_units() {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = TranscriptStore::new(TranscriptConfig::default());
    let transcript = session(dir.path(), &store, 40);
    let estimate = transcript.history().total_tokens();
    // The caller counts the context twice what the transcript does (as a
    // model counting dense tool output would).
    let params = CompactParams {
        current_token_count: Some(estimate * 2),
        ..params(20_000, CompactionTarget::Budget, true)
    };
    let result = compact_extractively(&store, &transcript, CompactionConfig::default(), &params);
    assert!(result.compacted, "{result:?}");
    assert_eq!(result.tokens_before, estimate * 2);
    let after = result.tokens_after.expect("tokens after");
    let rebuilt = transcript.history().total_tokens();
    assert!(
        after <= TargetShare::DEFAULT.of(20_000),
        "in the caller's units, well under its budget: {after}"
    );
    assert!(
        rebuilt * 2 >= after && rebuilt * 2 <= after + 2,
        "the transcript's own figure is half of it: {rebuilt} vs {after}"
    );
    let text = std::fs::read_to_string(dir.path().join("session.jsonl")).expect("read");
    let entry: serde_json::Value = text
        .lines()
        .filter(|line| line.starts_with(r#"{"type":"compaction""#))
        .map(|line| serde_json::from_str(line).expect("JSON"))
        .next()
        .expect("a compaction entry");
    assert_eq!(entry["tokensBefore"], estimate * 2);
    assert_eq!(entry["tokensAfter"], after);
    assert_eq!(entry["details"]["ctxbox"]["target"], 20_000);
}

#[test]
fn a_pass_that_cannot_make_progress_costs_no_summary() {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = TranscriptStore::new(TranscriptConfig::default());
    let transcript = store
        .create(&dir.path().join("session.jsonl"), NewSession::default())
        .expect("create");
    // A short exchange, then one turn whose tool result is nearly all of the
    // context: no cut can leave less than 95% of it.
    transcript
        .append(&[
            AgentMessage::user_text("hello"),
            AgentMessage::assistant_text("hi"),
            AgentMessage::user_text("read the log"),
            tool_call("big", "log.txt"),
            tool_result("big", 200_000),
        ])
        .expect("append");
    let lines = transcript.line_count();
    let summarizer = Arc::new(Recorder::default());
    let compactor = compactor(&store, summarizer.clone(), CompactionConfig::default());
    let result = runtime()
        .block_on(compactor.compact(
            &transcript,
            &params(16_000, CompactionTarget::Budget, true),
            &NoProgress,
            &CancellationToken::new(),
        ))
        .expect("compaction runs");
    assert!(result.ok && !result.compacted, "{result:?}");
    assert!(
        result
            .reason
            .as_deref()
            .is_some_and(|reason| reason.starts_with("no progress possible")),
        "{result:?}"
    );
    assert_eq!(
        summarizer.chunks.load(Ordering::SeqCst),
        0,
        "no summary asked for"
    );
    assert_eq!(transcript.line_count(), lines, "nothing written");
}

#[test]
fn a_nested_tool_result_of_120k_characters_is_counted_and_cut() {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = TranscriptStore::new(TranscriptConfig::default());
    let path = dir.path().join("session.jsonl");
    let transcript = store.create(&path, NewSession::default()).expect("create");
    transcript
        .append(&[
            AgentMessage::user_text("read the build log"),
            tool_call("big", "build.log"),
        ])
        .expect("append");
    // The result as OpenClaw's Codex runtime writes it: a `toolResult` block
    // nested in the content array, its payload in `text` and `content`.
    let output = format!(
        "{}error: the build failed",
        "compiling crate\n".repeat(7_500)
    );
    let parent = transcript.leaf_id().expect("leaf");
    let line = serde_json::json!({
        "type": "message", "id": "nested", "parentId": parent,
        "timestamp": "2026-01-01T00:00:01.000Z",
        "message": {"role": "toolResult", "toolCallId": "big", "toolName": "read",
            "isError": false, "timestamp": 1,
            "content": [{"type": "toolResult", "toolCallId": "big",
                "text": output, "content": output}]},
    });
    drop(transcript);
    let mut file = std::fs::OpenOptions::new()
        .append(true)
        .open(&path)
        .expect("open");
    std::io::Write::write_all(&mut file, format!("{line}\n").as_bytes()).expect("write");
    drop(file);
    let transcript = store.open(&path).expect("reopen");
    for turn in 0..6 {
        transcript
            .append(&[
                AgentMessage::user_text(format!("Please look at module {turn}.")),
                AgentMessage::assistant_text(format!("Module {turn} is fine.")),
            ])
            .expect("append");
    }
    let before = transcript.history().total_tokens();
    assert!(
        before > 30_000,
        "120k characters of output cost about 30k tokens, not a block overhead: {before}"
    );

    let summarizer = Arc::new(Capture::default());
    let compactor = compactor(&store, summarizer.clone(), CompactionConfig::default());
    let result = runtime()
        .block_on(compactor.compact(
            &transcript,
            &params(16_000, CompactionTarget::Budget, false),
            &NoProgress,
            &CancellationToken::new(),
        ))
        .expect("compaction runs");
    assert!(result.ok && result.compacted, "{result:?}");
    let history = transcript.history();
    assert!(
        history.total_tokens() <= TargetShare::DEFAULT.of(16_000),
        "the result is cut away: {}",
        history.total_tokens()
    );
    assert!(history.find("nested").is_none());
    assert_paired(&history);
    let texts = summarizer.texts.lock().expect("lock").join("\n");
    assert!(
        texts.contains("[Tool result]: compiling crate")
            && texts.contains("more characters truncated"),
        "the summarizer reads the result, cut to 2,000 characters"
    );
}

#[test]
fn history_with_nothing_to_read_is_no_prior_history_without_a_model_call() {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = TranscriptStore::new(TranscriptConfig::default());
    let transcript = store
        .create(&dir.path().join("session.jsonl"), NewSession::default())
        .expect("create");
    let empty: Vec<AgentMessage> = (0..300)
        .flat_map(|_| {
            [
                AgentMessage::user_text(""),
                AgentMessage::assistant_text(""),
            ]
        })
        .collect();
    transcript.append(&empty).expect("append");
    transcript
        .append(&[
            AgentMessage::user_text("now the real question"),
            AgentMessage::assistant_text("and its answer"),
        ])
        .expect("append");
    let summarizer = Arc::new(Capture::default());
    let compactor = compactor(&store, summarizer.clone(), CompactionConfig::default());
    let result = runtime()
        .block_on(compactor.compact(
            &transcript,
            &params(4_000, CompactionTarget::Budget, true),
            &NoProgress,
            &CancellationToken::new(),
        ))
        .expect("compaction runs");
    assert!(result.ok && result.compacted, "{result:?}");
    assert!(
        summarizer.texts.lock().expect("lock").is_empty(),
        "no model call for nothing to read"
    );
    let summary = result.summary.expect("summary");
    assert!(summary.contains("No prior history."), "{summary}");
}

/// Keeps every text it is asked to summarize.
#[derive(Default)]
struct Capture {
    texts: Mutex<Vec<String>>,
}

#[async_trait]
impl Summarizer for Capture {
    fn id(&self) -> &str {
        "capture"
    }

    async fn summarize(&self, request: SummaryRequest) -> Result<String, SummarizeError> {
        self.texts.lock().expect("lock").push(request.text);
        Ok("summary".into())
    }
}

#[derive(Default)]
struct CountingProgress(AtomicUsize);

impl crate::contract::services::ProgressSink for CountingProgress {
    fn progress(&self) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }
}

/// Answers `part N` for a chunk whose first module is N, and records
/// concurrency and merge order.
/// The concurrency the parallel-summary test configures.
const RECORDER_CONCURRENCY: usize = 3;

#[derive(Default)]
struct Recorder {
    chunks: AtomicUsize,
    in_flight: AtomicUsize,
    max_in_flight: AtomicUsize,
    merged: Mutex<Vec<String>>,
}

#[async_trait]
impl Summarizer for Recorder {
    fn id(&self) -> &str {
        "recorder"
    }

    async fn summarize(&self, request: SummaryRequest) -> Result<String, SummarizeError> {
        if request
            .instructions
            .contains("BEGINNING of the current turn")
        {
            return Ok("turn prefix".into());
        }
        self.chunks.fetch_add(1, Ordering::SeqCst);
        let first_module: String = request
            .text
            .split("module ")
            .nth(1)
            .unwrap_or_default()
            .chars()
            .take_while(char::is_ascii_digit)
            .collect();
        let now = self.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
        self.max_in_flight.fetch_max(now, Ordering::SeqCst);
        // Hold the first chunks until as many are in flight as the
        // compactor allows (or a while has passed), so a loaded machine's
        // scheduling cannot hide the concurrency.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(2);
        while self.max_in_flight.load(Ordering::SeqCst) < RECORDER_CONCURRENCY
            && std::time::Instant::now() < deadline
        {
            tokio::time::sleep(std::time::Duration::from_millis(1)).await;
        }
        self.in_flight.fetch_sub(1, Ordering::SeqCst);
        Ok(format!("part {first_module}"))
    }

    async fn merge(&self, request: MergeRequest) -> Result<String, SummarizeError> {
        *self.merged.lock().expect("lock") = request.parts.clone();
        Ok(request.parts.join("\n"))
    }
}

/// Never answers.
struct Stuck;

#[async_trait]
impl Summarizer for Stuck {
    fn id(&self) -> &str {
        "stuck"
    }

    async fn summarize(&self, _request: SummaryRequest) -> Result<String, SummarizeError> {
        std::future::pending().await
    }
}

/// Answers after a delay, like a remote model.
struct Slow(Duration);

#[async_trait]
impl Summarizer for Slow {
    fn id(&self) -> &str {
        "slow"
    }

    async fn summarize(&self, request: SummaryRequest) -> Result<String, SummarizeError> {
        tokio::time::sleep(self.0).await;
        Ok(format!("summary of {} characters", request.text.len()))
    }
}

/// Always fails like an unreachable provider.
struct Failing;

#[async_trait]
impl Summarizer for Failing {
    fn id(&self) -> &str {
        "failing"
    }

    async fn summarize(&self, _request: SummaryRequest) -> Result<String, SummarizeError> {
        Err(SummarizeError::Api(
            crate::provider::chat::ChatError::Transport("connection refused".into()),
        ))
    }
}

/// One step of a generated conversation.
#[derive(Debug, Clone)]
enum Step {
    Ask(usize),
    Answer(usize),
    /// A call with this many results (0: left pending) of this size each.
    Tools(usize, usize),
}

fn step() -> impl proptest::strategy::Strategy<Value = Step> {
    use proptest::prelude::*;
    prop_oneof![
        (1usize..400).prop_map(Step::Ask),
        (1usize..400).prop_map(Step::Answer),
        (0usize..3, 20usize..4_000).prop_map(|(results, size)| Step::Tools(results, size)),
    ]
}

proptest::proptest! {
    #![proptest_config(proptest::test_runner::Config { cases: 24, ..Default::default() })]

    /// Native compaction of any conversation shape, to any budget: the
    /// context never grows, the figures it reports are the transcript's, and
    /// no tool result is parted from its call.
    #[test]
    fn compaction_never_grows_the_context_or_parts_a_tool_pair(
        steps in proptest::collection::vec(step(), 4..60),
        budget in 600u64..20_000,
        force in proptest::bool::ANY,
    ) {
        let dir = tempfile::tempdir().expect("temp dir");
        let store = TranscriptStore::new(TranscriptConfig::default());
        let transcript = store
            .create(&dir.path().join("session.jsonl"), NewSession::default())
            .expect("create");
        for (index, step) in steps.iter().enumerate() {
            let messages = match step {
                Step::Ask(size) => vec![AgentMessage::user_text("ask ".repeat(*size))],
                Step::Answer(size) => vec![AgentMessage::assistant_text("answer ".repeat(*size))],
                Step::Tools(results, size) => {
                    // One assistant message making every call; `results`
                    // of them answered, the rest left pending.
                    let ids: Vec<String> = (0..(*results).max(1)).map(|n| format!("c{index}-{n}")).collect();
                    let mut call = tool_call(&ids[0], &format!("src/f{index}.rs"));
                    if let AgentMessage::Assistant { content, .. } = &mut call {
                        content.extend(ids[1..].iter().map(|id| ContentBlock::ToolCall {
                            id: id.clone(),
                            name: "read".into(),
                            arguments_json: "{}".into(),
                        }));
                    }
                    let mut messages = vec![call];
                    messages.extend(ids.iter().take(*results).map(|id| tool_result(id, *size)));
                    messages
                }
            };
            transcript.append(&messages).expect("append");
        }
        let before = transcript.history().total_tokens();
        let compactor = compactor(
            &store,
            Arc::new(crate::services::summarize::ExtractiveSummarizer),
            CompactionConfig::default(),
        );
        let result = runtime()
            .block_on(compactor.compact(
                &transcript,
                &params(budget, CompactionTarget::Budget, force),
                &NoProgress,
                &CancellationToken::new(),
            ))
            .expect("compaction runs");
        let history = transcript.history();
        proptest::prop_assert!(history.total_tokens() <= before, "{} > {before}: {result:?}", history.total_tokens());
        if result.compacted {
            proptest::prop_assert_eq!(result.tokens_after, Some(history.total_tokens()));
            proptest::prop_assert!(result.tokens_before >= before);
        } else {
            proptest::prop_assert_eq!(history.total_tokens(), before, "nothing compacted, nothing changed");
        }
        assert_paired(&history);
    }
}
