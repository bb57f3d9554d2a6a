//! Durable, idempotent turn commits: OpenClaw may retry a turn's
//! `commitTurn` with the same advancement key after a crash, and the second
//! time must hear `duplicate`. One row per key, written before the engine
//! hears of the turn: the [`TurnCommits`] trait, with an SQLite file in the
//! data directory ([`CommitStore`]) as the embedded implementation and the
//! shared PostgreSQL database (`PostgresCommits`) for many hosts.

use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};

use rusqlite::{Connection, OptionalExtension, params};
use serde::Serialize;
use serde_json::Value;

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
}

/// Where turn commits are kept.
pub trait TurnCommits: Send + Sync {
    /// Records the turn `key` of `session_id` with its `messages`, once:
    /// `Duplicate` when the key is already recorded (whatever the messages),
    /// by this host or any other sharing the store.
    fn commit(
        &self,
        key: &str,
        session_id: &str,
        messages: &[Value],
    ) -> Result<CommitStatus, CommitError>;

    /// The session and message count recorded for `key`, if any.
    fn get(&self, key: &str) -> Result<Option<(String, u64)>, CommitError>;

    /// How many turns of `session_id` are recorded.
    fn count(&self, session_id: &str) -> Result<u64, CommitError>;

    /// The keys recorded for `session_id`, in the order they were committed.
    fn keys(&self, session_id: &str) -> Result<Vec<String>, CommitError>;
}

/// What a commit did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum CommitStatus {
    /// First time for this key: recorded.
    Committed,
    /// The key was committed before: nothing done.
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
        let connection = Connection::open(path).map_err(fail)?;
        connection
            .execute_batch(
                "PRAGMA journal_mode = WAL;
                 PRAGMA synchronous = FULL;
                 PRAGMA busy_timeout = 5000;
                 CREATE TABLE IF NOT EXISTS turn_commits (
                     advancement_key TEXT PRIMARY KEY,
                     session_id      TEXT NOT NULL,
                     message_count   INTEGER NOT NULL,
                     messages_json   TEXT NOT NULL,
                     committed_at_ms INTEGER NOT NULL
                 );",
            )
            .map_err(fail)?;
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

impl TurnCommits for CommitStore {
    /// Records the turn `key` of `session_id` with its `messages`, once:
    /// `Duplicate` when the key is already recorded (whatever the messages).
    fn commit(
        &self,
        key: &str,
        session_id: &str,
        messages: &[Value],
    ) -> Result<CommitStatus, CommitError> {
        let json = Value::Array(messages.to_vec()).to_string();
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

    /// The session and message count recorded for `key`, if any.
    fn get(&self, key: &str) -> Result<Option<(String, u64)>, CommitError> {
        let connection = self.connection();
        connection
            .query_row(
                "SELECT session_id, message_count FROM turn_commits WHERE advancement_key = ?1",
                params![key],
                |row| {
                    Ok((
                        row.get::<_, String>(0)?,
                        row.get::<_, i64>(1)?.max(0) as u64,
                    ))
                },
            )
            .optional()
            .map_err(|source| self.error(source))
    }

    /// How many turns of `session_id` are recorded.
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
        let keys = statement
            .query_map(params![session_id], |row| row.get::<_, String>(0))
            .and_then(|rows| rows.collect::<Result<Vec<_>, _>>())
            .map_err(|source| self.error(source));
        keys
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_commits_once_even_after_reopening() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join(COMMITS_FILE);
        let messages = [serde_json::json!({"role": "user", "content": "hi"})];
        let store = CommitStore::open(&path).expect("opens");
        assert_eq!(
            store.commit("k1", "s", &messages).expect("commits"),
            CommitStatus::Committed
        );
        assert_eq!(
            store.commit("k1", "s", &[]).expect("answers"),
            CommitStatus::Duplicate
        );
        drop(store);
        let store = CommitStore::open(&path).expect("reopens");
        assert_eq!(
            store.commit("k1", "s", &messages).expect("answers"),
            CommitStatus::Duplicate
        );
        assert_eq!(store.get("k1").expect("reads"), Some(("s".into(), 1)));
        assert_eq!(store.count("s").expect("counts"), 1);
    }
}
