//! The fuzz targets' bodies. Each function takes arbitrary bytes, feeds them
//! to one parser of untrusted input and panics only when a promise of that
//! parser is broken (a panic inside the parser is a crash too). The
//! cargo-fuzz targets in `fuzz/fuzz_targets/` call them under libFuzzer; the
//! test suite replays every checked-in corpus file through them on stable
//! Rust, so a crash once found stays a regression test.

use std::io::Write;
use std::sync::OnceLock;

use ctxbox_host::contract::history::History;
use ctxbox_host::contract::types::{AssembleResult, AssembledItem, CompactResult, MessageEntry};
use ctxbox_host::contract::validate;
use ctxbox_host::serve::{message, protocol};
use ctxbox_host::{Config, TranscriptStore};

/// A fuzz target: the name of its corpus folder and the check it runs on one input.
pub type Target = (&'static str, fn(&[u8]));

/// Every target, by the name of its corpus folder (`fuzz/corpus/<name>`).
pub const TARGETS: &[Target] = &[
    ("transcript", transcript),
    ("config", config),
    ("component", component),
    ("guest_codec", guest_codec),
    ("sidecar", sidecar),
    ("validators", validators),
    ("sidecar_powers", sidecar_powers),
];

/// A JSONL v3 transcript file with these bytes opens read-only as a
/// transcript or is refused with an error, and an opened one can be read.
pub fn transcript(data: &[u8]) {
    static DIR: OnceLock<tempfile::TempDir> = OnceLock::new();
    let dir = DIR.get_or_init(|| tempfile::tempdir().expect("a temporary directory"));
    let path = dir.path().join("session.jsonl");
    let mut file = std::fs::File::create(&path).expect("the scratch file is writable");
    file.write_all(data)
        .expect("the scratch file takes the bytes");
    drop(file);
    let store = TranscriptStore::new(Default::default());
    if let Ok(transcript) = store.open_read_only(&path) {
        let history = transcript.history();
        let half = history.len() / 2;
        assert_eq!(
            history.total_tokens(),
            history.tokens(0..half) + history.tokens(half..history.len()),
            "token sums add up"
        );
        let _ = transcript.open_report().problems();
        let _ = transcript.active_branch();
    }
}

/// `ctxbox.toml` text parses into a configuration or names what is wrong.
pub fn config(data: &[u8]) {
    if let Ok(text) = std::str::from_utf8(data)
        && let Ok(config) = Config::parse(text)
    {
        let _ = config.context_tokens();
    }
}

/// The loader's checks before compiling read any bytes without panicking.
pub fn component(data: &[u8]) {
    let _ = ctxbox_host::sandbox::check_component("fuzz.wasm", data);
}

/// The guest SDK's state codec decodes any bytes without panicking, and what
/// it decodes encodes back to an entry that decodes the same.
pub fn guest_codec(data: &[u8]) {
    use ctxbox_guest::codec::{decode_entry, encode_entry};
    if let Ok(entry) = decode_entry(data) {
        let again = decode_entry(&encode_entry(&entry)).expect("an encoded entry decodes");
        assert_eq!(format!("{again:?}"), format!("{entry:?}"));
    }
}

/// A sidecar request line is read or refused with a response naming the
/// problem; a message in it converts to the host's view and back.
pub fn sidecar(data: &[u8]) {
    let Ok(line) = std::str::from_utf8(data) else {
        return;
    };
    match protocol::parse_request(line) {
        Ok(request) => {
            assert!(
                request.params.get().trim_start().starts_with('{'),
                "a request's params are an object"
            );
            // Params are kept as checked JSON text; a number past f64's
            // range is still JSON, and each method refuses it when it reads
            // the message that holds it.
            let Ok(params) = serde_json::from_str::<serde_json::Value>(request.params.get()) else {
                return;
            };
            if let Some(messages) = params.get("messages").and_then(|m| m.as_array()) {
                for raw in messages {
                    if let Ok(Some(view)) = message::to_host(raw) {
                        let _ = message::to_openclaw(&view, std::time::SystemTime::UNIX_EPOCH);
                    }
                }
            }
        }
        Err(response) => {
            let line = response.to_line();
            assert!(!line.contains('\n'), "a response is one line");
            serde_json::from_str::<serde_json::Value>(&line).expect("a response is JSON");
        }
    }
}

/// What the validators are given: a history and an engine's answers.
#[derive(serde::Deserialize)]
struct Answers {
    #[serde(default)]
    history: Vec<MessageEntry>,
    assemble: Option<AssembleResult>,
    compact: Option<CompactResult>,
    #[serde(default)]
    budget: Option<u64>,
    #[serde(default)]
    json: Option<String>,
}

/// The answer validators judge any answer without panicking, and an
/// accepted `assemble` answer materializes within the history.
pub fn validators(data: &[u8]) {
    let Ok(answers) = serde_json::from_slice::<Answers>(data) else {
        return;
    };
    let history = History::new(answers.history);
    if let Some(assemble) = &answers.assemble {
        let accepted = validate::check_assemble(&history, assemble).is_ok();
        let _ = validate::check_additions_fit(assemble, answers.budget);
        if accepted {
            let prompt = history.materialize(&assemble.items);
            let kept: usize = assemble
                .items
                .iter()
                .map(|item| match item {
                    AssembledItem::Keep { start, end } => (end - start) as usize,
                    AssembledItem::Insert(_) => 1,
                })
                .sum();
            assert_eq!(
                prompt.len(),
                kept,
                "an accepted answer's ranges lie in the history"
            );
        }
    }
    if let Some(compact) = &answers.compact {
        let _ = validate::check_compact(&history, compact);
    }
    if let Some(json) = &answers.json {
        let _ = validate::check_json("details", json);
    }
}

/// A shared server for [`sidecar_powers`]: the bundled `lossless` engine
/// (it calls the client's model and offers tools), 2 s calls, a few
/// sessions at once, its data in a scratch directory.
struct PowersServer {
    runtime: tokio::runtime::Runtime,
    service: std::sync::Arc<ctxbox_host::serve::Service>,
    _dir: tempfile::TempDir,
}

fn powers_server() -> &'static PowersServer {
    static SERVER: OnceLock<PowersServer> = OnceLock::new();
    SERVER.get_or_init(|| {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let config = Config {
            data_dir: Some(dir.path().to_owned()),
            sandbox: ctxbox_host::SandboxConfig {
                call_timeout_ms: 2_000,
                max_instances: 8,
                ..Default::default()
            },
            serve: ctxbox_host::runtime::config::ServeConfig {
                max_sessions: 8,
                ..Default::default()
            },
            ..Config::default()
        };
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("a tokio runtime");
        let service = runtime.block_on(async {
            let host = ctxbox_host::Runtime::new(config).expect("a host");
            let service = std::sync::Arc::new(
                ctxbox_host::serve::Service::new(host, Some("lossless".to_owned()))
                    .expect("a server"),
            );
            // Compiled before the first input, so no input waits for it.
            service
                .call(
                    "info",
                    serde_json::value::RawValue::from_string("{}".to_owned())
                        .expect("`{}` is JSON"),
                    tokio_util::sync::CancellationToken::new(),
                    0,
                    "warm-up".to_owned(),
                )
                .await
                .expect("the bundled lossless engine loads");
            service
        });
        PowersServer {
            runtime,
            service,
            _dir: dir,
        }
    })
}

/// How long the client waits for the server's next line before it hangs up
/// (normally it hangs up as soon as every request is answered).
const POWERS_QUIET: std::time::Duration = std::time::Duration::from_secs(2);

/// Whether the server answers `line` (it answers every line but blank
/// ones and answers to its own reverse calls, as `serve` tells them apart).
fn expects_an_answer(line: &str) -> bool {
    let line = line.trim();
    if line.is_empty() {
        return false;
    }
    let reverse_answer = line.contains("srv-")
        && serde_json::from_str::<serde_json::Value>(line).is_ok_and(|value| {
            value
                .get("id")
                .and_then(serde_json::Value::as_str)
                .is_some_and(|id| id.starts_with("srv-"))
                && value.get("method").is_none()
        });
    !reverse_answer
}

/// A protocol-2 conversation with a server whose engine calls back (model
/// completions) and offers tools: each line starting `>` is a request the
/// client sends, each line starting `<` answers the server's next reverse
/// call (its `id` set to the call's; once they run out, a plain summary
/// answers). Every line the server writes is one JSON object; the server
/// never panics and ends once the client hangs up.
pub fn sidecar_powers(data: &[u8]) {
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let requests: Vec<&str> = text
        .lines()
        .filter_map(|line| line.strip_prefix('>'))
        .collect();
    let mut answers: std::collections::VecDeque<&str> = text
        .lines()
        .filter_map(|line| line.strip_prefix('<'))
        .collect();
    let server = powers_server();
    server.runtime.block_on(async {
        let (client, end) = tokio::io::duplex(1 << 20);
        let (end_read, end_write) = tokio::io::split(end);
        let serving = tokio::spawn(ctxbox_host::serve::serve(
            server.service.clone(),
            BufReader::new(end_read),
            end_write,
        ));
        let (read, mut write) = tokio::io::split(client);
        let mut lines = BufReader::new(read).lines();
        let hello = r#"{"id":"hello","method":"hello","params":{"protocol":2,"capabilities":["complete"]}}"#;
        for line in std::iter::once(hello).chain(requests.iter().copied()) {
            if write.write_all(format!("{line}\n").as_bytes()).await.is_err() {
                break;
            }
        }
        let mut unanswered = 1 + requests.iter().filter(|line| expects_an_answer(line)).count();
        while unanswered > 0
            && let Ok(Ok(Some(line))) = tokio::time::timeout(POWERS_QUIET, lines.next_line()).await
        {
            let value: serde_json::Value =
                serde_json::from_str(&line).expect("every server line is JSON");
            assert!(value.is_object(), "every server line is an object: {line}");
            let reverse_id = value
                .get("id")
                .and_then(serde_json::Value::as_str)
                .filter(|id| id.starts_with("srv-"))
                .filter(|_| value.get("method").and_then(serde_json::Value::as_str) == Some("complete"));
            let Some(id) = reverse_id else {
                if value.get("method").is_none() {
                    unanswered = unanswered.saturating_sub(1);
                }
                continue;
            };
            let mut answer = answers
                .pop_front()
                .and_then(|answer| serde_json::from_str::<serde_json::Value>(answer).ok())
                .unwrap_or_else(|| serde_json::json!({"result": {"text": "a summary"}}));
            if let Some(object) = answer.as_object_mut() {
                object.insert("id".into(), id.into());
            }
            if write.write_all(format!("{answer}\n").as_bytes()).await.is_err() {
                break;
            }
        }
        // Hanging up: the server reads the end of its input.
        let _ = write.shutdown().await;
        // Requests still running end by their deadline.
        let ended = tokio::time::timeout(std::time::Duration::from_secs(60), serving)
            .await
            .expect("the server ends once the client hangs up");
        ended.expect("the server task does not panic").expect("the pipe does not fail");
        while let Ok(Ok(Some(_))) = tokio::time::timeout(POWERS_QUIET, lines.next_line()).await {}
    });
}
