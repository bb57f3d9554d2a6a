//! Transcript store and native compaction on real and synthetic sessions:
//! opening a multi-megabyte transcript (parse + token estimates + context),
//! compacting the real ones to a 16k budget, and compacting a synthetic
//! 100,000-message session with one and two chunks summarized at a time.
//!
//! `cargo bench -p ctxbox-tests --bench transcript`

use std::path::{Path, PathBuf};
use std::sync::Arc;

use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use ctxbox_host::contract::types::{
    AgentMessage, CompactParams, CompactionTarget, ContentBlock, StopReason,
};
use ctxbox_host::services::compaction::{CompactionConfig, Compactor, NoProgress};
use ctxbox_host::services::summarize::ExtractiveSummarizer;
use ctxbox_host::transcript::{NewSession, TranscriptConfig, TranscriptStore};
use tokio_util::sync::CancellationToken;

const LARGE_FIXTURES: [&str; 2] = [
    "deepseek-chat-windows-ops-zh-3-compactions.jsonl",
    "kimi-k2-thinking-rust-coding-de-1-compaction.jsonl",
];

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures/sessions")
        .join(name)
}

fn open_and_estimate(c: &mut Criterion) {
    for name in LARGE_FIXTURES {
        let path = fixture(name);
        c.bench_function(&format!("open+history/{name}"), |b| {
            b.iter(|| {
                let store = TranscriptStore::new(TranscriptConfig::default());
                let transcript = store.open(&path).expect("fixture opens");
                transcript.history().total_tokens()
            })
        });
    }
}

/// A fresh copy of `source` in a temporary directory.
fn copy(source: &Path) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("session.jsonl");
    std::fs::copy(source, &path).expect("copy");
    (dir, path)
}

fn compact(path: &Path, budget: u64, concurrency: usize, runtime: &tokio::runtime::Runtime) -> u64 {
    let store = TranscriptStore::new(TranscriptConfig::default());
    let transcript = store.open(path).expect("opens");
    let config = CompactionConfig {
        summary_concurrency: concurrency,
        ..CompactionConfig::default()
    };
    let compactor = Compactor::new(store, Arc::new(ExtractiveSummarizer), config);
    let params = CompactParams {
        token_budget: Some(budget),
        force: true,
        compaction_target: CompactionTarget::Budget,
        ..CompactParams::default()
    };
    let result = runtime
        .block_on(compactor.compact(&transcript, &params, &NoProgress, &CancellationToken::new()))
        .expect("compacts");
    assert!(result.compacted);
    result.tokens_after.unwrap_or_default()
}

fn compact_fixtures(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let mut group = c.benchmark_group("compact-16k");
    group.sample_size(10);
    for name in LARGE_FIXTURES {
        let source = fixture(name);
        group.bench_function(name, |b| {
            b.iter_batched(
                || copy(&source),
                |(_dir, path)| compact(&path, 16_000, 4, &runtime),
                BatchSize::PerIteration,
            )
        });
    }
    group.finish();
}

/// A session of `messages` messages: turns of a user ask, a tool call, its
/// result and an answer.
fn synthetic(dir: &Path, messages: usize) -> PathBuf {
    let path = dir.join("synthetic.jsonl");
    let store = TranscriptStore::new(TranscriptConfig::default());
    let transcript = store.create(&path, NewSession::default()).expect("create");
    let mut batch = Vec::new();
    for turn in 0..messages / 4 {
        let call = format!("call{turn}");
        batch.extend([
            AgentMessage::user_text(format!(
                "Turn {turn}: check src/mod{turn}.rs; never touch prod."
            )),
            AgentMessage::Assistant {
                content: vec![ContentBlock::ToolCall {
                    id: call.clone(),
                    name: "read".into(),
                    arguments_json: format!(r#"{{"path":"src/mod{turn}.rs"}}"#),
                }],
                model: None,
                provider: None,
                usage: None,
                stop_reason: StopReason::ToolUse,
                error_message: None,
            },
            AgentMessage::ToolResult {
                tool_call_id: call,
                tool_name: "read".into(),
                content: vec![ContentBlock::text(
                    format!("fn f{turn}() {{}}\n").repeat(20),
                )],
                is_error: false,
                details: None,
            },
            AgentMessage::assistant_text(format!(
                "I decided to keep mod{turn} as is. TODO: test it."
            )),
        ]);
        if batch.len() >= 4_000 {
            transcript.append(&batch).expect("append");
            batch.clear();
        }
    }
    transcript.append(&batch).expect("append");
    path
}

fn compact_100k(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let dir = tempfile::tempdir().expect("temp dir");
    let source = synthetic(dir.path(), 100_000);
    let mut group = c.benchmark_group("compact-100k-messages");
    group.sample_size(10);
    for concurrency in [1, 2] {
        group.bench_function(format!("concurrency-{concurrency}"), |b| {
            b.iter_batched(
                || copy(&source),
                |(_dir, path)| compact(&path, 200_000, concurrency, &runtime),
                BatchSize::PerIteration,
            )
        });
    }
    group.finish();
}

criterion_group!(benches, open_and_estimate, compact_fixtures, compact_100k);
criterion_main!(benches);
