//! The `openai-compatible` summarizer: one chat-completions request per
//! summary, to any server that speaks that API (OpenAI, vLLM, llama.cpp
//! server, Ollama). Each request is bounded by the time its caller has left;
//! failures are classified so callers can tell a bad key from a busy server.

use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::sections::clip;
use super::{SummarizeError, Summarizer, SummaryRequest};

/// The system prompt of every request.
const SYSTEM_PROMPT: &str = "You are a context summarization assistant. Read the material between \
<content> tags (usually a conversation between a user and an AI assistant) and produce exactly the \
summary the instructions ask for. Do NOT continue the conversation. Do NOT answer questions in it. \
Output only the summary.";

/// Longest provider message kept in an error.
const ERROR_MESSAGE_CHARS: usize = 500;
/// Largest response body read.
const MAX_RESPONSE_BYTES: u64 = 8 * 1024 * 1024;

/// Where and how to reach the provider
/// (`agents.defaults.compaction.summarizer` with `kind = "openai-compatible"`).
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

/// A chat-completions summarizer (cheap to clone).
#[derive(Debug, Clone)]
pub struct OpenAiCompatibleSummarizer {
    client: Arc<Client>,
}

#[derive(Debug)]
struct Client {
    agent: ureq::Agent,
    url: String,
    model: String,
    api_key: Option<String>,
}

impl OpenAiCompatibleSummarizer {
    /// A summarizer for `config`, reading the API key from its environment
    /// variable now.
    pub fn new(config: OpenAiCompatibleConfig) -> Result<Self, SummarizeError> {
        let api_key = match &config.api_key_env {
            None => None,
            Some(variable) => Some(std::env::var(variable).map_err(|_| {
                SummarizeError::Config(format!(
                    "the environment variable `{variable}` named by `apiKeyEnv` is not set"
                ))
            })?),
        };
        Self::with_api_key(config, api_key)
    }

    fn with_api_key(
        config: OpenAiCompatibleConfig,
        api_key: Option<String>,
    ) -> Result<Self, SummarizeError> {
        let base = config.base_url.trim_end_matches('/');
        if !(base.starts_with("http://") || base.starts_with("https://")) {
            return Err(SummarizeError::Config(format!(
                "`baseUrl` must be an http:// or https:// URL, not `{}`",
                config.base_url
            )));
        }
        if config.model.trim().is_empty() {
            return Err(SummarizeError::Config("`model` is empty".into()));
        }
        let agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .build()
            .into();
        Ok(Self {
            client: Arc::new(Client {
                agent,
                url: format!("{base}/chat/completions"),
                model: config.model,
                api_key,
            }),
        })
    }
}

impl Client {
    /// Sends one request and reads the completion (blocking).
    fn complete(&self, body: &Value, timeout: Duration) -> Result<String, SummarizeError> {
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
        completion_text(&text)
    }
}

#[async_trait]
impl Summarizer for OpenAiCompatibleSummarizer {
    fn id(&self) -> &str {
        "openai-compatible"
    }

    async fn summarize(&self, request: SummaryRequest) -> Result<String, SummarizeError> {
        let timeout = request.deadline.saturating_duration_since(Instant::now());
        if timeout.is_zero() {
            return Err(SummarizeError::Timeout);
        }
        let body = json!({
            "model": self.client.model,
            "messages": [
                {"role": "system", "content": SYSTEM_PROMPT},
                {"role": "user", "content": format!("<content>\n{}\n</content>\n\n{}", request.text, request.instructions)},
            ],
            "max_tokens": request.max_tokens,
            "temperature": 0.2,
        });
        let client = self.client.clone();
        let call = tokio::task::spawn_blocking(move || client.complete(&body, timeout));
        // The request's own timeout ends it; this bounds the wait for the
        // blocking thread as well.
        match tokio::time::timeout(timeout + Duration::from_millis(100), call).await {
            Err(_) => Err(SummarizeError::Timeout),
            Ok(Err(error)) => Err(SummarizeError::Internal(format!(
                "request thread failed: {error}"
            ))),
            Ok(Ok(result)) => result,
        }
    }
}

fn transport_error(error: ureq::Error) -> SummarizeError {
    match error {
        ureq::Error::Timeout(_) => SummarizeError::Timeout,
        other => SummarizeError::Transport(other.to_string()),
    }
}

/// The classified error of a non-2xx answer.
fn status_error(status: u16, body: &str) -> SummarizeError {
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
    let lower = message.to_lowercase();
    let overflow = [
        "context length",
        "context_length",
        "context window",
        "maximum context",
        "too many tokens",
        "too long",
    ]
    .iter()
    .any(|marker| lower.contains(marker));
    match status {
        401 | 403 => SummarizeError::Unauthorized { status, message },
        429 => SummarizeError::RateLimited { message },
        400 | 413 | 422 if overflow => SummarizeError::ContextOverflow { message },
        500..=599 => SummarizeError::Server { status, message },
        _ => SummarizeError::Rejected { status, message },
    }
}

/// `choices[0].message.content` of a chat completion.
fn completion_text(body: &str) -> Result<String, SummarizeError> {
    #[derive(Deserialize)]
    struct Completion {
        choices: Vec<Choice>,
    }
    #[derive(Deserialize)]
    struct Choice {
        message: Message,
    }
    #[derive(Deserialize)]
    struct Message {
        #[serde(default)]
        content: Option<String>,
    }
    let completion: Completion = serde_json::from_str(body).map_err(|error| {
        SummarizeError::InvalidResponse(format!("{error}: {}", clip(body.trim(), 200)))
    })?;
    completion
        .choices
        .into_iter()
        .next()
        .and_then(|choice| choice.message.content)
        .map(|content| content.trim().to_owned())
        .filter(|content| !content.is_empty())
        .ok_or_else(|| SummarizeError::InvalidResponse("the completion has no text".into()))
}

#[cfg(test)]
mod tests {
    use std::io::{BufRead, BufReader, Read, Write};
    use std::net::TcpListener;
    use std::sync::mpsc;

    use super::*;

    /// A one-request HTTP server on a loopback port: answers `status` and
    /// `body`, and hands back the request it got (head and body).
    fn serve_once(status: u16, body: &'static str) -> (String, mpsc::Receiver<(String, String)>) {
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

    fn request(max_tokens: u32) -> SummaryRequest {
        SummaryRequest {
            text: "[User]: hello".into(),
            instructions: "Summarize.".into(),
            max_tokens,
            deadline: Instant::now() + Duration::from_secs(10),
        }
    }

    fn summarizer(base_url: String, api_key: Option<&str>) -> OpenAiCompatibleSummarizer {
        let config = OpenAiCompatibleConfig {
            base_url,
            model: "tiny".into(),
            api_key_env: None,
        };
        OpenAiCompatibleSummarizer::with_api_key(config, api_key.map(str::to_owned))
            .expect("valid config")
    }

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .expect("runtime")
    }

    #[test]
    fn sends_a_chat_completion_and_reads_the_answer() {
        let (url, requests) = serve_once(
            200,
            r#"{"choices":[{"message":{"role":"assistant","content":" - ok\n"}}]}"#,
        );
        let summary = runtime()
            .block_on(summarizer(url, Some("sk-test")).summarize(request(77)))
            .expect("summary");
        assert_eq!(summary, "- ok", "trimmed");
        let (head, body) = requests.recv().expect("the server got a request");
        assert!(head.starts_with("POST /v1/chat/completions"), "{head}");
        assert!(
            head.to_lowercase()
                .contains("authorization: bearer sk-test"),
            "{head}"
        );
        let body: Value = serde_json::from_str(&body).expect("JSON body");
        assert_eq!(body["model"], "tiny");
        assert_eq!(body["max_tokens"], 77);
        assert!(
            body["messages"][1]["content"]
                .as_str()
                .is_some_and(|c| c.contains("[User]: hello"))
        );
    }

    #[test]
    fn classifies_provider_errors() {
        type Expected = fn(&SummarizeError) -> bool;
        let cases: [(u16, &'static str, Expected); 5] = [
            (401, r#"{"error":{"message":"bad key"}}"#, |e| {
                matches!(e, SummarizeError::Unauthorized { status: 401, .. })
            }),
            (429, r#"{"error":{"message":"slow down"}}"#, |e| {
                matches!(e, SummarizeError::RateLimited { .. })
            }),
            (
                400,
                r#"{"error":{"message":"This model's maximum context length is 8192 tokens"}}"#,
                |e| matches!(e, SummarizeError::ContextOverflow { .. }),
            ),
            (
                503,
                "overloaded",
                |e| matches!(e, SummarizeError::Server { status: 503, message } if message == "overloaded"),
            ),
            (200, r#"{"choices":[]}"#, |e| {
                matches!(e, SummarizeError::InvalidResponse(_))
            }),
        ];
        for (status, body, expected) in cases {
            let (url, _requests) = serve_once(status, body);
            let error = runtime()
                .block_on(summarizer(url, None).summarize(request(10)))
                .expect_err("an error");
            assert!(expected(&error), "{status}: {error:?}");
        }
    }

    #[test]
    fn reports_unreachable_providers_and_spent_budgets() {
        let closed = TcpListener::bind("127.0.0.1:0").expect("bind");
        let url = format!("http://{}/v1", closed.local_addr().expect("address"));
        drop(closed);
        let error = runtime()
            .block_on(summarizer(url.clone(), None).summarize(request(10)))
            .expect_err("nobody listens");
        assert!(matches!(error, SummarizeError::Transport(_)), "{error:?}");

        let mut late = request(10);
        late.deadline = Instant::now();
        let error = runtime()
            .block_on(summarizer(url, None).summarize(late))
            .expect_err("no time left");
        assert_eq!(error, SummarizeError::Timeout);
    }

    #[test]
    fn refuses_bad_configuration() {
        let config = |base_url: &str, key: Option<&str>| OpenAiCompatibleConfig {
            base_url: base_url.into(),
            model: "m".into(),
            api_key_env: key.map(str::to_owned),
        };
        assert!(matches!(
            OpenAiCompatibleSummarizer::new(config("ftp://x", None)),
            Err(SummarizeError::Config(_))
        ));
        let error = OpenAiCompatibleSummarizer::new(config(
            "https://x",
            Some("CTXBOX_SURELY_UNSET_VARIABLE"),
        ))
        .expect_err("missing key");
        assert!(error.to_string().contains("CTXBOX_SURELY_UNSET_VARIABLE"));
    }
}
