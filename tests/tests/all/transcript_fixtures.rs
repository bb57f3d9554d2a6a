//! The transcript store and native compaction on real OpenClaw/pi sessions
//! (`tests/fixtures/sessions`, described in its SOURCES.md): every file loads,
//! rebuilds the context the reference would, writes back byte for byte, and
//! compacts to a 16k and a 32k budget without orphaning a tool call.

use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context, Result, ensure};
use ctxbox_host::contract::history::History;
use ctxbox_host::contract::types::{
    AgentMessage, CompactParams, CompactionTarget, MessageEntry, MessageKind,
};
use ctxbox_host::services::compaction::{
    CompactionConfig, Compactor, MAX_SUMMARY_CHARS, NoProgress,
};
use ctxbox_host::services::summarize::{ExtractiveSummarizer, REQUIRED_SECTIONS};
use ctxbox_host::transcript::{Transcript, TranscriptConfig, TranscriptStore};
use tokio_util::sync::CancellationToken;

/// What the reference's `buildSessionContext` gives for a fixture (computed
/// independently from the files, see SOURCES.md for the per-file counts).
struct Expected {
    file: &'static str,
    /// Messages per role on the active branch (root to leaf): `message`
    /// entries by role, `custom_message` entries as `custom`.
    branch: &'static [(&'static str, usize)],
    /// Messages per kind in the rebuilt context.
    context: &'static [(&'static str, usize)],
    /// The latest compaction on the branch and its first kept entry.
    compaction: Option<(&'static str, &'static str)>,
    leaf: &'static str,
}

const FIXTURES: [Expected; 6] = [
    Expected {
        file: "qwen-minimax-feishu-zh-3-hook-compactions.jsonl",
        branch: &[("user", 23), ("assistant", 56), ("toolResult", 33)],
        context: &[
            ("compactionSummary", 1),
            ("user", 17),
            ("assistant", 45),
            ("toolResult", 28),
        ],
        compaction: Some(("48392785", "5093b100")),
        leaf: "188a55d1",
    },
    Expected {
        file: "claude-opus46-bedrock-subagent-webdev-en.jsonl",
        branch: &[("user", 1), ("assistant", 47), ("toolResult", 51)],
        context: &[("user", 1), ("assistant", 47), ("toolResult", 51)],
        compaction: None,
        leaf: "b87dc3b9",
    },
    Expected {
        file: "kimi-k2-thinking-rust-coding-de-1-compaction.jsonl",
        branch: &[
            ("user", 35),
            ("assistant", 270),
            ("toolResult", 240),
            ("custom", 5),
        ],
        context: &[
            ("compactionSummary", 1),
            ("user", 28),
            ("assistant", 212),
            ("toolResult", 185),
            ("custom", 3),
        ],
        compaction: Some(("10334897", "ed9faca9")),
        leaf: "6ecd1c31",
    },
    Expected {
        file: "pi-termux-deepseek-v4-discord-bot-ar.jsonl",
        branch: &[("user", 2), ("assistant", 92), ("toolResult", 90)],
        context: &[("user", 2), ("assistant", 92), ("toolResult", 90)],
        compaction: None,
        leaf: "54e042dc",
    },
    Expected {
        file: "deepseek-chat-windows-ops-zh-3-compactions.jsonl",
        branch: &[("user", 22), ("assistant", 280), ("toolResult", 258)],
        context: &[
            ("compactionSummary", 1),
            ("user", 7),
            ("assistant", 77),
            ("toolResult", 69),
        ],
        compaction: Some(("1e8ff4d6", "05874f46")),
        leaf: "404aca30",
    },
    Expected {
        // 30 assistant messages in the file; the 4 delivery-mirror copies
        // beside real tool results are dead-end branches.
        file: "qwen35-feishu-delivery-mirror-branching-zh.jsonl",
        branch: &[("user", 15), ("assistant", 26), ("toolResult", 13)],
        context: &[("user", 15), ("assistant", 26), ("toolResult", 13)],
        compaction: None,
        leaf: "67c53dbd",
    },
];

fn fixture(file: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures/sessions")
        .join(file)
}

fn role(message: &AgentMessage) -> &'static str {
    match message.kind() {
        MessageKind::User => "user",
        MessageKind::Assistant => "assistant",
        MessageKind::ToolResult => "toolResult",
        MessageKind::Custom => "custom",
        MessageKind::CompactionSummary => "compactionSummary",
        MessageKind::BranchSummary => "branchSummary",
    }
}

fn counts(entries: &[MessageEntry]) -> BTreeMap<&'static str, usize> {
    let mut counts = BTreeMap::new();
    for entry in entries {
        *counts.entry(role(&entry.message)).or_default() += 1;
    }
    counts
}

/// Every tool result follows the assistant message that made its call.
fn check_paired(history: &History) -> Result<()> {
    let mut calls = HashSet::new();
    for (index, entry) in history.entries().iter().enumerate() {
        match &entry.message {
            AgentMessage::Assistant { .. } => calls.extend(entry.message.tool_call_ids()),
            AgentMessage::ToolResult { tool_call_id, .. } => ensure!(
                calls.contains(tool_call_id.as_str()),
                "entry {index} ({}) answers call {tool_call_id}, which is not before it",
                entry.id
            ),
            _ => {}
        }
    }
    Ok(())
}

/// Reads a transcript without locking or changing it (the fixtures are
/// checked in).
fn open(path: &Path) -> Result<Transcript> {
    TranscriptStore::new(TranscriptConfig::default())
        .open_read_only(path)
        .with_context(|| format!("open {}", path.display()))
}

#[test]
fn every_fixture_rebuilds_the_reference_context() -> Result<()> {
    for expected in &FIXTURES {
        let transcript = open(&fixture(expected.file))?;
        let report = transcript.open_report();
        ensure!(
            report.is_clean(),
            "{}: {:?}",
            expected.file,
            report.problems()
        );
        ensure!(
            transcript.leaf_id().as_deref() == Some(expected.leaf),
            "{}: leaf",
            expected.file
        );

        let branch = counts(&transcript.active_branch());
        let wanted: BTreeMap<_, _> = expected.branch.iter().copied().collect();
        ensure!(
            branch == wanted,
            "{}: branch {branch:?}, expected {wanted:?}",
            expected.file
        );

        let history = transcript.history();
        let context = counts(history.entries());
        let wanted: BTreeMap<_, _> = expected.context.iter().copied().collect();
        ensure!(
            context == wanted,
            "{}: context {context:?}, expected {wanted:?}",
            expected.file
        );

        if let Some((compaction, first_kept)) = expected.compaction {
            let summary = history.entry(0).context("a summary first")?;
            ensure!(
                summary.id == compaction && history.kind(0) == Some(MessageKind::CompactionSummary)
            );
            let kept = history.entry(1).context("kept entries follow")?;
            ensure!(
                kept.id == first_kept,
                "{}: the kept entries start at {}, not at firstKeptEntryId {first_kept}",
                expected.file,
                kept.id
            );
        }
        ensure!(history.total_tokens() > 0);
    }
    Ok(())
}

#[test]
fn every_fixture_round_trips_byte_for_byte() -> Result<()> {
    let dir = tempfile::tempdir()?;
    for expected in &FIXTURES {
        let original = fixture(expected.file);
        let copy = dir.path().join(expected.file);
        open(&original)?.save_copy(&copy)?;
        ensure!(
            std::fs::read(&copy)? == std::fs::read(&original)?,
            "{} changed in the round trip",
            expected.file
        );
    }
    Ok(())
}

#[test]
fn every_fixture_compacts_to_16k_and_32k_budgets() -> Result<()> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    for budget in [16_000, 32_000] {
        for expected in &FIXTURES {
            let dir = tempfile::tempdir()?;
            let path = dir.path().join(expected.file);
            std::fs::copy(fixture(expected.file), &path)?;
            let store = TranscriptStore::new(TranscriptConfig::default());
            let transcript = store.open(&path)?;
            let estimate_before = transcript.history().total_tokens();
            let lines_before = transcript.line_count();
            let compactor = Compactor::new(
                store.clone(),
                Arc::new(ExtractiveSummarizer),
                CompactionConfig::default(),
            );
            let params = CompactParams {
                token_budget: Some(budget),
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
            let name = format!("{} at {budget}", expected.file);
            // A context no summary would make smaller is left alone (it
            // already fits: the cut keeps what the budget allows).
            if result.ok
                && !result.compacted
                && result
                    .reason
                    .as_deref()
                    .is_some_and(|reason| reason.starts_with("no progress"))
            {
                ensure!(estimate_before <= budget, "{name}: {result:?}");
                ensure!(transcript.line_count() == lines_before, "{name}: written");
                continue;
            }
            ensure!(result.ok && result.compacted, "{name}: {result:?}");

            let history = transcript.history();
            // In the caller's units: the recorded usage counts the context
            // larger than the transcript's estimates.
            let after = result.tokens_after.context("tokens after")?;
            ensure!(
                history.total_tokens() <= after && after <= budget,
                "{name}: {after} tokens after, {} by the transcript's estimate",
                history.total_tokens()
            );
            ensure!(
                after < result.tokens_before && history.total_tokens() < estimate_before,
                "{name}: grew from {estimate_before}"
            );
            ensure!(history.kind(0) == Some(MessageKind::CompactionSummary));
            ensure!(history.entry(1).map(|entry| entry.id.clone()) == result.first_kept_entry_id);
            check_paired(&history).with_context(|| name.clone())?;

            let summary = result.summary.context("summary")?;
            ensure!(
                summary.chars().count() <= MAX_SUMMARY_CHARS,
                "{name}: summary too long"
            );
            let mut cursor = 0;
            for title in REQUIRED_SECTIONS {
                cursor += summary[cursor..]
                    .find(&format!("## {title}"))
                    .with_context(|| format!("{name}: section {title} missing or out of order"))?;
            }

            // A fresh process reads the compacted file cleanly.
            let before: Vec<(String, AgentMessage)> = history
                .entries()
                .iter()
                .map(|e| (e.id.clone(), e.message.clone()))
                .collect();
            drop((compactor, transcript, store));
            let reopened = open(&path)?;
            ensure!(
                reopened.open_report().is_clean(),
                "{name}: not clean after compaction: {:?}",
                reopened.open_report().problems()
            );
            let again: Vec<(String, AgentMessage)> = reopened
                .history()
                .entries()
                .iter()
                .map(|e| (e.id.clone(), e.message.clone()))
                .collect();
            ensure!(again == before, "{name}: the reopened context differs");
            ensure!(
                std::fs::read(&path)?.starts_with(&std::fs::read(fixture(expected.file))?),
                "{name}: compaction changed earlier bytes"
            );
        }
    }
    Ok(())
}
