//! Sandbox figures: fresh instances, empty calls, keep-recent in wasm vs the
//! same logic native, history materialisation, cached loads, and what the
//! guards cost.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use async_trait::async_trait;
use ctxbox_host::check::cases;
use ctxbox_host::contract::engine::{CallOptions, ContextEngine, EngineResult};
use ctxbox_host::contract::guest_view;
use ctxbox_host::contract::history::History;
use ctxbox_host::contract::services::{MemoryServices, NoServices};
use ctxbox_host::contract::types::{
    AfterTurnParams, AssembleParams, AssembleResult, AssembledItem, BootstrapResult, CompactParams,
    CompactResult, EngineInfo, IngestBatchResult, IngestResult, MaintainReason, MaintainResult,
    MessageEntry, SessionRef, SubagentEndReason, SubagentSpawn,
};
use ctxbox_host::engines::bundled;
use ctxbox_host::sandbox::{Sandbox, SandboxConfig, WasmEngine};
use ctxbox_host::transcript::TranscriptStore;

use super::measure::{Stats, human, ratio, time, time_pair, time_sync};
use super::recorded::Recorded;
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
    // The cheapest export: no history, one short string in, nothing out
    // (keep-recent keeps the SDK's default, which does nothing).
    let call = CallOptions::default();
    let stats = time(options.runs(5_000), || async {
        engine.rollback_subagent_spawn(&call, "prep").await?;
        Ok(())
    })
    .await?;
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
        // Both builds must give the same answer, or the ratio compares
        // different work.
        let from_wasm = wasm.assemble(&call, &session, &history, &params).await?;
        let from_native = native.assemble(&call, &session, &history, &params).await?;
        anyhow::ensure!(
            from_wasm.items == from_native.items,
            "keep-recent answers differently in wasm and natively on {messages} messages"
        );
        let runs = options.runs(if messages >= 100_000 { 300 } else { 1_000 });
        let (wasm_stats, native_stats) = time_pair(
            runs,
            || async {
                wasm.assemble(&call, &session, &history, &params).await?;
                Ok(())
            },
            || async {
                native.assemble(&call, &session, &history, &params).await?;
                Ok(())
            },
        )
        .await?;
        let ratio = ratio(&wasm_stats, &native_stats);
        rows.push(Row {
            what: format!("keep-recent assemble, {messages} messages: wasm / native"),
            figure: format!(
                "{ratio:.2}× (wasm {}, native {})",
                wasm_stats.describe(),
                human(native_stats.median)
            ),
            target: "≤ 1.5×".into(),
            met: Some(ratio <= 1.5),
        });
        let baseline = *first_wasm.get_or_insert(wasm_stats);
        if messages == 100_000 {
            let growth = super::measure::ratio(&wasm_stats, &baseline);
            rows.push(Row {
                what: "keep-recent assemble, 100k vs 1k messages (wasm)".into(),
                figure: format!("{growth:.2}×"),
                target: "flat (≤ 1.5×)".into(),
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
    const MESSAGES: usize = 10_000;
    let store = TranscriptStore::new(Default::default());
    let recorded = Recorded::read(&store)?;
    let real: Vec<MessageEntry> = recorded
        .repeated(MESSAGES)
        .into_iter()
        .enumerate()
        .map(|(index, message)| cases::entry(format!("r{index}"), message))
        .collect();
    let histories = [
        (
            "short synthetic messages".to_owned(),
            cases::conversation(MESSAGES / 4),
        ),
        (format!("messages of {}", recorded.label), real),
    ];
    for (what, entries) in histories {
        let history = History::new(entries);
        // Message text as the probe counts it (the SDK's `AgentMessage::text`).
        let text_bytes: usize = history
            .entries()
            .iter()
            .map(|entry| guest_view::guest_message(&entry.message).text().len())
            .sum();
        let call = CallOptions::default();
        let session = SessionRef::new("bench", "/bench.jsonl");
        let stats = time(options.runs(100), || async {
            let answer = reader
                .assemble(&call, &session, &history, &AssembleParams::default())
                .await?;
            // The probe answers with the text bytes it received.
            anyhow::ensure!(
                answer.estimated_tokens == text_bytes as u64,
                "the guest received {} bytes of text, not {text_bytes}",
                answer.estimated_tokens
            );
            Ok(())
        })
        .await?;
        let mb_per_s = text_bytes as f64 / 1e6 / stats.median.as_secs_f64();
        rows.push(Row {
            what: format!(
                "history to_vec in the guest, {} {what} ({:.1} MB of text)",
                history.len(),
                text_bytes as f64 / 1e6
            ),
            figure: format!("{mb_per_s:.0} MB/s ({})", stats.describe()),
            target: "≥ 500 MB/s".into(),
            met: Some(mb_per_s >= 500.0),
        });
    }
    Ok(())
}

fn loading(options: &Options, rows: &mut Vec<Row>) -> anyhow::Result<()> {
    let bytes = component("keep-recent")?;
    let with_cache = |cache: &Path| {
        Sandbox::new(SandboxConfig {
            max_instances: 4,
            cache_dir: Some(cache.to_owned()),
            ..SandboxConfig::default()
        })
    };
    let mut compiles = Vec::new();
    for _ in 0..options.runs(5) {
        let cache = tempfile::tempdir()?;
        let sandbox = with_cache(cache.path())?;
        let started = Instant::now();
        let component = sandbox.load_bytes("keep-recent", bytes)?;
        compiles.push(started.elapsed());
        anyhow::ensure!(!component.from_cache(), "a fresh cache dir had the engine");
    }
    let cache = tempfile::tempdir()?;
    let sandbox = with_cache(cache.path())?;
    sandbox.load_bytes("keep-recent", bytes)?;
    let cached = time_sync(options.runs(50), || {
        let component = sandbox.load_bytes("keep-recent", bytes)?;
        anyhow::ensure!(component.from_cache(), "the engine was compiled again");
        Ok(())
    })?;
    let compile = Stats::of(compiles);
    rows.push(Row::timed(
        "load a cached precompiled engine",
        cached,
        "≤ 2 ms",
        cached.median <= Duration::from_millis(2),
    ));
    rows.push(Row {
        what: "first compile, written to the cache (for comparison)".into(),
        figure: compile.describe(),
        target: "-".into(),
        met: None,
    });
    Ok(())
}

async fn guards(options: &Options, rows: &mut Vec<Row>) -> anyhow::Result<()> {
    let sandbox = |guards: bool| {
        Sandbox::new(SandboxConfig {
            max_instances: 8,
            guards,
            ..SandboxConfig::default()
        })
    };
    let (guarded, unguarded) = (sandbox(true)?, sandbox(false)?);
    let call = CallOptions::default();
    let session = SessionRef::new("bench", "/bench.jsonl");

    // keep-recent on a long session: few instructions, many crossings.
    let history = History::new(cases::conversation(25_000));
    let params = AssembleParams {
        token_budget: Some(BUDGET),
        ..AssembleParams::default()
    };
    let (with, without) = (
        load(&guarded, "keep-recent").await?,
        load(&unguarded, "keep-recent").await?,
    );
    let (with_stats, without_stats) = time_pair(
        options.runs(1_000),
        || async {
            with.assemble(&call, &session, &history, &params).await?;
            Ok(())
        },
        || async {
            without.assemble(&call, &session, &history, &params).await?;
            Ok(())
        },
    )
    .await?;
    rows.push(guard_row(
        "fuel + epoch guards: keep-recent assemble on 100k messages",
        &with_stats,
        &without_stats,
    ));

    // The lossless engine's compaction: storing a session and building its
    // summary DAG — the engine's own code, in the guest. The host's side is
    // made negligible (state in memory, an instant summarizer), so the ratio
    // shows what the guards cost the guest's work.
    let entries = cases::conversation(100);
    let history = History::new(entries.clone());
    let compact = CompactParams {
        token_budget: Some(4_000),
        force: true,
        ..CompactParams::default()
    };
    let services = Arc::new(MemoryServices::default());
    let load_lossless = |sandbox: &Sandbox| {
        let component = sandbox.load_bytes("lossless", component("lossless")?);
        anyhow::Ok((component?, services.clone()))
    };
    let (component, services_with) = load_lossless(&guarded)?;
    let with = guarded.instantiate(&component, services_with).await?;
    let (component, services_without) = load_lossless(&unguarded)?;
    let without = unguarded.instantiate(&component, services_without).await?;
    let mut run = 0usize;
    let mut compaction = |engine: &WasmEngine| {
        run += 1;
        let session = SessionRef::new(format!("lossless-{run}"), format!("/bench/{run}.jsonl"));
        let (engine, entries, history, compact) = (engine.clone(), &entries, &history, &compact);
        async move {
            let call = CallOptions::default();
            engine.ingest_batch(&call, &session, entries, false).await?;
            let result = engine.compact(&call, &session, history, compact).await?;
            anyhow::ensure!(
                result.ok && result.compacted,
                "lossless did not compact: {:?}",
                result.reason
            );
            engine.close_session(&session.session_id).await;
            Ok(())
        }
    };
    let mut stats = [Vec::new(), Vec::new()];
    for _ in 0..options.runs(30) {
        for (side, engine) in [&with, &without].into_iter().enumerate() {
            let started = Instant::now();
            compaction(engine).await?;
            stats[side].push(started.elapsed());
        }
    }
    let [with_samples, without_samples] = stats;
    rows.push(guard_row(
        "fuel + epoch guards: lossless compaction of 400 messages",
        &Stats::of(with_samples),
        &Stats::of(without_samples),
    ));
    Ok(())
}

fn guard_row(what: &str, guarded: &Stats, unguarded: &Stats) -> Row {
    let ratio = ratio(guarded, unguarded);
    Row {
        what: what.into(),
        figure: format!(
            "{ratio:.2}× (guarded {}, unguarded {})",
            guarded.describe(),
            human(unguarded.median)
        ),
        target: "≤ 1.3×".into(),
        met: Some(ratio <= 1.3),
    }
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
                        AssembledItem::Insert(guest_view::host_message(message))
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
