//! Host-side types of the engine contract: the Rust twins of the WIT records in
//! `wit/types.wit` and `wit/engine.wit`. Every engine, native or sandboxed,
//! speaks these; the wasm adapter converts them to and from the bindings.

use serde::{Deserialize, Serialize};

/// JSON text (an open bag of the reference: `details`, `runtime-context`, …).
pub type Json = String;

/// Token usage an assistant message reported.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    /// Prompt tokens.
    pub input: u64,
    /// Completion tokens.
    pub output: u64,
    /// Prompt tokens read from the provider's cache.
    pub cache_read: u64,
    /// Prompt tokens written to the provider's cache.
    pub cache_write: u64,
    /// The provider's total for the request.
    pub total: u64,
}

/// One block of message content.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "kebab-case")]
pub enum ContentBlock {
    /// Plain text.
    Text {
        /// The text.
        text: String,
    },
    /// Model reasoning.
    Thinking {
        /// The reasoning text.
        text: String,
        /// The provider's signature, if any.
        signature: Option<String>,
    },
    /// An image, base64-encoded.
    Image {
        /// MIME type, e.g. `image/png`.
        mime_type: String,
        /// Base64 data.
        data: String,
    },
    /// A tool invocation requested by the assistant.
    ToolCall {
        /// Unique id; the result carries it as `tool_call_id`.
        id: String,
        /// Tool name.
        name: String,
        /// Arguments as a JSON object.
        arguments_json: Json,
    },
    /// A block of a kind the contract has no case for (a JSON payload),
    /// kept whole as the JSON it was read as: counted by the estimator,
    /// summarized, and handed to engines as a text block holding that JSON
    /// (the WIT `content-block` variant stays as it is, so engines built
    /// before still load). Providers are not sent it, as the reference's
    /// are not.
    Data {
        /// The block as JSON text, its `type` field included.
        json: Json,
    },
}

impl ContentBlock {
    /// A text block.
    pub fn text(text: impl Into<String>) -> Self {
        Self::Text { text: text.into() }
    }

    /// The text blocks of `blocks`, joined by newlines.
    pub fn joined_text(blocks: &[ContentBlock]) -> String {
        blocks
            .iter()
            .filter_map(|block| match block {
                Self::Text { text } => Some(text.as_str()),
                _ => None,
            })
            .collect::<Vec<_>>()
            .join("\n")
    }
}

/// Why the assistant stopped.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum StopReason {
    /// Finished normally.
    #[default]
    Stop,
    /// Hit the output length limit.
    Length,
    /// Stopped to call tools.
    ToolUse,
    /// The provider reported an error.
    Error,
    /// The run was cancelled.
    Aborted,
}

/// A message of the conversation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "role", rename_all = "kebab-case")]
pub enum AgentMessage {
    /// From the user.
    User {
        /// Content blocks.
        content: Vec<ContentBlock>,
    },
    /// From the model.
    Assistant {
        /// Content blocks (text, thinking, tool calls).
        content: Vec<ContentBlock>,
        /// Model id.
        model: Option<String>,
        /// Provider id.
        provider: Option<String>,
        /// Reported usage.
        usage: Option<Usage>,
        /// Why it stopped.
        stop_reason: StopReason,
        /// The provider's error, if it failed.
        error_message: Option<String>,
    },
    /// The result of a tool call.
    ToolResult {
        /// The call this answers.
        tool_call_id: String,
        /// The tool's name.
        tool_name: String,
        /// Content blocks.
        content: Vec<ContentBlock>,
        /// Whether the tool failed.
        is_error: bool,
        /// Tool-specific structured details (JSON).
        details: Option<Json>,
    },
    /// An extension message; providers see it as user content.
    Custom {
        /// The extension's type tag.
        custom_type: String,
        /// Content blocks.
        content: Vec<ContentBlock>,
        /// Whether a UI shows it.
        display: bool,
        /// Extension details (JSON).
        details: Option<Json>,
    },
    /// A summary standing in for compacted history.
    CompactionSummary {
        /// The summary text.
        summary: String,
        /// Tokens of the history it replaced.
        tokens_before: u64,
    },
    /// A summary of an abandoned branch.
    BranchSummary {
        /// The summary text.
        summary: String,
        /// The entry the branch left from.
        from_id: String,
    },
}

/// The kind of an [`AgentMessage`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum MessageKind {
    /// [`AgentMessage::User`].
    User,
    /// [`AgentMessage::Assistant`].
    Assistant,
    /// [`AgentMessage::ToolResult`].
    ToolResult,
    /// [`AgentMessage::Custom`].
    Custom,
    /// [`AgentMessage::CompactionSummary`].
    CompactionSummary,
    /// [`AgentMessage::BranchSummary`].
    BranchSummary,
}

/// The `customType` of OpenClaw's runtime-context carriers: hidden custom
/// messages that hand the model a turn's runtime context. Engines never see
/// one (see [`AgentMessage::is_runtime_context_carrier`]).
pub const RUNTIME_CONTEXT_CUSTOM_TYPE: &str = "openclaw.runtime-context";

impl AgentMessage {
    /// Whether this is a runtime-context carrier: a custom message of type
    /// [`RUNTIME_CONTEXT_CUSTOM_TYPE`] whose details do not say
    /// `runtimeContextCarrier: false`. As in the reference, carriers stay out
    /// of everything an engine is given (histories, transcript deltas, ingested
    /// messages); the runner puts the current turn's at the end of the prompt
    /// instead, and older ones reach no prompt.
    pub fn is_runtime_context_carrier(&self) -> bool {
        let Self::Custom {
            custom_type,
            details,
            ..
        } = self
        else {
            return false;
        };
        custom_type == RUNTIME_CONTEXT_CUSTOM_TYPE
            && details
                .as_deref()
                .and_then(|text| serde_json::from_str::<serde_json::Value>(text).ok())
                .and_then(|details| details.get("runtimeContextCarrier")?.as_bool())
                != Some(false)
    }

    /// A user message with one text block.
    pub fn user_text(text: impl Into<String>) -> Self {
        Self::User {
            content: vec![ContentBlock::text(text)],
        }
    }

    /// An assistant message with one text block that stopped normally.
    pub fn assistant_text(text: impl Into<String>) -> Self {
        Self::Assistant {
            content: vec![ContentBlock::text(text)],
            model: None,
            provider: None,
            usage: None,
            stop_reason: StopReason::Stop,
            error_message: None,
        }
    }

    /// An assistant message that calls the tool `name` once (id `call_id`,
    /// arguments a JSON object) and stopped to have it run.
    pub fn tool_call(
        call_id: impl Into<String>,
        name: impl Into<String>,
        arguments_json: impl Into<String>,
    ) -> Self {
        Self::Assistant {
            content: vec![ContentBlock::ToolCall {
                id: call_id.into(),
                name: name.into(),
                arguments_json: arguments_json.into(),
            }],
            model: None,
            provider: None,
            usage: None,
            stop_reason: StopReason::ToolUse,
            error_message: None,
        }
    }

    /// The successful result of the tool call `call_id` to `name`: one text
    /// block.
    pub fn tool_result(
        call_id: impl Into<String>,
        name: impl Into<String>,
        text: impl Into<String>,
    ) -> Self {
        Self::ToolResult {
            tool_call_id: call_id.into(),
            tool_name: name.into(),
            content: vec![ContentBlock::text(text)],
            is_error: false,
            details: None,
        }
    }

    /// The message's kind.
    pub fn kind(&self) -> MessageKind {
        match self {
            Self::User { .. } => MessageKind::User,
            Self::Assistant { .. } => MessageKind::Assistant,
            Self::ToolResult { .. } => MessageKind::ToolResult,
            Self::Custom { .. } => MessageKind::Custom,
            Self::CompactionSummary { .. } => MessageKind::CompactionSummary,
            Self::BranchSummary { .. } => MessageKind::BranchSummary,
        }
    }

    /// The content blocks (empty for summaries).
    pub fn content(&self) -> &[ContentBlock] {
        match self {
            Self::User { content }
            | Self::Assistant { content, .. }
            | Self::ToolResult { content, .. }
            | Self::Custom { content, .. } => content,
            Self::CompactionSummary { .. } | Self::BranchSummary { .. } => &[],
        }
    }

    /// The ids of the tool calls an assistant message makes.
    pub fn tool_call_ids(&self) -> impl Iterator<Item = &str> {
        let blocks = match self {
            Self::Assistant { content, .. } => content.as_slice(),
            _ => &[],
        };
        blocks.iter().filter_map(|block| match block {
            ContentBlock::ToolCall { id, .. } => Some(id.as_str()),
            _ => None,
        })
    }
}

/// A message as stored in the session transcript.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MessageEntry {
    /// Transcript entry id.
    pub id: String,
    /// The entry it follows in the conversation tree.
    pub parent_id: Option<String>,
    /// Milliseconds since the Unix epoch.
    pub timestamp_ms: i64,
    /// The message.
    pub message: AgentMessage,
}

/// Which session a call is about.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct SessionRef {
    /// Session id (the transcript header's id).
    pub session_id: String,
    /// The host's routing key (host-added).
    pub session_key: Option<String>,
    /// Path of the session transcript.
    pub session_file: String,
}

impl SessionRef {
    /// A session with an id and a transcript path, no key.
    pub fn new(session_id: impl Into<String>, session_file: impl Into<String>) -> Self {
        Self {
            session_id: session_id.into(),
            session_key: None,
            session_file: session_file.into(),
        }
    }
}

/// Host-added parameters an engine may opt into.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum HostParam {
    /// `SessionRef::session_key`.
    SessionKey,
    /// `AssembleParams::prompt`.
    Prompt,
    /// `runtime_settings` of assemble, compact and after-turn.
    RuntimeSettings,
    /// `runtime_context` of compact, after-turn and maintain.
    RuntimeContext,
}

/// Whether `maintain(turn)` runs before or after the turn is answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum TurnMaintenanceMode {
    /// The turn waits for it.
    Foreground,
    /// It runs after the turn, unawaited.
    Background,
}

/// Who an engine is and what it takes on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EngineInfo {
    /// Stable id.
    pub id: String,
    /// Human-readable name.
    pub name: String,
    /// Version.
    pub version: Option<String>,
    /// Whether the engine decides when to compact.
    pub owns_compaction: bool,
    /// Host-added parameters wanted; `None` = all.
    pub accepted_host_params: Option<Vec<HostParam>>,
    /// When per-turn maintenance runs.
    pub turn_maintenance_mode: Option<TurnMaintenanceMode>,
}

impl EngineInfo {
    /// Whether the engine receives host parameter `param`.
    pub fn accepts(&self, param: HostParam) -> bool {
        self.accepted_host_params
            .as_ref()
            .is_none_or(|accepted| accepted.contains(&param))
    }
}

/// Answer of `bootstrap`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BootstrapResult {
    /// Whether the engine imported anything.
    pub bootstrapped: bool,
    /// How many messages it imported.
    pub imported_messages: Option<u32>,
    /// Why (not).
    pub reason: Option<String>,
}

/// Answer of `ingest`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct IngestResult {
    /// Whether the engine stored the message.
    pub ingested: bool,
}

/// Answer of `ingest-batch`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct IngestBatchResult {
    /// How many messages the engine stored.
    pub ingested_count: u32,
}

/// What `assemble` is told about the coming model call.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AssembleParams {
    /// Most tokens the prompt may take.
    pub token_budget: Option<u64>,
    /// Tools the model can call.
    pub available_tools: Vec<String>,
    /// Citations mode, if the host has one.
    pub citations_mode: Option<String>,
    /// Model id.
    pub model: Option<String>,
    /// The user's new prompt (host-added).
    pub prompt: Option<String>,
    /// Host-added runtime settings (JSON), which the engine reads with
    /// `host.runtime-settings`.
    pub runtime_settings: Option<Json>,
}

/// A piece of an assembled prompt.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum AssembledItem {
    /// History entries `start..end`, verbatim.
    Keep {
        /// First entry kept.
        start: u32,
        /// One past the last entry kept.
        end: u32,
    },
    /// A message the engine made up.
    Insert(AgentMessage),
}

/// How long an assembled context may be reused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ContextProjection {
    /// Assembled afresh every turn.
    PerTurn,
    /// Reused until the epoch changes.
    ThreadBootstrap {
        /// The projection's epoch.
        epoch: u64,
    },
}

/// Answer of `assemble`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AssembleResult {
    /// The prompt, in order.
    pub items: Vec<AssembledItem>,
    /// The engine's size estimate.
    pub estimated_tokens: u64,
    /// Text appended to the system prompt.
    pub system_prompt_addition: Option<String>,
    /// Reuse policy.
    pub context_projection: Option<ContextProjection>,
}

impl AssembleResult {
    /// An answer of `items` alone: no estimate, no system-prompt addition,
    /// no reuse policy.
    pub fn of_items(items: Vec<AssembledItem>) -> Self {
        Self {
            items,
            estimated_tokens: 0,
            system_prompt_addition: None,
            context_projection: None,
        }
    }
}

/// What compaction aims for.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum CompactionTarget {
    /// Until the rebuilt context fits the budget.
    Budget,
    /// Until it is under the trigger threshold.
    #[default]
    Threshold,
}

/// Parameters of a compaction.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CompactParams {
    /// The budget to fit.
    pub token_budget: Option<u64>,
    /// Compact even if not needed.
    pub force: bool,
    /// The prompt size the provider reported.
    pub current_token_count: Option<u64>,
    /// What to aim for.
    pub compaction_target: CompactionTarget,
    /// Extra instructions for the summarizer.
    pub custom_instructions: Option<String>,
    /// Host-added runtime settings (JSON).
    pub runtime_settings: Option<Json>,
    /// Host-added runtime context (JSON).
    pub runtime_context: Option<Json>,
}

impl CompactParams {
    /// The prompt size observed before this compaction: `current_token_count`,
    /// else a positive `currentTokenCount` in the runtime context (where the
    /// reference's hosts also put it), rounded down.
    pub fn observed_token_count(&self) -> Option<u64> {
        self.current_token_count.or_else(|| {
            let context: serde_json::Value =
                serde_json::from_str(self.runtime_context.as_deref()?).ok()?;
            let count = context.get("currentTokenCount")?.as_f64()?;
            (count.is_finite() && count >= 1.0).then(|| count.floor() as u64)
        })
    }
}

/// A transcript compaction rotated into.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RotatedSession {
    /// New session id.
    pub session_id: String,
    /// New transcript path.
    pub session_file: String,
}

/// Answer of `compact`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CompactResult {
    /// False when compaction failed.
    pub ok: bool,
    /// False when nothing was compacted.
    pub compacted: bool,
    /// Why (not).
    pub reason: Option<String>,
    /// The summary written.
    pub summary: Option<String>,
    /// The first entry kept after the summary.
    pub first_kept_entry_id: Option<String>,
    /// Tokens before.
    pub tokens_before: u64,
    /// Tokens after.
    pub tokens_after: Option<u64>,
    /// Where the transcript rotated to, if it did.
    pub rotated_session: Option<RotatedSession>,
    /// Engine-specific details (JSON).
    pub details: Option<Json>,
}

impl CompactResult {
    /// A failed compaction with a reason.
    pub fn failed(reason: impl Into<String>) -> Self {
        Self {
            ok: false,
            compacted: false,
            reason: Some(reason.into()),
            ..Self::default()
        }
    }
}

/// Why `maintain` runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum MaintainReason {
    /// After bootstrap.
    Bootstrap,
    /// After a turn.
    Turn,
    /// After a compaction.
    Compaction,
}

/// Answer of `maintain`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MaintainResult {
    /// Whether anything changed.
    pub changed: bool,
    /// How many transcript entries were rewritten.
    pub rewritten_entries: u32,
    /// Why (not).
    pub reason: Option<String>,
}

/// What `after-turn` is told.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AfterTurnParams {
    /// History entries before this turn's messages.
    pub pre_prompt_message_count: u32,
    /// The budget.
    pub token_budget: Option<u64>,
    /// Whether this was a keep-alive turn.
    pub is_heartbeat: bool,
    /// Host-added runtime context (JSON).
    pub runtime_context: Option<Json>,
    /// Host-added runtime settings (JSON), which the engine reads with
    /// `host.runtime-settings`.
    pub runtime_settings: Option<Json>,
}

/// Whether a subagent starts empty or from its parent's context.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ContextMode {
    /// Empty.
    Isolated,
    /// A copy of the parent's.
    Fork,
}

/// A subagent about to be spawned.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SubagentSpawn {
    /// Parent session key.
    pub parent_session_key: String,
    /// Child session key.
    pub child_session_key: String,
    /// How the child's context starts.
    pub context_mode: ContextMode,
    /// Time to live.
    pub ttl_ms: Option<u64>,
}

/// Why a subagent ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SubagentEndReason {
    /// Deleted.
    Deleted,
    /// Completed.
    Completed,
    /// Swept by TTL.
    Swept,
    /// Released.
    Released,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_observed_token_count_falls_back_to_the_runtime_context() {
        let with_context = |context: &str| CompactParams {
            runtime_context: Some(context.to_owned()),
            ..CompactParams::default()
        };
        assert_eq!(
            CompactParams {
                current_token_count: Some(7),
                ..with_context(r#"{"currentTokenCount": 9}"#)
            }
            .observed_token_count(),
            Some(7),
            "the parameter wins"
        );
        assert_eq!(
            with_context(r#"{"currentTokenCount": 9000.7}"#).observed_token_count(),
            Some(9_000)
        );
        for ignored in [
            r#"{"currentTokenCount": 0}"#,
            r#"{"currentTokenCount": -5}"#,
            r#"{"currentTokenCount": "many"}"#,
            "not json",
            "{}",
        ] {
            assert_eq!(
                with_context(ignored).observed_token_count(),
                None,
                "{ignored}"
            );
        }
    }
}
