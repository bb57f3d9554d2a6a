//! Behaviour of the store as a whole, on small hand-written files.

use std::fs;
use std::path::{Path, PathBuf};

use super::*;
use crate::contract::services::{OversizedEntry, TranscriptDelta};
use crate::contract::types::{AgentMessage, ContentBlock, MessageKind, StopReason};

const HEADER: &str =
    r#"{"type":"session","version":3,"id":"s1","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/w"}"#;

fn store() -> TranscriptStore {
    TranscriptStore::new(TranscriptConfig::default())
}

fn write(dir: &Path, lines: &[&str]) -> PathBuf {
    let path = dir.join("s1.jsonl");
    let mut text = String::new();
    for line in lines {
        text.push_str(line);
        text.push('\n');
    }
    fs::write(&path, text).expect("write fixture");
    path
}

fn user(id: &str, parent: Option<&str>, text: &str) -> String {
    let parent = parent.map_or("null".to_owned(), |p| format!("\"{p}\""));
    format!(
        r#"{{"type":"message","id":"{id}","parentId":{parent},"timestamp":"2026-01-01T00:00:01.000Z","message":{{"role":"user","content":[{{"type":"text","text":"{text}"}}],"timestamp":1}}}}"#
    )
}

fn ids(transcript: &Transcript) -> Vec<String> {
    transcript
        .history()
        .entries()
        .iter()
        .map(|e| e.id.clone())
        .collect()
}

fn call(id: &str) -> AgentMessage {
    AgentMessage::Assistant {
        content: vec![ContentBlock::ToolCall {
            id: id.into(),
            name: "read".into(),
            arguments_json: r#"{"path":"src/main.rs"}"#.into(),
        }],
        model: None,
        provider: None,
        usage: None,
        stop_reason: StopReason::ToolUse,
        error_message: None,
    }
}

#[test]
fn appends_are_read_back_by_a_fresh_process() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("agents/main/sessions/new.jsonl");
    let stored = {
        let transcript = store()
            .create(
                &path,
                NewSession {
                    cwd: "/w".into(),
                    ..NewSession::default()
                },
            )
            .expect("create");
        let first = transcript
            .append(&[AgentMessage::user_text("hi")])
            .expect("append");
        let more = transcript
            .append(&[call("c1"), AgentMessage::assistant_text("done")])
            .expect("append");
        assert_eq!(more[0].parent_id.as_deref(), Some(first[0].id.as_str()));
        assert_eq!(more[1].parent_id.as_deref(), Some(more[0].id.as_str()));
        assert_eq!(transcript.leaf_id().as_deref(), Some(more[1].id.as_str()));
        first.into_iter().chain(more).collect::<Vec<_>>()
    };
    let reopened = store().open(&path).expect("reopen");
    assert_eq!(reopened.history().entries(), stored.as_slice());
    assert_eq!(reopened.header().cwd, "/w");
    assert_eq!(reopened.open_report(), OpenReport::default());
}

/// A message line `id` under `parent` holding `message` (JSON).
fn message_line(id: &str, parent: &str, message: &str) -> String {
    format!(
        r#"{{"type":"message","id":"{id}","parentId":"{parent}","timestamp":"2026-01-01T00:00:01.000Z","message":{message}}}"#
    )
}

#[test]
fn nested_tool_results_and_data_blocks_are_counted_and_round_trip_byte_for_byte() {
    let dir = tempfile::tempdir().expect("temp dir");
    let output = "x".repeat(4_000);
    let lines = [
        HEADER.to_owned(),
        user("a", None, "run it"),
        message_line(
            "b",
            "a",
            r#"{"role":"assistant","content":[{"type":"toolCall","id":"c1","name":"exec","arguments":{}},{"type":"redacted_thinking","data":"opaque"}],"stopReason":"toolUse","timestamp":1}"#,
        ),
        // Codex-style: the payload in both `text` and `content`.
        message_line(
            "c",
            "b",
            &format!(
                r#"{{"role":"toolResult","toolCallId":"c1","toolName":"exec","content":[{{"type":"toolResult","id":"c1","name":"exec","toolCallId":"c1","content":"{output}","text":"{output}"}}],"isError":false,"timestamp":1}}"#
            ),
        ),
    ];
    let lines: Vec<&str> = lines.iter().map(String::as_str).collect();
    let path = write(dir.path(), &lines);
    let original = fs::read(&path).expect("read");

    let transcript = store().open(&path).expect("open");
    let history = transcript.history();
    let plain = AgentMessage::tool_result("c1", "exec", output.clone());
    assert_eq!(
        history.entry(2).map(|entry| &entry.message),
        Some(&plain),
        "the nested result is read as its payload, once"
    );
    assert_eq!(
        history.tokens(2..3),
        crate::contract::tokens::estimate_message(&plain),
        "and costs what the same plain result costs (the reference's #99375)"
    );
    assert!(
        history
            .entry(1)
            .is_some_and(
                |entry| entry.message.content().contains(&ContentBlock::Data {
                    json: r#"{"type":"redacted_thinking","data":"opaque"}"#.into()
                })
            ),
        "an unknown block is kept as its JSON"
    );

    let copy = dir.path().join("copy.jsonl");
    transcript.save_copy(&copy).expect("copy");
    assert_eq!(fs::read(&copy).expect("read copy"), original);
    transcript
        .append(&[AgentMessage::assistant_text("done")])
        .expect("append");
    assert!(
        fs::read(&path).expect("read").starts_with(&original),
        "appends never touch earlier bytes"
    );
    drop(transcript);
    let reopened = store().open(&path).expect("reopen");
    assert_eq!(reopened.history().entries()[..3], history.entries()[..]);
}

#[test]
fn round_trips_unknown_entries_and_fields_byte_for_byte() {
    let dir = tempfile::tempdir().expect("temp dir");
    let lines = [
        HEADER.to_owned(),
        r#"{"type":"model_change","id":"m","parentId":null,"timestamp":"2026-01-01T00:00:00.000Z","provider":"p","modelId":"x","futureField":{"a":[1,2.50,"\u00e9"]}}"#.into(),
        user("a", Some("m"), "hello"),
        String::new(),
        r#"{"type":"hologram","id":"h","parentId":"a","timestamp":"2026-01-01T00:00:02.000Z","payload":"✨"}"#.into(),
        user("b", Some("h"), "again"),
    ];
    let lines: Vec<&str> = lines.iter().map(String::as_str).collect();
    let path = write(dir.path(), &lines);
    let original = fs::read(&path).expect("read");

    let transcript = store().open(&path).expect("open");
    assert_eq!(
        ids(&transcript),
        ["a", "b"],
        "the unknown entry stays in the chain"
    );
    let copy = dir.path().join("copy.jsonl");
    transcript.save_copy(&copy).expect("copy");
    assert_eq!(fs::read(&copy).expect("read copy"), original);

    transcript
        .append(&[AgentMessage::user_text("x")])
        .expect("append");
    let after = fs::read(&path).expect("read");
    assert!(
        after.starts_with(&original),
        "appends never touch earlier bytes"
    );
}

#[test]
fn reports_a_corrupt_middle_line_and_keeps_the_rest() {
    let dir = tempfile::tempdir().expect("temp dir");
    let lines = [
        HEADER.to_owned(),
        user("a", None, "one"),
        "{this is not json".to_owned(),
        user("c", Some("a"), "three"),
    ];
    let lines: Vec<&str> = lines.iter().map(String::as_str).collect();
    let path = write(dir.path(), &lines);
    let transcript = store().open(&path).expect("open despite the corrupt line");
    let report = transcript.open_report();
    assert_eq!(report.corrupt_lines.len(), 1);
    let corrupt = &report.corrupt_lines[0];
    assert_eq!(corrupt.line, 3);
    let message = corrupt.to_string();
    assert!(
        message.contains("s1.jsonl") && message.contains("line 3"),
        "{message}"
    );
    assert_eq!(ids(&transcript), ["a", "c"]);
}

#[test]
fn sets_a_torn_tail_aside_and_appends_cleanly_after_it() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("s1.jsonl");
    let body = format!(
        "{HEADER}\n{}\n{{\"type\":\"message\",\"id\":\"x",
        user("a", None, "one")
    );
    fs::write(&path, &body).expect("write");
    let transcript = store().open(&path).expect("open");
    let torn = transcript
        .open_report()
        .torn_tail
        .expect("torn tail reported");
    assert_eq!(torn.bytes, 25);
    assert!(torn.saved_to.is_some_and(|side| side.exists()));
    let stored = transcript
        .append(&[AgentMessage::user_text("two")])
        .expect("append");
    drop(transcript);
    let reopened = store().open(&path).expect("reopen");
    assert_eq!(reopened.open_report(), OpenReport::default());
    assert_eq!(ids(&reopened), ["a".to_owned(), stored[0].id.clone()]);
}

#[test]
fn follows_the_leaf_through_branches() {
    let dir = tempfile::tempdir().expect("temp dir");
    let lines = [
        HEADER.to_owned(),
        user("a", None, "root"),
        user("dead", Some("a"), "abandoned branch"),
        user("b", Some("a"), "live branch"),
        user("c", Some("b"), "leaf"),
    ];
    let lines: Vec<&str> = lines.iter().map(String::as_str).collect();
    let transcript = store().open(&write(dir.path(), &lines)).expect("open");
    assert_eq!(ids(&transcript), ["a", "b", "c"]);
}

#[test]
fn honours_the_latest_compaction() {
    let dir = tempfile::tempdir().expect("temp dir");
    let compaction = r#"{"type":"compaction","id":"k","parentId":"c","timestamp":"2026-01-01T00:00:03.000Z","summary":"earlier work","firstKeptEntryId":"b","tokensBefore":900,"details":{"readFiles":["a.rs"],"modifiedFiles":[]}}"#;
    let lines = [
        HEADER.to_owned(),
        user("a", None, "one"),
        user("b", Some("a"), "two"),
        user("c", Some("b"), "three"),
        compaction.to_owned(),
        user("d", Some("k"), "four"),
    ];
    let lines: Vec<&str> = lines.iter().map(String::as_str).collect();
    let transcript = store().open(&write(dir.path(), &lines)).expect("open");
    let context = transcript.context();
    assert_eq!(ids(&transcript), ["k", "b", "c", "d"]);
    let branch: Vec<String> = transcript
        .active_branch()
        .into_iter()
        .map(|e| e.id)
        .collect();
    assert_eq!(
        branch,
        ["a", "b", "c", "d"],
        "the branch ignores the compaction"
    );
    assert_eq!(
        context.history.kind(0),
        Some(MessageKind::CompactionSummary)
    );
    assert!(context.starts_with_summary);
    assert_eq!(context.fresh_from, 3);
    let previous = context
        .previous_compaction
        .as_ref()
        .expect("previous compaction");
    assert_eq!(previous.summary, "earlier work");
    assert_eq!(previous.read_files, ["a.rs"]);
}

#[test]
fn one_handle_per_file_in_a_process() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = write(dir.path(), &[HEADER]);
    let store = store();
    let first = store.open(&path).expect("open");
    let second = store
        .open(&dir.path().join(".").join("s1.jsonl"))
        .expect("open again");
    first
        .append(&[AgentMessage::user_text("seen by both")])
        .expect("append");
    assert_eq!(second.history().len(), 1);
    // Another registry stands for another process: the file is locked.
    assert!(matches!(
        TranscriptStore::new(TranscriptConfig::default()).open(&path),
        Err(TranscriptError::Locked { .. })
    ));
}

#[test]
fn refuses_bad_headers_and_other_versions() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = write(dir.path(), &[&user("a", None, "no header")]);
    assert!(matches!(store().open(&path), Err(TranscriptError::BadHeader(c)) if c.line == 1));
    let path = write(
        dir.path(),
        &[r#"{"type":"session","version":2,"id":"s","timestamp":"","cwd":""}"#],
    );
    assert!(matches!(
        store().open(&path),
        Err(TranscriptError::UnsupportedVersion { found: 2, .. })
    ));
    assert!(matches!(
        store().open(&dir.path().join("missing.jsonl")),
        Err(TranscriptError::NotFound { .. })
    ));
}

#[test]
fn refuses_to_append_compaction_summaries_as_messages() {
    let dir = tempfile::tempdir().expect("temp dir");
    let transcript = store()
        .create(&dir.path().join("n.jsonl"), NewSession::default())
        .expect("create");
    let error = transcript
        .append(&[AgentMessage::CompactionSummary {
            summary: "s".into(),
            tokens_before: 1,
        }])
        .expect_err("refused");
    assert!(matches!(error, TranscriptError::InvalidAppend { .. }));
    assert_eq!(transcript.line_count(), 0, "nothing was written");
}

#[test]
fn rotation_continues_the_context_in_a_new_file() {
    let dir = tempfile::tempdir().expect("temp dir");
    let lines = [
        HEADER.to_owned(),
        r#"{"type":"thinking_level_change","id":"t","parentId":null,"timestamp":"2026-01-01T00:00:00.000Z","thinkingLevel":"high"}"#.into(),
        user("a", Some("t"), "one"),
        user("b", Some("a"), "two"),
        user("c", Some("b"), "three"),
    ];
    let lines: Vec<&str> = lines.iter().map(String::as_str).collect();
    let path = write(dir.path(), &lines);
    let store = store();
    let old = store.open(&path).expect("open");
    let old_cursor = match old.read_delta(None, 10, 1 << 20, OversizedEntry::DeliverAlone, None) {
        TranscriptDelta::Page { cursor, .. } => cursor,
        other => panic!("expected a page, got {other:?}"),
    };
    let compaction = old
        .append_compaction(&super::wire::CompactionFigures {
            summary: "summary",
            first_kept_entry_id: "b",
            tokens_before: 500,
            tokens_after: 40,
            details: &serde_json::json!({}),
        })
        .expect("compaction entry");
    let before = old.history();

    let new = store.rotate(&old, "b").expect("rotate");
    let messages = |history: &crate::contract::history::History| -> Vec<(String, AgentMessage)> {
        history
            .entries()
            .iter()
            .map(|e| (e.id.clone(), e.message.clone()))
            .collect()
    };
    assert_eq!(messages(&new.history()), messages(&before), "same context");
    assert_eq!(
        new.header().parent_session.as_deref(),
        Some(old.path().to_str().expect("utf-8 path"))
    );
    assert_eq!(
        old.successor().map(|s| s.session_id),
        Some(new.session_id())
    );
    assert_eq!(
        ids(&old)[0],
        compaction,
        "the rotation marker does not change the old file's context"
    );

    let text = fs::read_to_string(new.path()).expect("read new file");
    let lines: Vec<serde_json::Value> = text
        .lines()
        .map(|line| serde_json::from_str(line).expect("JSON line"))
        .collect();
    let types: Vec<&str> = lines
        .iter()
        .map(|l| l["type"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(
        types,
        [
            "session",
            "thinking_level_change",
            "message",
            "message",
            "compaction"
        ]
    );
    assert_eq!(lines[1]["parentId"], serde_json::Value::Null);
    assert_eq!(
        lines[2]["parentId"], "t",
        "the first kept entry hangs off the carried setting"
    );

    match new.read_delta(
        Some(&old_cursor),
        10,
        1 << 20,
        OversizedEntry::DeliverAlone,
        None,
    ) {
        TranscriptDelta::Reset { reason, .. } => assert!(reason.contains("rotated"), "{reason}"),
        other => panic!("expected a reset, got {other:?}"),
    }
    drop((old, new));
    let reopened = TranscriptStore::new(TranscriptConfig::default())
        .open(&path)
        .expect("reopen old");
    assert!(
        reopened.successor().is_some(),
        "the rotation is recorded in the old file"
    );
}

/// Side files (`*.torn-*`) next to the transcripts in `dir`.
fn side_files(dir: &Path) -> Vec<PathBuf> {
    fs::read_dir(dir)
        .expect("list dir")
        .map(|entry| entry.expect("dir entry").path())
        .filter(|path| path.to_string_lossy().contains(".torn-"))
        .collect()
}

#[test]
fn a_lone_unterminated_header_opens_and_the_next_append_starts_a_new_line() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("s1.jsonl");
    fs::write(&path, HEADER).expect("write");
    let transcript = store().open(&path).expect("a header without newline opens");
    assert_eq!(transcript.open_report(), OpenReport::default());
    assert_eq!(transcript.session_id(), "s1");
    assert_eq!(
        fs::read(&path).expect("read"),
        HEADER.as_bytes(),
        "opening changed nothing"
    );
    assert!(side_files(dir.path()).is_empty());

    let stored = transcript
        .append(&[AgentMessage::user_text("hi")])
        .expect("append");
    drop(transcript);
    let text = fs::read_to_string(&path).expect("read");
    assert!(text.starts_with(&format!("{HEADER}\n{{")), "{text}");
    let reopened = store().open(&path).expect("reopen");
    assert_eq!(reopened.open_report(), OpenReport::default());
    assert_eq!(ids(&reopened), [stored[0].id.clone()]);
}

#[test]
fn an_unterminated_garbage_first_line_is_refused_and_left_alone() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("s1.jsonl");
    let garbage = r#"{"type":"session","version":3,"id":"s1","#;
    fs::write(&path, garbage).expect("write");
    assert!(matches!(store().open(&path), Err(TranscriptError::BadHeader(c)) if c.line == 1));
    assert_eq!(fs::read(&path).expect("read"), garbage.as_bytes());
    assert!(
        side_files(dir.path()).is_empty(),
        "the header is never set aside"
    );
}

#[test]
fn a_read_only_open_takes_no_lock_and_cuts_nothing() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("s1.jsonl");
    let body = format!(
        "{HEADER}\n{}\n{{\"type\":\"message\",\"id\":\"x",
        user("a", None, "one")
    );
    fs::write(&path, &body).expect("write");
    // Another process is writing the file (and its last line, right now).
    let writer = fs::OpenOptions::new()
        .append(true)
        .open(&path)
        .expect("open as a writer");
    writer.try_lock().expect("the writer's lock");
    assert!(matches!(
        store().open(&path),
        Err(TranscriptError::Locked { .. })
    ));

    let reader = store().open_read_only(&path).expect("reads a locked file");
    assert_eq!(ids(&reader), ["a"]);
    let torn = reader
        .open_report()
        .torn_tail
        .expect("the torn tail is reported");
    assert_eq!((torn.line, torn.bytes, torn.saved_to), (3, 25, None));
    assert!(!reader.is_writable());
    assert!(matches!(
        reader.append(&[AgentMessage::user_text("no")]),
        Err(TranscriptError::ReadOnly { .. })
    ));
    assert_eq!(
        fs::read_to_string(&path).expect("read"),
        body,
        "bytes unchanged"
    );
    assert!(side_files(dir.path()).is_empty());
    drop(writer);

    // With a writer in this process, readers see its handle and its appends.
    let store = store();
    let live = store.open(&path).expect("open for writing");
    live.append(&[AgentMessage::user_text("two")])
        .expect("append");
    assert_eq!(ids(&store.open_read_only(&path).expect("read")), ids(&live));
}

#[test]
fn a_rotated_transcript_refuses_appends_naming_its_successor() {
    let dir = tempfile::tempdir().expect("temp dir");
    let lines = [
        HEADER.to_owned(),
        user("a", None, "one"),
        user("b", Some("a"), "two"),
    ];
    let lines: Vec<&str> = lines.iter().map(String::as_str).collect();
    let path = write(dir.path(), &lines);
    let store = TranscriptStore::new(TranscriptConfig {
        fsync: FsyncPolicy::Never,
        ..TranscriptConfig::default()
    });
    let old = store.open(&path).expect("open");

    // Appends race the rotation; none may be left behind in the old file.
    let appender = {
        let old = old.clone();
        std::thread::spawn(move || {
            let mut acked = Vec::new();
            loop {
                let rotated = old.successor().is_some();
                match old.append(&[AgentMessage::user_text("more")]) {
                    Ok(stored) => acked.push(stored[0].id.clone()),
                    Err(error) => return (acked, Some(error)),
                }
                if rotated {
                    return (acked, None);
                }
            }
        })
    };
    while old.line_count() < 20 {
        std::thread::yield_now();
    }
    let new = store.rotate(&old, "b").expect("rotate");
    let (acked, refusal) = appender.join().expect("appender thread");
    let in_new: std::collections::HashSet<String> = fs::read_to_string(new.path())
        .expect("read new file")
        .lines()
        .filter_map(|line| {
            serde_json::from_str::<serde_json::Value>(line).ok()?["id"]
                .as_str()
                .map(str::to_owned)
        })
        .collect();
    for id in &acked {
        assert!(
            in_new.contains(id),
            "acknowledged entry {id} was left in the old file"
        );
    }
    let refusal = refusal.expect("appends after the rotation are refused");
    assert!(
        matches!(&refusal, TranscriptError::Rotated { successor, .. } if successor == new.path()),
        "{refusal:?}"
    );
    assert!(refusal.to_string().contains(&*new.path().to_string_lossy()));
    assert!(matches!(
        store.rotate(&old, "b"),
        Err(TranscriptError::Rotated { .. })
    ));

    // The refusal survives a reopen: it comes from the marker on disk.
    drop((old, new));
    let reopened = TranscriptStore::new(TranscriptConfig::default())
        .open(&path)
        .expect("reopen old");
    assert!(matches!(
        reopened.append(&[AgentMessage::user_text("late")]),
        Err(TranscriptError::Rotated { .. })
    ));
}

#[test]
fn reports_messages_of_an_unknown_shape_instead_of_dropping_them_silently() {
    let dir = tempfile::tempdir().expect("temp dir");
    let lines = [
        HEADER.to_owned(),
        user("a", None, "read it"),
        r#"{"type":"message","id":"b","parentId":"a","timestamp":"2026-01-01T00:00:02.000Z","message":{"role":"assistant","content":[{"type":"toolCall","name":"read","arguments":{}}]}}"#.into(),
        r#"{"type":"message","id":"c","parentId":"b","timestamp":"2026-01-01T00:00:03.000Z","message":{"role":"toolResult","toolCallId":"lost","toolName":"read","content":[{"type":"text","text":"x"}],"isError":false}}"#.into(),
        "{broken".into(),
    ];
    let lines: Vec<&str> = lines.iter().map(String::as_str).collect();
    let path = write(dir.path(), &lines);
    let transcript = store().open_read_only(&path).expect("open");
    let report = transcript.open_report();
    assert_eq!(report.misshapen_entries.len(), 1);
    assert_eq!(report.misshapen_entries[0].line, 3);
    assert_eq!(ids(&transcript), ["a", "c"], "the entry stays in the tree");
    let problems = report.problems();
    assert_eq!(problems.len(), 2, "{problems:?}");
    assert!(
        problems[0].contains("s1.jsonl` line 3") && problems[0].contains("`b`"),
        "{problems:?}"
    );
    assert!(problems[1].contains("line 5"), "{problems:?}");
    assert!(!report.is_clean());
}

#[cfg(feature = "exact-tokens")]
#[test]
fn caches_exact_token_counts_when_configured() {
    use crate::contract::tokens::{self, Tokenizer};
    let dir = tempfile::tempdir().expect("temp dir");
    let path = write(dir.path(), &[HEADER, &user("a", None, "hello world")]);
    let config: TranscriptConfig =
        toml::from_str(r#"tokenizer = "o200k-base""#).expect("the config switch");
    assert_eq!(config.tokenizer, Tokenizer::O200kBase);
    let transcript = TranscriptStore::new(config).open(&path).expect("open");
    let stored = transcript
        .append(&[AgentMessage::user_text("héllo wörld, 你好")])
        .expect("append");
    let history = transcript.history();
    let exact = |message: &AgentMessage| tokens::count_message(message, Tokenizer::O200kBase);
    assert_eq!(
        history.tokens(0..1),
        2 + tokens::MESSAGE_OVERHEAD_TOKENS + tokens::BLOCK_OVERHEAD_TOKENS
    );
    assert_eq!(history.tokens(1..2), exact(&stored[0].message));
    assert_ne!(
        history.tokens(0..2),
        tokens::estimate_entries(history.entries()),
        "not the heuristic"
    );
}

#[test]
fn a_roll_back_continues_the_branch_from_the_given_entry() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = write(
        dir.path(),
        &[
            HEADER,
            &user("a", None, "kept"),
            &user("b", Some("a"), "dropped"),
        ],
    );
    let transcript = store().open(&path).expect("open");
    let error = transcript
        .roll_back_to(Some("nope"), &["b".into()], "test")
        .expect_err("unknown entry");
    assert!(error.to_string().contains("nope"), "{error}");
    transcript
        .roll_back_to(Some("a"), &["b".into()], "test")
        .expect("roll back");
    assert_eq!(ids(&transcript), ["a"]);
    let appended = transcript
        .append(&[AgentMessage::user_text("next")])
        .expect("append");
    drop(transcript);
    let reopened = store().open(&path).expect("reopen");
    assert_eq!(ids(&reopened), ["a".to_owned(), appended[0].id.clone()]);
    assert!(reopened.open_report().is_clean());
}

/// The context as a fresh process builds it from the file.
fn rebuilt(path: &Path) -> std::sync::Arc<super::context::ActiveContext> {
    store().open_read_only(path).expect("read").context()
}

/// What a context says, entry by entry.
fn described(context: &super::context::ActiveContext) -> String {
    let history = &context.history;
    let entries: Vec<String> = (0..history.len())
        .map(|index| {
            format!(
                "{}:{}:{:?}",
                history.entries()[index].id,
                history.tokens(index..index + 1),
                history.tool_pairing(index)
            )
        })
        .collect();
    format!(
        "{entries:?} summary={} fresh_from={} previous={:?}",
        context.starts_with_summary, context.fresh_from, context.previous_compaction
    )
}

#[test]
fn the_context_kept_across_appends_is_the_one_a_fresh_process_builds() {
    let dir = tempfile::tempdir().expect("temp dir");
    let compaction = r#"{"type":"compaction","id":"k","parentId":"b","timestamp":"2026-01-01T00:00:03.000Z","summary":"earlier work","firstKeptEntryId":"b","tokensBefore":900,"details":{}}"#;
    let lines = [
        HEADER.to_owned(),
        user("a", None, "one"),
        user("b", Some("a"), "two"),
        compaction.to_owned(),
        user("c", Some("k"), "three"),
    ];
    let lines: Vec<&str> = lines.iter().map(String::as_str).collect();
    let path = write(dir.path(), &lines);
    let transcript = store().open(&path).expect("open");
    let check = |step: &str| {
        assert_eq!(
            described(&transcript.context()),
            described(&rebuilt(&path)),
            "after {step}"
        );
    };
    check("opening");

    // A turn's appends: the kept context grows in place when no one else
    // holds it.
    let first = transcript.history().entries()[0].id.as_ptr();
    transcript
        .append_uncommitted(&[AgentMessage::user_text("four"), call("c1")])
        .expect("append");
    transcript
        .append(&[AgentMessage::assistant_text("five")])
        .expect("append");
    assert_eq!(
        transcript.history().entries()[0].id.as_ptr(),
        first,
        "the messages were reused, not copied"
    );
    check("appends");

    // Appends while an engine still holds the context: copied, the same.
    let held = transcript.history();
    transcript
        .append(&[AgentMessage::user_text("six")])
        .expect("append");
    assert_eq!(held.len() + 1, transcript.history().len());
    check("an append beside a held context");

    // A compaction, then a roll-back off the leaf: built anew.
    let kept = transcript.history().entries()[3].id.clone();
    transcript
        .append_compaction(&super::wire::CompactionFigures {
            summary: "later work",
            first_kept_entry_id: &kept,
            tokens_before: 700,
            tokens_after: 50,
            details: &serde_json::json!({}),
        })
        .expect("compaction");
    check("a compaction");
    transcript
        .append(&[AgentMessage::user_text("seven")])
        .expect("append");
    check("an append after the compaction");
    let leaf = transcript
        .history()
        .entries()
        .last()
        .expect("entries")
        .id
        .clone();
    let parent = rebuilt(&path).history.entries()[transcript.history().len() - 2]
        .id
        .clone();
    transcript
        .roll_back_to(Some(&parent), &[leaf], "test")
        .expect("roll back");
    check("a roll-back");
    transcript
        .append(&[AgentMessage::user_text("eight")])
        .expect("append");
    check("an append after the roll-back");
}
