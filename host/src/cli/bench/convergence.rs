//! Whether compaction converges: every fixture replayed once with each
//! engine at a 16k window, reporting how many compactions it took and what
//! each freed (ARCHITECTURE.md §6; issue "Compaction that converges").

use std::path::{Path, PathBuf};

use ctxbox_host::runtime::Runtime;
use ctxbox_host::runtime::config::Config;

use super::{Options, Row};

/// The shared fixtures, when the bench runs from a checkout.
const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/fixtures/sessions");
/// The engines replayed.
const ENGINES: [&str; 3] = ["legacy", "keep-recent", "lossless"];

/// One row per fixture and engine: compactions, model calls, and the tokens
/// each compaction freed (mean and least), by the runner's own estimate.
pub async fn rows(options: &Options, rows: &mut Vec<Row>) -> anyhow::Result<()> {
    let fixtures = fixtures(options)?;
    let dir = tempfile::tempdir()?;
    let runtime = Runtime::new(Config {
        data_dir: Some(dir.path().to_owned()),
        ..Config::default()
    })?;
    for path in fixtures {
        let (script, name) = super::replay::script_of(&runtime, &path)?;
        for engine_id in ENGINES {
            let engine = runtime.select(Some(engine_id)).await;
            let output = dir.path().join(format!("{name}-{engine_id}.jsonl"));
            let report = super::replay::replay_once(&runtime, &script, engine, &output).await?;
            let passes = report.compaction_passes();
            let freed = report.tokens_freed();
            let stops = report
                .turns
                .iter()
                .chain(report.failed_turns.iter().map(|failed| &failed.done))
                .filter(|turn| turn.compaction_stopped.is_some())
                .count();
            let freed_figure = match freed.iter().min() {
                Some(least) => format!(
                    "freed {} tokens per compaction on average, {least} at least",
                    freed.iter().sum::<u64>() / freed.len() as u64
                ),
                None => "nothing freed".to_owned(),
            };
            rows.push(Row {
                what: format!(
                    "compactions replaying {name} with {engine_id}, {}-token window",
                    super::replay::WINDOW
                ),
                figure: format!(
                    "{} compactions in {} model calls; {freed_figure}; {} passes asked for, {stops} guard stops, {} failed turns",
                    report.compactions,
                    report.model_calls,
                    passes.len(),
                    report.failed_turns.len()
                ),
                target: "report".into(),
                met: None,
            });
        }
    }
    Ok(())
}

/// The recordings to replay: `--transcript` when given, else every fixture
/// of the checkout (none outside one).
fn fixtures(options: &Options) -> anyhow::Result<Vec<PathBuf>> {
    if let Some(path) = &options.transcript {
        return Ok(vec![path.clone()]);
    }
    if !Path::new(FIXTURES).is_dir() {
        return Ok(Vec::new());
    }
    let mut paths: Vec<PathBuf> = std::fs::read_dir(FIXTURES)?
        .filter_map(|entry| entry.ok().map(|entry| entry.path()))
        .filter(|path| path.extension().is_some_and(|ext| ext == "jsonl"))
        .collect();
    paths.sort();
    Ok(paths)
}
