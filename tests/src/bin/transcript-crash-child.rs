//! Crash-test child: appends to a transcript and compacts it, forever, until
//! the test kills it. After every durable write (an append, or an
//! uncommitted append once its commit returned) it prints `ack <entry id>`;
//! when a compaction rotates the transcript it prints `file <new path>` (the
//! acks after it belong to that file; a kill can come before this line, so
//! the test also follows the rotation chain on disk).
//!
//! With `tear` set it stops after a few rounds the way a crash in the middle
//! of an append would leave the file: it writes the first bytes of one more
//! entry line, without its newline, prints `torn <entry id> <bytes>`, and
//! waits to be killed.
//!
//! Usage: `transcript-crash-child <transcript> <seed> <rotate: 0|1> <tear: 0|1>`

use std::fs::OpenOptions;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context, Result};
use ctxbox_host::contract::types::{
    AgentMessage, CompactParams, CompactionTarget, ContentBlock, StopReason,
};
use ctxbox_host::services::compaction::{CompactionConfig, Compactor, NoProgress};
use ctxbox_host::services::summarize::ExtractiveSummarizer;
use ctxbox_host::transcript::{NewSession, TranscriptConfig, TranscriptStore};
use tokio_util::sync::CancellationToken;

fn main() -> Result<()> {
    let mut args = std::env::args().skip(1);
    let path = PathBuf::from(args.next().context("transcript path")?);
    let seed: u64 = args.next().context("seed")?.parse()?;
    let rotate = args.next().context("rotate flag")? == "1";
    let tear = args.next().context("tear flag")? == "1";

    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let store = TranscriptStore::new(TranscriptConfig::default());
    let mut transcript = store.open_or_create(&path, NewSession::default())?;
    let compactor = Compactor::new(
        store.clone(),
        Arc::new(ExtractiveSummarizer),
        CompactionConfig {
            truncate_after_compaction: rotate,
            ..CompactionConfig::default()
        },
    );
    let params = CompactParams {
        token_budget: Some(3_000),
        force: true,
        compaction_target: CompactionTarget::Budget,
        ..CompactParams::default()
    };
    let mut rng = fastrand::Rng::with_seed(seed);
    let tear_at = tear.then(|| rng.u64(0..6));
    let mut out = std::io::stdout().lock();
    for round in 0u64.. {
        if tear_at == Some(round) {
            let (id, bytes) = write_torn_line(transcript.path(), seed, &mut rng)?;
            writeln!(out, "torn {id} {bytes}")?;
            out.flush()?;
            loop {
                std::thread::park();
            }
        }
        if rng.u8(..8) == 0 && transcript.history().len() > 8 {
            let result = runtime.block_on(compactor.compact(
                &transcript,
                &params,
                &NoProgress,
                &CancellationToken::new(),
            ))?;
            if result.compacted {
                let compaction = transcript.history().entries()[0].id.clone();
                writeln!(out, "ack {compaction}")?;
                if let Some(rotated) = result.rotated_session {
                    transcript = store.open(Path::new(&rotated.session_file))?;
                    writeln!(out, "file {}", transcript.path().display())?;
                }
            }
        } else {
            let messages = if rng.bool() {
                vec![AgentMessage::user_text(format!(
                    "ask {round}: {}",
                    "words ".repeat(rng.usize(1..400))
                ))]
            } else {
                let call = format!("call-{seed}-{round}");
                vec![
                    AgentMessage::Assistant {
                        content: vec![ContentBlock::ToolCall {
                            id: call.clone(),
                            name: "read".into(),
                            arguments_json: format!(r#"{{"path":"src/file{round}.rs"}}"#),
                        }],
                        model: None,
                        provider: None,
                        usage: None,
                        stop_reason: StopReason::ToolUse,
                        error_message: None,
                    },
                    AgentMessage::ToolResult {
                        tool_call_id: call,
                        tool_name: "read".into(),
                        content: vec![ContentBlock::text(
                            "output line\n".repeat(rng.usize(1..300)),
                        )],
                        is_error: false,
                        details: None,
                    },
                ]
            };
            let entries = if rng.bool() {
                transcript.append(&messages)?
            } else {
                // A turn's way: written uncommitted, acknowledged once the
                // commit returns.
                let entries = transcript.append_uncommitted(&messages)?;
                transcript.commit()?;
                entries
            };
            for entry in entries {
                writeln!(out, "ack {}", entry.id)?;
            }
        }
        out.flush()?;
    }
    Ok(())
}

/// Appends the first bytes of an entry line (at least up to its id, never
/// its newline) behind the store's back: what an append cut short by a crash
/// leaves. Answers the entry's id and how many bytes were written.
fn write_torn_line(path: &Path, seed: u64, rng: &mut fastrand::Rng) -> Result<(String, usize)> {
    let id = format!("torn{seed:08x}");
    let line = format!(
        r#"{{"type":"message","id":"{id}","parentId":null,"timestamp":"2026-01-01T00:00:00.000Z","message":{{"role":"user","content":"{}"}}}}"#,
        "lost ".repeat(rng.usize(1..50))
    );
    let with_id = line.find(&id).context("id in line")? + id.len();
    let bytes = rng.usize(with_id..line.len());
    let mut file = OpenOptions::new().append(true).open(path)?;
    file.write_all(&line.as_bytes()[..bytes])?;
    file.sync_data()?;
    Ok((id, bytes))
}
