//! Sandbox figures: fresh instances, empty calls, keep-recent in wasm vs the
//! same logic native, history materialisation, cached loads, and what the
//! guards cost.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use async_trait::async_trait;
use ctxbox_host::bundled;
use ctxbox_host::check::cases;
use ctxbox_host::config::Config;
use ctxbox_host::engine::{CallOptions, ContextEngine, EngineResult};
use ctxbox_host::history::History;
use ctxbox_host::runtime::Runtime;
use ctxbox_host::sandbox::{Sandbox, SandboxConfig, WasmEngine};
use ctxbox_host::services::NoServices;
use ctxbox_host::types::{
    AfterTurnParams, AgentMessage, AssembleParams, AssembleResult, AssembledItem, BootstrapResult,
    CompactParams, CompactResult, ContentBlock, EngineInfo, IngestBatchResult, IngestResult,
    MaintainReason, MaintainResult, MessageEntry, SessionRef, SubagentEndReason, SubagentSpawn,
};

use super::measure::{Stats, human, time, time_sync};
use super::{Options, Row};

/// The prompt budget of the assemble measurements: every history is cut.
const BUDGET: u64 = 20_000;

fn component(name: &str) -> anyhow::Result<&'static [u8]> {
    bundled::engine(name)
        .or_else(|| bundled::probe(name))
        .with_context(|| format!("`{name}` is not bundled in this build"))
}

async fn load(sandbox: &Sandbox, name: &str) -> anyhow::Result<WasmEngine> {
    let component = sandbox.load_bytes(name, component(name)?)?;
    Ok(sandbox
        .instantiate(&component, Arc::new(NoServices))
        .await?)
}

/// Every sandbox measurement.
pub async fn rows(options: &Options, rows: &mut Vec<Row>) -> anyhow::Result<()> {
    let sandbox = Sandbox::new(SandboxConfig::default())?;
    let keep_recent = load(&sandbox, "keep-recent").await?;
    fresh_instances(options, &keep_recent, rows).await?;
    empty_call(options, &keep_recent, rows).await?;
    wasm_vs_native(options, &keep_recent, rows).await?;
    materialisation(options, &sandbox, rows).await?;
    loading(options, rows)?;
    guards(options, rows).await?;
    Ok(())
}

async fn fresh_instances(
    options: &Options,
    engine: &WasmEngine,
    rows: &mut Vec<Row>,
) -> anyhow::Result<()> {
    const BATCH: usize = 50;
    let mut samples = Vec::new();
    let mut next = 0usize;
    while samples.len() < options.runs(400) {
        let ids: Vec<String> = (0..BATCH)
            .map(|_| {
                next += 1;
                format!("fresh-{next}")
            })
            .collect();
        for id in &ids {
            let started = Instant::now();
            engine.prewarm(id).await?;
            samples.push(started.elapsed());
        }
        for id in &ids {
            engine.close_session(id).await;
        }
    }
    let stats = Stats::of(samples);
    rows.push(Row::timed(
        "fresh engine instance for a session",
        stats,
        "≤ 25 µs median",
        stats.median <= Duration::from_micros(25),
    ));
    Ok(())
}

async fn empty_call(
    options: &Options,
    engine: &WasmEngine,
    rows: &mut Vec<Row>,
) -> anyhow::Result<()> {
    let call = CallOptions::default();
    let stats = time(options.runs(5_000), || async {
        let _ = engine.rollback_subagent_spawn(&call, "prep").await;
    })
    .await;
    rows.push(Row::timed(
        "empty engine call round trip",
        stats,
        "≤ 1 µs",
        stats.median <= Duration::from_micros(1),
    ));
    Ok(())
}

async fn wasm_vs_native(
    options: &Options,
    wasm: &WasmEngine,
    rows: &mut Vec<Row>,
) -> anyhow::Result<()> {
    let native = NativeKeepRecent::default();
    let call = CallOptions::default();
    let session = SessionRef::new("bench", "/bench.jsonl");
    let params = AssembleParams {
        token_budget: Some(BUDGET),
        ..AssembleParams::default()
    };
    let mut first_wasm = None;
    for messages in [1_000usize, 10_000, 100_000] {
        let history = History::new(cases::conversation(messages / 4));
        let runs = options.runs(if messages >= 100_000 { 300 } else { 1_000 });
        let wasm_stats = time(runs, || async {
            let _ = wasm.assemble(&call, &session, &history, &params).await;
        })
        .await;
        let native_stats = time(runs, || async {
            let _ = native.assemble(&call, &session, &history, &params).await;
        })
        .await;
        let ratio = wasm_stats.median.as_secs_f64() / native_stats.median.as_secs_f64();
        rows.push(Row {
            what: format!("keep-recent assemble, {messages} messages: wasm / native"),
            figure: format!(
                "{ratio:.2}× (wasm {}, native {})",
                human(wasm_stats.median),
                human(native_stats.median)
            ),
            target: "≤ 1.5×".into(),
            met: Some(ratio <= 1.5),
        });
        let baseline = *first_wasm.get_or_insert(wasm_stats.median);
        if messages == 100_000 {
            let growth = wasm_stats.median.as_secs_f64() / baseline.as_secs_f64();
            rows.push(Row {
                what: "keep-recent assemble, 100k vs 1k messages (wasm)".into(),
                figure: format!("{growth:.2}×"),
                target: "flat".into(),
                met: Some(growth <= 1.5),
            });
        }
    }
    Ok(())
}

async fn materialisation(
    options: &Options,
    sandbox: &Sandbox,
    rows: &mut Vec<Row>,
) -> anyhow::Result<()> {
    let reader = load(sandbox, "history-reader").await?;
    let history = History::new(cases::conversation(2_500));
    let text_bytes: usize = history
        .entries()
        .iter()
        .flat_map(|entry| entry.message.content())
        .map(|block| match block {
            ContentBlock::Text { text } => text.len(),
            _ => 0,
        })
        .sum();
    let call = CallOptions::default();
    let session = SessionRef::new("bench", "/bench.jsonl");
    let stats = time(options.runs(100), || async {
        let _ = reader
            .assemble(&call, &session, &history, &AssembleParams::default())
            .await;
    })
    .await;
    let mb_per_s = text_bytes as f64 / 1e6 / stats.median.as_secs_f64();
    rows.push(Row {
        what: format!(
            "history to_vec in the guest ({} messages, {:.1} MB of text)",
            history.len(),
            text_bytes as f64 / 1e6
        ),
        figure: format!("{mb_per_s:.0} MB/s ({})", stats.describe()),
        target: "≥ 500 MB/s".into(),
        met: Some(mb_per_s >= 500.0),
    });
    Ok(())
}

fn loading(options: &Options, rows: &mut Vec<Row>) -> anyhow::Result<()> {
    let bytes = component("keep-recent")?;
    let mut compiles = Vec::new();
    for _ in 0..options.runs(3).max(1) {
        let cache = tempfile::tempdir()?;
        let sandbox = Sandbox::new(SandboxConfig {
            max_instances: 4,
            cache_dir: Some(cache.path().to_owned()),
            ..SandboxConfig::default()
        })?;
        let started = Instant::now();
        sandbox.load_bytes("keep-recent", bytes)?;
        compiles.push(started.elapsed());
    }
    let cache = tempfile::tempdir()?;
    let sandbox = Sandbox::new(SandboxConfig {
        max_instances: 4,
        cache_dir: Some(cache.path().to_owned()),
        ..SandboxConfig::default()
    })?;
    sandbox.load_bytes("keep-recent", bytes)?;
    let cached = time_sync(options.runs(50), || {
        let _ = sandbox.load_bytes("keep-recent", bytes);
    });
    let compile = Stats::of(compiles);
    rows.push(Row::timed(
        "load a cached precompiled engine",
        cached,
        "≤ 2 ms",
        cached.median <= Duration::from_millis(2),
    ));
    rows.push(Row {
        what: "first compile (for comparison)".into(),
        figure: compile.describe(),
        target: "-".into(),
        met: None,
    });
    Ok(())
}

async fn guards(options: &Options, rows: &mut Vec<Row>) -> anyhow::Result<()> {
    let guarded = Sandbox::new(SandboxConfig {
        max_instances: 8,
        ..SandboxConfig::default()
    })?;
    let unguarded = Sandbox::new(SandboxConfig {
        max_instances: 8,
        guards: false,
        ..SandboxConfig::default()
    })?;
    let history = History::new(cases::conversation(25_000));
    let call = CallOptions::default();
    let session = SessionRef::new("bench", "/bench.jsonl");
    let params = AssembleParams {
        token_budget: Some(BUDGET),
        ..AssembleParams::default()
    };
    let mut medians = Vec::new();
    for sandbox in [&guarded, &unguarded] {
        let engine = load(sandbox, "keep-recent").await?;
        let stats = time(options.runs(1_000), || async {
            let _ = engine.assemble(&call, &session, &history, &params).await;
        })
        .await;
        medians.push(stats.median);
    }
    let ratio = medians[0].as_secs_f64() / medians[1].as_secs_f64();
    rows.push(Row {
        what: "fuel + epoch guards: keep-recent on 100k messages".into(),
        figure: format!(
            "{ratio:.2}× (guarded {}, unguarded {})",
            human(medians[0]),
            human(medians[1])
        ),
        target: "≤ 1.3×".into(),
        met: Some(ratio <= 1.3),
    });

    // The lossless engine's own work: storing a session and summarizing it
    // into its DAG, with the host's real services.
    let mut medians = Vec::new();
    for guards in [true, false] {
        let dir = tempfile::tempdir()?;
        let mut config = Config {
            data_dir: Some(dir.path().to_owned()),
            ..Config::default()
        };
        config.sandbox.guards = guards;
        config.sandbox.max_instances = 64;
        let runtime = Runtime::new(config)?;
        let engine = runtime.select(Some("lossless")).await;
        anyhow::ensure!(
            engine.serving_selected(),
            "the bundled lossless engine did not load"
        );
        let entries = cases::conversation(100);
        let history = History::new(entries.clone());
        let compact = CompactParams {
            token_budget: Some(4_000),
            force: true,
            ..CompactParams::default()
        };
        let mut run = 0usize;
        let stats = time(options.runs(10), || {
            run += 1;
            let session = SessionRef::new(format!("lossless-{run}"), format!("/bench/{run}.jsonl"));
            let (engine, entries, history, compact) = (&engine, &entries, &history, &compact);
            async move {
                let call = CallOptions::default();
                let _ = engine.ingest_batch(&call, &session, entries, false).await;
                let _ = engine.compact(&call, &session, history, compact).await;
            }
        })
        .await;
        medians.push(stats.median);
    }
    let ratio = medians[0].as_secs_f64() / medians[1].as_secs_f64();
    rows.push(Row {
        what: "fuel + epoch guards: lossless storing and summarizing 400 messages".into(),
        figure: format!(
            "{ratio:.2}× (guarded {}, unguarded {})",
            human(medians[0]),
            human(medians[1])
        ),
        target: "≤ 1.3×".into(),
        met: Some(ratio <= 1.3),
    });
    Ok(())
}

/// keep-recent's logic as a native engine: what the wasm build is compared
/// with, through the same trait call.
struct NativeKeepRecent {
    info: EngineInfo,
}

impl Default for NativeKeepRecent {
    fn default() -> Self {
        Self {
            info: EngineInfo {
                id: keep_recent::ID.into(),
                name: "Keep recent (native)".into(),
                version: None,
                owns_compaction: false,
                accepted_host_params: Some(Vec::new()),
                turn_maintenance_mode: None,
            },
        }
    }
}

#[async_trait]
impl ContextEngine for NativeKeepRecent {
    fn info(&self) -> &EngineInfo {
        &self.info
    }

    async fn bootstrap(
        &self,
        _: &CallOptions,
        _: &SessionRef,
        _: &History,
    ) -> EngineResult<BootstrapResult> {
        Ok(BootstrapResult::default())
    }

    async fn ingest(
        &self,
        _: &CallOptions,
        _: &SessionRef,
        _: &MessageEntry,
        _: bool,
    ) -> EngineResult<IngestResult> {
        Ok(IngestResult::default())
    }

    async fn ingest_batch(
        &self,
        _: &CallOptions,
        _: &SessionRef,
        _: &[MessageEntry],
        _: bool,
    ) -> EngineResult<IngestBatchResult> {
        Ok(IngestBatchResult::default())
    }

    async fn assemble(
        &self,
        _: &CallOptions,
        _: &SessionRef,
        history: &History,
        params: &AssembleParams,
    ) -> EngineResult<AssembleResult> {
        let plan = keep_recent::plan(history, params.token_budget);
        Ok(AssembleResult {
            items: plan
                .items
                .into_iter()
                .map(|item| match item {
                    ctxbox_guest::AssembledItem::Keep(range) => AssembledItem::Keep {
                        start: range.start,
                        end: range.end,
                    },
                    ctxbox_guest::AssembledItem::Insert(message) => {
                        AssembledItem::Insert(AgentMessage::user_text(message.text()))
                    }
                })
                .collect(),
            estimated_tokens: plan.estimated_tokens,
            system_prompt_addition: None,
            context_projection: None,
        })
    }

    async fn compact(
        &self,
        _: &CallOptions,
        _: &SessionRef,
        _: &History,
        _: &CompactParams,
    ) -> EngineResult<CompactResult> {
        Ok(CompactResult::failed(
            "the native bench engine does not compact",
        ))
    }

    async fn after_turn(
        &self,
        _: &CallOptions,
        _: &SessionRef,
        _: &History,
        _: &AfterTurnParams,
    ) -> EngineResult<()> {
        Ok(())
    }

    async fn maintain(
        &self,
        _: &CallOptions,
        _: &SessionRef,
        _: &History,
        _: MaintainReason,
        _: Option<&str>,
    ) -> EngineResult<MaintainResult> {
        Ok(MaintainResult::default())
    }

    async fn prepare_subagent_spawn(
        &self,
        _: &CallOptions,
        _: &SubagentSpawn,
    ) -> EngineResult<Option<String>> {
        Ok(None)
    }

    async fn rollback_subagent_spawn(&self, _: &CallOptions, _: &str) -> EngineResult<()> {
        Ok(())
    }

    async fn on_subagent_ended(
        &self,
        _: &CallOptions,
        _: &str,
        _: SubagentEndReason,
    ) -> EngineResult<()> {
        Ok(())
    }

    async fn dispose(&self) -> EngineResult<()> {
        Ok(())
    }
}
