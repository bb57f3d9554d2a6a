//! The contract's data types, re-exported from the generated bindings, with
//! constructors and accessors that keep engine code short.

use crate::__private::bindings::ctxbox::engine::{history, host, types};
use crate::__private::bindings::exports::ctxbox::engine::{engine, tools};

pub use engine::{
    AfterTurnParams, AssembleParams, AssembleResult, AssembledItem, BootstrapResult, ContextMode,
    ContextProjection, EngineInfo, IngestBatchResult, IngestResult, KeepRange, MaintainReason,
    MaintainResult, SubagentEndReason, SubagentSpawn, TurnMaintenanceMode,
};
pub use history::ToolPairing;
pub use host::{
    BoundedTranscriptPage, Completion, CompletionMessage, CompletionRequest, CompletionRole,
    HostError, HostErrorKind, IndexDocument, IndexHit, IndexPage, IndexQuery, IndexScope, LogLevel,
    StateEntry, TranscriptDelta, TranscriptPage, TranscriptRead, TranscriptReset,
};
pub use tools::ToolDefinition;
pub use types::{
    AgentMessage, AssistantMessage, BranchSummary, CompactParams, CompactResult, CompactionSummary,
    CompactionTarget, ContentBlock, CustomMessage, EngineError, EngineErrorKind, HostParam, Image,
    MessageEntry, MessageKind, RotatedSession, SessionRef, StopReason, Thinking, ToolCall,
    ToolResultMessage, Usage, UserMessage,
};

impl ToolDefinition {
    /// A tool the model may call: its name (1–64 of `a-z A-Z 0-9 _ -`),
    /// what it does, and its arguments as a JSON Schema object.
    pub fn new(
        name: impl Into<String>,
        description: impl Into<String>,
        parameters_json: impl Into<String>,
    ) -> Self {
        Self {
            name: name.into(),
            description: description.into(),
            parameters: parameters_json.into(),
        }
    }
}

impl CompletionRequest {
    /// A request of one user message `text`, answered in at most
    /// `max_tokens` tokens.
    pub fn prompt(text: impl Into<String>, max_tokens: u32) -> Self {
        Self {
            messages: vec![CompletionMessage {
                role: CompletionRole::User,
                text: text.into(),
            }],
            system: None,
            max_tokens,
            purpose: None,
        }
    }

    /// Sets the system instructions.
    pub fn with_system(mut self, system: impl Into<String>) -> Self {
        self.system = Some(system.into());
        self
    }

    /// Says what the completion is for (the host's log and audit).
    pub fn with_purpose(mut self, purpose: impl Into<String>) -> Self {
        self.purpose = Some(purpose.into());
        self
    }
}

impl EngineInfo {
    /// Info with an id and a name, compaction left to the host, all host
    /// parameters accepted, and no version.
    ///
    /// ```
    /// use ctxbox_guest::EngineInfo;
    ///
    /// let info = EngineInfo::new("summaries", "Summaries")
    ///     .with_version("0.3.0")
    ///     .owning_compaction();
    /// assert_eq!(info.version.as_deref(), Some("0.3.0"));
    /// assert!(info.owns_compaction);
    /// assert!(info.accepted_host_params.is_none()); // no declaration: all
    /// ```
    pub fn new(id: impl Into<String>, name: impl Into<String>) -> Self {
        Self {
            id: id.into(),
            name: name.into(),
            version: None,
            owns_compaction: false,
            accepted_host_params: None,
            turn_maintenance_mode: None,
        }
    }

    /// Sets the version.
    pub fn with_version(mut self, version: impl Into<String>) -> Self {
        self.version = Some(version.into());
        self
    }

    /// Declares that the engine decides when to compact.
    pub fn owning_compaction(mut self) -> Self {
        self.owns_compaction = true;
        self
    }
}

impl AssembleResult {
    /// A prompt made of history entries `range`, estimated at `estimated_tokens`.
    ///
    /// Add items of your own to `items` (in prompt order) and a
    /// `system_prompt_addition` as needed:
    ///
    /// ```
    /// use ctxbox_guest::testing::{MemoryHistory, conversation};
    /// use ctxbox_guest::{AgentMessage, AssembleResult, AssembledItem, HistoryView};
    ///
    /// let history = MemoryHistory::new(conversation(3));
    /// let mut answer = AssembleResult::keep_range(8..12, history.tokens(8..12));
    /// answer.items.insert(0, AssembledItem::Insert(AgentMessage::note("summary", "Turns 1-2: …")));
    /// answer.system_prompt_addition = Some("Older turns are summarized.".into());
    ///
    /// let prompt = answer.materialize(&history);
    /// assert_eq!(prompt.len(), 5);
    /// assert_eq!(prompt[0].text(), "Turns 1-2: …");
    /// ```
    pub fn keep_range(range: std::ops::Range<u32>, estimated_tokens: u64) -> Self {
        Self {
            items: vec![AssembledItem::keep(range)],
            estimated_tokens,
            system_prompt_addition: None,
            context_projection: None,
        }
    }

    /// The whole of `history`, as it is, estimated at its tokens: what an
    /// engine that leaves the window to the host answers.
    ///
    /// ```
    /// use ctxbox_guest::testing::{MemoryHistory, conversation};
    /// use ctxbox_guest::{AgentMessage, AssembleResult, HistoryView};
    ///
    /// let history = MemoryHistory::new(conversation(2));
    /// let answer = AssembleResult::keep_all(&history)
    ///     .with_appended(AgentMessage::note("probe", "count=2"));
    /// assert_eq!(answer.estimated_tokens, history.tokens(0..history.len()));
    ///
    /// let prompt = answer.materialize(&history);
    /// assert_eq!(prompt.len(), history.len() as usize + 1);
    /// assert_eq!(prompt.last().map(|message| message.text()), Some("count=2".to_owned()));
    /// ```
    pub fn keep_all(history: &impl crate::HistoryView) -> Self {
        let all = 0..history.len();
        Self::keep_range(all.clone(), history.tokens(all))
    }

    /// This prompt with `message` inserted after everything in it (its
    /// tokens are not added to `estimated_tokens`).
    pub fn with_appended(mut self, message: AgentMessage) -> Self {
        self.items.push(AssembledItem::Insert(message));
        self
    }
}

impl AssembledItem {
    /// Keeps history entries `range` verbatim.
    pub fn keep(range: std::ops::Range<u32>) -> Self {
        Self::Keep(KeepRange {
            start: range.start,
            end: range.end,
        })
    }
}

impl ToolCall {
    /// A call of tool `name` with `arguments_json` (a JSON object), under the
    /// session-unique `id`.
    pub fn new(
        id: impl Into<String>,
        name: impl Into<String>,
        arguments_json: impl Into<String>,
    ) -> Self {
        Self {
            id: id.into(),
            name: name.into(),
            arguments_json: arguments_json.into(),
        }
    }
}

impl EngineError {
    /// An error of `kind` with `message`. Any error quarantines the engine
    /// (the host's `legacy` engine answers instead), so return one only for a
    /// real failure.
    ///
    /// ```
    /// use ctxbox_guest::{EngineError, EngineErrorKind};
    ///
    /// let error = EngineError::new(EngineErrorKind::InvalidInput, "no such session");
    /// assert_eq!(error.kind, EngineErrorKind::InvalidInput);
    /// assert_eq!(EngineError::internal("index corrupt").kind, EngineErrorKind::Internal);
    /// ```
    pub fn new(kind: EngineErrorKind, message: impl Into<String>) -> Self {
        Self {
            kind,
            message: message.into(),
        }
    }

    /// An internal error.
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(EngineErrorKind::Internal, message)
    }
}

impl From<HostError> for EngineError {
    fn from(error: HostError) -> Self {
        Self::new(
            EngineErrorKind::HostFailure,
            format!("host {}: {}", host_error_kind(error.kind), error.message),
        )
    }
}

/// A host error's kind as the contract spells it (`quota-exceeded`).
pub fn host_error_kind(kind: HostErrorKind) -> &'static str {
    match kind {
        HostErrorKind::Unavailable => "unavailable",
        HostErrorKind::InvalidArgument => "invalid-argument",
        HostErrorKind::QuotaExceeded => "quota-exceeded",
        HostErrorKind::Aborted => "aborted",
        HostErrorKind::Failed => "failed",
    }
}

/// Messages for tests and for inserted prompt items:
///
/// ```
/// use ctxbox_guest::{AgentMessage, MessageKind, ToolCall};
///
/// let call = AgentMessage::tool_use([ToolCall::new("c1", "read", r#"{"path":"a.rs"}"#)]);
/// let result = AgentMessage::tool_result("c1", "read", "fn main() {}");
/// assert_eq!(call.tool_calls().count(), 1);
/// assert_eq!(result.kind(), MessageKind::ToolResult);
/// assert_eq!(AgentMessage::user_text("hi").text(), "hi");
/// ```
impl AgentMessage {
    /// A user message with one text block.
    pub fn user_text(text: impl Into<String>) -> Self {
        Self::User(UserMessage {
            content: vec![ContentBlock::Text(text.into())],
        })
    }

    /// An assistant message with one text block that ended normally.
    pub fn assistant_text(text: impl Into<String>) -> Self {
        Self::Assistant(AssistantMessage {
            content: vec![ContentBlock::Text(text.into())],
            model: None,
            provider: None,
            usage: None,
            stop_reason: StopReason::Stop,
            error_message: None,
        })
    }

    /// An assistant message making `calls` (stopped for tool use).
    pub fn tool_use(calls: impl IntoIterator<Item = ToolCall>) -> Self {
        Self::Assistant(AssistantMessage {
            content: calls.into_iter().map(ContentBlock::ToolCall).collect(),
            model: None,
            provider: None,
            usage: None,
            stop_reason: StopReason::ToolUse,
            error_message: None,
        })
    }

    /// A successful tool result answering call `tool_call_id` with one text
    /// block.
    pub fn tool_result(
        tool_call_id: impl Into<String>,
        tool_name: impl Into<String>,
        text: impl Into<String>,
    ) -> Self {
        Self::ToolResult(ToolResultMessage {
            tool_call_id: tool_call_id.into(),
            tool_name: tool_name.into(),
            content: vec![ContentBlock::Text(text.into())],
            is_error: false,
            details: None,
        })
    }

    /// A custom (extension) message with one text block, hidden from UIs.
    pub fn note(custom_type: impl Into<String>, text: impl Into<String>) -> Self {
        Self::Custom(CustomMessage {
            custom_type: custom_type.into(),
            content: vec![ContentBlock::Text(text.into())],
            display: false,
            details: None,
        })
    }

    /// The message's kind.
    pub fn kind(&self) -> MessageKind {
        match self {
            Self::User(_) => MessageKind::User,
            Self::Assistant(_) => MessageKind::Assistant,
            Self::ToolResult(_) => MessageKind::ToolResult,
            Self::Custom(_) => MessageKind::Custom,
            Self::CompactionSummary(_) => MessageKind::CompactionSummary,
            Self::BranchSummary(_) => MessageKind::BranchSummary,
        }
    }

    /// The message's text blocks (and summaries) joined by newlines; thinking,
    /// images and tool-call arguments are left out.
    pub fn text(&self) -> String {
        let blocks = match self {
            Self::User(m) => &m.content,
            Self::Assistant(m) => &m.content,
            Self::ToolResult(m) => &m.content,
            Self::Custom(m) => &m.content,
            Self::CompactionSummary(m) => return m.summary.clone(),
            Self::BranchSummary(m) => return m.summary.clone(),
        };
        let texts: Vec<&str> = blocks
            .iter()
            .filter_map(|block| match block {
                ContentBlock::Text(text) => Some(text.as_str()),
                _ => None,
            })
            .collect();
        texts.join("\n")
    }

    /// The tool calls an assistant message makes (none for other kinds).
    pub fn tool_calls(&self) -> impl Iterator<Item = &ToolCall> {
        let blocks: &[ContentBlock] = match self {
            Self::Assistant(m) => &m.content,
            _ => &[],
        };
        blocks.iter().filter_map(|block| match block {
            ContentBlock::ToolCall(call) => Some(call),
            _ => None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn message_constructors_build_what_they_say() {
        let answer = AgentMessage::assistant_text("done");
        assert_eq!(answer.kind(), MessageKind::Assistant);
        assert_eq!(answer.text(), "done");
        assert!(
            matches!(answer, AgentMessage::Assistant(ref m) if m.stop_reason == StopReason::Stop)
        );

        let calls = AgentMessage::tool_use([
            ToolCall::new("c1", "read", "{}"),
            ToolCall::new("c2", "grep", r#"{"q":"x"}"#),
        ]);
        let ids: Vec<&str> = calls.tool_calls().map(|call| call.id.as_str()).collect();
        assert_eq!(ids, ["c1", "c2"]);
        assert!(
            matches!(calls, AgentMessage::Assistant(ref m) if m.stop_reason == StopReason::ToolUse)
        );

        let result = AgentMessage::tool_result("c1", "read", "contents");
        assert_eq!(result.text(), "contents");
        assert!(matches!(result, AgentMessage::ToolResult(ref m)
            if m.tool_call_id == "c1" && m.tool_name == "read" && !m.is_error));
    }
}
