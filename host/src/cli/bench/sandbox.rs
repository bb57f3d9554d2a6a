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

use super::measure::{Meter, Reading, Stats};
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

/// Instance slots of a sandbox under callgrind: each slot reserves about
/// 8 GiB of address space, and valgrind offers some 60 GiB in all, shared by
/// the (at most three) sandboxes alive at once.
const COUNTED_POOL: u32 = 2;

/// A sandbox of `config`, its pool shrunk to fit valgrind when `counting`.
fn sandbox(counting: bool, config: SandboxConfig) -> anyhow::Result<Sandbox> {
    let max_instances = if counting {
        config.max_instances.min(COUNTED_POOL)
    } else {
        config.max_instances
    };
    Ok(Sandbox::new(SandboxConfig {
        max_instances,
        ..config
    })?)
}

/// Every sandbox measurement, by `meter`.
pub async fn rows(options: &Options, meter: &mut Meter, rows: &mut Vec<Row>) -> anyhow::Result<()> {
    let main = sandbox(meter.counts(), SandboxConfig::default())?;
    let keep_recent = load(&main, "keep-recent").await?;
    fresh_instances(options, meter, &keep_recent, rows).await?;
    empty_call(options, meter, &keep_recent, rows).await?;
    wasm_vs_native(options, meter, &keep_recent, rows).await?;
    materialisation(options, meter, &main, rows).await?;
    loading(options, meter, rows)?;
    guards(options, meter, rows).await?;
    Ok(())
}

async fn fresh_instances(
    options: &Options,
    meter: &mut Meter,
    engine: &WasmEngine,
    rows: &mut Vec<Row>,
) -> anyhow::Result<()> {
    // Instances are created a batch at a time and closed outside the
    // measurement; under callgrind the pool has room for one more.
    let batch = if meter.counts() { 1 } else { 50 };
    let runs = meter.runs(options.runs(400));
    let mut sampler = meter.sampler();
    let mut next = 0usize;
    while next < runs {
        let ids: Vec<String> = (0..batch)
            .map(|_| {
                next += 1;
                format!("fresh-{next}")
            })
            .collect();
        for id in &ids {
            sampler.run(engine.prewarm(id)).await?;
        }
        for id in &ids {
            engine.close_session(id).await;
        }
    }
    let reading = sampler.read("fresh engine instance")?;
    rows.push(Row::measured(
        "fresh engine instance for a session",
        reading,
        "≤ 25 µs median",
        |stats| stats.median <= Duration::from_micros(25),
    ));
    Ok(())
}

async fn empty_call(
    options: &Options,
    meter: &mut Meter,
    engine: &WasmEngine,
    rows: &mut Vec<Row>,
) -> anyhow::Result<()> {
    // The cheapest export: no history, one short string in, nothing out
    // (keep-recent keeps the SDK's default, which does nothing).
    let call = CallOptions::default();
    let runs = meter.runs(options.runs(5_000));
    let reading = meter
        .measure("empty engine call", runs, || async {
            engine.rollback_subagent_spawn(&call, "prep").await?;
            Ok(())
        })
        .await?;
    rows.push(Row::measured(
        "empty engine call round trip",
        reading,
        "≤ 1 µs",
        |stats| stats.median <= Duration::from_micros(1),
    ));
    Ok(())
}

async fn wasm_vs_native(
    options: &Options,
    meter: &mut Meter,
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
        let runs = meter.runs(options.runs(if messages >= 100_000 { 300 } else { 1_000 }));
        let (wasm_reading, native_reading) = meter
            .measure_pair(
                [
                    &format!("keep-recent assemble {messages} wasm"),
                    &format!("keep-recent assemble {messages} native"),
                ],
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
        let ratio = wasm_reading.ratio(&native_reading);
        rows.push(Row {
            what: format!("keep-recent assemble, {messages} messages: wasm / native"),
            figure: format!(
                "{ratio:.2}× (wasm {}, native {})",
                wasm_reading.describe(),
                native_reading.headline()
            ),
            target: "≤ 1.5×".into(),
            met: Some(ratio <= 1.5),
        });
        let baseline = *first_wasm.get_or_insert(wasm_reading);
        if messages == 100_000 {
            let growth = wasm_reading.ratio(&baseline);
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
    meter: &mut Meter,
    sandbox: &Sandbox,
    rows: &mut Vec<Row>,
) -> anyhow::Result<()> {
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
            History::new(cases::conversation(MESSAGES / 4)),
            "≥ 500 MB/s",
            500.0,
        ),
        (
            format!("messages of {}", recorded.label),
            History::new(real),
            "≥ 1 GB/s",
            1_000.0,
        ),
    ];
    // The same work by the two paths: owned copies (the reference's array
    // semantics) and the packed bulk path read in place.
    let probes = [
        ("history-reader", "history to_vec in the guest"),
        (
            "history-scanner",
            "history scan (packed, read in place) in the guest",
        ),
    ];
    for (probe, path) in probes {
        let engine = load(sandbox, probe).await?;
        for (what, history, target, target_mb_per_s) in &histories {
            // Message text as the probes count it (the SDK's `AgentMessage::text`).
            let text_bytes: usize = history
                .entries()
                .iter()
                .map(|entry| guest_view::guest_message(&entry.message).text().len())
                .sum();
            let call = CallOptions::default();
            let session = SessionRef::new("bench", "/bench.jsonl");
            let runs = meter.runs(options.runs(100));
            let reading = meter
                .measure(&format!("{path}, {what}"), runs, || async {
                    let answer = engine
                        .assemble(&call, &session, history, &AssembleParams::default())
                        .await?;
                    // The probe answers with the text bytes it received.
                    anyhow::ensure!(
                        answer.estimated_tokens == text_bytes as u64,
                        "{probe} received {} bytes of text, not {text_bytes}",
                        answer.estimated_tokens
                    );
                    Ok(())
                })
                .await?;
            let what = format!(
                "{path}, {} {what} ({:.1} MB of text)",
                history.len(),
                text_bytes as f64 / 1e6
            );
            rows.push(match reading {
                Reading::Time(stats) => {
                    let mb_per_s = text_bytes as f64 / 1e6 / stats.median.as_secs_f64();
                    Row {
                        what,
                        figure: format!("{mb_per_s:.0} MB/s ({})", stats.describe()),
                        target: (*target).into(),
                        met: Some(mb_per_s >= *target_mb_per_s),
                    }
                }
                Reading::Instructions { per_run, .. } => Row {
                    what,
                    figure: format!(
                        "{:.0} instructions per message, {:.2} per byte of text ({})",
                        per_run as f64 / history.len() as f64,
                        per_run as f64 / text_bytes as f64,
                        reading.describe()
                    ),
                    target: (*target).into(),
                    met: None,
                },
            });
        }
        // Its instance leaves the counted pool's room to the next probe.
        engine.close_session("bench").await;
    }
    Ok(())
}

fn loading(options: &Options, meter: &mut Meter, rows: &mut Vec<Row>) -> anyhow::Result<()> {
    let bytes = component("keep-recent")?;
    let counting = meter.counts();
    let with_cache = |cache: &Path| {
        sandbox(
            counting,
            SandboxConfig {
                max_instances: 4,
                cache_dir: Some(cache.to_owned()),
                ..SandboxConfig::default()
            },
        )
    };
    // Cranelift compiles on wasmtime's worker threads, which a count of the
    // bench's own thread leaves out: a first compile is only timed.
    let compile = if counting {
        None
    } else {
        let mut compiles = Vec::new();
        for _ in 0..options.runs(5) {
            let cache = tempfile::tempdir()?;
            let sandbox = with_cache(cache.path())?;
            let started = Instant::now();
            let component = sandbox.load_bytes("keep-recent", bytes)?;
            compiles.push(started.elapsed());
            anyhow::ensure!(!component.from_cache(), "a fresh cache dir had the engine");
        }
        Some(Stats::of(compiles))
    };
    let cache = tempfile::tempdir()?;
    let sandbox = with_cache(cache.path())?;
    sandbox.load_bytes("keep-recent", bytes)?;
    let runs = meter.runs(options.runs(50));
    let cached = meter.measure_sync("cached load", runs, || {
        let component = sandbox.load_bytes("keep-recent", bytes)?;
        anyhow::ensure!(component.from_cache(), "the engine was compiled again");
        Ok(())
    })?;
    rows.push(Row::measured(
        "load a cached precompiled engine",
        cached,
        "≤ 2 ms",
        |stats| stats.median <= Duration::from_millis(2),
    ));
    const COMPILE: &str = "first compile, written to the cache (for comparison)";
    rows.push(match compile {
        Some(stats) => Row {
            what: COMPILE.into(),
            figure: stats.describe(),
            target: "-".into(),
            met: None,
        },
        None => Row::skipped(
            COMPILE,
            "it runs on wasmtime's worker threads, which a count leaves out",
        ),
    });
    Ok(())
}

async fn guards(options: &Options, meter: &mut Meter, rows: &mut Vec<Row>) -> anyhow::Result<()> {
    let with_guards = |guards: bool| {
        sandbox(
            meter.counts(),
            SandboxConfig {
                max_instances: 8,
                guards,
                ..SandboxConfig::default()
            },
        )
    };
    let (guarded, unguarded) = (with_guards(true)?, with_guards(false)?);
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
    let runs = meter.runs(options.runs(1_000));
    let (with_reading, without_reading) = meter
        .measure_pair(
            [
                "guarded keep-recent assemble",
                "unguarded keep-recent assemble",
            ],
            runs,
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
        "guards (fuel, deadline): keep-recent assemble on 100k messages",
        &with_reading,
        &without_reading,
        1.3,
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
    let next_run = std::cell::Cell::new(0usize);
    let compaction = |engine: &WasmEngine| {
        next_run.set(next_run.get() + 1);
        let run = next_run.get();
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
    let runs = meter.runs(options.runs(30));
    let (with_reading, without_reading) = meter
        .measure_pair(
            [
                "guarded lossless compaction",
                "unguarded lossless compaction",
            ],
            runs,
            || compaction(&with),
            || compaction(&without),
        )
        .await?;
    // Issue 40's target for the guards on long guest work.
    rows.push(guard_row(
        "guards (fuel, deadline): lossless compaction of 400 messages",
        &with_reading,
        &without_reading,
        1.2,
    ));
    Ok(())
}

/// The guards' cost as a row: guarded over unguarded, met at `target` or
/// less.
fn guard_row(what: &str, guarded: &Reading, unguarded: &Reading, target: f64) -> Row {
    let ratio = guarded.ratio(unguarded);
    Row {
        what: what.into(),
        figure: format!(
            "{ratio:.2}× (guarded {}, unguarded {})",
            guarded.describe(),
            unguarded.headline()
        ),
        target: format!("≤ {target}×"),
        met: Some(ratio <= target),
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A quick timed run of every sandbox row: each checks its engine's
    /// answers while it measures, so a broken row fails here.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn every_sandbox_row_is_measured() {
        let options = Options::tiny();
        let mut rows = Vec::new();
        super::rows(&options, &mut Meter::Clock, &mut rows)
            .await
            .expect("the sandbox rows run");
        let names: Vec<&str> = rows.iter().map(|row| row.what.as_str()).collect();
        for expected in [
            "fresh engine instance for a session",
            "empty engine call round trip",
            "keep-recent assemble, 100000 messages: wasm / native",
            "load a cached precompiled engine",
            "guards (fuel, deadline): lossless compaction of 400 messages",
        ] {
            assert!(
                names.contains(&expected),
                "no row {expected:?} in {names:?}"
            );
        }
        let to_vec_rows = names
            .iter()
            .filter(|name| name.starts_with("history to_vec"))
            .count();
        assert_eq!(to_vec_rows, 2, "{names:?}");
        for row in &rows {
            assert!(
                row.figure.contains("median") || row.figure.contains('×'),
                "row {:?} has no timed figure: {}",
                row.what,
                row.figure
            );
        }
    }
}
