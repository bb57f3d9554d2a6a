//! Native compaction of a very long session (made of the real ones):
//! how long it takes, and what summarizing chunks in parallel buys.

use std::time::Instant;

use ctxbox_host::contract::types::{CompactParams, CompactionTarget};
use ctxbox_host::services::compaction::{CompactionConfig, Compactor, NoProgress};
use ctxbox_host::transcript::{NewSession, TranscriptStore};
use tokio_util::sync::CancellationToken;

use super::measure::{Stats, ratio};
use super::recorded::Recorded;
use super::{Options, Row};

/// Compacts a `options.compaction_messages`-message session with one chunk at
/// a time and with two.
pub async fn rows(options: &Options, rows: &mut Vec<Row>) -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let store = TranscriptStore::new(Default::default());
    let source = Recorded::read(&store)?;

    let long_path = dir.path().join("long.jsonl");
    let long = store.create(
        &long_path,
        NewSession {
            session_id: None,
            cwd: "/bench".into(),
            parent_session: None,
        },
    )?;
    let messages = source.repeated(options.compaction_messages);
    let written = messages.len();
    for batch in messages.chunks(1_000) {
        long.append(batch)?;
    }
    let tokens = long.history().total_tokens();
    drop(long);

    // The question: what two cores buy over one.
    let mut timings = Vec::new();
    for concurrency in [1, 2] {
        let compactor = Compactor::from_config(
            store.clone(),
            CompactionConfig {
                summary_concurrency: concurrency,
                ..CompactionConfig::default()
            },
        )?;
        let params = CompactParams {
            token_budget: Some(128_000),
            force: true,
            compaction_target: CompactionTarget::Threshold,
            ..CompactParams::default()
        };
        let mut samples = Vec::new();
        for run in 0..options.runs(5) {
            // Each run compacts its own copy: compaction appends to the file.
            let copy = dir.path().join(format!("copy-{concurrency}-{run}.jsonl"));
            std::fs::copy(&long_path, &copy)?;
            let transcript = store.open(&copy)?;
            let started = Instant::now();
            let result = compactor
                .compact(&transcript, &params, &NoProgress, &CancellationToken::new())
                .await?;
            samples.push(started.elapsed());
            anyhow::ensure!(
                result.compacted,
                "the long session did not compact: {:?}",
                result.reason
            );
            drop(transcript);
            std::fs::remove_file(&copy)?;
        }
        timings.push(Stats::of(samples));
    }
    let (one, two) = (timings[0], timings[1]);
    rows.push(Row {
        what: format!(
            "native compaction, {written} messages of {} ({tokens} tokens), extractive",
            source.label
        ),
        figure: format!(
            "one chunk at a time: {}; two at a time: {}",
            one.describe(),
            two.describe()
        ),
        target: "report".into(),
        met: None,
    });
    rows.push(Row {
        what: "parallel chunk summarization speedup, 2 at a time vs 1".into(),
        figure: format!(
            "{:.2}× on a machine with {} cores",
            ratio(&one, &two),
            std::thread::available_parallelism().map_or(0, usize::from)
        ),
        target: "report".into(),
        met: None,
    });
    Ok(())
}
