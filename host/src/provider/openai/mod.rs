//! The `openai-compatible` provider: each model call is one chat-completions
//! request (OpenAI, vLLM, llama.cpp server, Ollama, …) through the
//! [`ChatClient`] the `openai-compatible` summarizer uses too.
//!
//! * **Request** ([`request`]): the system prompt, then the conversation —
//!   user and extension messages as `user`, assistant text with its
//!   `tool_calls`, tool results as `tool` messages answering their call's id,
//!   compaction and branch summaries as `user` messages that say what they
//!   are. Thinking is not sent. Images in user and extension messages go as
//!   `image_url` parts with `data:` URLs; chat completions take images
//!   nowhere else, so one in an assistant message or a tool result becomes a
//!   short text placeholder naming its type. The tools go along when the
//!   host's [`ToolExecutor`](super::ToolExecutor) defines them.
//! * **Answer** ([`answer`]): text, reasoning (as thinking), tool calls, the
//!   usage (into the assistant message's `usage` too) and the finish reason
//!   as the stop reason.
//! * **Errors**: a context overflow becomes
//!   [`ProviderError::ContextOverflow`] with the prompt's tokens and the
//!   window as the API states them ([`overflow`]), else the host's estimate
//!   of the request and the configured window, so the runner's recovery
//!   compacts; anything else is [`ProviderError::Api`], classified.
//! * **Abort**: the call returns [`ProviderError::Aborted`] as soon as the
//!   caller's token is cancelled. The HTTP client cannot cancel a request in
//!   flight; its thread ends at the request's own deadline, unread.

mod answer;
mod request;

use std::time::{Duration, Instant};

use async_trait::async_trait;
use tokio_util::sync::CancellationToken;

use super::{ModelReply, ModelRequest, Provider, ProviderError, overflow, prompt_tokens};
use crate::provider::chat::{ChatClient, ChatError, OpenAiCompatibleConfig};

/// How long one model call may take unless set otherwise: long answers from
/// slow local models take minutes.
pub const DEFAULT_CALL_TIMEOUT: Duration = Duration::from_secs(600);

/// The provider id answers are stamped with.
const PROVIDER_ID: &str = "openai-compatible";

/// A model behind a chat-completions API (cheap to clone).
#[derive(Debug, Clone)]
pub struct OpenAiCompatibleProvider {
    client: ChatClient,
    window: u64,
    timeout: Duration,
}

impl OpenAiCompatibleProvider {
    /// A provider for `config`, reading the API key from its environment
    /// variable now. `window` is the model's context in tokens, reported when
    /// an overflow error does not state it.
    pub fn new(config: OpenAiCompatibleConfig, window: u64) -> Result<Self, ChatError> {
        Ok(Self::with_client(ChatClient::new(config)?, window))
    }

    /// A provider over `client`.
    pub fn with_client(client: ChatClient, window: u64) -> Self {
        Self {
            client,
            window,
            timeout: DEFAULT_CALL_TIMEOUT,
        }
    }

    /// The same provider with calls bounded by `timeout`.
    pub fn with_timeout(self, timeout: Duration) -> Self {
        Self { timeout, ..self }
    }
}

#[async_trait]
impl Provider for OpenAiCompatibleProvider {
    async fn complete(
        &self,
        request: ModelRequest<'_>,
        abort: &CancellationToken,
    ) -> Result<ModelReply, ProviderError> {
        if abort.is_cancelled() {
            return Err(ProviderError::Aborted);
        }
        let model = request.model.unwrap_or(self.client.model());
        let body = request::body(&request, model);
        let deadline = Instant::now() + self.timeout;
        let completion = tokio::select! {
            biased;
            () = abort.cancelled() => return Err(ProviderError::Aborted),
            completion = self.client.complete(body, deadline) => completion,
        };
        match completion {
            Ok(completion) => answer::reply(&completion, model).map_err(ProviderError::Api),
            Err(ChatError::ContextOverflow { message }) => {
                let stated = overflow::stated(&message);
                Err(ProviderError::ContextOverflow {
                    prompt_tokens: stated
                        .prompt_tokens
                        .unwrap_or_else(|| prompt_tokens(&request)),
                    window: stated.window.unwrap_or(self.window),
                })
            }
            Err(error) => Err(ProviderError::Api(error)),
        }
    }
}
