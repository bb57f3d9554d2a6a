//! The `openai-compatible` provider against a chat-completions server on a
//! loopback port: the requests a turn sends (messages, tools, tool calls and
//! their results), the answers read back (text, tool calls, usage), a context
//! overflow taking the runner's recovery path, error classification, abort,
//! and building the provider from `[provider]`.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::mpsc;
use std::time::Duration;

use async_trait::async_trait;
use ctxbox_host::contract::types::{AgentMessage, ContentBlock, StopReason, Usage};
use ctxbox_host::provider::chat::{ChatClient, ChatError, OpenAiCompatibleConfig};
use ctxbox_host::provider::{
    ModelRequest, OpenAiCompatibleProvider, Provider, ProviderConfig, ProviderError,
    ToolDefinition, ToolExecutor, prompt_tokens,
};
use ctxbox_host::runner::{Session, TurnError};
use ctxbox_host::runtime::config::Config;
use ctxbox_host::runtime::{Runtime, RuntimeError};
use ctxbox_host::transcript::NewSession;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

/// A chat-completions server answering one connection after another with
/// the next of its answers, handing each request's JSON body to the test.
struct Server {
    url: String,
    requests: mpsc::Receiver<Value>,
}

impl Server {
    fn answering(answers: Vec<(u16, String)>) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind loopback");
        let url = format!("http://{}/v1", listener.local_addr().expect("address"));
        let (sender, requests) = mpsc::channel();
        std::thread::spawn(move || {
            for (status, body) in answers {
                let Ok((stream, _)) = listener.accept() else {
                    return;
                };
                let (request, mut stream) = read_request(stream);
                let _ = sender.send(request);
                let _ = write!(
                    stream,
                    "HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
            }
        });
        Self { url, requests }
    }

    /// The next request the server got.
    fn request(&self) -> Value {
        self.requests
            .recv_timeout(Duration::from_secs(30))
            .expect("the server got a request")
    }
}

/// Reads one request; answers its JSON body and the stream to reply on.
fn read_request(stream: TcpStream) -> (Value, TcpStream) {
    let mut reader = BufReader::new(stream);
    let mut length = 0usize;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
            break;
        }
        if let Some(value) = line.to_lowercase().strip_prefix("content-length:") {
            length = value.trim().parse().unwrap_or(0);
        }
    }
    let mut body = vec![0; length];
    let _ = reader.read_exact(&mut body);
    let request = serde_json::from_slice(&body).unwrap_or(Value::Null);
    (request, reader.into_inner())
}

fn completion(message: Value, finish_reason: &str, usage: Value) -> (u16, String) {
    let body = json!({
        "model": "tiny-1",
        "choices": [{"index": 0, "message": message, "finish_reason": finish_reason}],
        "usage": usage,
    });
    (200, body.to_string())
}

fn config(url: &str) -> OpenAiCompatibleConfig {
    OpenAiCompatibleConfig {
        base_url: url.to_owned(),
        model: "tiny".into(),
        api_key_env: None,
    }
}

fn provider(url: &str) -> OpenAiCompatibleProvider {
    OpenAiCompatibleProvider::new(config(url), 8_192).expect("valid config")
}

/// One `exec` tool that answers every call with a file list.
struct Exec;

#[async_trait]
impl ToolExecutor for Exec {
    async fn execute(&self, assistant: &AgentMessage, _: &CancellationToken) -> Vec<AgentMessage> {
        assistant
            .tool_call_ids()
            .map(|id| AgentMessage::tool_result(id, "exec", "a.rs\nb.rs"))
            .collect()
    }

    fn definitions(&self) -> Vec<ToolDefinition> {
        vec![ToolDefinition {
            name: "exec".into(),
            description: "Runs a shell command.".into(),
            parameters: json!({"type": "object", "properties": {"cmd": {"type": "string"}}}),
        }]
    }
}

/// A host configured with `[provider]` pointing at `url`, and a fresh
/// session in it.
struct Host {
    _dir: tempfile::TempDir,
    runtime: Runtime,
    session: Option<Session>,
}

fn host(url: &str) -> Host {
    let dir = tempfile::tempdir().expect("temp dir");
    let runtime = Runtime::new(Config {
        data_dir: Some(dir.path().to_owned()),
        provider: ProviderConfig::OpenaiCompatible(config(url)),
        ..Config::default()
    })
    .expect("runtime");
    let transcript = runtime
        .transcripts()
        .create(
            &dir.path().join("live.jsonl"),
            NewSession {
                session_id: None,
                cwd: "/work".into(),
                parent_session: None,
            },
        )
        .expect("session");
    Host {
        _dir: dir,
        runtime,
        session: Some(Session::new(transcript, None)),
    }
}

impl Host {
    async fn turn(
        &mut self,
        text: &str,
        window: u64,
    ) -> Result<ctxbox_host::runner::TurnReport, TurnError> {
        let provider = self
            .runtime
            .provider()
            .expect("the provider builds")
            .expect("a live provider is configured");
        let engine = self.runtime.select(Some("legacy")).await;
        let runner = self.runtime.runner(
            engine,
            provider,
            Arc::new(Exec),
            window,
            vec!["exec".into()],
        );
        let session = self.session.as_mut().expect("session");
        runner
            .run_turn(
                session,
                vec![AgentMessage::user_text(text)],
                &CancellationToken::new(),
            )
            .await
    }

    fn messages(&self) -> Vec<AgentMessage> {
        let session = self.session.as_ref().expect("session");
        session
            .transcript()
            .active_branch()
            .into_iter()
            .map(|entry| entry.message)
            .collect()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turn_with_a_tool_call_is_sent_and_read_back() {
    let server = Server::answering(vec![
        completion(
            json!({"role": "assistant", "content": null, "tool_calls": [{
                "id": "call_1", "type": "function",
                "function": {"name": "exec", "arguments": "{\"cmd\":\"ls\"}"},
            }]}),
            "tool_calls",
            json!({"prompt_tokens": 40, "completion_tokens": 10, "total_tokens": 50}),
        ),
        completion(
            json!({"role": "assistant", "content": "Two files: a.rs and b.rs."}),
            "stop",
            json!({"prompt_tokens": 70, "completion_tokens": 9, "total_tokens": 79}),
        ),
    ]);
    let mut host = host(&server.url);
    let report = host.turn("list the files", 32_768).await.expect("turn");
    assert_eq!(report.model_calls, 2);

    let first = server.request();
    assert_eq!(first["model"], "tiny");
    assert_eq!(first["messages"][0]["role"], "system");
    assert_eq!(
        first["messages"][1],
        json!({"role": "user", "content": "list the files"})
    );
    assert_eq!(first["tools"][0]["function"]["name"], "exec");
    assert_eq!(
        first["tools"][0]["function"]["parameters"]["type"],
        "object"
    );

    let second = server.request();
    let messages = second["messages"].as_array().expect("messages");
    assert_eq!(messages.len(), 4, "{messages:?}");
    assert_eq!(
        messages[2],
        json!({"role": "assistant", "content": null, "tool_calls": [{
            "id": "call_1", "type": "function",
            "function": {"name": "exec", "arguments": "{\"cmd\":\"ls\"}"},
        }]})
    );
    assert_eq!(
        messages[3],
        json!({"role": "tool", "tool_call_id": "call_1", "content": "a.rs\nb.rs"})
    );

    let transcript = host.messages();
    assert_eq!(transcript.len(), 4, "user, call, result, answer");
    let AgentMessage::Assistant {
        content,
        model,
        usage,
        stop_reason,
        ..
    } = &transcript[3]
    else {
        panic!("the answer: {:?}", transcript[3]);
    };
    assert_eq!(
        content,
        &vec![ContentBlock::text("Two files: a.rs and b.rs.")]
    );
    assert_eq!(model.as_deref(), Some("tiny-1"));
    assert_eq!(*stop_reason, StopReason::Stop);
    assert_eq!(
        *usage,
        Some(Usage {
            input: 70,
            output: 9,
            cache_read: 0,
            cache_write: 0,
            total: 79
        })
    );
    assert!(matches!(
        &transcript[1],
        AgentMessage::Assistant {
            stop_reason: StopReason::ToolUse,
            ..
        }
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_overflow_is_compacted_and_the_prompt_sent_again() {
    let overflow = json!({"error": {
        "message": "This model's maximum context length is 8192 tokens. However, your messages resulted in 30000 tokens. Please reduce the length of the messages.",
        "type": "invalid_request_error",
        "code": "context_length_exceeded",
    }});
    let server = Server::answering(vec![
        (400, overflow.to_string()),
        completion(
            json!({"role": "assistant", "content": "Done."}),
            "stop",
            json!({"prompt_tokens": 9000, "completion_tokens": 2, "total_tokens": 9002}),
        ),
    ]);
    let mut host = host(&server.url);
    // A long conversation before this turn: ~30k tokens, which forced
    // compaction can cut (it keeps the newest 20k).
    {
        let session = host.session.as_ref().expect("session");
        let mut earlier = Vec::new();
        for turn in 0..30 {
            earlier.push(AgentMessage::user_text(format!(
                "question {turn}: {}",
                "words ".repeat(650)
            )));
            earlier.push(AgentMessage::assistant_text(format!("answer {turn}")));
        }
        session.transcript().append(&earlier).expect("history");
    }
    // The host's window is large enough that the pre-prompt check lets the
    // prompt through: the server's refusal is what triggers recovery.
    let report = host.turn("and now?", 128_000).await.expect("recovers");
    assert_eq!(report.overflow_retries, 1);
    assert_eq!(report.compactions, 1);

    let refused = server.request();
    let retried = server.request();
    let refused_messages = refused["messages"].as_array().expect("messages").len();
    let retried_messages = retried["messages"].as_array().expect("messages");
    assert!(
        retried_messages.len() < refused_messages,
        "{} then {}",
        refused_messages,
        retried_messages.len()
    );
    assert!(
        retried_messages[1]["content"]
            .as_str()
            .is_some_and(|text| text.contains("<summary>")),
        "the compaction summary leads the retried prompt: {:?}",
        retried_messages[1]
    );
    assert_eq!(
        retried_messages
            .last()
            .map(|message| message["content"].clone()),
        Some(json!("and now?"))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn overflow_errors_carry_the_stated_or_the_estimated_token_count() {
    let messages = [AgentMessage::user_text("hello there")];
    let request = ModelRequest {
        system_prompt: "be brief",
        messages: &messages,
        model: None,
        tools: &[],
        tool_definitions: &[],
    };
    let abort = CancellationToken::new();

    let stated = json!({"error": {"message":
        "This model's maximum context length is 4096 tokens. However, your messages resulted in 9000 tokens."}});
    let server = Server::answering(vec![(400, stated.to_string())]);
    let error = provider(&server.url)
        .complete(request, &abort)
        .await
        .expect_err("overflow");
    assert_eq!(
        error,
        ProviderError::ContextOverflow {
            prompt_tokens: 9_000,
            window: 4_096
        }
    );

    let unstated = json!({"error": {"message": "the request exceeds the available context size, try increasing it"}});
    let server = Server::answering(vec![(400, unstated.to_string())]);
    let error = provider(&server.url)
        .complete(request, &abort)
        .await
        .expect_err("overflow");
    assert_eq!(
        error,
        ProviderError::ContextOverflow {
            prompt_tokens: prompt_tokens(&request),
            window: 8_192
        },
        "the host's estimate and the configured window"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn other_failures_are_classified() {
    let messages = [AgentMessage::user_text("hi")];
    let request = ModelRequest {
        system_prompt: "",
        messages: &messages,
        model: Some("other-model"),
        tools: &[],
        tool_definitions: &[],
    };
    type Expected = fn(&ProviderError) -> bool;
    let cases: [(u16, &str, Expected); 5] = [
        (401, r#"{"error":{"message":"bad key"}}"#, |error| {
            matches!(
                error,
                ProviderError::Api(ChatError::Unauthorized { status: 401, .. })
            )
        }),
        (429, r#"{"error":{"message":"slow down"}}"#, |error| {
            matches!(error, ProviderError::Api(ChatError::RateLimited { .. }))
        }),
        (503, "overloaded", |error| {
            matches!(
                error,
                ProviderError::Api(ChatError::Server { status: 503, .. })
            )
        }),
        (404, r#"{"error":{"message":"no such model"}}"#, |error| {
            matches!(
                error,
                ProviderError::Api(ChatError::Rejected { status: 404, .. })
            )
        }),
        (200, r#"{"choices":[]}"#, |error| {
            matches!(error, ProviderError::Api(ChatError::InvalidResponse(_)))
        }),
    ];
    for (status, body, expected) in cases {
        let server = Server::answering(vec![(status, body.to_owned())]);
        let error = provider(&server.url)
            .complete(request, &CancellationToken::new())
            .await
            .expect_err("a failure");
        assert!(expected(&error), "{status}: {error:?}");
        assert_eq!(
            server.request()["model"],
            "other-model",
            "the request's model wins"
        );
    }

    let closed = TcpListener::bind("127.0.0.1:0").expect("bind");
    let url = format!("http://{}/v1", closed.local_addr().expect("address"));
    drop(closed);
    let error = provider(&url)
        .complete(request, &CancellationToken::new())
        .await
        .expect_err("nobody listens");
    assert!(
        matches!(error, ProviderError::Api(ChatError::Transport(_))),
        "{error:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_abort_ends_the_call_while_the_server_is_silent() {
    // A server that reads the request and never answers.
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind loopback");
    let url = format!("http://{}/v1", listener.local_addr().expect("address"));
    let (received, got_request) = mpsc::channel();
    std::thread::spawn(move || {
        if let Ok((stream, _)) = listener.accept() {
            let (_, stream) = read_request(stream);
            let _ = received.send(());
            std::thread::sleep(Duration::from_secs(300));
            drop(stream);
        }
    });
    let abort = CancellationToken::new();
    let cancel = abort.clone();
    tokio::task::spawn_blocking(move || {
        if got_request.recv_timeout(Duration::from_secs(30)).is_ok() {
            cancel.cancel();
        }
    });
    let messages = [AgentMessage::user_text("hi")];
    let request = ModelRequest {
        system_prompt: "",
        messages: &messages,
        model: None,
        tools: &[],
        tool_definitions: &[],
    };
    // Without the abort this call would wait for its 120 s timeout and fail
    // with `Timeout`.
    let error = provider(&url)
        .with_timeout(Duration::from_secs(120))
        .complete(request, &abort)
        .await
        .expect_err("aborted");
    assert_eq!(error, ProviderError::Aborted);

    let error = provider(&url)
        .complete(request, &abort)
        .await
        .expect_err("already aborted");
    assert_eq!(error, ProviderError::Aborted, "no request once aborted");
}

#[test]
fn the_runtime_builds_the_configured_provider() {
    let dir = tempfile::tempdir().expect("temp dir");
    let runtime = Runtime::new(Config {
        data_dir: Some(dir.path().to_owned()),
        ..Config::default()
    })
    .expect("runtime");
    assert!(
        runtime.provider().expect("replay").is_none(),
        "replay has no live model"
    );

    let runtime = Runtime::new(Config {
        data_dir: Some(dir.path().to_owned()),
        provider: ProviderConfig::OpenaiCompatible(OpenAiCompatibleConfig {
            api_key_env: Some("CTXBOX_SURELY_UNSET_KEY".into()),
            ..config("http://127.0.0.1:9/v1")
        }),
        ..Config::default()
    })
    .expect("the key is read only when the provider is built");
    let Err(error) = runtime.provider() else {
        panic!("the key variable is not set");
    };
    assert!(
        matches!(error, RuntimeError::Provider(ChatError::Config(_))),
        "{error:?}"
    );
    let message = error.to_string();
    assert!(message.starts_with("provider: "), "{message}");
    assert!(message.contains("CTXBOX_SURELY_UNSET_KEY"), "{message}");

    // A client given its key directly.
    let client = ChatClient::with_api_key(config("http://127.0.0.1:9/v1"), Some("sk".into()))
        .expect("client");
    let _provider: Arc<dyn Provider> =
        Arc::new(OpenAiCompatibleProvider::with_client(client, 8_192));
}
