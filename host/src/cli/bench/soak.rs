//! Load with faults at scale: 1,000 sessions × 20 turns (by default) on one
//! host through the `chaos` probe, which traps, spins or answers invalidly on
//! a tenth of its calls; turns per second, the process's resident memory as
//! the sessions finish (it must stay flat), and whether every acknowledged
//! entry is on disk afterwards.

use std::sync::{Arc, Mutex};

use ctxbox_host::engines::bundled;
use ctxbox_host::engines::guard::GuardAction;
use ctxbox_host::engines::registry::{EngineFactory, RegisterOptions};
use ctxbox_host::runner::load::{LoadPlan, run_load};
use ctxbox_host::runtime::Runtime;
use ctxbox_host::runtime::config::{Config, QuarantineConfig};
use ctxbox_host::sandbox::SandboxConfig;

use super::measure::{mib, resident_bytes};
use super::{Options, Row};

/// Sessions running turns at once.
const CONCURRENT: usize = 32;

/// One row: throughput, memory at each quarter of the sessions, losses.
pub async fn rows(options: &Options, rows: &mut Vec<Row>) -> anyhow::Result<()> {
    let bytes =
        bundled::probe("chaos").ok_or_else(|| anyhow::anyhow!("the chaos probe is not bundled"))?;
    let dir = tempfile::tempdir()?;
    let runtime = Runtime::new(Config {
        data_dir: Some(dir.path().to_owned()),
        // Retried on its next call after each failure: it keeps failing a
        // tenth of the calls instead of being set aside.
        quarantine: QuarantineConfig {
            retry_after: Some(std::time::Duration::ZERO),
            ..QuarantineConfig::default()
        },
        sandbox: SandboxConfig {
            call_timeout_ms: 300,
            ..SandboxConfig::default()
        },
        ..Config::default()
    })?;
    runtime.engines().registry().plugin("bench").register(
        "chaos",
        EngineFactory::WasmBytes {
            label: "chaos".into(),
            bytes: bytes.into(),
        },
        RegisterOptions::default(),
    )?;
    let engine = runtime.select(Some("chaos")).await;
    let plan = LoadPlan {
        sessions: options.soak_sessions,
        turns: options.soak_turns,
        concurrent: CONCURRENT,
        window: 16_384,
    };
    let (total, quarter) = (plan.sessions, plan.sessions.div_ceil(4).max(1));
    let samples = Arc::new(Mutex::new(Vec::new()));
    let recorder = samples.clone();
    let sessions_dir = dir.path().join("sessions");
    std::fs::create_dir_all(&sessions_dir)?;
    let report = run_load(
        engine,
        runtime.transcripts().clone(),
        &sessions_dir,
        &plan,
        move |done| {
            if (done % quarter == 0 || done == total)
                && let (Some(resident), Ok(mut samples)) = (resident_bytes(), recorder.lock())
            {
                samples.push((done, resident.now));
            }
        },
    )
    .await?;
    let fell_back = report
        .events
        .iter()
        .filter(|e| e.action == GuardAction::FellBack)
        .count();
    let memory = samples
        .lock()
        .map(|samples| {
            samples
                .iter()
                .map(|(done, bytes)| format!("{done}: {:.0}", mib(*bytes)))
                .collect::<Vec<_>>()
                .join(", ")
        })
        .unwrap_or_default();
    let peak = resident_bytes().map_or(0.0, |resident| mib(resident.peak));
    rows.push(Row {
        what: format!(
            "soak: {} sessions × {} turns, {CONCURRENT} at once, chaos engine (a tenth of calls fail)",
            plan.sessions, plan.turns
        ),
        figure: format!(
            "{:.0} turns/s; {fell_back} calls served by legacy; resident MiB after N sessions {memory}; peak {peak:.0} MiB",
            report.turns as f64 / report.elapsed.as_secs_f64()
        ),
        target: "every turn served, nothing lost".into(),
        met: Some(report.lost.is_empty() && report.turns == plan.sessions * plan.turns),
    });
    Ok(())
}
