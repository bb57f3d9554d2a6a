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

/// Every target, by the name of its corpus folder (`fuzz/corpus/<name>`).
pub const TARGETS: &[(&str, fn(&[u8]))] = &[
    ("transcript", transcript),
    ("config", config),
    ("component", component),
    ("guest_codec", guest_codec),
    ("sidecar", sidecar),
    ("validators", validators),
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
            if let Some(messages) = request.params.get("messages").and_then(|m| m.as_array()) {
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
