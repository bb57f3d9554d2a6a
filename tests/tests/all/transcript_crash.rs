//! Crash safety of the transcript store: a child process appends, compacts
//! and rotates until it is killed at a random moment (or, every fourth round,
//! right after leaving a torn line as a crash mid-append would); after every
//! kill the transcript opens, every entry the child acknowledged is in its
//! file exactly once, a torn line was set aside whole and never merged, and
//! the session still compacts.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, mpsc};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail, ensure};
use ctxbox_host::contract::types::{CompactParams, CompactionTarget};
use ctxbox_host::services::compaction::{CompactionConfig, Compactor, NoProgress};
use ctxbox_host::services::summarize::ExtractiveSummarizer;
use ctxbox_host::transcript::{TranscriptConfig, TranscriptError, TranscriptStore};
use tokio_util::sync::CancellationToken;

const CHILD: &str = env!("CARGO_BIN_EXE_transcript-crash-child");

/// What the kills interrupted, summed over all rounds.
#[derive(Debug, Default)]
struct Seen {
    acknowledged: usize,
    /// Rotations that led to the final transcript.
    rotations: usize,
    /// Rounds in which the child left a torn line on purpose.
    torn_written: usize,
    /// Torn tails the store found and set aside on reopening.
    torn_tails: usize,
}

/// A line the child left without its newline, as it announced it.
struct Torn {
    id: String,
    bytes: u64,
}

/// The child's complete stdout lines, as they come (a line the kill cut
/// short is never sent: it was never acknowledged).
fn lines_of(stdout: impl Read + Send + 'static) -> mpsc::Receiver<String> {
    let (sender, receiver) = mpsc::channel();
    std::thread::spawn(move || {
        let mut reader = BufReader::new(stdout);
        let mut line = Vec::new();
        while matches!(reader.read_until(b'\n', &mut line), Ok(n) if n > 0) {
            if line.ends_with(b"\n") {
                let text = String::from_utf8_lossy(&line[..line.len() - 1]).into_owned();
                if sender.send(text).is_err() {
                    return;
                }
            }
            line.clear();
        }
    });
    receiver
}

/// Runs the child and kills it `kills` times; every `TEAR_EVERY`th round the
/// child leaves a torn line first.
fn kill_repeatedly(kills: u64, seed: u64) -> Result<Seen> {
    const TEAR_EVERY: u64 = 4;
    let mut seen = Seen::default();
    let dir = tempfile::tempdir()?;
    let mut current = dir.path().join("session.jsonl");
    let mut acked: HashMap<PathBuf, Vec<String>> = HashMap::new();
    let mut rng = fastrand::Rng::with_seed(seed);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    for round in 0..kills {
        let tear = round % TEAR_EVERY == TEAR_EVERY - 1;
        let mut child = Command::new(CHILD)
            .arg(&current)
            .arg((seed + round).to_string())
            .arg(if round % 2 == 0 { "1" } else { "0" })
            .arg(if tear { "1" } else { "0" })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()?;
        let lines = lines_of(child.stdout.take().context("child stdout")?);
        let mut output = Vec::new();
        if tear {
            // Kill it only once the torn line is written (generous bound: the
            // child gets there after a handful of appends).
            let deadline = Instant::now() + Duration::from_secs(120);
            loop {
                let left = deadline.saturating_duration_since(Instant::now());
                match lines.recv_timeout(left) {
                    Ok(line) => {
                        let done = line.starts_with("torn ");
                        output.push(line);
                        if done {
                            break;
                        }
                    }
                    Err(_) => break,
                }
            }
        } else {
            std::thread::sleep(Duration::from_millis(rng.u64(0..60)));
        }
        let still_running = child.try_wait()?.is_none();
        child.kill()?;
        let status = child.wait()?;
        output.extend(lines.iter());
        if !still_running {
            let mut stderr = String::new();
            child
                .stderr
                .take()
                .context("child stderr")?
                .read_to_string(&mut stderr)?;
            bail!("round {round}: the child stopped by itself ({status}): {stderr}");
        }

        let mut torn = None;
        for line in &output {
            if let Some(path) = line.strip_prefix("file ") {
                current = PathBuf::from(path);
            } else if let Some(id) = line.strip_prefix("ack ") {
                acked
                    .entry(current.clone())
                    .or_default()
                    .push(id.to_owned());
                seen.acknowledged += 1;
            } else if let Some(rest) = line.strip_prefix("torn ") {
                let (id, bytes) = rest.split_once(' ').context("torn <id> <bytes>")?;
                torn = Some(Torn {
                    id: id.to_owned(),
                    bytes: bytes.parse()?,
                });
            }
        }
        ensure!(
            !tear || torn.is_some(),
            "round {round}: the child never wrote its torn line"
        );
        seen.torn_written += usize::from(torn.is_some());
        // The kill may have come between a rotation and its `file` line.
        current = latest(&current)?;
        let found = check(&current, &acked, torn.as_ref(), &runtime)
            .with_context(|| format!("after kill {round}"))?;
        seen.torn_tails += usize::from(found);
    }
    seen.rotations = chain_length(&current)?;
    eprintln!("{kills} kills: {seen:?}");
    Ok(seen)
}

/// The transcript at the end of the rotation chain starting at `path`.
fn latest(path: &Path) -> Result<PathBuf> {
    let store = TranscriptStore::new(TranscriptConfig::default());
    let mut current = path.to_owned();
    loop {
        match store.open_read_only(&current) {
            Ok(transcript) => match transcript.successor() {
                Some(next) => current = PathBuf::from(next.session_file),
                None => return Ok(current),
            },
            Err(TranscriptError::NotFound { .. }) => return Ok(current),
            Err(error) => return Err(error.into()),
        }
    }
}

/// How many rotations led to `path` (following `parentSession` back).
fn chain_length(path: &Path) -> Result<usize> {
    let store = TranscriptStore::new(TranscriptConfig::default());
    let mut length = 0;
    let mut current = path.to_owned();
    while current.exists() {
        match store.open_read_only(&current)?.header().parent_session {
            Some(parent) => {
                length += 1;
                current = PathBuf::from(parent);
            }
            None => break,
        }
    }
    Ok(length)
}

/// Opens the current transcript, checks every acknowledged entry is in its
/// file exactly once and that a torn line the child left was set aside whole
/// and never merged, and compacts. Answers whether a torn tail was set aside.
fn check(
    current: &Path,
    acked: &HashMap<PathBuf, Vec<String>>,
    torn: Option<&Torn>,
    runtime: &tokio::runtime::Runtime,
) -> Result<bool> {
    let store = TranscriptStore::new(TranscriptConfig::default());
    let transcript = match store.open(current) {
        Ok(transcript) => transcript,
        // Killed before it created the file: nothing was acknowledged.
        Err(TranscriptError::NotFound { .. }) if acked.is_empty() && torn.is_none() => {
            return Ok(false);
        }
        Err(error) => return Err(error.into()),
    };
    let report = transcript.open_report();
    ensure!(
        report.corrupt_lines.is_empty(),
        "corrupt lines: {:?}",
        report.corrupt_lines
    );
    if let Some(torn) = torn {
        let tail = report
            .torn_tail
            .as_ref()
            .context("the torn line was not detected")?;
        ensure!(
            tail.bytes == torn.bytes,
            "torn tail {tail:?}, wrote {} bytes",
            torn.bytes
        );
        let side = tail
            .saved_to
            .as_ref()
            .context("the torn line was not set aside")?;
        let saved = std::fs::read_to_string(side)?;
        ensure!(
            saved.len() as u64 == torn.bytes && saved.contains(&torn.id) && !saved.contains('\n'),
            "side file holds {saved:?}"
        );
    }

    for (file, ids) in acked {
        let mut counts: HashMap<String, usize> = HashMap::new();
        for line in std::fs::read_to_string(file)?.lines() {
            let entry: serde_json::Value = serde_json::from_str(line)
                .with_context(|| format!("{}: {line}", file.display()))?;
            if let Some(id) = entry["id"].as_str() {
                *counts.entry(id.to_owned()).or_default() += 1;
            }
        }
        for id in ids {
            let count = counts.get(id).copied().unwrap_or(0);
            ensure!(
                count == 1,
                "{}: acknowledged entry {id} is there {count} times",
                file.display()
            );
        }
    }

    if transcript.history().len() > 4 {
        let compactor = Compactor::new(
            store.clone(),
            Arc::new(ExtractiveSummarizer),
            CompactionConfig::default(),
        );
        let params = CompactParams {
            token_budget: Some(3_000),
            force: true,
            compaction_target: CompactionTarget::Budget,
            ..CompactParams::default()
        };
        let result = runtime.block_on(compactor.compact(
            &transcript,
            &params,
            &NoProgress,
            &CancellationToken::new(),
        ))?;
        ensure!(result.ok, "the session no longer compacts: {result:?}");
    }
    if let Some(torn) = torn {
        // Whatever was written after it, the torn bytes never joined a line.
        for line in std::fs::read_to_string(current)?.lines() {
            serde_json::from_str::<serde_json::Value>(line)
                .with_context(|| format!("merged line {line}"))?;
            ensure!(
                !line.contains(&torn.id),
                "the torn entry resurfaced: {line}"
            );
        }
    }
    Ok(report.torn_tail.is_some())
}

#[test]
fn acknowledged_entries_survive_kills() -> Result<()> {
    let seen = kill_repeatedly(16, 1)?;
    ensure!(
        seen.acknowledged > 0,
        "the child never got to acknowledge anything"
    );
    ensure!(
        seen.torn_written == 4 && seen.torn_tails >= seen.torn_written,
        "torn lines were not all found: {seen:?}"
    );
    Ok(())
}

#[test]
#[ignore = "long: 250 kills; run with --ignored"]
fn acknowledged_entries_survive_hundreds_of_kills() -> Result<()> {
    let seen = kill_repeatedly(250, 1_000)?;
    ensure!(
        seen.acknowledged > 250 && seen.rotations > 0,
        "the kills interrupted too little: {seen:?}"
    );
    ensure!(
        seen.torn_written == 62 && seen.torn_tails >= seen.torn_written,
        "torn lines were not all found: {seen:?}"
    );
    Ok(())
}
