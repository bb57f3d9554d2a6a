//! Model completions engines ask for (`host.complete`): [`ModelCompletions`]
//! is where the answer comes from — the agent's own model in an embedding
//! host (`ctxbox serve` asks its client), a chat-completions API
//! ([`ChatCompletions`]), or an offline stand-in — and the budgets around it
//! are the services layer's (`services::completions`).

use std::time::Instant;

use async_trait::async_trait;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::contract::completion::{Completion, CompletionRequest};
use crate::contract::tokens;
use crate::contract::types::SessionRef;
use crate::provider::chat::{ChatClient, ChatError, OpenAiCompatibleConfig};

/// What a completion is asked for, besides the request itself.
#[derive(Debug, Clone, Copy)]
pub struct CompletionContext<'a> {
    /// The engine asking (its registered id).
    pub engine_id: &'a str,
    /// The session of the engine call, if any.
    pub session: Option<&'a SessionRef>,
    /// The embedding host's id for the request the engine call serves.
    pub request_id: Option<&'a str>,
    /// When the answer is no longer of use.
    pub deadline: Instant,
    /// Cancelled when the engine call's caller gives up.
    pub abort: &'a CancellationToken,
}

/// Why a completion could not be had.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CompletionError {
    /// There is no model to ask.
    #[error("no model is available: {0}")]
    Unavailable(String),
    /// The deadline passed or the caller gave up.
    #[error("the model did not answer in time: {0}")]
    Aborted(String),
    /// The model failed.
    #[error("the model failed: {0}")]
    Failed(String),
}

/// Where completions come from.
#[async_trait]
pub trait ModelCompletions: Send + Sync + std::fmt::Debug {
    /// A short name for logs (`openai-compatible`, `openclaw`, …).
    fn id(&self) -> &str;

    /// Answers `request` by `context.deadline`.
    async fn complete(
        &self,
        context: CompletionContext<'_>,
        request: &CompletionRequest,
    ) -> Result<Completion, CompletionError>;
}

/// No model: every request is `Unavailable`, saying why.
#[derive(Debug, Clone)]
pub struct NoModel(pub String);

#[async_trait]
impl ModelCompletions for NoModel {
    fn id(&self) -> &str {
        "none"
    }

    async fn complete(
        &self,
        _context: CompletionContext<'_>,
        _request: &CompletionRequest,
    ) -> Result<Completion, CompletionError> {
        Err(CompletionError::Unavailable(self.0.clone()))
    }
}

/// Completions from a chat-completions API (`[provider] kind =
/// "openai-compatible"`).
#[derive(Debug, Clone)]
pub struct ChatCompletions {
    client: ChatClient,
}

impl ChatCompletions {
    /// Completions from the API `config` names (the key read from its
    /// environment variable now).
    pub fn new(config: OpenAiCompatibleConfig) -> Result<Self, ChatError> {
        Ok(Self {
            client: ChatClient::new(config)?,
        })
    }

    /// Completions through `client`.
    pub fn with_client(client: ChatClient) -> Self {
        Self { client }
    }
}

#[async_trait]
impl ModelCompletions for ChatCompletions {
    fn id(&self) -> &str {
        "openai-compatible"
    }

    async fn complete(
        &self,
        context: CompletionContext<'_>,
        request: &CompletionRequest,
    ) -> Result<Completion, CompletionError> {
        let mut messages: Vec<Value> = Vec::with_capacity(request.messages.len() + 1);
        if let Some(system) = &request.system {
            messages.push(json!({"role": "system", "content": system}));
        }
        messages.extend(
            request
                .messages
                .iter()
                .map(|message| json!({"role": message.role.as_str(), "content": message.text})),
        );
        let body = json!({
            "model": self.client.model(),
            "messages": messages,
            "max_tokens": request.max_tokens,
        });
        let answer = tokio::select! {
            biased;
            () = context.abort.cancelled() => {
                return Err(CompletionError::Aborted("the caller cancelled the call".into()));
            }
            answer = self.client.complete(body, context.deadline) => answer,
        };
        let answer = answer.map_err(|error| match error {
            ChatError::Timeout => CompletionError::Aborted(error.to_string()),
            other => CompletionError::Failed(other.to_string()),
        })?;
        chat_completion(&answer, request)
    }
}

/// The completion in a chat API's answer: its text, and the usage it
/// reports (estimated when it reports none).
fn chat_completion(
    answer: &Value,
    request: &CompletionRequest,
) -> Result<Completion, CompletionError> {
    let text = answer
        .pointer("/choices/0/message/content")
        .and_then(Value::as_str)
        .map(str::trim)
        .filter(|text| !text.is_empty())
        .ok_or_else(|| CompletionError::Failed("the completion has no text".into()))?
        .to_owned();
    let reported = |key: &str| {
        answer
            .pointer(&format!("/usage/{key}"))
            .and_then(Value::as_u64)
    };
    Ok(Completion {
        input_tokens: reported("prompt_tokens")
            .unwrap_or_else(|| tokens::estimate_text(&request.text())),
        output_tokens: reported("completion_tokens")
            .unwrap_or_else(|| tokens::estimate_text(&text)),
        model: answer
            .get("model")
            .and_then(Value::as_str)
            .map(str::to_owned),
        text,
    })
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::contract::completion::{CompletionMessage, CompletionRole};
    use crate::provider::chat::tests::serve_once;

    fn context(abort: &CancellationToken) -> CompletionContext<'_> {
        CompletionContext {
            engine_id: "e",
            session: None,
            request_id: None,
            deadline: Instant::now() + Duration::from_secs(10),
            abort,
        }
    }

    #[tokio::test]
    async fn asks_the_chat_api_with_the_system_prompt_and_reads_its_usage() {
        let (url, requests) = serve_once(
            200,
            r#"{"model":"tiny-2","choices":[{"message":{"content":" summary "}}],"usage":{"prompt_tokens":40,"completion_tokens":3}}"#,
        );
        let completions = ChatCompletions::with_client(
            ChatClient::with_api_key(
                OpenAiCompatibleConfig {
                    base_url: url,
                    model: "tiny".into(),
                    api_key_env: None,
                },
                None,
            )
            .expect("client"),
        );
        let request = CompletionRequest {
            messages: vec![
                CompletionMessage {
                    role: CompletionRole::User,
                    text: "hello".into(),
                },
                CompletionMessage {
                    role: CompletionRole::Assistant,
                    text: "hi".into(),
                },
            ],
            system: Some("be brief".into()),
            max_tokens: 50,
            purpose: Some("test".into()),
        };
        let abort = CancellationToken::new();
        let completion = completions
            .complete(context(&abort), &request)
            .await
            .expect("answered");
        assert_eq!(completion.text, "summary");
        assert_eq!((completion.input_tokens, completion.output_tokens), (40, 3));
        assert_eq!(completion.model.as_deref(), Some("tiny-2"));
        let (_, body) = requests.recv().expect("a request");
        let body: Value = serde_json::from_str(&body).expect("JSON");
        assert_eq!(body["messages"][0]["role"], "system");
        assert_eq!(body["messages"][2]["role"], "assistant");
        assert_eq!(body["max_tokens"], 50);
    }

    #[tokio::test]
    async fn no_model_says_why() {
        let abort = CancellationToken::new();
        let error = NoModel("the client offers no model".into())
            .complete(context(&abort), &CompletionRequest::prompt("x", 1))
            .await
            .expect_err("unavailable");
        assert!(error.to_string().contains("the client offers no model"));
    }
}
