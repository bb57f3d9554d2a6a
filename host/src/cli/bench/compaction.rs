//! Native compaction of a very long session (generated from a real one):
//! how long it takes, and what summarizing chunks in parallel buys.

use std::time::Instant;

use ctxbox_host::compaction::{CompactionConfig, Compactor, NoProgress};
use ctxbox_host::transcript::{NewSession, TranscriptStore};
use ctxbox_host::types::{AgentMessage, CompactParams, CompactionTarget, ContentBlock};
use tokio_util::sync::CancellationToken;

use super::measure::{Stats, ratio};
use super::{Options, Row};

/// The recording the long session is made of.
const SOURCE: &[u8] = crate::cli::run::SAMPLE;

/// Compacts a `options.compaction_messages`-message session with one chunk at
/// a time and with several.
pub async fn rows(options: &Options, rows: &mut Vec<Row>) -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let store = TranscriptStore::new(Default::default());
    let source_path = dir.path().join("source.jsonl");
    std::fs::write(&source_path, SOURCE)?;
    let source: Vec<AgentMessage> = store
        .open_read_only(&source_path)?
        .active_branch()
        .into_iter()
        .map(|entry| entry.message)
        .collect();

    let long_path = dir.path().join("long.jsonl");
    let long = store.create(
        &long_path,
        NewSession {
            session_id: None,
            cwd: "/bench".into(),
            parent_session: None,
        },
    )?;
    let mut written = 0usize;
    let mut cycle = 0usize;
    while written < options.compaction_messages {
        let batch: Vec<AgentMessage> = source
            .iter()
            .take(options.compaction_messages - written)
            .map(|message| renamed_calls(message, cycle))
            .collect();
        written += batch.len();
        long.append(&batch)?;
        cycle += 1;
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
        what: format!("native compaction, {written} messages ({tokens} tokens), extractive"),
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

/// `message` with its tool-call ids made unique to copy number `cycle`, so
/// repeated copies still pair calls with their own results.
fn renamed_calls(message: &AgentMessage, cycle: usize) -> AgentMessage {
    let rename = |id: &str| format!("{id}-{cycle}");
    match message {
        AgentMessage::Assistant {
            content,
            model,
            provider,
            usage,
            stop_reason,
            error_message,
        } => AgentMessage::Assistant {
            content: content
                .iter()
                .map(|block| match block {
                    ContentBlock::ToolCall {
                        id,
                        name,
                        arguments_json,
                    } => ContentBlock::ToolCall {
                        id: rename(id),
                        name: name.clone(),
                        arguments_json: arguments_json.clone(),
                    },
                    other => other.clone(),
                })
                .collect(),
            model: model.clone(),
            provider: provider.clone(),
            usage: *usage,
            stop_reason: *stop_reason,
            error_message: error_message.clone(),
        },
        AgentMessage::ToolResult {
            tool_call_id,
            tool_name,
            content,
            is_error,
            details,
        } => AgentMessage::ToolResult {
            tool_call_id: rename(tool_call_id),
            tool_name: tool_name.clone(),
            content: content.clone(),
            is_error: *is_error,
            details: details.clone(),
        },
        other => other.clone(),
    }
}
