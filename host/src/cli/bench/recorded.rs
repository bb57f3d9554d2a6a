//! Long sessions made of real ones: the recorded sessions of the checkout's
//! fixtures (the built-in sample outside a checkout), repeated with their
//! tool-call ids made unique per copy, for the measurements that need size.

use std::path::Path;

use ctxbox_host::contract::types::{AgentMessage, ContentBlock};
use ctxbox_host::transcript::TranscriptStore;

/// The checkout's real session recordings.
pub(super) const FIXTURES: &str =
    concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/fixtures/sessions");

/// The messages of the active branches of real sessions, in order.
pub struct Recorded {
    /// What they came from, for the report.
    pub label: String,
    messages: Vec<AgentMessage>,
}

impl Recorded {
    /// The fixtures' messages, or the built-in sample's.
    pub fn read(store: &TranscriptStore) -> anyhow::Result<Self> {
        let mut files: Vec<_> = std::fs::read_dir(FIXTURES)
            .map(|entries| {
                entries
                    .flatten()
                    .map(|entry| entry.path())
                    .filter(|path| path.extension().is_some_and(|ext| ext == "jsonl"))
                    .collect()
            })
            .unwrap_or_default();
        files.sort();
        let mut messages = Vec::new();
        for file in &files {
            messages.extend(active_messages(store, file)?);
        }
        if !messages.is_empty() {
            return Ok(Self {
                label: format!("{} real sessions", files.len()),
                messages,
            });
        }
        let dir = tempfile::tempdir()?;
        let sample = dir.path().join("sample.jsonl");
        std::fs::write(&sample, crate::cli::replay_setup::SAMPLE)?;
        Ok(Self {
            label: "the built-in real session".into(),
            messages: active_messages(store, &sample)?,
        })
    }

    /// `count` messages: the recordings over and over, each copy's tool-call
    /// ids made unique so calls still pair with their own results.
    pub fn repeated(&self, count: usize) -> Vec<AgentMessage> {
        if self.messages.is_empty() {
            return Vec::new();
        }
        (0..)
            .flat_map(|cycle| {
                self.messages
                    .iter()
                    .map(move |message| renamed_calls(message, cycle))
            })
            .take(count)
            .collect()
    }
}

fn active_messages(store: &TranscriptStore, path: &Path) -> anyhow::Result<Vec<AgentMessage>> {
    Ok(store
        .open_read_only(path)?
        .active_branch()
        .into_iter()
        .map(|entry| entry.message)
        .collect())
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
