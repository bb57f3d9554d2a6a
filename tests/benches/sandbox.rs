//! Criterion benches of the sandbox against ARCHITECTURE.md §10's targets: a fresh
//! instance per session, an empty call, keep-recent `assemble` in wasm vs the
//! same logic native, history materialisation in the guest, loading a cached
//! precompiled engine, and what the fuel and deadline guards cost.
//!
//! Run: `cargo bench -p ctxbox-tests --bench sandbox`.

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use ctxbox_host::contract::engine::{CallOptions, ContextEngine};
use ctxbox_host::contract::history::History;
use ctxbox_host::contract::types::AssembleParams;
use ctxbox_host::sandbox::{SandboxConfig, WasmEngine};
use ctxbox_tests::{conversation, guests, sandbox_with, session};
use tokio::runtime::Runtime;

/// Sessions warmed per batch before they are closed again (below the pool size).
const PREWARM_BATCH: u64 = 20;
/// Budget for assemble benches: small enough that every history gets cut.
const BUDGET: u64 = 20_000;

fn runtime() -> Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime")
}

fn load(runtime: &Runtime, guest: &str) -> WasmEngine {
    let sandbox = sandbox_with(SandboxConfig::default());
    runtime.block_on(ctxbox_tests::engine(&sandbox, guest))
}

fn instances(c: &mut Criterion) {
    let runtime = runtime();
    let engine = load(&runtime, guests::KEEP_RECENT);
    let mut next_session = 0u64;
    c.bench_function("instance/fresh-for-session", |b| {
        b.iter_custom(|iters| {
            runtime.block_on(async {
                let mut measured = Duration::ZERO;
                let mut remaining = iters;
                while remaining > 0 {
                    let batch = remaining.min(PREWARM_BATCH);
                    let ids: Vec<String> = (0..batch)
                        .map(|_| {
                            next_session += 1;
                            format!("bench-{next_session}")
                        })
                        .collect();
                    let started = Instant::now();
                    for id in &ids {
                        engine.prewarm(id).await.expect("prewarm");
                    }
                    measured += started.elapsed();
                    for id in &ids {
                        engine.close_session(id).await;
                    }
                    remaining -= batch;
                }
                measured
            })
        })
    });

    let call = CallOptions::default();
    c.bench_function("call/empty-round-trip", |b| {
        b.to_async(&runtime).iter(|| async {
            engine
                .rollback_subagent_spawn(&call, black_box("prep"))
                .await
                .expect("rollback")
        })
    });
}

fn keep_recent_assemble(c: &mut Criterion) {
    let runtime = runtime();
    let engine = load(&runtime, guests::KEEP_RECENT);
    let mut group = c.benchmark_group("assemble/keep-recent");
    for messages in [1_000usize, 10_000, 100_000] {
        let history = History::new(conversation(messages / 4));
        let params = AssembleParams {
            token_budget: Some(BUDGET),
            ..AssembleParams::default()
        };
        let call = CallOptions::default();
        let session = session("bench");
        group.bench_with_input(
            BenchmarkId::new("wasm", messages),
            &history,
            |b, history| {
                b.to_async(&runtime).iter(|| async {
                    engine
                        .assemble(&call, &session, history, &params)
                        .await
                        .expect("assemble")
                })
            },
        );
        group.bench_with_input(
            BenchmarkId::new("native", messages),
            &history,
            |b, history| b.iter(|| keep_recent::plan(history, black_box(Some(BUDGET)))),
        );
    }
    group.finish();
}

fn materialise_history(c: &mut Criterion) {
    let runtime = runtime();
    let engine = load(&runtime, guests::HISTORY_READER);
    let mut group = c.benchmark_group("history/to-vec");
    for messages in [1_000usize, 10_000] {
        let history = History::new(conversation(messages / 4));
        let text_bytes: usize = history
            .entries()
            .iter()
            .flat_map(|entry| entry.message.content())
            .map(|block| match block {
                ctxbox_host::contract::types::ContentBlock::Text { text } => text.len(),
                _ => 0,
            })
            .sum();
        group.throughput(Throughput::Bytes(text_bytes as u64));
        let call = CallOptions::default();
        let session = session("bench");
        group.bench_with_input(
            BenchmarkId::from_parameter(messages),
            &history,
            |b, history| {
                b.to_async(&runtime).iter(|| async {
                    engine
                        .assemble(&call, &session, history, &AssembleParams::default())
                        .await
                        .expect("assemble")
                })
            },
        );
    }
    group.finish();
}

fn loading(c: &mut Criterion) {
    let bytes = std::fs::read(guests::KEEP_RECENT).expect("keep-recent was built");
    let cache = tempfile::tempdir().expect("temp dir");
    let sandbox = sandbox_with(SandboxConfig {
        cache_dir: Some(cache.path().to_owned()),
        ..SandboxConfig::default()
    });
    sandbox
        .load_bytes("keep-recent", &bytes)
        .expect("first load compiles");
    c.bench_function("load/cached-precompiled", |b| {
        b.iter(|| {
            let component = sandbox.load_bytes("keep-recent", &bytes).expect("load");
            assert!(component.from_cache());
            component
        })
    });
}

/// keep-recent on 100k messages with and without the fuel and deadline guards.
fn guards(c: &mut Criterion) {
    let runtime = runtime();
    let history = History::new(conversation(25_000));
    let params = AssembleParams {
        token_budget: Some(BUDGET),
        ..AssembleParams::default()
    };
    let call = CallOptions::default();
    let session = session("bench");
    let mut group = c.benchmark_group("guards/keep-recent-100k");
    for guards in [true, false] {
        let sandbox = sandbox_with(SandboxConfig {
            guards,
            ..SandboxConfig::default()
        });
        let engine = runtime.block_on(ctxbox_tests::engine(&sandbox, guests::KEEP_RECENT));
        let name = if guards { "guarded" } else { "unguarded" };
        group.bench_function(name, |b| {
            b.to_async(&runtime).iter(|| async {
                engine
                    .assemble(&call, &session, &history, &params)
                    .await
                    .expect("assemble")
            })
        });
    }
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .sample_size(30)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3));
    targets = instances, keep_recent_assemble, materialise_history, loading, guards
}
criterion_main!(benches);
