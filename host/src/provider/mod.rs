//! The model side of a turn (ARCHITECTURE.md §8): a [`Provider`] answers a prompt with
//! an assistant message, and a [`ToolExecutor`] runs the tools that message
//! calls. [`Replay`] replays a recorded conversation (the CLI's main job);
//! [`OpenAiCompatibleProvider`] talks to a chat-completions API through the
//! [`chat`] client (which the `openai-compatible` summarizer shares). Which
//! one a host uses is `[provider]` in `ctxbox.toml` ([`ProviderConfig`]).
//! [`ScriptedProvider`] and [`FixedToolResults`] answer from memory, for
//! tests and examples.

pub mod chat;
pub mod completion;
mod openai;
pub mod overflow;
mod recorded;
mod replay;
mod scripted;

use std::sync::Arc;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

pub use self::openai::{DEFAULT_CALL_TIMEOUT, OpenAiCompatibleProvider};
pub use self::recorded::{is_model_answer, runs_its_tool_calls};
pub use self::replay::{Replay, ReplayScript, ScriptTurn};
pub use self::scripted::{FixedToolResults, ScriptedProvider};
use crate::contract::tokens;
use crate::contract::types::{AgentMessage, Usage};
use crate::provider::chat::ChatError;
pub use crate::provider::chat::OpenAiCompatibleConfig;

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
    /// What those tools take, for the providers that tell the model
    /// ([`ToolExecutor::definitions`]; empty when the host has no schemas).
    pub tool_definitions: &'a [ToolDefinition],
}

/// A tool as a model is told of it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolDefinition {
    /// The name calls use.
    pub name: String,
    /// What it does, for the model.
    pub description: String,
    /// Its arguments, as a JSON Schema object.
    pub parameters: serde_json::Value,
}

/// The prompt's size by the host's estimate: what the replaying provider
/// counts, and what a provider reports when its API does not say.
pub fn prompt_tokens(request: &ModelRequest<'_>) -> u64 {
    tokens::estimate_text(request.system_prompt)
        + request
            .messages
            .iter()
            .map(tokens::estimate_message)
            .sum::<u64>()
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
    /// A chat-completions API failed: bad credentials, rate limiting, a
    /// server error, no answer in time, an answer that is no completion.
    #[error(transparent)]
    Api(ChatError),
    /// Anything else (network, API, bad response).
    #[error("{0}")]
    Failed(String),
}

impl ProviderError {
    /// Whether the model did not answer in time (the runner may compact a
    /// nearly full prompt and ask again).
    pub fn is_timeout(&self) -> bool {
        matches!(self, Self::Api(ChatError::Timeout))
    }
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

    /// Messages that arrived while the turn ran and go into the transcript
    /// before the next model call, or at the turn's end: what a replay's
    /// recording holds between answers besides the results of the calls it
    /// ran (extension messages, OpenClaw's copies of delivered messages,
    /// results of calls never run). Live models answer none.
    fn arrived(&self) -> Vec<AgentMessage> {
        Vec::new()
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

    /// The tools' definitions, sent to models that take them. Default: none
    /// (the model is not told of any tool; a replay needs none).
    fn definitions(&self) -> Vec<ToolDefinition> {
        Vec::new()
    }
}

/// Which model answers turns: `[provider]` in `ctxbox.toml`.
///
/// ```toml
/// [provider]
/// kind = "openai-compatible"
/// baseUrl = "http://localhost:11434/v1"
/// model = "qwen3:8b"
/// apiKeyEnv = "OPENAI_API_KEY"   # optional: local servers need no key
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case", deny_unknown_fields)]
pub enum ProviderConfig {
    /// Recorded conversations answer ([`Replay`], what `ctxbox run` does):
    /// there is no live model.
    #[default]
    Replay,
    /// A chat-completions API ([`OpenAiCompatibleProvider`]).
    OpenaiCompatible(OpenAiCompatibleConfig),
}

impl ProviderConfig {
    /// Checks the configuration without the network or the environment.
    pub fn validate(&self) -> Result<(), ChatError> {
        match self {
            Self::Replay => Ok(()),
            Self::OpenaiCompatible(config) => config.validate("provider."),
        }
    }

    /// Where engines' completions come from with this provider: the
    /// chat-completions API when one is configured (a model that cannot be
    /// reached, e.g. its key variable unset, answers `unavailable` with the
    /// reason); `None` for `replay`, which has no live model.
    pub fn completions(&self) -> Option<Arc<dyn completion::ModelCompletions>> {
        match self {
            Self::Replay => None,
            Self::OpenaiCompatible(config) => {
                Some(match completion::ChatCompletions::new(config.clone()) {
                    Ok(completions) => Arc::new(completions),
                    Err(error) => Arc::new(completion::NoModel(format!("provider: {error}"))),
                })
            }
        }
    }

    /// The live model configured, for a `window`-token context (the
    /// fallback when an overflow error does not state the model's window);
    /// `None` for `replay`, which answers only from a recording. Reads the
    /// API key from its environment variable now.
    pub fn build(&self, window: u64) -> Result<Option<Arc<dyn Provider>>, ChatError> {
        Ok(match self {
            Self::Replay => None,
            Self::OpenaiCompatible(config) => Some(Arc::new(OpenAiCompatibleProvider::new(
                config.clone(),
                window,
            )?)),
        })
    }
}

/// The result of a tool call that could not be run, so the call is never left
/// without one.
pub fn unavailable_tool_result(call_id: &str, tool_name: &str, why: &str) -> AgentMessage {
    AgentMessage::ToolResult {
        tool_call_id: call_id.to_owned(),
        tool_name: tool_name.to_owned(),
        content: vec![crate::contract::types::ContentBlock::text(format!(
            "Tool `{tool_name}` unavailable: {why}"
        ))],
        is_error: true,
        details: None,
    }
}
