//! `ctxbox serve`'s protocol, driven in-process over an in-memory pipe: the
//! handshake, bad requests, assembling with a bundled engine from synced
//! history, idempotent commits that survive a restart, a hanging and a
//! panicking engine answered by `legacy` within the deadline, and
//! cancellation.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ctxbox_host::runtime::Runtime;
use ctxbox_host::runtime::config::{Config, ServeConfig};
use ctxbox_host::sandbox::SandboxConfig;
use ctxbox_host::serve::{Service, serve};
use ctxbox_tests::guests;
use serde_json::{Value, json};
use tokio::io::{
    AsyncBufReadExt, AsyncWriteExt, BufReader, DuplexStream, Lines, ReadHalf, WriteHalf,
};
use tokio::task::JoinHandle;

/// A client connected to a server running in this process (the bounds and
/// metrics tests drive it too).
pub(crate) struct Client {
    writer: WriteHalf<DuplexStream>,
    pub(crate) lines: Lines<BufReader<ReadHalf<DuplexStream>>>,
    /// Answers read while waiting for another one.
    pub(crate) early: Vec<Value>,
    next_id: u64,
    server: JoinHandle<std::io::Result<()>>,
    /// The server's state.
    pub(super) service: Arc<Service>,
}

impl Client {
    pub(crate) fn start(data_dir: &Path, call_timeout_ms: u64, engine: Option<&str>) -> Self {
        Self::with_config(
            Config {
                data_dir: Some(data_dir.to_owned()),
                sandbox: SandboxConfig {
                    call_timeout_ms,
                    max_instances: 8,
                    ..SandboxConfig::default()
                },
                ..Config::default()
            },
            engine,
            1 << 20,
        )
    }

    /// A server on `config` serving `engine` by default, over a pipe that
    /// buffers `pipe_bytes` each way.
    pub(crate) fn with_config(config: Config, engine: Option<&str>, pipe_bytes: usize) -> Self {
        let runtime = Runtime::new(config).expect("host");
        let service = Arc::new(Service::new(runtime, engine.map(str::to_owned)).expect("service"));
        Self::connect(service, pipe_bytes)
    }

    /// Another connection (another client) to the server of `service`.
    pub(crate) fn connect(service: Arc<Service>, pipe_bytes: usize) -> Self {
        let (client, server) = tokio::io::duplex(pipe_bytes);
        let (server_read, server_write) = tokio::io::split(server);
        let server = tokio::spawn(serve(
            service.clone(),
            BufReader::new(server_read),
            server_write,
        ));
        let (read, writer) = tokio::io::split(client);
        Self {
            writer,
            lines: BufReader::new(read).lines(),
            early: Vec::new(),
            next_id: 1,
            server,
            service,
        }
    }

    pub(crate) async fn greeted(
        data_dir: &Path,
        call_timeout_ms: u64,
        engine: Option<&str>,
    ) -> Self {
        let mut client = Self::start(data_dir, call_timeout_ms, engine);
        let hello = client.call("hello", json!({"protocol": 1})).await;
        assert_eq!(hello["result"]["protocol"], 1, "{hello}");
        client
    }

    pub(crate) async fn send_line(&mut self, line: &str) {
        self.writer.write_all(line.as_bytes()).await.expect("write");
        self.writer.write_all(b"\n").await.expect("write");
    }

    /// Sends a request; returns its id.
    pub(crate) async fn send(&mut self, method: &str, params: Value) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        let line = json!({"id": id, "method": method, "params": params}).to_string();
        self.send_line(&line).await;
        id
    }

    /// The answer to request `id` (the whole response object).
    pub(crate) async fn answer(&mut self, id: u64) -> Value {
        if let Some(index) = self.early.iter().position(|a| a["id"] == json!(id)) {
            return self.early.remove(index);
        }
        loop {
            let line = tokio::time::timeout(Duration::from_secs(60), self.lines.next_line())
                .await
                .expect("an answer within a minute")
                .expect("read")
                .expect("the server is still answering");
            let answer: Value = serde_json::from_str(&line).expect("every answer is JSON");
            if answer["id"] == json!(id) {
                return answer;
            }
            self.early.push(answer);
        }
    }

    pub(crate) async fn next_answer(&mut self) -> Value {
        let line = self.lines.next_line().await.expect("read").expect("a line");
        serde_json::from_str(&line).expect("JSON")
    }

    pub(crate) async fn call(&mut self, method: &str, params: Value) -> Value {
        let id = self.send(method, params).await;
        self.answer(id).await
    }

    pub(crate) async fn result(&mut self, method: &str, params: Value) -> Value {
        let answer = self.call(method, params).await;
        assert!(answer["error"].is_null(), "{method} failed: {answer}");
        answer["result"].clone()
    }

    /// Closes the channel and waits for the server to finish.
    pub(crate) async fn stop(mut self) {
        self.writer.shutdown().await.expect("shutdown");
        drop(self.writer);
        tokio::time::timeout(Duration::from_secs(30), self.server)
            .await
            .expect("the server ends when its input does")
            .expect("joins")
            .expect("served cleanly");
    }
}

/// `turns` user/assistant pairs, with fields the host does not know.
pub(crate) fn conversation(turns: usize) -> Vec<Value> {
    (0..turns)
        .flat_map(|turn| {
            [
                json!({"role": "user", "content": format!("question {turn} {}", "word ".repeat(60)),
                       "timestamp": turn * 10, "futureField": {"turn": turn}}),
                json!({"role": "assistant",
                       "content": [{"type": "thinking", "thinking": "hm", "thinkingSignature": format!("s{turn}")},
                                   {"type": "text", "text": format!("answer {turn} {}", "word ".repeat(60))}],
                       "api": "openai-completions", "provider": "p", "model": "m",
                       "usage": {"input": 1, "output": 1, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 2,
                                 "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0}},
                       "stopReason": "stop", "timestamp": turn * 10 + 1, "providerReplay": {"v": 1, "data": "x"}}),
            ]
        })
        .collect()
}

pub(crate) fn full_sync(messages: &[Value]) -> Value {
    json!({"base": 0, "messages": messages})
}

/// Tells the server session `id` starts empty, as a client's first
/// `assemble` of it would (a `commitTurn` is refused for a session the
/// server was never told of).
async fn begin(client: &mut Client, id: &str) {
    client
        .result("assemble", json!({"sessionId": id, "sync": full_sync(&[])}))
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_handshake_comes_first_and_bad_requests_are_named() {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut client = Client::start(dir.path(), 10_000, None);

    let early = client.call("health", json!({})).await;
    assert_eq!(early["error"]["code"], "handshake-required", "{early}");
    let wrong = client.call("hello", json!({"protocol": 0})).await;
    assert_eq!(wrong["error"]["code"], "unsupported-protocol");
    assert_eq!(wrong["error"]["data"]["supported"], json!([1, 2]));
    let hello = client.result("hello", json!({"protocol": 1})).await;
    assert_eq!(hello["server"], "ctxbox");
    // The release and every protocol it speaks, for the plugins' version checks.
    assert_eq!(hello["version"], env!("CARGO_PKG_VERSION"));
    assert_eq!(hello["protocols"], json!([1, 2]));
    assert!(
        hello["engines"]
            .as_array()
            .expect("engine list")
            .contains(&json!("keep-recent")),
        "{hello}"
    );

    client.send_line("this is not json").await;
    let garbage = client.next_answer().await;
    assert_eq!(
        (&garbage["id"], &garbage["error"]["code"]),
        (&Value::Null, &json!("parse-error"))
    );
    client.send_line(r#"{"method": "health"}"#).await;
    let no_id = client.next_answer().await;
    assert!(
        no_id["error"]["message"]
            .as_str()
            .expect("message")
            .contains("`id`")
    );

    let unknown = client.call("explode", json!({})).await;
    assert_eq!(unknown["error"]["code"], "unknown-method");
    let missing = client
        .call("assemble", json!({"engine": "keep-recent"}))
        .await;
    assert_eq!(missing["error"]["code"], "invalid-params");
    assert!(
        missing["error"]["message"]
            .as_str()
            .expect("message")
            .contains("sessionId"),
        "{missing}"
    );
    let no_engine = client
        .call("assemble", json!({"sessionId": "s", "engine": "nope"}))
        .await;
    assert_eq!(no_engine["error"]["code"], "unknown-engine");
    let bad_message = client
        .call(
            "assemble",
            json!({"sessionId": "s", "engine": "keep-recent",
                   "sync": {"base": 0, "messages": [{"role": "user"}]}}),
        )
        .await;
    assert_eq!(bad_message["error"]["code"], "invalid-params");
    assert!(
        bad_message["error"]["message"]
            .as_str()
            .expect("message")
            .starts_with("message 0:"),
        "{bad_message}"
    );
    // The server is still there after all of that.
    let health = client.result("health", json!({})).await;
    assert_eq!(health["quarantined"], json!([]));
    // `info` speaks the protocol's camelCase, as clients read it.
    let info = client
        .result("info", json!({"engine": "keep-recent"}))
        .await;
    assert_eq!(info["info"]["ownsCompaction"], false, "{info}");
    assert_eq!(info["info"]["id"], "keep-recent", "{info}");
    client.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keep_recent_assembles_from_synced_history_and_keeps_messages_intact() {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut client = Client::greeted(dir.path(), 10_000, Some("keep-recent")).await;
    let messages = conversation(20);

    let all = client
        .result(
            "assemble",
            json!({"sessionId": "s", "sync": full_sync(&messages[..30])}),
        )
        .await;
    assert_eq!(
        all["messages"],
        json!(messages[..30]),
        "under no budget everything is kept verbatim"
    );
    assert_eq!(all["servedBy"], "keep-recent");

    // Only the new messages travel; the server already has the first 30.
    let trimmed = client
        .result(
            "assemble",
            json!({"sessionId": "s", "tokenBudget": 600,
                   "sync": {"base": 30, "messages": messages[30..]}}),
        )
        .await;
    assert_eq!(trimmed["length"], 40);
    let prompt = trimmed["messages"].as_array().expect("messages");
    assert!(prompt.len() < 40, "kept {} of 40", prompt.len());
    assert_eq!(
        prompt.last(),
        messages.last(),
        "the newest message, unknown fields and all"
    );
    assert!(
        prompt
            .iter()
            .any(|message| message["role"] == "custom" && message["customType"] == "keep-recent"),
        "{trimmed}"
    );

    // The same answer by reference: runs of the client's own positions.
    let by_reference = client
        .result(
            "assemble",
            json!({"sessionId": "s", "tokenBudget": 600, "answer": "ranges"}),
        )
        .await;
    let items = by_reference["items"].as_array().expect("items");
    assert!(
        items[0]["insert"]["customType"] == "keep-recent",
        "{by_reference}"
    );
    let last = items.last().expect("a kept run");
    assert_eq!(last["keep"][1], 40, "{by_reference}");
    assert!(by_reference.get("messages").is_none());
    let bad = client
        .call("assemble", json!({"sessionId": "s", "answer": "poem"}))
        .await;
    assert_eq!(bad["error"]["code"], "invalid-params");

    let gap = client
        .call(
            "assemble",
            json!({"sessionId": "s", "sync": {"base": 99, "messages": []}}),
        )
        .await;
    assert_eq!(gap["error"]["code"], "history-mismatch");
    assert_eq!(gap["error"]["data"]["length"], 40);
    client.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_compaction_says_what_kind_of_failure_it_is_and_what_to_do() {
    // keep-recent leaves compaction to the host, and a sidecar session has
    // no transcript file the host could compact: the answer is a failure
    // the client can classify, as the reference surfaces one.
    let dir = tempfile::tempdir().expect("temp dir");
    let mut client = Client::greeted(dir.path(), 10_000, Some("keep-recent")).await;
    let messages = conversation(5);
    let answer = client
        .result(
            "compact",
            json!({"sessionId": "s", "force": true, "tokenBudget": 1_000,
                   "sync": full_sync(&messages)}),
        )
        .await;
    assert_eq!(answer["ok"], false, "{answer}");
    assert_eq!(answer["failure"]["kind"], "compaction_failure", "{answer}");
    let hint = answer["failure"]["hint"].as_str().expect("a hint");
    assert!(hint.contains("/compact") && hint.contains("/new"), "{hint}");
    client.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turn_commits_once_even_across_a_restart() {
    let dir = tempfile::tempdir().expect("temp dir");
    let turn = conversation(1);
    let commit = json!({"sessionId": "s", "advancementKey": "run-1:turn-1", "messages": turn});

    let mut client = Client::greeted(dir.path(), 10_000, Some("keep-recent")).await;
    begin(&mut client, "s").await;
    let first = client.result("commitTurn", commit.clone()).await;
    assert_eq!(
        (&first["status"], &first["length"]),
        (&json!("committed"), &json!(2))
    );
    let again = client.result("commitTurn", commit.clone()).await;
    assert_eq!(
        (&again["status"], &again["length"]),
        (&json!("duplicate"), &json!(2))
    );
    let empty = client
        .call(
            "commitTurn",
            json!({"sessionId": "s", "advancementKey": " ", "messages": []}),
        )
        .await;
    assert_eq!(empty["error"]["code"], "invalid-params");
    client.stop().await;

    let mut restarted = Client::greeted(dir.path(), 10_000, Some("keep-recent")).await;
    // The restarted server does not hold the session: refused, not run on
    // the turn alone, until the client resends the session.
    let unknown = restarted.call("commitTurn", commit.clone()).await;
    assert_eq!(unknown["error"]["code"], "session-unknown", "{unknown}");
    let mut resent = commit;
    resent["sync"] = full_sync(&[]);
    let replay = restarted.result("commitTurn", resent).await;
    assert_eq!(replay["status"], "duplicate", "the key is durable");
    assert_eq!(replay["length"], 0, "a replay adds nothing to the session");
    restarted.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_same_advancement_key_in_two_sessions_commits_both_turns() {
    // Keys are the client's, unique within a session: a second session
    // using the same key (a per-session turn counter, say) commits its own
    // turn instead of hearing `duplicate` and losing it.
    let dir = tempfile::tempdir().expect("temp dir");
    let mut client = Client::greeted(dir.path(), 10_000, Some("keep-recent")).await;
    for session in ["a", "b"] {
        begin(&mut client, session).await;
        let commit = json!({"sessionId": session, "advancementKey": "turn-1",
                            "messages": conversation(1)});
        let answer = client.result("commitTurn", commit).await;
        assert_eq!(
            (&answer["status"], &answer["length"]),
            (&json!("committed"), &json!(2)),
            "session {session}: {answer}"
        );
    }
    let again = client
        .result(
            "commitTurn",
            json!({"sessionId": "b", "advancementKey": "turn-1", "messages": conversation(1)}),
        )
        .await;
    assert_eq!(again["status"], "duplicate", "still once per session");
    client.stop().await;
}

/// Loads `engine` with a generous deadline (a debug build compiles slowly).
pub(crate) async fn load(client: &mut Client, engine: &str) {
    let id = client.next_id;
    client.next_id += 1;
    let line =
        json!({"id": id, "method": "info", "deadlineMs": 120_000, "params": {"engine": engine}});
    client.send_line(&line.to_string()).await;
    let answer = client.answer(id).await;
    assert!(answer["error"].is_null(), "{answer}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hanging_engine_is_answered_by_legacy_within_the_deadline_and_quarantined() {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut client = Client::greeted(dir.path(), 1_000, None).await;
    let messages = conversation(3);
    let request = json!({"sessionId": "s", "engine": guests::SPIN, "sync": full_sync(&messages)});
    // Loading (compiling) an engine is not part of a call's deadline here.
    for engine in [guests::SPIN, guests::PANICKER] {
        load(&mut client, engine).await;
    }

    let started = Instant::now();
    let answer = client.result("assemble", request.clone()).await;
    let took = started.elapsed();
    assert!(took < Duration::from_secs(3), "answered after {took:?}");
    assert_eq!(
        answer["messages"],
        json!(messages),
        "legacy passes the history through"
    );
    assert_eq!(answer["servedBy"], "legacy");

    let health = client.result("health", json!({})).await;
    let quarantined = health["quarantined"].as_array().expect("list");
    assert_eq!(quarantined.len(), 1, "{health}");
    assert_eq!(quarantined[0]["engineId"], "spin");
    assert!(
        ["timeout", "out-of-fuel"].contains(
            &quarantined[0]["classification"]
                .as_str()
                .unwrap_or_default()
        ),
        "{health}"
    );

    // The next call does not wait for the engine at all.
    let started = Instant::now();
    let next = client.result("assemble", request).await;
    assert!(started.elapsed() < Duration::from_millis(500));
    assert_eq!(next["servedBy"], "legacy");

    // A panicking engine (this one panics when the prompt is "panic") is
    // caught the same way, with its reason.
    let panicked = client
        .result(
            "assemble",
            json!({"sessionId": "p", "engine": guests::PANICKER, "prompt": "panic",
                   "sync": full_sync(&messages)}),
        )
        .await;
    assert_eq!(panicked["messages"], json!(messages));
    let health = client.result("health", json!({})).await;
    let record = health["quarantined"]
        .as_array()
        .expect("list")
        .iter()
        .find(|record| record["engineId"] == "panicker")
        .cloned()
        .expect("panicker quarantined");
    assert_eq!(record["classification"], "panic", "{record}");
    assert!(
        record["stderrTail"]
            .as_str()
            .unwrap_or_default()
            .contains("engine exploded"),
        "{record}"
    );
    client.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_request_is_answered_at_once_and_quarantines_nothing() {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut client = Client::greeted(dir.path(), 30_000, None).await;
    let messages = conversation(2);
    // The sleeper blocks in a WASI clock wait until its call's deadline (30 s
    // here): still running when the cancel arrives, however fast the machine.
    load(&mut client, guests::SLEEPER).await;
    let started = Instant::now();
    let hanging = client
        .send(
            "assemble",
            json!({"sessionId": "s", "engine": guests::SLEEPER, "sync": full_sync(&messages)}),
        )
        .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let cancel = client.result("cancel", json!({"target": hanging})).await;
    assert_eq!(cancel["cancelled"], true);
    let answer = client.answer(hanging).await;
    assert_eq!(answer["error"]["code"], "cancelled", "{answer}");
    assert!(started.elapsed() < Duration::from_secs(5));
    let unknown = client.result("cancel", json!({"target": 999})).await;
    assert_eq!(unknown["cancelled"], false);

    // A deadline of the request's own works the same way.
    let deadline = client
        .send_line(
            &json!({"id": "late", "method": "assemble", "deadlineMs": 300,
                    "params": {"sessionId": "t", "engine": guests::SLEEPER, "sync": full_sync(&messages)}})
            .to_string(),
        )
        .await;
    let () = deadline;
    let late = loop {
        let answer = client.next_answer().await;
        if answer["id"] == "late" {
            break answer;
        }
    };
    assert_eq!(late["error"]["code"], "deadline-exceeded", "{late}");

    tokio::time::sleep(Duration::from_millis(500)).await;
    let health = client.result("health", json!({})).await;
    assert_eq!(
        health["quarantined"],
        json!([]),
        "a caller's abort is not the engine's fault"
    );
    client.stop().await;
}

// --- protocol 2: negotiation, reverse calls, engine tools --------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn protocol_2_is_negotiated_and_protocol_1_clients_are_served_as_before() {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut client = Client::start(dir.path(), 10_000, Some("keep-recent"));
    let newest = client.call("hello", json!({"protocol": 9})).await;
    assert_eq!(
        newest["result"]["protocol"], 2,
        "the newest both speak: {newest}"
    );
    assert_eq!(
        newest["result"]["capabilities"],
        json!(["complete", "tools"])
    );
    let old = client.call("hello", json!({"protocol": 1})).await;
    assert_eq!(old["result"]["protocol"], 1, "{old}");
    assert_eq!(old["result"]["capabilities"], json!([]));
    let listed = client.call("hello", json!({"protocols": [1, 2, 5]})).await;
    assert_eq!(listed["result"]["protocol"], 2);
    let unknown = client.call("hello", json!({"protocols": [7]})).await;
    assert_eq!(
        unknown["error"]["code"], "unsupported-protocol",
        "{unknown}"
    );
    assert_eq!(unknown["error"]["data"]["supported"], json!([1, 2]));
    client.stop().await;
}

/// Reads lines until the server's reverse request arrives; the client's own
/// answers read meanwhile are kept for [`Client::answer`].
pub(crate) async fn reverse_request(client: &mut Client) -> Value {
    loop {
        let line = tokio::time::timeout(Duration::from_secs(60), client.lines.next_line())
            .await
            .expect("a line within a minute")
            .expect("read")
            .expect("the server is still answering");
        let value: Value = serde_json::from_str(&line).expect("JSON");
        if value.get("method").is_some() {
            return value;
        }
        client.early.push(value);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_hangs_up_ends_the_reverse_calls_waiting_on_it() {
    let dir = tempfile::tempdir().expect("temp dir");
    // A minute of call time: only the hang-up can end the wait early.
    let mut client = Client::start(dir.path(), 60_000, Some(guests::POWERS_PROBE));
    client
        .call(
            "hello",
            json!({"protocol": 2, "capabilities": ["complete"]}),
        )
        .await;
    load(&mut client, guests::POWERS_PROBE).await;
    let id = client
        .send(
            "assemble",
            json!({"sessionId": "s", "prompt": "complete 1", "sync": full_sync(&conversation(1))}),
        )
        .await;
    let asked = reverse_request(&mut client).await;
    assert_eq!(asked["method"], "complete", "{asked}");
    let hung_up = Instant::now();
    client.writer.shutdown().await.expect("the client hangs up");
    let answer = client.answer(id).await;
    assert!(
        hung_up.elapsed() < Duration::from_secs(30),
        "answered at once, not at the deadline: {:?}",
        hung_up.elapsed()
    );
    assert!(
        answer["result"]["messages"][0]
            .to_string()
            .contains("completed=0 error=HostErrorKind::Unavailable"),
        "the engine heard the model is gone: {answer}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_engines_completion_is_asked_of_the_client_by_a_reverse_call() {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut client = Client::start(dir.path(), 6_000, Some(guests::POWERS_PROBE));
    let hello = client
        .call(
            "hello",
            json!({"protocol": 2, "capabilities": ["complete"]}),
        )
        .await;
    assert_eq!(hello["result"]["protocol"], 2);
    load(&mut client, guests::POWERS_PROBE).await;

    let id = client
        .send(
            "assemble",
            json!({"sessionId": "s", "sessionKey": "agent:main:s", "prompt": "complete 1",
                   "sync": full_sync(&conversation(1))}),
        )
        .await;
    let asked = reverse_request(&mut client).await;
    assert_eq!(asked["method"], "complete", "{asked}");
    let reverse_id = asked["id"].as_str().expect("a string id").to_owned();
    assert!(reverse_id.starts_with("srv-"), "{reverse_id}");
    assert_eq!(asked["params"]["sessionId"], "s");
    assert_eq!(asked["params"]["sessionKey"], "agent:main:s");
    assert_eq!(asked["params"]["engine"], "powers-probe");
    assert_eq!(
        asked["params"]["requestId"],
        json!(id),
        "names the request it serves"
    );
    assert_eq!(asked["params"]["purpose"], "probe");
    assert_eq!(asked["params"]["messages"][0]["role"], "user");
    assert!(
        asked["deadlineMs"].as_u64().is_some_and(|ms| ms > 0),
        "{asked}"
    );
    client
        .send_line(
            &json!({"id": reverse_id, "result": {"text": "from the client's model",
                    "inputTokens": 12, "outputTokens": 5, "model": "fake/fake-1"}})
            .to_string(),
        )
        .await;
    let answer = client.answer(id).await;
    let note = &answer["result"]["messages"][0];
    let health = client.result("health", json!({})).await;
    assert!(
        note.to_string().contains("powers: completed=1"),
        "the engine got its completion: {answer} {health}"
    );
    let totals = client.result("health", json!({})).await;
    assert!(totals["uptimeMs"].is_u64());

    // A client that does not answer: the engine's call ends at its deadline
    // with an error it handles, and the server takes its request back.
    let id = client
        .send(
            "assemble",
            json!({"sessionId": "s", "prompt": "complete 1", "deadlineMs": 30_000}),
        )
        .await;
    let unanswered = reverse_request(&mut client).await;
    let cancel = reverse_request(&mut client).await;
    assert_eq!(cancel["method"], "cancel", "{cancel}");
    assert_eq!(cancel["params"]["target"], unanswered["id"]);
    let answer = client.answer(id).await;
    assert!(
        answer["result"]["messages"][0]
            .to_string()
            .contains("completed=0 error=HostErrorKind::Aborted"),
        "{answer}"
    );
    // An answer that comes too late, or to an id never used, is ignored.
    client
        .send_line(&json!({"id": unanswered["id"], "result": {"text": "late"}}).to_string())
        .await;
    client
        .send_line(
            &json!({"id": "srv-999", "error": {"code": "failed", "message": "?"}}).to_string(),
        )
        .await;
    assert!(client.result("health", json!({})).await["uptimeMs"].is_u64());
    client.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_protocol_1_client_is_never_asked_and_engines_hear_unavailable() {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut client = Client::greeted(dir.path(), 20_000, Some(guests::POWERS_PROBE)).await;
    load(&mut client, guests::POWERS_PROBE).await;
    let answer = client
        .result(
            "assemble",
            json!({"sessionId": "s", "prompt": "complete 1", "sync": full_sync(&conversation(1))}),
        )
        .await;
    assert!(
        answer["messages"][0]
            .to_string()
            .contains("completed=0 error=HostErrorKind::Unavailable"),
        "{answer}"
    );
    client.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_engines_tools_are_listed_and_called_and_a_failing_tool_is_an_error_result() {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut client = Client::start(dir.path(), 5_000, Some(guests::TOOL_SPINNER));
    client.call("hello", json!({"protocol": 2})).await;
    load(&mut client, guests::TOOL_SPINNER).await;
    let tools = client.result("tools", json!({})).await;
    let names: Vec<&str> = tools["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .filter_map(|tool| tool["name"].as_str())
        .collect();
    assert_eq!(names, ["echo", "spin"]);
    assert_eq!(tools["tools"][0]["parameters"], json!({"type": "object"}));

    let echoed = client
        .result(
            "callTool",
            json!({"sessionId": "s", "name": "echo", "arguments": {"say": "hi"}}),
        )
        .await;
    assert_eq!(echoed["content"], r#"echo {"say":"hi"}"#);
    assert_eq!(echoed["isError"], false);
    let bad = client
        .call(
            "callTool",
            json!({"sessionId": "s", "name": "echo", "arguments": [1]}),
        )
        .await;
    assert_eq!(bad["error"]["code"], "invalid-params", "{bad}");

    let spun = client
        .result("callTool", json!({"sessionId": "s", "name": "spin"}))
        .await;
    assert_eq!(spun["isError"], true, "{spun}");
    assert!(
        spun["content"]
            .as_str()
            .is_some_and(|text| text.starts_with("the tool failed:"))
    );
    let after = client.result("tools", json!({})).await;
    assert_eq!(
        after["tools"],
        json!([]),
        "a quarantined engine's tools are withdrawn"
    );
    client.stop().await;
}

// --- hostile clients: protocol edges -----------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_request_reuses_an_id_in_flight_and_a_zero_deadline_is_refused() {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut client = Client::greeted(dir.path(), 1_000, None).await;
    load(&mut client, guests::SPIN).await;
    // A request that hangs until its deadline, id 100.
    client
        .send_line(
            &json!({"id": 100, "method": "assemble", "deadlineMs": 3_000,
                    "params": {"sessionId": "s", "engine": guests::SPIN, "sync": full_sync(&conversation(1))}})
            .to_string(),
        )
        .await;
    for method in ["cancel", "hello", "health"] {
        client
            .send_line(
                &json!({"id": 100, "method": method, "params": {"target": 100, "protocol": 1}})
                    .to_string(),
            )
            .await;
        let refused = client.next_answer().await;
        assert_eq!(refused["id"], 100, "{method}: {refused}");
        assert_eq!(
            refused["error"]["code"], "duplicate-id",
            "{method}: {refused}"
        );
    }
    let zero = client.call("health", json!({})).await;
    assert!(zero["error"].is_null());
    client
        .send_line(&json!({"id": 7, "method": "health", "deadlineMs": 0}).to_string())
        .await;
    let refused = client.answer(7).await;
    assert_eq!(refused["error"]["code"], "invalid-params", "{refused}");
    let hung = client.answer(100).await;
    assert!(hung["result"].is_object(), "answered by legacy: {hung}");
    client.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_commit_answered_late_tells_the_client_whether_it_committed() {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut client = Client::greeted(dir.path(), 10_000, Some("keep-recent")).await;
    let turn = conversation(1);
    for attempt in 0..5 {
        let key = format!("late-{attempt}");
        begin(&mut client, &format!("s{attempt}")).await;
        let commit =
            json!({"sessionId": format!("s{attempt}"), "advancementKey": key, "messages": turn});
        let id = client.next_id;
        client.next_id += 1;
        client
            .send_line(
                &json!({"id": id, "method": "commitTurn", "deadlineMs": 1, "params": commit})
                    .to_string(),
            )
            .await;
        let first = client.answer(id).await;
        let again = client.result("commitTurn", commit).await;
        if first["error"]["code"] == "deadline-exceeded" {
            assert_eq!(
                again["status"], "committed",
                "told not committed, so it was not: {first}"
            );
        } else {
            assert_eq!(first["result"]["status"], "committed", "{first}");
            assert_eq!(again["status"], "duplicate");
        }
    }
    client.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sync_never_shrinks_or_rewrites_a_session_unless_it_is_a_reset() {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut client = Client::greeted(dir.path(), 10_000, Some("keep-recent")).await;
    let messages = conversation(31);
    let digests: Vec<String> = (0..messages.len()).map(|i| format!("d{i}")).collect();
    let sync = |base: usize, end: usize| json!({"base": base, "messages": messages[base..end], "digests": digests[base..end]});
    let ask = |sync: Value| json!({"sessionId": "s", "tokenBudget": 600, "answer": "ranges", "sync": sync});
    let first = client.result("assemble", ask(sync(0, 60))).await;
    assert_eq!(first["length"], 60);

    // OpenClaw's second assemble of a turn carries what the first answer
    // kept: as a sync it would cut the session to that projection.
    let projection = json!({"base": 0, "messages": messages[47..60], "digests": digests[47..60]});
    let refused = client.call("assemble", ask(projection.clone())).await;
    assert_eq!(refused["error"]["code"], "history-mismatch", "{refused}");
    assert_eq!(refused["error"]["data"]["length"], 60);
    let why = refused["error"]["message"].as_str().expect("a message");
    assert!(
        why.contains("holds 60") && why.contains("would leave 13"),
        "names both lengths: {why}"
    );

    // The held messages re-sent as they are, and the turn's new ones: fine.
    let extended = client.result("assemble", ask(sync(0, 62))).await;
    assert_eq!(extended["length"], 62);
    // A held message rewritten at its own position is refused too.
    let rewritten = json!({"base": 61, "baseDigest": "d60",
                           "messages": [messages[0]], "digests": ["another"]});
    let refused = client.call("assemble", ask(rewritten)).await;
    assert_eq!(refused["error"]["code"], "history-mismatch", "{refused}");
    assert_eq!(refused["error"]["data"]["length"], 62);

    // A reset the runtime made (`/new`, a rollback) replaces the session.
    let mut reset = projection;
    reset["reset"] = json!(true);
    let after_reset = client.result("assemble", ask(reset)).await;
    assert_eq!(after_reset["length"], 13, "{after_reset}");
    client.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_commit_for_a_session_the_server_gave_up_waits_for_the_history() {
    let dir = tempfile::tempdir().expect("temp dir");
    let config = Config {
        data_dir: Some(dir.path().to_owned()),
        serve: ServeConfig {
            max_sessions: 1,
            idle_session_seconds: 0,
            ..ServeConfig::default()
        },
        ..Config::default()
    };
    let mut client = Client::with_config(config, Some("keep-recent"), 1 << 20);
    client.call("hello", json!({"protocol": 2})).await;
    let history = conversation(10);
    let held = client
        .result(
            "assemble",
            json!({"sessionId": "a", "sync": full_sync(&history)}),
        )
        .await;
    assert_eq!(held["length"], 20);
    // Session b takes the only place: a is given up.
    begin(&mut client, "b").await;

    let turn = conversation(11).split_off(20);
    let commit = json!({"sessionId": "a", "advancementKey": "a:11", "messages": turn});
    let refused = client.call("commitTurn", commit.clone()).await;
    assert_eq!(refused["error"]["code"], "session-unknown", "{refused}");
    // Nothing was committed: the resend with the history commits the turn
    // on the whole session, not on the turn alone.
    let mut resent = commit;
    resent["sync"] = full_sync(&history);
    let committed = client.result("commitTurn", resent).await;
    assert_eq!(
        (&committed["status"], &committed["length"]),
        (&json!("committed"), &json!(22)),
        "{committed}"
    );
    client.stop().await;
}
