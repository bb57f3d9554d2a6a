//! The store conformance suite: each test runs once per backend — the
//! embedded one (files and SQLite in a data directory) and PostgreSQL (a
//! throw-away server, `pg_cluster`) — through the same public traits, with
//! two store instances standing for two hosts sharing the data.
//! Transcripts (ordered durable appends, reopening, delta pages, rotation,
//! branches, one writer at a time), engine state (privacy, byte order,
//! quotas), quarantine records (first failure wins, seen by the other host)
//! and turn commits (once per key); then what only the shared store has:
//! session leases, and clear errors for a bad or unreachable server. The
//! engines' searchable memory, kept by the state stores, has its own module
//! ([`index`]).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use ctxbox_host::contract::failure::{EngineFailure, FailureKind, Operation};
use ctxbox_host::contract::services::{OversizedEntry, TranscriptDelta};
use ctxbox_host::contract::types::AgentMessage;
use ctxbox_host::engines::PostgresQuarantine;
use ctxbox_host::engines::quarantine::{QuarantineStore, SHARED_REFRESH};
use ctxbox_host::serve::PostgresCommits;
use ctxbox_host::serve::commits::{COMMITS_FILE, CommitStatus, CommitStore, TurnCommits};
use ctxbox_host::services::PostgresState;
use ctxbox_host::services::state::{
    CallWrites, EngineState, StateConfig, StateError, StateStore, StateWrite,
};
use ctxbox_host::store::{LeaseError, Postgres, SessionLeases};
use ctxbox_host::transcript::{
    NewSession, PostgresLogs, TranscriptConfig, TranscriptError, TranscriptStore,
};
use serde_json::json;

use crate::pg_cluster;

mod index;

/// One backend under test.
enum Backend {
    Embedded(tempfile::TempDir),
    Postgres(String),
}

/// The embedded backend, and PostgreSQL when a test server is available.
fn backends(test: &str) -> Vec<Backend> {
    let mut all = vec![Backend::Embedded(tempfile::tempdir().expect("temp dir"))];
    if let Some(url) = pg_cluster::database(test) {
        all.push(Backend::Postgres(url));
    }
    all
}

impl Backend {
    fn name(&self) -> &'static str {
        match self {
            Self::Embedded(_) => "embedded",
            Self::Postgres(_) => "postgres",
        }
    }

    /// A new connection, as another host would open one.
    fn connect(url: &str) -> Arc<Postgres> {
        Postgres::connect(url, 4).expect("connects to the test server")
    }

    /// A host's transcript store.
    fn transcripts(&self) -> TranscriptStore {
        match self {
            Self::Embedded(_) => TranscriptStore::new(TranscriptConfig::default()),
            Self::Postgres(url) => TranscriptStore::with_logs(
                TranscriptConfig::default(),
                Arc::new(PostgresLogs::new(Self::connect(url))),
            ),
        }
    }

    /// Where transcript `name` lives.
    fn path(&self, name: &str) -> PathBuf {
        match self {
            Self::Embedded(dir) => dir.path().join("sessions").join(name),
            Self::Postgres(_) => PathBuf::from("/sessions").join(name),
        }
    }

    fn state(&self, config: &StateConfig) -> Arc<dyn EngineState> {
        match self {
            Self::Embedded(dir) => {
                Arc::new(StateStore::open_in(dir.path(), config).expect("opens"))
            }
            Self::Postgres(url) => Arc::new(PostgresState::new(Self::connect(url), config)),
        }
    }

    fn quarantine(&self) -> QuarantineStore {
        match self {
            Self::Embedded(dir) => {
                QuarantineStore::open(&dir.path().join("quarantine.sqlite3"), None).expect("opens")
            }
            Self::Postgres(url) => QuarantineStore::with_backend(
                Box::new(PostgresQuarantine::new(Self::connect(url))),
                None,
            )
            .expect("opens"),
        }
    }

    fn commits(&self) -> Box<dyn TurnCommits> {
        match self {
            Self::Embedded(dir) => {
                Box::new(CommitStore::open(&dir.path().join(COMMITS_FILE)).expect("opens"))
            }
            Self::Postgres(url) => Box::new(PostgresCommits::new(Self::connect(url))),
        }
    }
}

fn session(id: &str) -> NewSession {
    NewSession {
        session_id: Some(id.to_owned()),
        cwd: "/work".to_owned(),
        parent_session: None,
    }
}

fn texts(count: usize, tag: &str) -> Vec<AgentMessage> {
    (0..count)
        .map(|index| {
            if index % 2 == 0 {
                AgentMessage::user_text(format!("{tag} question {index} — 你好"))
            } else {
                AgentMessage::assistant_text(format!("{tag} answer {index}"))
            }
        })
        .collect()
}

#[test]
fn transcripts_keep_every_acknowledged_append_in_order() {
    for backend in backends("transcripts_keep_every_acknowledged_append_in_order") {
        let name = backend.name();
        let path = backend.path("ordered.jsonl");
        let mut ids = Vec::new();
        {
            let store = backend.transcripts();
            let transcript = store.create(&path, session("ordered")).expect("creates");
            for batch in 0..5 {
                let stored = transcript
                    .append(&texts(3, &format!("b{batch}")))
                    .expect("appends");
                ids.extend(stored.into_iter().map(|entry| entry.id));
            }
            let uncommitted = transcript
                .append_uncommitted(&texts(2, "late"))
                .expect("appends");
            ids.extend(uncommitted.into_iter().map(|entry| entry.id));
            transcript.commit().expect("commits");
            assert!(
                matches!(
                    store.create(&path, session("again")),
                    Err(TranscriptError::AlreadyExists { .. })
                ),
                "{name}: a transcript is created once"
            );
        }
        // Another host (a new store) reads everything, in order.
        let reopened = backend.transcripts().open(&path).expect("reopens");
        let read: Vec<String> = reopened
            .active_branch()
            .into_iter()
            .map(|entry| entry.id)
            .collect();
        assert_eq!(
            read, ids,
            "{name}: every acknowledged entry, in append order"
        );
        assert_eq!(reopened.session_id(), "ordered", "{name}");
        assert_eq!(reopened.history().len(), ids.len(), "{name}");
        assert!(
            reopened.open_report().is_clean(),
            "{name}: {:?}",
            reopened.open_report()
        );
        let entries = reopened.active_branch();
        for pair in entries.windows(2) {
            assert_eq!(
                pair[1].parent_id.as_deref(),
                Some(pair[0].id.as_str()),
                "{name}: a chain"
            );
        }
        assert!(
            matches!(
                backend.transcripts().open(&backend.path("missing.jsonl")),
                Err(TranscriptError::NotFound { .. })
            ),
            "{name}: a missing transcript is named as such"
        );
    }
}

#[test]
fn transcripts_page_deltas_branch_and_rotate() {
    for backend in backends("transcripts_page_deltas_branch_and_rotate") {
        let name = backend.name();
        let store = backend.transcripts();
        let path = backend.path("paged.jsonl");
        let transcript = store.create(&path, session("paged")).expect("creates");
        let stored = transcript.append(&texts(7, "p")).expect("appends");

        // Delta pages of 3: 3, 3, 1, then an empty page.
        let mut cursor: Option<String> = None;
        let mut paged = Vec::new();
        for expected in [3, 3, 1, 0] {
            match transcript.read_delta(
                cursor.as_deref(),
                3,
                1 << 20,
                OversizedEntry::DeliverAlone,
                None,
            ) {
                TranscriptDelta::Page {
                    cursor: next,
                    entries,
                    ..
                } => {
                    assert_eq!(entries.len(), expected, "{name}");
                    paged.extend(entries.into_iter().map(|entry| entry.id));
                    cursor = Some(next);
                }
                other => panic!("{name}: a page, not {other:?}"),
            }
        }
        let ids: Vec<String> = stored.iter().map(|entry| entry.id.clone()).collect();
        assert_eq!(
            paged, ids,
            "{name}: the pages hold every entry once, in order"
        );

        // A branch: a byte-identical copy continuing on its own.
        let branch_path = backend.path("branch.jsonl");
        transcript.save_copy(&branch_path).expect("branches");
        assert!(
            transcript.save_copy(&branch_path).is_err(),
            "{name}: never over an existing one"
        );
        let branch = store.open(&branch_path).expect("opens the branch");
        assert_eq!(branch.active_branch().len(), 7, "{name}");
        branch
            .append(&texts(1, "branch only"))
            .expect("appends to the branch");
        assert_eq!(
            transcript.active_branch().len(),
            7,
            "{name}: the original is untouched"
        );

        // Rotation: the successor starts at the kept entry; the old refuses appends.
        let successor = store.rotate(&transcript, &ids[4]).expect("rotates");
        let kept: Vec<String> = successor
            .active_branch()
            .into_iter()
            .map(|entry| entry.id)
            .collect();
        assert_eq!(
            kept,
            ids[4..].to_vec(),
            "{name}: the kept entries carry over"
        );
        assert_eq!(
            transcript.successor().map(|next| next.session_id),
            Some(successor.session_id()),
            "{name}: the old transcript names its successor"
        );
        assert!(
            matches!(
                transcript.append(&texts(1, "too late")),
                Err(TranscriptError::Rotated { .. })
            ),
            "{name}"
        );
        // Another host reads both (without a lock: this one still writes).
        let other = backend.transcripts();
        let again = other.open_read_only(&path).expect("reads the old one");
        assert!(
            again.successor().is_some(),
            "{name}: the rotation is durable"
        );
        match other
            .open_read_only(successor.path())
            .expect("reads")
            .read_delta(None, 100, 1 << 20, OversizedEntry::DeliverAlone, None)
        {
            TranscriptDelta::Page { entries, .. } => assert_eq!(entries.len(), 3, "{name}"),
            other => panic!("{name}: a page, not {other:?}"),
        }
    }
}

#[test]
fn a_subagents_transcript_forks_the_active_branch_and_is_discarded_whole() {
    for backend in backends("a_subagents_transcript_forks_the_active_branch_and_is_discarded_whole")
    {
        let name = backend.name();
        let store = backend.transcripts();
        let path = backend.path("parent.jsonl");
        let parent = store.create(&path, session("parent")).expect("creates");
        let kept = parent.append(&texts(4, "kept")).expect("appends");
        let abandoned = parent.append(&texts(2, "abandoned")).expect("appends");
        let ids: Vec<String> = abandoned.iter().map(|entry| entry.id.clone()).collect();
        parent
            .roll_back_to(Some(&kept[3].id), &ids, "test")
            .expect("rolls back");

        let child = store.create_child(&parent, "child-1", true).expect("forks");
        assert_eq!(child.session_id(), "child-1", "{name}");
        let forked: Vec<String> = child.active_branch().into_iter().map(|e| e.id).collect();
        let expected: Vec<String> = kept.iter().map(|entry| entry.id.clone()).collect();
        assert_eq!(forked, expected, "{name}: the active branch only");
        child
            .append(&texts(1, "child only"))
            .expect("the child goes on");
        assert_eq!(
            parent.active_branch().len(),
            4,
            "{name}: the parent is untouched"
        );

        let child_path = child.path().to_owned();
        store.discard(child).expect("discards");
        assert!(
            matches!(
                backend.transcripts().open(&child_path),
                Err(TranscriptError::NotFound { .. })
            ),
            "{name}: gone for every host"
        );
        assert_eq!(
            backend
                .transcripts()
                .open_read_only(&path)
                .expect("reads")
                .active_branch()
                .len(),
            4,
            "{name}: the parent survives the discard"
        );
    }
}

#[test]
fn a_second_writer_cannot_interleave_appends() {
    for backend in backends("a_second_writer_cannot_interleave_appends") {
        let name = backend.name();
        let path = backend.path("contended.jsonl");
        let host_a = backend.transcripts();
        let host_b = backend.transcripts();
        let a = host_a.create(&path, session("contended")).expect("creates");
        a.append(&texts(2, "a")).expect("appends");
        match host_b.open(&path) {
            // Files: the first writer holds the lock.
            Err(TranscriptError::Locked { .. }) => {}
            // PostgreSQL: B may open, but A's next append makes B's stale.
            Ok(b) => {
                a.append(&texts(1, "a again")).expect("appends");
                assert!(
                    matches!(
                        b.append(&texts(1, "b")),
                        Err(TranscriptError::Conflict { .. })
                    ),
                    "{name}: a stale writer is refused"
                );
            }
            Err(other) => panic!("{name}: unexpected {other}"),
        }
        drop(a);
        drop(host_a);
        let entries = backend
            .transcripts()
            .open(&path)
            .expect("reopens")
            .active_branch();
        assert!(
            entries
                .iter()
                .all(|entry| !format!("{:?}", entry.message).contains("b question")),
            "{name}: nothing of the refused writer"
        );
    }
}

#[test]
fn engine_state_is_private_ordered_and_within_its_limits() {
    for backend in backends("engine_state_is_private_ordered_and_within_its_limits") {
        let name = backend.name();
        let config = StateConfig {
            quota_bytes: 4_096,
            max_keys: 10,
        };
        let state = backend.state(&config);
        state.set("alpha", "k/b", b"two").expect("sets");
        state.set("alpha", "k/a", b"one").expect("sets");
        state.set("alpha", "k/\u{e9}", b"accent").expect("sets");
        state.set("alpha", "other", b"x").expect("sets");
        state.set("beta", "k/a", b"beta's").expect("sets");
        let other_host = backend.state(&config);
        assert_eq!(
            other_host.get("alpha", "k/a").expect("gets"),
            Some(b"one".to_vec()),
            "{name}"
        );
        assert_eq!(
            other_host.get("beta", "k/a").expect("gets"),
            Some(b"beta's".to_vec()),
            "{name}: private"
        );
        let keys: Vec<String> = other_host
            .scan("alpha", "k/", None, 10)
            .expect("scans")
            .into_iter()
            .map(|(key, _)| key)
            .collect();
        assert_eq!(
            keys,
            ["k/a", "k/b", "k/\u{e9}"],
            "{name}: byte order, prefix only"
        );
        let page: Vec<String> = other_host
            .scan("alpha", "k/", Some("k/a"), 1)
            .expect("scans")
            .into_iter()
            .map(|(key, _)| key)
            .collect();
        assert_eq!(page, ["k/b"], "{name}: paged after a key");

        // The quota counts key + value + 64 per entry, across hosts.
        let used = state.usage("alpha").expect("usage");
        assert_eq!(
            used,
            (3 + 3) + (3 + 3) + (4 + 6) + (5 + 1) + 4 * 64,
            "{name}"
        );
        let big = vec![7u8; 4_096];
        assert!(
            matches!(
                other_host.set("alpha", "big", &big),
                Err(StateError::QuotaExceeded { .. })
            ),
            "{name}: over the quota"
        );
        assert_eq!(
            state.get("alpha", "big").expect("gets"),
            None,
            "{name}: nothing half-written"
        );
        for index in 0..6 {
            state
                .set("alpha", &format!("n{index}"), b"")
                .expect("within the key limit");
        }
        assert!(
            matches!(
                other_host.set("alpha", "n-last", b""),
                Err(StateError::TooManyKeys { .. })
            ),
            "{name}: the key limit holds for the other host too"
        );
        assert!(other_host.delete("alpha", "n0").expect("deletes"), "{name}");
        assert!(
            !state.delete("alpha", "n0").expect("deletes"),
            "{name}: once"
        );
        other_host.set("alpha", "n-last", b"").expect("room again");
        assert!(
            matches!(state.set("alpha", "", b""), Err(StateError::BadKey { .. })),
            "{name}"
        );
    }
}

#[test]
fn a_calls_batch_of_state_writes_commits_all_or_none() {
    for backend in backends("a_calls_batch_of_state_writes_commits_all_or_none") {
        let name = backend.name();
        let config = StateConfig {
            quota_bytes: 200 + 2 * 64,
            max_keys: 10,
        };
        let state = backend.state(&config);
        state.set("e", "z", &[0; 150]).expect("sets");
        let other_host = backend.state(&config);
        // Judged where it ends: deleting `z` makes room for `a`, which
        // comes first in key order.
        let state_writes = |writes: Vec<StateWrite>| CallWrites {
            state: writes,
            index: Vec::new(),
        };
        other_host
            .commit(
                "e",
                state_writes(vec![
                    ("a".to_owned(), Some(vec![1; 120])),
                    ("b".to_owned(), Some(b"two".to_vec())),
                    ("z".to_owned(), None),
                ]),
                None,
                None,
            )
            .expect("commits");
        assert_eq!(
            state.get("e", "a").expect("gets"),
            Some(vec![1; 120]),
            "{name}"
        );
        assert_eq!(state.get("e", "z").expect("gets"), None, "{name}");
        let footprint = state.footprint("e", "a").expect("footprint");
        assert_eq!(footprint.entry, Some(121 + 64), "{name}");
        assert_eq!(
            (footprint.usage.bytes, footprint.usage.keys),
            (121 + 4 + 2 * 64, 2),
            "{name}"
        );
        let refused = state.commit(
            "e",
            state_writes(vec![
                ("b".to_owned(), None),
                ("c".to_owned(), Some(vec![3; 150])),
            ]),
            None,
            None,
        );
        assert!(
            matches!(refused, Err(StateError::QuotaExceeded { .. })),
            "{name}: {refused:?}"
        );
        assert_eq!(
            other_host.get("e", "b").expect("gets"),
            Some(b"two".to_vec()),
            "{name}: the refused batch's delete is rolled back"
        );
        assert_eq!(other_host.get("e", "c").expect("gets"), None, "{name}");
        assert_eq!(
            other_host.usage("e").expect("usage"),
            121 + 4 + 2 * 64,
            "{name}"
        );
    }
}

#[test]
fn quarantine_records_are_shared_and_the_first_failure_wins() {
    for backend in backends("quarantine_records_are_shared_and_the_first_failure_wins") {
        let name = backend.name();
        let host_a = backend.quarantine();
        let host_b = backend.quarantine();
        let first =
            EngineFailure::new("spinner", Operation::Assemble, FailureKind::Timeout, "spun");
        let later =
            EngineFailure::new("spinner", Operation::Ingest, FailureKind::Panic, "panicked");
        assert!(!host_b.is_blocked("spinner"), "{name}: nothing yet");
        host_a
            .record("plugin:zoo", Some("abc"), &first)
            .expect("records");
        // A host that checked just before the record was written sees it
        // within the refresh interval (embedded: one host, reopened).
        let host_b = match backend {
            Backend::Embedded(_) => backend.quarantine(),
            Backend::Postgres(_) => host_b,
        };
        let deadline = std::time::Instant::now() + SHARED_REFRESH + Duration::from_secs(1);
        while !host_b.is_blocked("spinner") {
            assert!(
                std::time::Instant::now() < deadline,
                "{name}: seen by the other host within {SHARED_REFRESH:?}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        let stored = host_b
            .record("plugin:zoo", Some("abc"), &later)
            .expect("records");
        assert_eq!(
            stored.classification, "timeout",
            "{name}: the first failure wins"
        );
        assert_eq!(stored.failures, 2, "{name}: later ones count up");
        let listed = backend.quarantine().list();
        assert_eq!(listed.len(), 1, "{name}");
        assert_eq!(
            (listed[0].operation.as_str(), listed[0].failures),
            ("assemble", 2),
            "{name}"
        );
        assert!(host_b.clear("spinner").expect("clears"), "{name}");
        let after = backend.quarantine();
        assert!(!after.is_blocked("spinner"), "{name}: cleared for everyone");
    }
}

#[test]
fn a_turn_commits_once_for_every_host() {
    for backend in backends("a_turn_commits_once_for_every_host") {
        let name = backend.name();
        let host_a = backend.commits();
        let host_b = backend.commits();
        let messages = [
            json!({"role": "user", "content": "hi"}),
            json!({"role": "assistant", "content": "yo"}),
        ]
        .map(|message| {
            serde_json::value::RawValue::from_string(message.to_string()).expect("JSON")
        });
        for turn in 0..3 {
            let key = format!("s:{turn}");
            assert_eq!(
                host_a.commit(&key, "s", &messages, None).expect("commits"),
                CommitStatus::Committed,
                "{name}"
            );
            assert_eq!(
                host_b.commit(&key, "s", &[], None).expect("answers"),
                CommitStatus::Duplicate,
                "{name}"
            );
        }
        assert_eq!(host_b.get("s", "s:1").expect("reads"), Some(2), "{name}");
        assert_eq!(host_b.count("s").expect("counts"), 3, "{name}");
        assert_eq!(
            host_b.keys("s").expect("lists"),
            ["s:0", "s:1", "s:2"],
            "{name}: commit order"
        );
        assert_eq!(host_a.get("s", "nope").expect("reads"), None, "{name}");
        assert_eq!(
            host_a.get("other", "s:1").expect("reads"),
            None,
            "{name}: another session's key"
        );
        assert_eq!(
            host_b
                .commit("s:1", "other", &messages, None)
                .expect("commits"),
            CommitStatus::Committed,
            "{name}: the same key in another session is another turn"
        );
        assert_eq!(host_a.keys("s").expect("lists").len(), 3, "{name}");
    }
}

#[test]
fn turn_commits_keyed_across_sessions_are_migrated_to_keys_scoped_by_session() {
    let Some(url) = pg_cluster::database("turn_commits_keyed_across_sessions") else {
        return;
    };
    // The schema as it was before migration 3 (a key unique across
    // sessions, no fencing tokens, one trigram index with the default
    // pending list), with a commit in it: migrated to the newest, then the
    // turn commits' key taken back.
    drop(Backend::connect(&url));
    pg_cluster::psql(
        &url,
        "ALTER TABLE ctxbox_turn_commits DROP CONSTRAINT ctxbox_turn_commits_pkey;
         ALTER TABLE ctxbox_turn_commits ADD PRIMARY KEY (advancement_key);
         DROP TABLE ctxbox_session_messages;
         ALTER TABLE ctxbox_session_leases DROP COLUMN token;
         DROP SEQUENCE ctxbox_lease_tokens;
         DROP INDEX ctxbox_index_documents_text_upto512, ctxbox_index_documents_text_upto2k,
             ctxbox_index_documents_text_upto8k, ctxbox_index_documents_text_over8k;
         CREATE INDEX ctxbox_index_documents_text
             ON ctxbox_index_documents USING gin (text gin_trgm_ops);
         DELETE FROM ctxbox_schema WHERE version >= 3;
         INSERT INTO ctxbox_turn_commits
             (advancement_key, session_id, message_count, messages_json, committed_at_ms)
             VALUES ('turn-1', 'a', 2, '[]', 1);",
    );
    let commits = PostgresCommits::new(Backend::connect(&url));
    assert_eq!(commits.get("a", "turn-1").expect("reads"), Some(2), "kept");
    assert_eq!(
        commits.commit("turn-1", "a", &[], None).expect("answers"),
        CommitStatus::Duplicate
    );
    assert_eq!(
        commits.commit("turn-1", "b", &[], None).expect("commits"),
        CommitStatus::Committed,
        "the same key in another session"
    );
    assert_eq!(commits.keys("b").expect("lists"), ["turn-1"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_lease_has_one_holder_and_is_renewed_while_held() {
    let Some(url) = pg_cluster::database("a_session_lease_has_one_holder") else {
        return;
    };
    let postgres = Backend::connect(&url);
    let host_a = SessionLeases::postgres(
        postgres.clone(),
        Duration::from_millis(1_500),
        Duration::ZERO,
    );
    let host_b = SessionLeases::postgres(
        postgres.clone(),
        Duration::from_millis(1_500),
        Duration::from_millis(200),
    );
    let held = host_a.acquire("s1").await.expect("granted");
    assert!(held.is_shared());
    // Held past its first lifetime: renewal keeps it.
    tokio::time::sleep(Duration::from_millis(2_000)).await;
    match host_b.acquire("s1").await {
        Err(LeaseError::Busy { holder, .. }) => assert_eq!(holder, host_a.holder()),
        other => panic!("busy, not {:?}", other.map(|_| ())),
    }
    let other_session = host_b.acquire("s2").await.expect("another session is free");
    drop(other_session);
    drop(held);
    // Released on drop (in the background): another host gets it within
    // its wait. (A dead holder's lease running out is the multi-host test's.)
    let waiting = SessionLeases::postgres(
        postgres,
        Duration::from_millis(1_500),
        Duration::from_secs(5),
    );
    let _taken = waiting
        .acquire("s1")
        .await
        .expect("granted after the release");
}

/// Fencing: a host whose lease ran out while it stalled (its renewals
/// stopped, as under SIGSTOP; here the row is made to run out) and whose
/// session another host took over has its turn commits and engine-state
/// writes refused; the new holder's go through, and the stale host's
/// release leaves the new lease alone. The processes' version of this is
/// `multi_host::a_host_stalled_past_its_lease_has_its_writes_refused`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stale_lease_cannot_write_once_another_host_took_the_session_over() {
    let Some(url) = pg_cluster::database("a_stale_lease_cannot_write") else {
        return;
    };
    let postgres = Backend::connect(&url);
    let leases = |wait_ms| {
        SessionLeases::postgres(
            postgres.clone(),
            Duration::from_millis(60_000),
            Duration::from_millis(wait_ms),
        )
    };
    let (host_a, host_b) = (leases(0), leases(200));
    let stale = host_a.acquire("s").await.expect("granted");
    let stale_fence = stale.fence().expect("a shared lease fences");
    // A's lease runs out without A noticing.
    let run_out = postgres.clone();
    postgres
        .run_async(move |client| async move {
            client
                .execute(
                    "UPDATE ctxbox_session_leases SET expires_at = now() - interval '1 second'",
                    &[],
                )
                .await
                .map_err(|error| run_out.query_error("expire", &error))
        })
        .await
        .expect("expires");
    let current = host_b.acquire("s").await.expect("taken over");
    let fence = current.fence().expect("fences");
    assert!(
        fence.token > stale_fence.token,
        "{fence:?} after {stale_fence:?}"
    );

    let state = PostgresState::new(postgres.clone(), &StateConfig::default());
    let writes = |value: &[u8]| CallWrites {
        state: vec![("k".to_owned(), Some(value.to_vec()))],
        index: Vec::new(),
    };
    let refused = state.commit("e", writes(b"stale"), Some(&stale_fence), None);
    assert!(
        matches!(refused, Err(StateError::LeaseLost(ref stale)) if stale.session == "s"),
        "{refused:?}"
    );
    state
        .commit("e", writes(b"current"), Some(&fence), None)
        .expect("the holder writes");
    assert_eq!(
        state.get("e", "k").expect("reads"),
        Some(b"current".to_vec())
    );

    let commits = PostgresCommits::new(postgres.clone());
    let refused = commits.commit("turn-1", "s", &[], Some(&stale_fence));
    assert!(
        refused.as_ref().is_err_and(|error| error
            .to_string()
            .contains("another host took the session over")),
        "{refused:?}"
    );
    assert_eq!(
        commits
            .commit("turn-1", "s", &[], Some(&fence))
            .expect("commits"),
        CommitStatus::Committed,
        "the stale refusal left no row behind"
    );
    assert_eq!(commits.count("s").expect("counts"), 1);

    // A's release (its drop) does not release B's lease.
    drop(stale);
    tokio::time::sleep(Duration::from_millis(300)).await;
    match leases(0).acquire("s").await {
        Err(LeaseError::Busy { holder, .. }) => assert_eq!(holder, host_b.holder()),
        other => panic!("still B's, not {:?}", other.map(|_| ())),
    }
    drop(current);

    // B's next request takes the lease again at once, while the release of
    // the last one is still on its way (in the background): that release
    // must not take the new lease away (found by `ctxbox bench --only
    // shared`, whose every turn is two requests).
    let again = host_b.acquire("s").await.expect("granted again");
    tokio::time::sleep(Duration::from_millis(300)).await;
    let fence = again.fence().expect("fences");
    assert_eq!(
        commits
            .commit("turn-2", "s", &[], Some(&fence))
            .expect("commits"),
        CommitStatus::Committed
    );
}

#[test]
fn a_bad_or_unreachable_server_is_a_clear_error() {
    let bad = Postgres::connect("postgres://u:hunter2@127.0.0.1:notaport/db", 1)
        .unwrap_err()
        .to_string();
    assert!(
        bad.contains("not a PostgreSQL URL") && !bad.contains("hunter2"),
        "{bad}"
    );
    let refused = Postgres::connect("postgres://u@127.0.0.1:1/db", 1)
        .unwrap_err()
        .to_string();
    assert!(
        refused.contains("cannot reach PostgreSQL at 127.0.0.1:1/db as u"),
        "{refused}"
    );
    let Some(url) = pg_cluster::database("a_bad_or_unreachable_server") else {
        return;
    };
    let missing = url
        .rsplit_once('/')
        .map(|(base, _)| format!("{base}/no_such_db"))
        .expect("a URL");
    let error = Postgres::connect(&missing, 1).unwrap_err().to_string();
    assert!(
        error.contains("no_such_db") && error.contains("does not exist"),
        "{error}"
    );
}
