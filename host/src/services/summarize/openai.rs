//! The `openai-compatible` summarizer: one chat-completions request per
//! summary, to any server that speaks that API (OpenAI, vLLM, llama.cpp
//! server, Ollama). Each request is bounded by the time its caller has left;
//! failures are classified so callers can tell a bad key from a busy server.

use async_trait::async_trait;
use serde_json::{Value, json};

use super::{SummarizeError, Summarizer, SummaryRequest};
pub use crate::provider::chat::OpenAiCompatibleConfig;
use crate::provider::chat::{ChatClient, ChatError};

/// The system prompt of every request.
const SYSTEM_PROMPT: &str = "You are a context summarization assistant. Read the material between \
<content> tags (usually a conversation between a user and an AI assistant) and produce exactly the \
summary the instructions ask for. Do NOT continue the conversation. Do NOT answer questions in it. \
Output only the summary.";

/// A chat-completions summarizer (cheap to clone).
#[derive(Debug, Clone)]
pub struct OpenAiCompatibleSummarizer {
    client: ChatClient,
}

impl OpenAiCompatibleSummarizer {
    /// A summarizer for `config`, reading the API key from its environment
    /// variable now.
    pub fn new(config: OpenAiCompatibleConfig) -> Result<Self, SummarizeError> {
        Ok(Self {
            client: ChatClient::new(config)?,
        })
    }

    #[cfg(test)]
    fn with_api_key(
        config: OpenAiCompatibleConfig,
        api_key: Option<String>,
    ) -> Result<Self, SummarizeError> {
        Ok(Self {
            client: ChatClient::with_api_key(config, api_key)?,
        })
    }
}

#[async_trait]
impl Summarizer for OpenAiCompatibleSummarizer {
    fn id(&self) -> &str {
        "openai-compatible"
    }

    async fn summarize(&self, request: SummaryRequest) -> Result<String, SummarizeError> {
        let body = json!({
            "model": self.client.model(),
            "messages": [
                {"role": "system", "content": SYSTEM_PROMPT},
                {"role": "user", "content": format!("<content>\n{}\n</content>\n\n{}", request.text, request.instructions)},
            ],
            "max_tokens": request.max_tokens,
            "temperature": 0.2,
        });
        let completion = self.client.complete(body, request.deadline).await?;
        completion_text(&completion)
    }
}

/// `choices[0].message.content` of a chat completion.
fn completion_text(completion: &Value) -> Result<String, SummarizeError> {
    completion
        .pointer("/choices/0/message/content")
        .and_then(Value::as_str)
        .map(|content| content.trim().to_owned())
        .filter(|content| !content.is_empty())
        .ok_or_else(|| ChatError::InvalidResponse("the completion has no text".into()).into())
}

#[cfg(test)]
mod tests {
    use std::net::TcpListener;
    use std::time::{Duration, Instant};

    use super::*;
    use crate::provider::chat::tests::serve_once;

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
                matches!(
                    e,
                    SummarizeError::Api(ChatError::Unauthorized { status: 401, .. })
                )
            }),
            (429, r#"{"error":{"message":"slow down"}}"#, |e| {
                matches!(e, SummarizeError::Api(ChatError::RateLimited { .. }))
            }),
            (
                400,
                r#"{"error":{"message":"This model's maximum context length is 8192 tokens"}}"#,
                |e| matches!(e, SummarizeError::Api(ChatError::ContextOverflow { .. })),
            ),
            (
                503,
                "overloaded",
                |e| matches!(e, SummarizeError::Api(ChatError::Server { status: 503, message }) if message == "overloaded"),
            ),
            (200, r#"{"choices":[]}"#, |e| {
                matches!(e, SummarizeError::Api(ChatError::InvalidResponse(_)))
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
        assert!(
            matches!(error, SummarizeError::Api(ChatError::Transport(_))),
            "{error:?}"
        );

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
