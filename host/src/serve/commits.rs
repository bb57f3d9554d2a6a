//! Durable, idempotent turn commits: OpenClaw may retry a turn's
//! `commitTurn` with the same advancement key after a crash, and the second
//! time must hear `duplicate`. One row per session and key (a key is the
//! client's, unique within its session only: another session's turn with
//! the same key is its own), written before the engine hears of the turn: the [`TurnCommits`] trait, with an SQLite file in the
//! data directory ([`CommitStore`]) as the embedded implementation and the
//! shared PostgreSQL database (`PostgresCommits`) for many hosts.

use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};

use super::sessions::RawMessage;
use crate::contract::engine::WriteFence;
use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params};
use serde::Serialize;

/// The file under the data directory.
pub const COMMITS_FILE: &str = "turn-commits.sqlite3";

/// A commit store that could not be used.
#[derive(Debug, thiserror::Error)]
pub enum CommitError {
    /// The embedded database failed.
    #[error("turn commit store `{}`: {source}", path.display())]
    Sqlite {
        /// The database file.
        path: PathBuf,
        /// SQLite's error.
        source: rusqlite::Error,
    },
    /// The shared store failed.
    #[error("turn commit store: {0}")]
    Store(#[from] crate::store::StoreError),
    /// Another host holds a newer lease on the session: the turn was not
    /// recorded by this host.
    #[error("{0}; the turn was not committed here")]
    LeaseLost(#[from] crate::store::StaleLease),
}

/// A turn's messages as one JSON array: the client's own text, joined.
pub(super) fn messages_json(messages: &[RawMessage]) -> String {
    let mut json =
        String::with_capacity(2 + messages.iter().map(|m| m.get().len() + 1).sum::<usize>());
    json.push('[');
    for (index, message) in messages.iter().enumerate() {
        if index > 0 {
            json.push(',');
        }
        json.push_str(message.get());
    }
    json.push(']');
    json
}

/// Where turn commits are kept.
pub trait TurnCommits: Send + Sync {
    /// Records the turn `key` of `session_id` with its `messages`, once:
    /// `Duplicate` when the session already recorded the key (whatever the
    /// messages), by this host or any other sharing the store. Keys are
    /// scoped by session: the same key in another session is another turn.
    /// With `tail`, a store that keeps sessions' histories (the shared one)
    /// also keeps the turn's `messages` as its session's history from
    /// `tail.from` on, in the same transaction, when the turn is
    /// `Committed` (a `Duplicate` changes nothing); a store that keeps no
    /// histories (the embedded one) only commits. With `fence` (a shared
    /// store), refused ([`CommitError::LeaseLost`]) when another host holds
    /// a newer lease on the session.
    fn commit_with_history(
        &self,
        key: &str,
        session_id: &str,
        messages: &[RawMessage],
        tail: Option<HistoryTail<'_>>,
        fence: Option<&WriteFence>,
    ) -> Result<CommitStatus, CommitError>;

    /// [`commit_with_history`](Self::commit_with_history) without a history.
    fn commit(
        &self,
        key: &str,
        session_id: &str,
        messages: &[RawMessage],
        fence: Option<&WriteFence>,
    ) -> Result<CommitStatus, CommitError> {
        self.commit_with_history(key, session_id, messages, None, fence)
    }

    /// The message count recorded for the turn `key` of `session_id`, if any.
    fn get(&self, session_id: &str, key: &str) -> Result<Option<u64>, CommitError>;

    /// How many turns of `session_id` are recorded.
    fn count(&self, session_id: &str) -> Result<u64, CommitError>;

    /// The keys recorded for `session_id`, in the order they were committed.
    fn keys(&self, session_id: &str) -> Result<Vec<String>, CommitError>;
}

/// Where a turn's messages go in its session's stored history.
#[derive(Debug, Clone, Copy)]
pub struct HistoryTail<'a> {
    /// The position of the turn's first message in the session.
    pub from: usize,
    /// The client's digest of each of the turn's messages, if it sent one.
    pub digests: &'a [Option<String>],
}

/// What a commit did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum CommitStatus {
    /// First time for this key in this session: recorded.
    Committed,
    /// The session committed the key before: nothing done.
    Duplicate,
}

/// The turn commits of every session, in SQLite.
pub struct CommitStore {
    path: PathBuf,
    connection: Mutex<Connection>,
}

impl CommitStore {
    /// Opens (creating) the store at `path`.
    pub fn open(path: &Path) -> Result<Self, CommitError> {
        let fail = |source| CommitError::Sqlite {
            path: path.to_owned(),
            source,
        };
        let mut connection = Connection::open(path).map_err(fail)?;
        connection
            .execute_batch(
                "PRAGMA journal_mode = WAL;
                 PRAGMA synchronous = FULL;
                 PRAGMA busy_timeout = 5000;",
            )
            .map_err(fail)?;
        migrate(&mut connection).map_err(fail)?;
        Ok(Self {
            path: path.to_owned(),
            connection: Mutex::new(connection),
        })
    }

    fn error(&self, source: rusqlite::Error) -> CommitError {
        CommitError::Sqlite {
            path: self.path.clone(),
            source,
        }
    }

    fn connection(&self) -> std::sync::MutexGuard<'_, Connection> {
        self.connection
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }
}

/// The layout of the database, in `PRAGMA user_version`: 2 keys commits by
/// session and key; 1 (and 0, the files written before it was numbered)
/// keyed them by key alone, across sessions.
const SCHEMA_VERSION: i64 = 2;

/// Creates the table, or brings a database of an older layout to the current
/// one (its rows kept, in commit order), in one transaction.
fn migrate(connection: &mut Connection) -> rusqlite::Result<()> {
    let transaction = connection.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let version: i64 = transaction.query_row("PRAGMA user_version", [], |row| row.get(0))?;
    if version >= SCHEMA_VERSION {
        return Ok(());
    }
    transaction.execute_batch(
        "CREATE TABLE turn_commits_by_session (
             session_id      TEXT NOT NULL,
             advancement_key TEXT NOT NULL,
             message_count   INTEGER NOT NULL,
             messages_json   TEXT NOT NULL,
             committed_at_ms INTEGER NOT NULL,
             PRIMARY KEY (session_id, advancement_key)
         );",
    )?;
    let old_layout: bool = transaction.query_row(
        "SELECT count(*) > 0 FROM sqlite_master WHERE type = 'table' AND name = 'turn_commits'",
        [],
        |row| row.get(0),
    )?;
    if old_layout {
        transaction.execute_batch(
            "INSERT INTO turn_commits_by_session
                 (session_id, advancement_key, message_count, messages_json, committed_at_ms)
                 SELECT session_id, advancement_key, message_count, messages_json, committed_at_ms
                 FROM turn_commits ORDER BY rowid;
             DROP TABLE turn_commits;",
        )?;
    }
    transaction.execute_batch("ALTER TABLE turn_commits_by_session RENAME TO turn_commits;")?;
    transaction.pragma_update(None, "user_version", SCHEMA_VERSION)?;
    transaction.commit()
}

impl TurnCommits for CommitStore {
    /// One host, so no fence, and no histories kept: only the commit.
    fn commit_with_history(
        &self,
        key: &str,
        session_id: &str,
        messages: &[RawMessage],
        _tail: Option<HistoryTail<'_>>,
        _fence: Option<&WriteFence>,
    ) -> Result<CommitStatus, CommitError> {
        let json = messages_json(messages);
        let now = crate::transcript::unix_millis(std::time::SystemTime::now());
        let connection = self.connection();
        let inserted = connection
            .execute(
                "INSERT OR IGNORE INTO turn_commits
                     (advancement_key, session_id, message_count, messages_json, committed_at_ms)
                 VALUES (?1, ?2, ?3, ?4, ?5)",
                params![key, session_id, messages.len() as i64, json, now],
            )
            .map_err(|source| self.error(source))?;
        Ok(if inserted == 1 {
            CommitStatus::Committed
        } else {
            CommitStatus::Duplicate
        })
    }

    fn get(&self, session_id: &str, key: &str) -> Result<Option<u64>, CommitError> {
        let connection = self.connection();
        connection
            .query_row(
                "SELECT message_count FROM turn_commits
                 WHERE session_id = ?1 AND advancement_key = ?2",
                params![session_id, key],
                |row| Ok(row.get::<_, i64>(0)?.max(0) as u64),
            )
            .optional()
            .map_err(|source| self.error(source))
    }

    fn count(&self, session_id: &str) -> Result<u64, CommitError> {
        let connection = self.connection();
        connection
            .query_row(
                "SELECT COUNT(*) FROM turn_commits WHERE session_id = ?1",
                params![session_id],
                |row| row.get::<_, i64>(0),
            )
            .map(|count| count.max(0) as u64)
            .map_err(|source| self.error(source))
    }

    fn keys(&self, session_id: &str) -> Result<Vec<String>, CommitError> {
        let connection = self.connection();
        let mut statement = connection
            .prepare(
                "SELECT advancement_key FROM turn_commits WHERE session_id = ?1 ORDER BY rowid",
            )
            .map_err(|source| self.error(source))?;
        statement
            .query_map(params![session_id], |row| row.get::<_, String>(0))
            .and_then(|rows| rows.collect::<Result<Vec<_>, _>>())
            .map_err(|source| self.error(source))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hi() -> [RawMessage; 1] {
        [
            serde_json::value::RawValue::from_string(
                r#"{"role":"user","content":"hi"}"#.to_owned(),
            )
            .expect("JSON"),
        ]
    }

    #[test]
    fn a_key_commits_once_even_after_reopening() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join(COMMITS_FILE);
        let messages = hi();
        let store = CommitStore::open(&path).expect("opens");
        assert_eq!(
            store.commit("k1", "s", &messages, None).expect("commits"),
            CommitStatus::Committed
        );
        assert_eq!(
            store.commit("k1", "s", &[], None).expect("answers"),
            CommitStatus::Duplicate
        );
        drop(store);
        let store = CommitStore::open(&path).expect("reopens");
        assert_eq!(
            store.commit("k1", "s", &messages, None).expect("answers"),
            CommitStatus::Duplicate
        );
        assert_eq!(store.get("s", "k1").expect("reads"), Some(1));
        assert_eq!(store.count("s").expect("counts"), 1);
    }

    #[test]
    fn a_key_is_scoped_by_its_session() {
        let dir = tempfile::tempdir().expect("temp dir");
        let store = CommitStore::open(&dir.path().join(COMMITS_FILE)).expect("opens");
        let turn = hi();
        for session in ["a", "b"] {
            assert_eq!(
                store
                    .commit("turn-1", session, &turn, None)
                    .expect("commits"),
                CommitStatus::Committed,
                "session {session}"
            );
        }
        assert_eq!(
            store.commit("turn-1", "b", &turn, None).expect("answers"),
            CommitStatus::Duplicate
        );
        assert_eq!(store.keys("a").expect("lists"), ["turn-1"]);
        assert_eq!(store.keys("b").expect("lists"), ["turn-1"]);
    }

    #[test]
    fn a_store_keyed_across_sessions_is_migrated_with_its_rows() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join(COMMITS_FILE);
        // The layout before commits were scoped by session (no user_version).
        let old = Connection::open(&path).expect("opens");
        old.execute_batch(
            "CREATE TABLE turn_commits (
                 advancement_key TEXT PRIMARY KEY,
                 session_id      TEXT NOT NULL,
                 message_count   INTEGER NOT NULL,
                 messages_json   TEXT NOT NULL,
                 committed_at_ms INTEGER NOT NULL
             );
             INSERT INTO turn_commits VALUES ('z', 'a', 2, '[]', 1), ('k', 'a', 1, '[]', 2);",
        )
        .expect("old layout");
        drop(old);
        let store = CommitStore::open(&path).expect("migrates");
        assert_eq!(
            store.keys("a").expect("lists"),
            ["z", "k"],
            "commit order kept"
        );
        assert_eq!(store.get("a", "z").expect("reads"), Some(2));
        assert_eq!(
            store.commit("k", "a", &[], None).expect("answers"),
            CommitStatus::Duplicate,
            "a migrated key is still a duplicate in its session"
        );
        assert_eq!(
            store.commit("k", "b", &[], None).expect("commits"),
            CommitStatus::Committed,
            "and free in another"
        );
        drop(store);
        CommitStore::open(&path).expect("a migrated store opens again");
    }
}
