//! The engines' durable key-value store behind the `state-*` host imports:
//! one SQLite database in the host's data directory, a private key space per
//! engine id, and a byte quota per engine (key and value bytes counted).
//! Every write is one transaction: it happens entirely or not at all.

use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};

use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params};
use serde::{Deserialize, Serialize};

/// Longest key, in bytes.
pub const MAX_KEY_BYTES: usize = 1_024;

/// File name of the database in the data directory.
pub const STATE_DB_FILE: &str = "state.sqlite3";

/// Limits of the state store (`state.*`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase", deny_unknown_fields)]
pub struct StateConfig {
    /// Bytes (keys plus values) one engine may store.
    pub quota_bytes: u64,
}

impl Default for StateConfig {
    fn default() -> Self {
        Self {
            quota_bytes: 64 * 1024 * 1024,
        }
    }
}

/// Why a state operation failed.
#[derive(Debug, thiserror::Error)]
pub enum StateError {
    /// The database failed.
    #[error("state store `{}`: {source}", path.display())]
    Sqlite {
        /// The database file.
        path: PathBuf,
        /// SQLite's error.
        #[source]
        source: rusqlite::Error,
    },
    /// The data directory could not be created.
    #[error("cannot create the data directory `{}`: {source}", path.display())]
    DataDir {
        /// The directory.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The write would take the engine past its quota.
    #[error(
        "engine `{engine}` would store {needed} bytes, over its quota of {quota} (state.quotaBytes)"
    )]
    QuotaExceeded {
        /// The engine id.
        engine: String,
        /// Bytes the engine would use after the write.
        needed: u64,
        /// Its quota.
        quota: u64,
    },
    /// The key is empty or too long.
    #[error("state key `{key}` must be 1 to {MAX_KEY_BYTES} bytes long")]
    BadKey {
        /// The key (cut to 64 characters).
        key: String,
    },
}

/// The state database (share it behind an `Arc`).
#[derive(Debug)]
pub struct StateStore {
    path: PathBuf,
    quota_bytes: u64,
    connection: Mutex<Connection>,
}

impl StateStore {
    /// Opens (creating if needed) `<data_dir>/state.sqlite3`.
    pub fn open_in(data_dir: &Path, config: &StateConfig) -> Result<Self, StateError> {
        std::fs::create_dir_all(data_dir).map_err(|source| StateError::DataDir {
            path: data_dir.to_owned(),
            source,
        })?;
        Self::open(&data_dir.join(STATE_DB_FILE), config)
    }

    /// Opens (creating if needed) the database at `path`.
    pub fn open(path: &Path, config: &StateConfig) -> Result<Self, StateError> {
        let sqlite = |source| StateError::Sqlite {
            path: path.to_owned(),
            source,
        };
        let connection = Connection::open(path).map_err(sqlite)?;
        connection
            .execute_batch(
                "PRAGMA journal_mode = WAL;
                 PRAGMA synchronous = FULL;
                 CREATE TABLE IF NOT EXISTS engine_state (
                     engine TEXT NOT NULL,
                     key TEXT NOT NULL,
                     value BLOB NOT NULL,
                     PRIMARY KEY (engine, key)
                 ) WITHOUT ROWID;
                 CREATE TABLE IF NOT EXISTS engine_usage (
                     engine TEXT PRIMARY KEY,
                     bytes INTEGER NOT NULL
                 ) WITHOUT ROWID;",
            )
            .map_err(sqlite)?;
        Ok(Self {
            path: path.to_owned(),
            quota_bytes: config.quota_bytes,
            connection: Mutex::new(connection),
        })
    }

    /// The value of `key` in `engine`'s store.
    pub fn get(&self, engine: &str, key: &str) -> Result<Option<Vec<u8>>, StateError> {
        check_key(key)?;
        self.connection()
            .query_row(
                "SELECT value FROM engine_state WHERE engine = ?1 AND key = ?2",
                params![engine, key],
                |row| row.get(0),
            )
            .optional()
            .map_err(|source| self.sqlite(source))
    }

    /// Stores `value` under `key`, unless that takes `engine` past its quota
    /// (writes that shrink its usage always succeed).
    pub fn set(&self, engine: &str, key: &str, value: &[u8]) -> Result<(), StateError> {
        check_key(key)?;
        let mut connection = self.connection();
        let transaction = connection
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(|source| self.sqlite(source))?;
        let old = entry_bytes(&transaction, engine, key).map_err(|source| self.sqlite(source))?;
        let used = usage(&transaction, engine).map_err(|source| self.sqlite(source))?;
        let new = (key.len() + value.len()) as u64;
        let needed = used.saturating_sub(old.unwrap_or(0)) + new;
        if needed > self.quota_bytes && new > old.unwrap_or(0) {
            return Err(StateError::QuotaExceeded {
                engine: engine.to_owned(),
                needed,
                quota: self.quota_bytes,
            });
        }
        transaction
            .execute(
                "INSERT INTO engine_state (engine, key, value) VALUES (?1, ?2, ?3)
                 ON CONFLICT (engine, key) DO UPDATE SET value = excluded.value",
                params![engine, key, value],
            )
            .and_then(|_| set_usage(&transaction, engine, needed))
            .and_then(|()| transaction.commit())
            .map_err(|source| self.sqlite(source))
    }

    /// Deletes `key`; answers whether it existed.
    pub fn delete(&self, engine: &str, key: &str) -> Result<bool, StateError> {
        check_key(key)?;
        let mut connection = self.connection();
        let transaction = connection
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(|source| self.sqlite(source))?;
        let Some(old) =
            entry_bytes(&transaction, engine, key).map_err(|source| self.sqlite(source))?
        else {
            return Ok(false);
        };
        let used = usage(&transaction, engine).map_err(|source| self.sqlite(source))?;
        transaction
            .execute(
                "DELETE FROM engine_state WHERE engine = ?1 AND key = ?2",
                params![engine, key],
            )
            .and_then(|_| set_usage(&transaction, engine, used.saturating_sub(old)))
            .and_then(|()| transaction.commit())
            .map_err(|source| self.sqlite(source))?;
        Ok(true)
    }

    /// Up to `limit` entries of `engine` whose key starts with `prefix`, in
    /// key (byte) order, after `start_after`.
    pub fn scan(
        &self,
        engine: &str,
        prefix: &str,
        start_after: Option<&str>,
        limit: u32,
    ) -> Result<Vec<(String, Vec<u8>)>, StateError> {
        let connection = self.connection();
        let mut statement = connection
            .prepare_cached(
                "SELECT key, value FROM engine_state
                 WHERE engine = ?1 AND key >= ?2 AND (?3 IS NULL OR key < ?3) AND (?4 IS NULL OR key > ?4)
                 ORDER BY key LIMIT ?5",
            )
            .map_err(|source| self.sqlite(source))?;
        let rows = statement
            .query_map(
                params![
                    engine,
                    prefix,
                    prefix_end(prefix),
                    start_after,
                    i64::from(limit)
                ],
                |row| Ok((row.get::<_, String>(0)?, row.get::<_, Vec<u8>>(1)?)),
            )
            .map_err(|source| self.sqlite(source))?;
        rows.collect::<Result<_, _>>()
            .map_err(|source| self.sqlite(source))
    }

    /// Bytes `engine` uses now.
    pub fn usage(&self, engine: &str) -> Result<u64, StateError> {
        usage(&self.connection(), engine).map_err(|source| self.sqlite(source))
    }

    fn connection(&self) -> std::sync::MutexGuard<'_, Connection> {
        // SQLite rolls back a transaction that a panic left open; the
        // connection itself stays usable.
        self.connection
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    fn sqlite(&self, source: rusqlite::Error) -> StateError {
        StateError::Sqlite {
            path: self.path.clone(),
            source,
        }
    }
}

fn check_key(key: &str) -> Result<(), StateError> {
    if key.is_empty() || key.len() > MAX_KEY_BYTES {
        return Err(StateError::BadKey {
            key: key.chars().take(64).collect(),
        });
    }
    Ok(())
}

/// Bytes of the entry under `key`, if there is one.
fn entry_bytes(connection: &Connection, engine: &str, key: &str) -> rusqlite::Result<Option<u64>> {
    connection
        .query_row(
            "SELECT length(value) FROM engine_state WHERE engine = ?1 AND key = ?2",
            params![engine, key],
            |row| row.get::<_, i64>(0),
        )
        .optional()
        .map(|length| length.map(|length| key.len() as u64 + length.max(0) as u64))
}

fn usage(connection: &Connection, engine: &str) -> rusqlite::Result<u64> {
    connection
        .query_row(
            "SELECT bytes FROM engine_usage WHERE engine = ?1",
            params![engine],
            |row| row.get::<_, i64>(0),
        )
        .optional()
        .map(|bytes| bytes.unwrap_or(0).max(0) as u64)
}

fn set_usage(connection: &Connection, engine: &str, bytes: u64) -> rusqlite::Result<()> {
    connection
        .execute(
            "INSERT INTO engine_usage (engine, bytes) VALUES (?1, ?2)
             ON CONFLICT (engine) DO UPDATE SET bytes = excluded.bytes",
            params![engine, i64::try_from(bytes).unwrap_or(i64::MAX)],
        )
        .map(|_| ())
}

/// The smallest string greater than every string starting with `prefix`
/// (`None` when there is none: an empty prefix, or one of `char::MAX`s).
fn prefix_end(prefix: &str) -> Option<String> {
    let mut chars: Vec<char> = prefix.chars().collect();
    while let Some(last) = chars.pop() {
        let next = match last {
            '\u{D7FF}' => Some('\u{E000}'),
            other => char::from_u32(other as u32 + 1),
        };
        if let Some(next) = next {
            chars.push(next);
            return Some(chars.into_iter().collect());
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn store(quota_bytes: u64) -> (tempfile::TempDir, StateStore) {
        let dir = tempfile::tempdir().expect("temp dir");
        let store = StateStore::open_in(&dir.path().join("data"), &StateConfig { quota_bytes })
            .expect("open");
        (dir, store)
    }

    #[test]
    fn keeps_each_engine_private_and_survives_reopening() {
        let (dir, store) = store(1 << 20);
        store.set("a", "k", b"one").expect("set");
        store.set("b", "k", b"two").expect("set");
        assert_eq!(store.get("a", "k").expect("get"), Some(b"one".to_vec()));
        assert_eq!(store.get("b", "k").expect("get"), Some(b"two".to_vec()));
        assert_eq!(store.get("c", "k").expect("get"), None);
        drop(store);
        let reopened =
            StateStore::open_in(&dir.path().join("data"), &StateConfig::default()).expect("reopen");
        assert_eq!(reopened.get("a", "k").expect("get"), Some(b"one".to_vec()));
    }

    #[test]
    fn enforces_the_quota_and_tracks_usage() {
        let (_dir, store) = store(20);
        store.set("e", "key", &[0; 10]).expect("13 bytes fit");
        let error = store
            .set("e", "other", &[0; 10])
            .expect_err("28 bytes do not");
        assert!(
            matches!(
                error,
                StateError::QuotaExceeded {
                    needed: 28,
                    quota: 20,
                    ..
                }
            ),
            "{error}"
        );
        assert_eq!(
            store.get("e", "other").expect("get"),
            None,
            "nothing was written"
        );
        store
            .set("e", "key", &[0; 17])
            .expect("replacing within the quota");
        assert_eq!(store.usage("e").expect("usage"), 20);
        assert!(store.delete("e", "key").expect("delete"));
        assert!(!store.delete("e", "key").expect("delete again"));
        assert_eq!(store.usage("e").expect("usage"), 0);
        store.set("e", "other", &[0; 10]).expect("room again");
    }

    #[test]
    fn scans_a_prefix_in_pages() {
        let (_dir, store) = store(1 << 20);
        for key in ["a/1", "a/2", "a/3", "a0", "b/1", "a/\u{10FFFF}"] {
            store.set("e", key, key.as_bytes()).expect("set");
        }
        store.set("other", "a/9", b"x").expect("set");
        let keys =
            |page: Vec<(String, Vec<u8>)>| page.into_iter().map(|(key, _)| key).collect::<Vec<_>>();
        assert_eq!(
            keys(store.scan("e", "a/", None, 2).expect("scan")),
            ["a/1", "a/2"]
        );
        assert_eq!(
            keys(store.scan("e", "a/", Some("a/2"), 10).expect("scan")),
            ["a/3", "a/\u{10FFFF}"]
        );
        assert_eq!(keys(store.scan("e", "", None, 100).expect("scan")).len(), 6);
    }

    #[test]
    fn refuses_bad_keys() {
        let (_dir, store) = store(1 << 20);
        assert!(matches!(
            store.set("e", "", b"x"),
            Err(StateError::BadKey { .. })
        ));
        assert!(matches!(
            store.get("e", &"k".repeat(MAX_KEY_BYTES + 1)),
            Err(StateError::BadKey { .. })
        ));
    }

    #[test]
    fn prefix_end_is_the_next_string() {
        assert_eq!(prefix_end("ab").as_deref(), Some("ac"));
        assert_eq!(prefix_end("a\u{10FFFF}").as_deref(), Some("b"));
        assert_eq!(prefix_end("\u{D7FF}").as_deref(), Some("\u{E000}"));
        assert_eq!(prefix_end(""), None);
    }
}
