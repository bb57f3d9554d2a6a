//! A full `ctxbox run` replay of a real session: turns per second.

use std::path::Path;
use std::time::Instant;

use anyhow::Context;
use ctxbox_host::provider::ReplayScript;
use ctxbox_host::runtime::Runtime;
use ctxbox_host::runtime::config::Config;
use tokio_util::sync::CancellationToken;

use super::call_times::CallTimes;
use super::measure::Stats;
use super::{Options, Row};

/// The largest fixture, when the bench runs from a checkout.
const LARGEST_FIXTURE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../tests/fixtures/sessions/deepseek-chat-windows-ops-zh-3-compactions.jsonl"
);
/// The window of the replays.
pub(super) const WINDOW: u64 = 16_384;

/// The engines replayed: the native baseline first, then the bundled wasm
/// engines (lossless keeps every message in its state store).
const ENGINES: [&str; 3] = ["legacy", "keep-recent", "lossless"];
/// The target for lossless: this share of legacy's turns per second.
const LOSSLESS_SHARE_TARGET: f64 = 0.8;

/// Replays `script` with `engine` at the bench's window into `output`.
pub(super) async fn replay_once(
    runtime: &Runtime,
    script: &ReplayScript,
    engine: std::sync::Arc<ctxbox_host::GuardedEngine>,
    output: &Path,
) -> anyhow::Result<ctxbox_host::runner::RunReport> {
    Ok(runtime
        .replay(
            script,
            engine,
            WINDOW,
            output,
            &CancellationToken::new(),
            &mut |_, _| {},
        )
        .await?)
}

/// The replay script of the recording at `path`, and its file name.
pub(super) fn script_of(runtime: &Runtime, path: &Path) -> anyhow::Result<(ReplayScript, String)> {
    let recording = runtime
        .transcripts()
        .open_read_only(path)
        .with_context(|| format!("cannot read `{}`", path.display()))?;
    let script = ReplayScript::from_messages(
        recording
            .active_branch()
            .into_iter()
            .map(|entry| entry.message),
    );
    let name = path
        .file_name()
        .map_or_else(String::new, |name| name.to_string_lossy().into_owned());
    Ok((script, name))
}

/// Replays the session in `options.transcript` (else the largest fixture,
/// else the built-in sample) with each of [`ENGINES`], and compares
/// lossless's turns per second with legacy's.
pub async fn rows(options: &Options, rows: &mut Vec<Row>) -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let runtime = Runtime::new(Config {
        data_dir: Some(dir.path().to_owned()),
        ..Config::default()
    })?;
    let recording_path = match &options.transcript {
        Some(path) => path.clone(),
        None if Path::new(LARGEST_FIXTURE).exists() => LARGEST_FIXTURE.into(),
        None => {
            let sample = dir.path().join("sample.jsonl");
            std::fs::write(&sample, crate::cli::replay_setup::SAMPLE)?;
            sample
        }
    };
    let (script, name) = script_of(&runtime, &recording_path)?;
    let call_times = std::sync::Arc::new(CallTimes::default());
    runtime
        .engines()
        .call_observers()
        .install(call_times.clone());
    let mut rates = Vec::new();
    for engine_id in ENGINES {
        let mut samples = Vec::new();
        let mut last = None;
        for run in 0..options.runs(5) {
            let engine = runtime.select(Some(engine_id)).await;
            let output = dir.path().join(format!("replay-{engine_id}-{run}.jsonl"));
            let started = Instant::now();
            let report = replay_once(&runtime, &script, engine, &output).await?;
            samples.push(started.elapsed());
            anyhow::ensure!(
                report.failed_turns.is_empty(),
                "turns failed replaying with {engine_id}: {:?}",
                report.failed_turns
            );
            anyhow::ensure!(
                report.fallbacks == 0,
                "{engine_id} fell back to legacy {} times (quarantined: {:?})",
                report.fallbacks,
                report.quarantined
            );
            last = Some(report);
        }
        let Some(report) = last else {
            continue;
        };
        let stats = Stats::of(samples);
        let turns = report.turns.len() as f64;
        rates.push((engine_id, turns / stats.median.as_secs_f64()));
        rows.push(Row {
            what: format!("full replay of {name} with {engine_id}, {WINDOW}-token window"),
            figure: format!(
                "{:.1} turns/s median (min {:.1}, max {:.1}; {} turns, {} model calls, {} compactions; n={})",
                turns / stats.median.as_secs_f64(),
                turns / stats.max.as_secs_f64(),
                turns / stats.min.as_secs_f64(),
                report.turns.len(),
                report.model_calls,
                report.compactions,
                stats.samples
            ),
            target: "report".into(),
            met: None,
        });
        rows.push(Row {
            what: format!("where {engine_id}'s replay time goes (guarded engine calls per replay)"),
            figure: call_times.summary(engine_id, stats.samples as u32),
            target: "report".into(),
            met: None,
        });
    }
    let rate = |id: &str| {
        rates
            .iter()
            .find(|(engine, _)| *engine == id)
            .map(|(_, rate)| *rate)
    };
    if let (Some(legacy), Some(lossless)) = (rate("legacy"), rate("lossless")) {
        let share = lossless / legacy;
        rows.push(Row {
            what: format!("full replay of {name}: lossless's turns/s as a share of legacy's"),
            figure: format!(
                "{:.0}% ({lossless:.1} / {legacy:.1} turns/s)",
                share * 100.0
            ),
            target: format!("≥ {:.0}%", LOSSLESS_SHARE_TARGET * 100.0),
            met: Some(share >= LOSSLESS_SHARE_TARGET),
        });
    }
    Ok(())
}
