//! The model side of a turn (DESIGN §8): a [`Provider`] answers a prompt with
//! an assistant message, and a [`ToolExecutor`] runs the tools that message
//! calls. `replay` replays a recorded conversation (the CLI's main job);
//! `openai` talks to a chat-completions API.

mod replay;

use async_trait::async_trait;
use tokio_util::sync::CancellationToken;

pub use self::replay::{Replay, ReplayScript, ScriptTurn, prompt_tokens};
use crate::types::{AgentMessage, Usage};

/// What a model is asked.
#[derive(Debug, Clone, Copy)]
pub struct ModelRequest<'a> {
    /// The system prompt (the host's plus the engine's addition).
    pub system_prompt: &'a str,
    /// The conversation as the engine assembled it.
    pub messages: &'a [AgentMessage],
    /// The model to ask, if the host names one.
    pub model: Option<&'a str>,
    /// Tools the model may call.
    pub tools: &'a [String],
}

/// A model's answer.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelReply {
    /// The assistant message (text, thinking, tool calls).
    pub message: AgentMessage,
    /// What the provider reported the request cost.
    pub usage: Option<Usage>,
}

/// Why a model call failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProviderError {
    /// The prompt is larger than the model's window: the turn runner's
    /// overflow recovery compacts and tries again.
    #[error("context overflow: the prompt has {prompt_tokens} tokens, the window {window}")]
    ContextOverflow {
        /// The prompt's size as the provider counted it.
        prompt_tokens: u64,
        /// The model's window.
        window: u64,
    },
    /// The caller gave up.
    #[error("the model call was aborted")]
    Aborted,
    /// A scripted provider has nothing left to say.
    #[error("the recording has no further answer")]
    Exhausted,
    /// Anything else (network, API, bad response).
    #[error("{0}")]
    Failed(String),
}

/// A language model behind an API.
#[async_trait]
pub trait Provider: Send + Sync {
    /// Answers `request`.
    async fn complete(
        &self,
        request: ModelRequest<'_>,
        abort: &CancellationToken,
    ) -> Result<ModelReply, ProviderError>;

    /// Whether the provider has more of the current turn to give without a
    /// new user message. Only scripted providers do (a recorded turn may hold
    /// several assistant messages in a row); live models answer `false`.
    fn continues_turn(&self) -> bool {
        false
    }
}

/// Runs the tools an assistant message calls.
#[async_trait]
pub trait ToolExecutor: Send + Sync {
    /// One `tool-result` message for every tool call in `assistant`, in
    /// order.
    async fn execute(
        &self,
        assistant: &AgentMessage,
        abort: &CancellationToken,
    ) -> Vec<AgentMessage>;
}

/// The result of a tool call that could not be run, so the call is never left
/// without one.
pub fn unavailable_tool_result(call_id: &str, tool_name: &str, why: &str) -> AgentMessage {
    AgentMessage::ToolResult {
        tool_call_id: call_id.to_owned(),
        tool_name: tool_name.to_owned(),
        content: vec![crate::types::ContentBlock::text(format!(
            "Tool `{tool_name}` unavailable: {why}"
        ))],
        is_error: true,
        details: None,
    }
}
