//! What one session's instance costs, a TypeScript engine beside the Rust
//! `keep-recent` (`ctxbox bench --ts-engine PATH.wasm`): the time to a fresh
//! instance, and the memory a warm instance adds — resident (`VmRSS`), what
//! is the session's own (`Private_Dirty`: written pages, CoW copies
//! included) and its proportional share (`Pss`), from
//! `/proc/self/smaps_rollup`. RSS counts a page shared by N mappings N times
//! (one per instance slot that read it), so for engines whose memory image
//! is shared copy-on-write the private and proportional figures are the
//! per-session cost; RSS is what an operator's `top` shows.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ctxbox_host::check::cases;
use ctxbox_host::contract::engine::{CallOptions, ContextEngine};
use ctxbox_host::contract::history::History;
use ctxbox_host::contract::services::{HostServices, MemoryServices};
use ctxbox_host::contract::types::{AssembleParams, SessionRef};
use ctxbox_host::engines::bundled;
use ctxbox_host::runtime::config::Config;
use ctxbox_host::sandbox::{
    EngineIdentity, EngineLimits, LoadedComponent, Sandbox, SandboxConfig, SqlAccess, WasmEngine,
};
use ctxbox_host::services::sql::{SqlConfig, SqlService};
use ctxbox_host::services::state::{StateConfig, StateStore};

use super::measure::{Stats, mib};
use super::{Options, Row};

/// Fresh instances timed per engine.
const FRESH_RUNS: usize = 60;

/// The process's memory figures, bytes.
#[derive(Debug, Clone, Copy, Default)]
struct Memory {
    rss: u64,
    pss: u64,
    private_dirty: u64,
    /// The system's `MemAvailable` (`/proc/meminfo`): what the machine as a
    /// whole lost, shared pages counted once (noisy: other processes too).
    available: u64,
}

impl Memory {
    /// `/proc/self/smaps_rollup` now (Linux; `None` elsewhere).
    fn read() -> Option<Self> {
        let text = std::fs::read_to_string("/proc/self/smaps_rollup").ok()?;
        let field = |name: &str| -> Option<u64> {
            let line = text.lines().find(|line| line.starts_with(name))?;
            Some(line.split_whitespace().nth(1)?.parse::<u64>().ok()? * 1024)
        };
        let meminfo = std::fs::read_to_string("/proc/meminfo").ok()?;
        let available = meminfo
            .lines()
            .find(|line| line.starts_with("MemAvailable:"))?
            .split_whitespace()
            .nth(1)?
            .parse::<u64>()
            .ok()?;
        Some(Self {
            rss: field("Rss:")?,
            pss: field("Pss:")?,
            private_dirty: field("Private_Dirty:")?,
            available: available * 1024,
        })
    }

    fn per_session(self, base: Self, sessions: usize) -> [f64; 4] {
        let per = |now: u64, then: u64| now.saturating_sub(then) as f64 / sessions as f64;
        [
            per(self.rss, base.rss),
            per(self.private_dirty, base.private_dirty),
            per(self.pss, base.pss),
            per(base.available, self.available),
        ]
    }
}

/// The settings and limits engines are configured with
/// (`plugins.entries.<id>`), from `bench --ts-config`.
#[derive(Default)]
pub struct EngineSetup {
    configs: BTreeMap<String, Arc<str>>,
    limits: BTreeMap<String, EngineLimits>,
}

impl EngineSetup {
    /// The setup `path` configures (none without a path).
    pub fn read(path: Option<&Path>) -> anyhow::Result<Self> {
        let Some(path) = path else {
            return Ok(Self::default());
        };
        let config = Config::load(path)?;
        Ok(Self {
            configs: config.engine_configs().map_err(anyhow::Error::msg)?,
            limits: config.engine_limits().map_err(anyhow::Error::msg)?,
        })
    }

    /// `engine` made again as its declared id is configured, when it is
    /// (its first instance disposed); otherwise `engine` itself.
    async fn apply(
        &self,
        sandbox: &Sandbox,
        component: &LoadedComponent,
        engine: WasmEngine,
        services: Arc<dyn HostServices>,
    ) -> anyhow::Result<WasmEngine> {
        let Some(identity) =
            EngineIdentity::configured(&engine.info().id, "bench", &self.configs, &self.limits)
        else {
            return Ok(engine);
        };
        let _ = engine.dispose().await;
        Ok(sandbox
            .instantiate_as(component, identity, services)
            .await?)
    }
}

/// Rows for `keep-recent` and the TypeScript engine at `ts_engine`, run
/// as `setup` configures it. Engines get the state store and SQL databases
/// (in a temporary folder), so an engine with the SQL power (an OpenClaw
/// plugin's `node:sqlite`) runs as in a host.
pub async fn rows(
    options: &Options,
    ts_engine: &Path,
    setup: &EngineSetup,
    rows: &mut Vec<Row>,
) -> anyhow::Result<()> {
    if Memory::read().is_none() {
        rows.push(Row::skipped(
            "instance cost",
            "no /proc/self/smaps_rollup here",
        ));
        return Ok(());
    }
    let sessions = options.ts_sessions;
    let scratch = tempfile::tempdir()?;
    let state = Arc::new(StateStore::open_in(
        scratch.path(),
        &StateConfig::default(),
    )?);
    let sql = SqlService::open_in(scratch.path(), SqlConfig::default(), state)
        .map_err(anyhow::Error::msg)?;
    let sandbox = Sandbox::new(SandboxConfig {
        max_instances: (2 * sessions + 2) as u32,
        cache_dir: ts_engine
            .parent()
            .map(|dir| dir.join(".ctxbox-bench-cache")),
        ..SandboxConfig::default().with_room_for(setup.limits.values())
    })?
    .with_sql(SqlAccess::Served(Arc::new(sql)));
    let rust = bundled::engine("keep-recent")
        .ok_or_else(|| anyhow::anyhow!("keep-recent is not bundled"))?;
    let rust = sandbox.load_bytes("keep-recent", rust)?;
    let started = Instant::now();
    let ts = sandbox.load_file(ts_engine)?;
    rows.push(Row {
        what: format!(
            "TypeScript engine: load ({} MB)",
            std::fs::metadata(ts_engine)?.len() / 1_000_000
        ),
        figure: format!(
            "{:.0} ms ({})",
            started.elapsed().as_secs_f64() * 1e3,
            if ts.from_cache() {
                "from the compile cache"
            } else {
                "compiled; the next run loads from the cache"
            }
        ),
        target: "report".into(),
        met: None,
    });
    // The TypeScript call's target is issue 40's: a template engine's
    // `assemble` at 1 ms or less.
    for (label, component, fresh_target, call_target) in [
        ("Rust keep-recent", &rust, Duration::from_micros(25), None),
        (
            "TypeScript engine",
            &ts,
            Duration::from_millis(1),
            Some(Duration::from_millis(1)),
        ),
    ] {
        let services: Arc<dyn HostServices> = Arc::new(MemoryServices::default());
        let engine = sandbox.instantiate(component, services.clone()).await?;
        let engine = setup.apply(&sandbox, component, engine, services).await?;
        let [fresh, first_call, second_call] = fresh_instances(options, &engine).await?;
        rows.push(Row {
            what: format!("{label}: fresh instance for a session"),
            figure: fresh.describe(),
            target: format!("≤ {} median", super::measure::human(fresh_target)),
            met: Some(fresh.median <= fresh_target),
        });
        rows.push(Row {
            what: format!("{label}: its first assemble (10 messages)"),
            figure: first_call.describe(),
            target: "report".into(),
            met: None,
        });
        rows.push(Row {
            what: format!("{label}: the same assemble again"),
            figure: second_call.describe(),
            target: call_target.map_or_else(
                || "report".into(),
                |target| format!("≤ {} median", super::measure::human(target)),
            ),
            met: call_target.map(|target| second_call.median <= target),
        });
        warm_sessions(label, &engine, sessions, rows).await?;
        let _ = engine.dispose().await;
    }
    Ok(())
}

/// Times `FRESH_RUNS` fresh session instances, the first `assemble` on each
/// and a second one (every instance dropped before the next batch).
async fn fresh_instances(options: &Options, engine: &WasmEngine) -> anyhow::Result<[Stats; 3]> {
    let (history, call, params) = assemble_input();
    let [mut fresh, mut first_call, mut second_call] = [Vec::new(), Vec::new(), Vec::new()];
    let runs = options.runs(FRESH_RUNS).max(10);
    for batch in 0..runs.div_ceil(10) {
        let ids: Vec<String> = (0..10).map(|n| format!("fresh-{batch}-{n}")).collect();
        for id in &ids {
            let started = Instant::now();
            engine.prewarm(id).await?;
            fresh.push(started.elapsed());
            let session = SessionRef::new(id.clone(), "/bench.jsonl");
            let started = Instant::now();
            engine.assemble(&call, &session, &history, &params).await?;
            first_call.push(started.elapsed());
            let started = Instant::now();
            engine.assemble(&call, &session, &history, &params).await?;
            second_call.push(started.elapsed());
        }
        for id in &ids {
            engine.close_session(id).await;
        }
    }
    Ok([fresh, first_call, second_call].map(Stats::of))
}

/// A short conversation and a budget every instance assembles once.
fn assemble_input() -> (History, CallOptions, AssembleParams) {
    let params = AssembleParams {
        token_budget: Some(4_000),
        ..AssembleParams::default()
    };
    (
        History::new(cases::conversation(10)),
        CallOptions::default(),
        params,
    )
}

/// `sessions` concurrent sessions of `engine`, each with an instance that
/// served one `assemble`: the memory they add, per session and in all.
async fn warm_sessions(
    label: &str,
    engine: &WasmEngine,
    sessions: usize,
    rows: &mut Vec<Row>,
) -> anyhow::Result<()> {
    let (history, call, params) = assemble_input();
    let base = Memory::read().unwrap_or_default();
    for n in 0..sessions {
        let session = SessionRef::new(format!("warm-{n}"), "/bench.jsonl");
        engine.assemble(&call, &session, &history, &params).await?;
    }
    let now = Memory::read().unwrap_or_default();
    let [rss, private, pss, system] = now.per_session(base, sessions);
    const MIB: f64 = 1024.0 * 1024.0;
    rows.push(Row {
        what: format!("{label}: memory per warm session ({sessions} sessions)"),
        figure: format!(
            "private {:.2} MiB, proportional {:.2} MiB, resident {:.2} MiB, system {:.2} MiB",
            private / MIB,
            pss / MIB,
            rss / MIB,
            system / MIB
        ),
        target: "≤ 2 MiB private".into(),
        met: Some(private <= 2.0 * MIB),
    });
    let projected = now.pss.saturating_sub(base.pss) as f64 / sessions as f64 * 1_000.0;
    rows.push(Row {
        what: format!("{label}: 1,000 warm sessions (from {sessions})"),
        figure: format!(
            "{:.0} MiB proportional (the process: {:.0} MiB resident with {sessions})",
            projected / MIB,
            mib(now.rss)
        ),
        target: "≤ 2 GiB".into(),
        met: Some(projected <= 2.0 * 1024.0 * 1024.0 * 1024.0),
    });
    for n in 0..sessions {
        engine.close_session(&format!("warm-{n}")).await;
    }
    Ok(())
}
