//! A client for chat-completions APIs (OpenAI, vLLM, llama.cpp server,
//! Ollama): what the `openai-compatible` summarizer and provider share. One
//! request at a time, bounded by the caller's deadline, with failures
//! classified so callers can tell a bad key from a busy server or an
//! overlong prompt.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::contract::text::clip;

/// Longest provider message kept in an error.
const ERROR_MESSAGE_CHARS: usize = 500;
/// Largest response body read.
const MAX_RESPONSE_BYTES: u64 = 8 * 1024 * 1024;

/// Where and how to reach the API.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct OpenAiCompatibleConfig {
    /// The API's base URL, e.g. `https://api.openai.com/v1` or
    /// `http://localhost:11434/v1`; `/chat/completions` is appended.
    pub base_url: String,
    /// The model to ask.
    pub model: String,
    /// The environment variable holding the API key (none for local servers
    /// that need no key).
    #[serde(default)]
    pub api_key_env: Option<String>,
}

impl OpenAiCompatibleConfig {
    /// Checks what can be checked without the network or the environment:
    /// `baseUrl` is an http(s) URL and `model` is not empty. Messages name
    /// the keys under `section` (e.g. `provider.`).
    pub fn validate(&self, section: &str) -> Result<(), ChatError> {
        let base = self.base_url.trim_end_matches('/');
        if !(base.starts_with("http://") || base.starts_with("https://")) {
            return Err(ChatError::Config(format!(
                "`{section}baseUrl` must be an http:// or https:// URL, not `{}`",
                self.base_url
            )));
        }
        if self.model.trim().is_empty() {
            return Err(ChatError::Config(format!("`{section}model` is empty")));
        }
        Ok(())
    }
}

/// Why a chat-completions request failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ChatError {
    /// The client is misconfigured (names the key).
    #[error("chat API configuration: {0}")]
    Config(String),
    /// The deadline passed.
    #[error("the chat API did not answer in time")]
    Timeout,
    /// The provider refused the credentials (401/403).
    #[error("the provider refused the credentials ({status}): {message}")]
    Unauthorized {
        /// HTTP status.
        status: u16,
        /// The provider's message.
        message: String,
    },
    /// The provider is rate limiting (429).
    #[error("the provider is rate limiting: {message}")]
    RateLimited {
        /// The provider's message.
        message: String,
    },
    /// The prompt is longer than the model's context.
    #[error("the prompt exceeds the model's context: {message}")]
    ContextOverflow {
        /// The provider's message.
        message: String,
    },
    /// The provider failed (5xx).
    #[error("the provider failed ({status}): {message}")]
    Server {
        /// HTTP status.
        status: u16,
        /// The provider's message.
        message: String,
    },
    /// The provider rejected the request (other 4xx).
    #[error("the provider rejected the request ({status}): {message}")]
    Rejected {
        /// HTTP status.
        status: u16,
        /// The provider's message.
        message: String,
    },
    /// The provider could not be reached.
    #[error("cannot reach the provider: {0}")]
    Transport(String),
    /// The provider answered something that is not a chat completion.
    #[error("the provider's answer is not a chat completion: {0}")]
    InvalidResponse(String),
}

/// A chat-completions client (cheap to clone).
#[derive(Debug, Clone)]
pub struct ChatClient {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    agent: ureq::Agent,
    url: String,
    model: String,
    api_key: Option<String>,
}

impl ChatClient {
    /// A client for `config`, reading the API key from its environment
    /// variable now.
    pub fn new(config: OpenAiCompatibleConfig) -> Result<Self, ChatError> {
        let api_key = match &config.api_key_env {
            None => None,
            Some(variable) => Some(std::env::var(variable).map_err(|_| {
                ChatError::Config(format!(
                    "the environment variable `{variable}` named by `apiKeyEnv` is not set"
                ))
            })?),
        };
        Self::with_api_key(config, api_key)
    }

    /// A client for `config` with `api_key` given directly.
    pub fn with_api_key(
        config: OpenAiCompatibleConfig,
        api_key: Option<String>,
    ) -> Result<Self, ChatError> {
        config.validate("")?;
        let base = config.base_url.trim_end_matches('/');
        let agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .build()
            .into();
        Ok(Self {
            inner: Arc::new(Inner {
                agent,
                url: format!("{base}/chat/completions"),
                model: config.model,
                api_key,
            }),
        })
    }

    /// The model requests name.
    pub fn model(&self) -> &str {
        &self.inner.model
    }

    /// Sends `body` and answers the completion's JSON, by `deadline`.
    ///
    /// The (blocking) request runs on a thread of its own rather than
    /// tokio's blocking pool: a caller that stops waiting — dropping this
    /// future, as an aborted model call does — leaves it to end at its
    /// deadline, unread, without holding up the runtime's shutdown.
    pub async fn complete(&self, body: Value, deadline: Instant) -> Result<Value, ChatError> {
        let timeout = deadline.saturating_duration_since(Instant::now());
        if timeout.is_zero() {
            return Err(ChatError::Timeout);
        }
        let inner = self.inner.clone();
        let (sender, answer) = tokio::sync::oneshot::channel();
        std::thread::Builder::new()
            .name("ctxbox-chat-api".into())
            .spawn(move || {
                let _ = sender.send(inner.send(&body, timeout));
            })
            .map_err(|error| {
                ChatError::Transport(format!("cannot start the request thread: {error}"))
            })?;
        // The request's own timeout ends it; this bounds the wait for the
        // thread as well.
        match tokio::time::timeout(timeout + Duration::from_millis(100), answer).await {
            Err(_) => Err(ChatError::Timeout),
            Ok(Err(_)) => Err(ChatError::Transport(
                "the request thread ended without an answer".into(),
            )),
            Ok(Ok(result)) => result,
        }
    }
}

impl Inner {
    /// Sends one request and parses the answer (blocking).
    fn send(&self, body: &Value, timeout: Duration) -> Result<Value, ChatError> {
        let mut request = self
            .agent
            .post(&self.url)
            .config()
            .timeout_global(Some(timeout))
            .build()
            .header("Content-Type", "application/json");
        if let Some(key) = &self.api_key {
            request = request.header("Authorization", &format!("Bearer {key}"));
        }
        let mut response = request.send(body.to_string()).map_err(transport_error)?;
        let status = response.status().as_u16();
        let text = response
            .body_mut()
            .with_config()
            .limit(MAX_RESPONSE_BYTES)
            .read_to_string()
            .map_err(transport_error)?;
        if !(200..300).contains(&status) {
            return Err(status_error(status, &text));
        }
        serde_json::from_str(&text).map_err(|error| {
            ChatError::InvalidResponse(format!("{error}: {}", clip(text.trim(), 200)))
        })
    }
}

fn transport_error(error: ureq::Error) -> ChatError {
    match error {
        ureq::Error::Timeout(_) => ChatError::Timeout,
        other => ChatError::Transport(other.to_string()),
    }
}

/// The classified error of a non-2xx answer.
fn status_error(status: u16, body: &str) -> ChatError {
    let message = serde_json::from_str::<Value>(body)
        .ok()
        .and_then(|value| {
            value
                .pointer("/error/message")
                .or_else(|| value.get("error"))
                .or_else(|| value.get("message"))
                .and_then(Value::as_str)
                .map(str::to_owned)
        })
        .unwrap_or_else(|| body.trim().to_owned());
    let message = clip(&message, ERROR_MESSAGE_CHARS);
    // A compaction's own overflow is not the model's (`overflow`).
    let overflow = super::overflow::is_context_overflow(&message);
    match status {
        401 | 403 => ChatError::Unauthorized { status, message },
        429 => ChatError::RateLimited { message },
        400 | 413 | 422 if overflow => ChatError::ContextOverflow { message },
        500..=599 => ChatError::Server { status, message },
        _ => ChatError::Rejected { status, message },
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use std::io::{BufRead, BufReader, Read, Write};
    use std::net::TcpListener;
    use std::sync::mpsc;

    #[test]
    fn overflow_answers_of_common_servers_are_recognised() {
        let bodies = [
            // OpenAI
            r#"{"error":{"message":"This model's maximum context length is 8192 tokens. However, your messages resulted in 9000 tokens.","type":"invalid_request_error","code":"context_length_exceeded"}}"#,
            // vLLM
            r#"{"object":"error","message":"This model's maximum context length is 4096 tokens. However, you requested 5000 tokens (4000 in the messages, 1000 in the completion).","code":400}"#,
            // llama.cpp server
            r#"{"error":{"code":400,"message":"request (9000 tokens) exceeds the available context size (8192 tokens), try increasing it","type":"exceed_context_size_error"}}"#,
            // Anthropic's compatibility endpoint
            r#"{"error":{"type":"invalid_request_error","message":"prompt is too long: 210000 tokens > 200000 maximum"}}"#,
        ];
        for body in bodies {
            assert!(
                matches!(
                    super::status_error(400, body),
                    super::ChatError::ContextOverflow { .. }
                ),
                "{body}"
            );
        }
        assert!(matches!(
            super::status_error(400, r#"{"error":{"message":"unknown model"}}"#),
            super::ChatError::Rejected { status: 400, .. }
        ));
    }

    /// A one-request HTTP server on a loopback port: answers `status` and
    /// `body`, and hands back the request it got (head and body).
    pub(crate) fn serve_once(
        status: u16,
        body: &'static str,
    ) -> (String, mpsc::Receiver<(String, String)>) {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind loopback");
        let address = listener.local_addr().expect("address");
        let (sender, receiver) = mpsc::channel();
        std::thread::spawn(move || {
            let Ok((stream, _)) = listener.accept() else {
                return;
            };
            let mut reader = BufReader::new(stream);
            let mut head = String::new();
            let mut length = 0usize;
            loop {
                let mut line = String::new();
                if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                    break;
                }
                if let Some(value) = line.to_lowercase().strip_prefix("content-length:") {
                    length = value.trim().parse().unwrap_or(0);
                }
                head.push_str(&line);
            }
            let mut request_body = vec![0; length];
            let _ = reader.read_exact(&mut request_body);
            let _ = sender.send((head, String::from_utf8_lossy(&request_body).into_owned()));
            let mut stream = reader.into_inner();
            let _ = write!(
                stream,
                "HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
        });
        (format!("http://{address}/v1"), receiver)
    }
}
