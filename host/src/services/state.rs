//! The engines' durable key-value store behind the `state-*` host imports:
//! the [`EngineState`] trait, with [`StateStore`] — one SQLite database in the
//! host's data directory — as the embedded implementation (the shared one is
//! `PostgresState`); in either, a private key space per
//! engine id, and limits per engine that bound what it takes on disk: a byte
//! quota counting each entry's key, value and [`ENTRY_OVERHEAD_BYTES`], and a
//! number of keys. Entries name their engine by a small number, so a long
//! engine id costs its bytes once, not once per entry; the write-ahead log
//! is truncated back to [`WAL_LIMIT_BYTES`] after each checkpoint. Every
//! write is one transaction: it happens entirely or not at all. An engine
//! call's writes are one batch ([`EngineState::commit`]): one transaction and
//! one sync per call, not per `state-set`.
//!
//! The same store keeps the engines' searchable memory (`host.index-*`):
//! documents count against the same limits as entries
//! ([`document_cost`](super::index::document_cost), one key each), a call's
//! index writes commit in the same transaction as its state writes
//! ([`CallWrites`]), and [`EngineState::search`] finds them (the embedded
//! index is `index_sqlite`, searched on a read connection of its own so a
//! long search never holds up writes).

use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};

use rusqlite::{Connection, OpenFlags, OptionalExtension, TransactionBehavior, params};
use serde::{Deserialize, Serialize};

use super::{index, index_sqlite};
use crate::contract::engine::WriteFence;
use crate::contract::index::{IndexOp, IndexPage, IndexQuery};
pub use crate::contract::state_batch::{StateUsage, StateWrite};

/// Longest key, in bytes.
pub const MAX_KEY_BYTES: usize = 1_024;

/// What one entry is counted as beyond its key and value: SQLite's row and
/// B-tree bookkeeping, rounded up, so tiny entries cannot fill a disk
/// their key and value bytes alone would not.
pub const ENTRY_OVERHEAD_BYTES: u64 = 64;

/// The size the write-ahead log is cut back to after a checkpoint.
pub const WAL_LIMIT_BYTES: u64 = 4 * 1024 * 1024;

/// The page cache of each connection to the database, KiB (`PRAGMA
/// cache_size`).
pub const PAGE_CACHE_KIB: i64 = 4 * 1024;

/// The layout of the database, in `PRAGMA user_version`: 3 adds the
/// engines' searchable memory; 2 numbers the engines; 0 (before it) keyed
/// every row by the engine's id text.
const SCHEMA_VERSION: i64 = 3;

/// File name of the database in the data directory.
pub const STATE_DB_FILE: &str = "state.sqlite3";

/// Limits of the state store (`state.*`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase", deny_unknown_fields)]
pub struct StateConfig {
    /// Bytes one engine may store: keys plus values plus
    /// [`ENTRY_OVERHEAD_BYTES`] per entry, and its indexed documents
    /// ([`document_cost`](super::index::document_cost)).
    pub quota_bytes: u64,
    /// Keys one engine may store, counting each indexed document as one.
    pub max_keys: u64,
}

impl Default for StateConfig {
    fn default() -> Self {
        Self {
            quota_bytes: 64 * 1024 * 1024,
            max_keys: 100_000,
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
    /// The shared store failed.
    #[error(transparent)]
    Store(#[from] crate::store::StoreError),
    /// The data directory could not be created.
    #[error("cannot create the data directory `{}`: {source}", path.display())]
    DataDir {
        /// The directory.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// Another host holds a newer lease on the session the writes were
    /// made for: they were refused.
    #[error("{0}; the writes were refused")]
    LeaseLost(#[from] crate::store::StaleLease),
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
    /// The write would take the engine past its number of keys.
    #[error("engine `{engine}` already stores {keys} keys, its limit (state.maxKeys)")]
    TooManyKeys {
        /// The engine id.
        engine: String,
        /// Keys it stores.
        keys: u64,
    },
    /// The key is empty or too long.
    #[error("state key `{key}` must be 1 to {MAX_KEY_BYTES} bytes long")]
    BadKey {
        /// The key (cut to 64 characters).
        key: String,
    },
    /// An index write breaks the rules of documents.
    #[error("cannot index the document: {reason}")]
    BadDocument {
        /// Which rule.
        reason: String,
    },
    /// A search breaks the rules of queries.
    #[error("cannot search the index: {reason}")]
    BadQuery {
        /// Which rule.
        reason: String,
    },
}

/// One engine call's writes, committed together ([`EngineState::commit`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CallWrites {
    /// State writes, in order: a value, or `None` to delete.
    pub state: Vec<StateWrite>,
    /// Index writes, in order.
    pub index: Vec<IndexOp>,
}

/// A durable key-value store with a private key space per engine id and
/// per-engine limits, enforced by the store itself (so they hold however
/// many hosts share it). Every write is atomic; a batch of writes
/// ([`EngineState::commit`]) is one transaction.
pub trait EngineState: Send + Sync + std::fmt::Debug {
    /// The value of `key` in `engine`'s store.
    fn get(&self, engine: &str, key: &str) -> Result<Option<Vec<u8>>, StateError>;

    /// Stores `value` under `key`, unless that takes `engine` past its quota
    /// or number of keys (writes that shrink its usage always succeed).
    fn set(&self, engine: &str, key: &str, value: &[u8]) -> Result<(), StateError>;

    /// Deletes `key`; answers whether it existed.
    fn delete(&self, engine: &str, key: &str) -> Result<bool, StateError>;

    /// Up to `limit` entries of `engine` whose key starts with `prefix`, in
    /// key (byte) order, after `start_after`.
    fn scan(
        &self,
        engine: &str,
        prefix: &str,
        start_after: Option<&str>,
        limit: u32,
    ) -> Result<Vec<(String, Vec<u8>)>, StateError>;

    /// Bytes `engine` uses now, as the quota counts them.
    fn usage(&self, engine: &str) -> Result<u64, StateError>;

    /// The limits every write of every engine is held to.
    fn limits(&self) -> Limits;

    /// What `engine` stores now and what its entry under `key` counts for:
    /// what a call's pending writes ([`StateBatch`]) are counted from.
    ///
    /// [`StateBatch`]: crate::contract::state_batch::StateBatch
    fn footprint(&self, engine: &str, key: &str) -> Result<Footprint, StateError>;

    /// What `engine` stores now and what its document `id` in `session`'s
    /// scope (`None`: the engine's own) counts for: what a call's pending
    /// index writes are counted from, and whether the document exists.
    fn index_footprint(
        &self,
        engine: &str,
        session: Option<&str>,
        id: &str,
    ) -> Result<Footprint, StateError>;

    /// Applies one call's state and index writes in one durable
    /// transaction: all of them, or none if the batch would take `engine`
    /// past a limit (judged where the whole batch ends), a write breaks a
    /// rule or the store fails.
    /// With `fence`, in a shared store: refused ([`StateError::LeaseLost`])
    /// when the session's current lease is not the fence's; an embedded
    /// store has one host and no leases, and ignores it.
    fn commit(
        &self,
        engine: &str,
        writes: CallWrites,
        fence: Option<&WriteFence>,
    ) -> Result<(), StateError>;

    /// One page of `engine`'s documents containing every word of `query`
    /// (case-insensitively, as substrings), best first, with snippets: in
    /// `session`'s scope only, or (`None`) all of them, the engine's own and
    /// every session's. `query.scope` is the caller's to turn into
    /// `session`; the store reads the text, limit and offset.
    fn search(
        &self,
        engine: &str,
        session: Option<&str>,
        query: &IndexQuery,
    ) -> Result<IndexPage, StateError>;
}

/// The state database (share it behind an `Arc`).
#[derive(Debug)]
pub struct StateStore {
    path: PathBuf,
    quota_bytes: u64,
    max_keys: u64,
    connection: Mutex<Connection>,
    /// Read-only, for searches: in WAL mode they read while writes go on.
    reader: Mutex<Connection>,
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
        let mut connection = Connection::open(path).map_err(sqlite)?;
        connection
            .execute_batch(&format!(
                "PRAGMA journal_mode = WAL;
                 PRAGMA synchronous = FULL;
                 PRAGMA journal_size_limit = {WAL_LIMIT_BYTES};
                 PRAGMA cache_size = -{PAGE_CACHE_KIB};"
            ))
            .map_err(sqlite)?;
        migrate(&mut connection).map_err(sqlite)?;
        let reader = Connection::open_with_flags(
            path,
            OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .and_then(|reader| {
            reader.execute_batch(&format!("PRAGMA cache_size = -{PAGE_CACHE_KIB};"))?;
            Ok(reader)
        })
        .map_err(sqlite)?;
        Ok(Self {
            path: path.to_owned(),
            quota_bytes: config.quota_bytes,
            max_keys: config.max_keys,
            connection: Mutex::new(connection),
            reader: Mutex::new(reader),
        })
    }

    fn connection(&self) -> std::sync::MutexGuard<'_, Connection> {
        // SQLite rolls back a transaction that a panic left open; the
        // connection itself stays usable.
        self.connection
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    fn reader(&self) -> std::sync::MutexGuard<'_, Connection> {
        self.reader.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn sqlite(&self, source: rusqlite::Error) -> StateError {
        StateError::Sqlite {
            path: self.path.clone(),
            source,
        }
    }
}

impl StateStore {
    /// Applies `writes`, then `index`, in one transaction, all or none,
    /// refused past the engine's limits ([`Limits::check_growth`] on the
    /// whole batch); answers how many of the deleted keys existed.
    fn apply(
        &self,
        engine: &str,
        writes: &[StateWrite],
        index: &[IndexOp],
    ) -> Result<usize, StateError> {
        for (key, _) in writes {
            check_key(key)?;
        }
        for op in index {
            index::check_op(op)?;
        }
        let sqlite = |source| self.sqlite(source);
        let mut connection = self.connection();
        let transaction = connection
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(sqlite)?;
        let number = engine_number(&transaction, engine).map_err(sqlite)?;
        let before = usage_of(&transaction, number).map_err(sqlite)?;
        let mut after = before;
        let mut removed = 0;
        for (key, value) in writes {
            let old = entry_bytes(&transaction, number, key).map_err(sqlite)?;
            match value {
                Some(value) => {
                    after = Limits::after_write(after, old, entry_cost(key, value.len()));
                    transaction
                        .prepare_cached(
                            "INSERT INTO entries (engine, key, value) VALUES (?1, ?2, ?3)
                             ON CONFLICT (engine, key) DO UPDATE SET value = excluded.value",
                        )
                        .and_then(|mut statement| statement.execute(params![number, key, value]))
                        .map_err(sqlite)?;
                }
                None => {
                    let Some(old) = old else { continue };
                    after = Limits::after_delete(after, old);
                    removed += 1;
                    transaction
                        .prepare_cached("DELETE FROM entries WHERE engine = ?1 AND key = ?2")
                        .and_then(|mut statement| statement.execute(params![number, key]))
                        .map_err(sqlite)?;
                }
            }
        }
        let after = index_sqlite::apply(&transaction, number, index, after).map_err(sqlite)?;
        // Refused: the transaction is dropped, rolling every write back.
        self.limits().check_growth(engine, before, after)?;
        set_usage(&transaction, number, after)
            .and_then(|()| transaction.commit())
            .map_err(sqlite)?;
        Ok(removed)
    }
}

impl EngineState for StateStore {
    /// The value of `key` in `engine`'s store.
    fn get(&self, engine: &str, key: &str) -> Result<Option<Vec<u8>>, StateError> {
        check_key(key)?;
        self.connection()
            .query_row(
                "SELECT value FROM entries
                 WHERE engine = (SELECT number FROM engines WHERE id = ?1) AND key = ?2",
                params![engine, key],
                |row| row.get(0),
            )
            .optional()
            .map_err(|source| self.sqlite(source))
    }

    /// Stores `value` under `key`, unless that takes `engine` past its quota
    /// (writes that shrink its usage always succeed).
    fn set(&self, engine: &str, key: &str, value: &[u8]) -> Result<(), StateError> {
        self.apply(engine, &[(key.to_owned(), Some(value.to_vec()))], &[])
            .map(|_| ())
    }

    /// Deletes `key`; answers whether it existed.
    fn delete(&self, engine: &str, key: &str) -> Result<bool, StateError> {
        self.apply(engine, &[(key.to_owned(), None)], &[])
            .map(|removed| removed > 0)
    }

    /// Up to `limit` entries of `engine` whose key starts with `prefix`, in
    /// key (byte) order, after `start_after`.
    fn scan(
        &self,
        engine: &str,
        prefix: &str,
        start_after: Option<&str>,
        limit: u32,
    ) -> Result<Vec<(String, Vec<u8>)>, StateError> {
        let connection = self.connection();
        let mut statement = connection
            .prepare_cached(
                "SELECT key, value FROM entries
                 WHERE engine = (SELECT number FROM engines WHERE id = ?1) AND key >= ?2 AND (?3 IS NULL OR key < ?3) AND (?4 IS NULL OR key > ?4)
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

    /// Bytes `engine` uses now, as the quota counts them.
    fn usage(&self, engine: &str) -> Result<u64, StateError> {
        self.connection()
            .query_row(
                "SELECT bytes FROM engines WHERE id = ?1",
                params![engine],
                |row| row.get::<_, i64>(0),
            )
            .optional()
            .map(|bytes| bytes.map_or(0, |bytes| bytes.max(0) as u64))
            .map_err(|source| self.sqlite(source))
    }

    fn limits(&self) -> Limits {
        Limits {
            quota_bytes: self.quota_bytes,
            max_keys: self.max_keys,
        }
    }

    fn footprint(&self, engine: &str, key: &str) -> Result<Footprint, StateError> {
        check_key(key)?;
        self.connection()
            .query_row(
                "SELECT bytes, keys,
                        (SELECT length(value) FROM entries WHERE engine = number AND key = ?2)
                 FROM engines WHERE id = ?1",
                params![engine, key],
                |row| {
                    Ok(Footprint {
                        usage: StateUsage {
                            bytes: row.get::<_, i64>(0)?.max(0) as u64,
                            keys: row.get::<_, i64>(1)?.max(0) as u64,
                        },
                        entry: row
                            .get::<_, Option<i64>>(2)?
                            .map(|length| entry_cost(key, length.max(0) as usize)),
                    })
                },
            )
            .optional()
            .map(Option::unwrap_or_default)
            .map_err(|source| self.sqlite(source))
    }

    fn index_footprint(
        &self,
        engine: &str,
        session: Option<&str>,
        id: &str,
    ) -> Result<Footprint, StateError> {
        index_sqlite::footprint(&self.connection(), engine, session, id)
            .map_err(|source| self.sqlite(source))
    }

    fn commit(
        &self,
        engine: &str,
        writes: CallWrites,
        _fence: Option<&WriteFence>,
    ) -> Result<(), StateError> {
        self.apply(engine, &writes.state, &writes.index).map(|_| ())
    }

    fn search(
        &self,
        engine: &str,
        session: Option<&str>,
        query: &IndexQuery,
    ) -> Result<IndexPage, StateError> {
        let words = index::check_search(session, query)?;
        let found = index_sqlite::search(&self.reader(), engine, session, &words, query)
            .map_err(|source| self.sqlite(source))?;
        // Snippets are cut with the read connection free for others.
        Ok(index::page(found, &words, query.limit))
    }
}

/// An engine's limits (`state.*`).
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Bytes one engine may store ([`StateConfig::quota_bytes`]).
    pub quota_bytes: u64,
    /// Keys one engine may store ([`StateConfig::max_keys`]).
    pub max_keys: u64,
}

impl Limits {
    /// What `engine` uses after writing an entry that counts for `new`
    /// over one that counted for `old` (`None`: a new key), given it uses
    /// `used` now; refused past a limit, unless the write shrinks it.
    pub fn after_set(
        self,
        engine: &str,
        used: StateUsage,
        old: Option<u64>,
        new: u64,
    ) -> Result<StateUsage, StateError> {
        let needed = Self::after_write(used, old, new);
        self.check_growth(engine, used, needed)?;
        Ok(needed)
    }

    /// What an engine using `used` uses after writing an entry that counts
    /// for `new` over one that counted for `old` (`None`: a new key).
    pub fn after_write(used: StateUsage, old: Option<u64>, new: u64) -> StateUsage {
        StateUsage {
            bytes: used.bytes.saturating_sub(old.unwrap_or(0)) + new,
            keys: used.keys + u64::from(old.is_none()),
        }
    }

    /// What `engine` uses after deleting an entry that counted for `old`.
    pub fn after_delete(used: StateUsage, old: u64) -> StateUsage {
        StateUsage {
            bytes: used.bytes.saturating_sub(old),
            keys: used.keys.saturating_sub(1),
        }
    }

    /// Refuses going from `before` to `after` when it grows what `engine`
    /// stores past a limit; shrinking is always allowed.
    pub fn check_growth(
        self,
        engine: &str,
        before: StateUsage,
        after: StateUsage,
    ) -> Result<(), StateError> {
        if after.bytes > self.quota_bytes && after.bytes > before.bytes {
            return Err(StateError::QuotaExceeded {
                engine: engine.to_owned(),
                needed: after.bytes,
                quota: self.quota_bytes,
            });
        }
        if after.keys > self.max_keys && after.keys > before.keys {
            return Err(StateError::TooManyKeys {
                engine: engine.to_owned(),
                keys: before.keys,
            });
        }
        Ok(())
    }
}

pub(crate) fn check_key(key: &str) -> Result<(), StateError> {
    if key.is_empty() || key.len() > MAX_KEY_BYTES {
        return Err(StateError::BadKey {
            key: key.chars().take(64).collect(),
        });
    }
    Ok(())
}

/// Creates the tables, or brings a database of an older layout to the
/// current one, in one transaction.
fn migrate(connection: &mut Connection) -> rusqlite::Result<()> {
    let transaction = connection.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let version: i64 = transaction.query_row("PRAGMA user_version", [], |row| row.get(0))?;
    if version >= SCHEMA_VERSION {
        return Ok(());
    }
    if version < 2 {
        numbered_engines(&transaction)?;
    }
    if version < 3 {
        transaction.execute_batch(index_sqlite::SCHEMA)?;
    }
    transaction.pragma_update(None, "user_version", SCHEMA_VERSION)?;
    transaction.commit()
}

/// Version 2: entries keyed by the engine's number, from a fresh database
/// or one keyed by the engine's id text.
fn numbered_engines(transaction: &Connection) -> rusqlite::Result<()> {
    transaction.execute_batch(
        "CREATE TABLE IF NOT EXISTS engines (
             number INTEGER PRIMARY KEY,
             id TEXT NOT NULL UNIQUE,
             bytes INTEGER NOT NULL DEFAULT 0,
             keys INTEGER NOT NULL DEFAULT 0
         );
         CREATE TABLE IF NOT EXISTS entries (
             engine INTEGER NOT NULL,
             key TEXT NOT NULL,
             value BLOB NOT NULL,
             PRIMARY KEY (engine, key)
         ) WITHOUT ROWID;",
    )?;
    let old_layout: bool = transaction.query_row(
        "SELECT count(*) > 0 FROM sqlite_master WHERE name = 'engine_state'",
        [],
        |row| row.get(0),
    )?;
    if old_layout {
        transaction.execute_batch(&format!(
            "INSERT OR IGNORE INTO engines (id) SELECT DISTINCT engine FROM engine_state;
             INSERT INTO entries (engine, key, value)
                 SELECT engines.number, engine_state.key, engine_state.value
                 FROM engine_state JOIN engines ON engines.id = engine_state.engine;
             DROP TABLE engine_state;
             DROP TABLE IF EXISTS engine_usage;
             UPDATE engines SET
                 bytes = (SELECT coalesce(sum(length(CAST(key AS BLOB)) + length(value)
                                              + {ENTRY_OVERHEAD_BYTES}), 0)
                          FROM entries WHERE engine = number),
                 keys = (SELECT count(*) FROM entries WHERE engine = number);"
        ))?;
    }
    Ok(())
}

/// What the quota counts for an entry of `key` with a value of
/// `value_bytes` bytes.
pub(crate) fn entry_cost(key: &str, value_bytes: usize) -> u64 {
    (key.len() + value_bytes) as u64 + ENTRY_OVERHEAD_BYTES
}

/// What an engine's store counts now, and what one of its entries counts for.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Footprint {
    /// The engine's usage.
    pub usage: StateUsage,
    /// What the entry counts for (`None`: no such key).
    pub entry: Option<u64>,
}

/// The number of `engine` (registered on its first write).
fn engine_number(connection: &Connection, engine: &str) -> rusqlite::Result<i64> {
    connection.execute(
        "INSERT INTO engines (id) VALUES (?1) ON CONFLICT (id) DO NOTHING",
        params![engine],
    )?;
    connection.query_row(
        "SELECT number FROM engines WHERE id = ?1",
        params![engine],
        |row| row.get(0),
    )
}

/// What the entry under `key` counts for, if there is one.
fn entry_bytes(connection: &Connection, engine: i64, key: &str) -> rusqlite::Result<Option<u64>> {
    connection
        .query_row(
            "SELECT length(value) FROM entries WHERE engine = ?1 AND key = ?2",
            params![engine, key],
            |row| row.get::<_, i64>(0),
        )
        .optional()
        .map(|length| length.map(|length| entry_cost(key, length.max(0) as usize)))
}

fn usage_of(connection: &Connection, engine: i64) -> rusqlite::Result<StateUsage> {
    connection.query_row(
        "SELECT bytes, keys FROM engines WHERE number = ?1",
        params![engine],
        |row| {
            Ok(StateUsage {
                bytes: row.get::<_, i64>(0)?.max(0) as u64,
                keys: row.get::<_, i64>(1)?.max(0) as u64,
            })
        },
    )
}

fn set_usage(connection: &Connection, engine: i64, usage: StateUsage) -> rusqlite::Result<()> {
    let clamp = |value: u64| i64::try_from(value).unwrap_or(i64::MAX);
    connection
        .execute(
            "UPDATE engines SET bytes = ?2, keys = ?3 WHERE number = ?1",
            params![engine, clamp(usage.bytes), clamp(usage.keys)],
        )
        .map(|_| ())
}

/// The smallest string greater than every string starting with `prefix`
/// (`None` when there is none: an empty prefix, or one of `char::MAX`s).
pub(crate) fn prefix_end(prefix: &str) -> Option<String> {
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
        let config = StateConfig {
            quota_bytes,
            ..StateConfig::default()
        };
        let store = StateStore::open_in(&dir.path().join("data"), &config).expect("open");
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
        let overhead = ENTRY_OVERHEAD_BYTES;
        let (_dir, store) = store(20 + overhead);
        store.set("e", "key", &[0; 10]).expect("13 bytes fit");
        let error = store
            .set("e", "other", &[0; 10])
            .expect_err("28 bytes do not");
        assert!(
            matches!(
                error,
                StateError::QuotaExceeded { needed, quota, .. }
                    if needed == 28 + 2 * overhead && quota == 20 + overhead
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
        assert_eq!(store.usage("e").expect("usage"), 20 + overhead);
        assert!(store.delete("e", "key").expect("delete"));
        assert!(!store.delete("e", "key").expect("delete again"));
        assert_eq!(store.usage("e").expect("usage"), 0);
        store.set("e", "other", &[0; 10]).expect("room again");
    }

    #[test]
    fn a_batch_commits_all_or_none_and_is_limited_as_a_whole() {
        let overhead = ENTRY_OVERHEAD_BYTES;
        let (_dir, store) = store(40 + 2 * overhead);
        store.set("e", "z-big", &[0; 30]).expect("35 bytes fit");
        // Freeing z-big makes room for the rest, though `a` comes first in
        // key order: the batch is judged by where it ends.
        let state = |writes: Vec<StateWrite>| CallWrites {
            state: writes,
            index: Vec::new(),
        };
        store
            .commit(
                "e",
                state(vec![
                    ("a".to_owned(), Some(vec![1; 20])),
                    ("b".to_owned(), Some(vec![2; 10])),
                    ("z-big".to_owned(), None),
                    ("never-stored".to_owned(), None),
                ]),
                None,
            )
            .expect("within the quota once applied");
        assert_eq!(store.get("e", "a").expect("get"), Some(vec![1; 20]));
        assert_eq!(store.get("e", "z-big").expect("get"), None);
        assert_eq!(store.usage("e").expect("usage"), 21 + 11 + 2 * overhead);
        let error = store
            .commit(
                "e",
                state(vec![
                    ("b".to_owned(), None),
                    ("c".to_owned(), Some(vec![3; 30])),
                ]),
                None,
            )
            .expect_err("over the quota");
        assert!(matches!(error, StateError::QuotaExceeded { .. }), "{error}");
        assert_eq!(
            store.get("e", "b").expect("get"),
            Some(vec![2; 10]),
            "b kept"
        );
        assert_eq!(store.get("e", "c").expect("get"), None, "nothing of c");
        assert_eq!(store.usage("e").expect("usage"), 21 + 11 + 2 * overhead);
        assert_eq!(
            store.footprint("e", "a").expect("footprint"),
            Footprint {
                usage: StateUsage {
                    bytes: 32 + 2 * overhead,
                    keys: 2
                },
                entry: Some(21 + overhead),
            }
        );
        assert_eq!(
            store.footprint("unknown", "a").expect("footprint"),
            Footprint::default()
        );
    }

    #[test]
    fn limits_the_number_of_keys() {
        let dir = tempfile::tempdir().expect("temp dir");
        let config = StateConfig {
            max_keys: 3,
            ..StateConfig::default()
        };
        let store = StateStore::open_in(dir.path(), &config).expect("open");
        for key in ["a", "b", "c"] {
            store.set("e", key, b"x").expect("within the limit");
        }
        let error = store.set("e", "d", b"x").expect_err("a fourth key");
        assert!(
            matches!(error, StateError::TooManyKeys { keys: 3, .. }),
            "{error}"
        );
        store
            .set("e", "a", b"replaced")
            .expect("replacing adds no key");
        store
            .set("other", "d", b"x")
            .expect("another engine has its own");
        assert!(store.delete("e", "a").expect("delete"));
        store.set("e", "d", b"x").expect("room again");
    }

    #[test]
    fn tiny_keys_cannot_fill_the_disk_past_the_quota() {
        let dir = tempfile::tempdir().expect("temp dir");
        let quota = 256 * 1024;
        let config = StateConfig {
            quota_bytes: quota,
            max_keys: u64::MAX,
        };
        let store = StateStore::open_in(dir.path(), &config).expect("open");
        // A long engine id is stored once, not in every entry.
        let engine = "e".repeat(1_000);
        let mut stored = 0u64;
        while store.set(&engine, &format!("{stored:x}"), b"").is_ok() {
            stored += 1;
        }
        assert!(stored > 1_000, "{stored}");
        assert!(stored <= quota / ENTRY_OVERHEAD_BYTES, "{stored}");
        drop(store);
        let on_disk: u64 = std::fs::read_dir(dir.path())
            .expect("data dir")
            .flatten()
            .map(|entry| entry.metadata().map_or(0, |meta| meta.len()))
            .sum();
        assert!(
            on_disk <= 4 * quota + WAL_LIMIT_BYTES,
            "{on_disk} bytes on disk for a {quota}-byte quota"
        );
    }

    #[test]
    fn a_database_of_the_old_layout_is_migrated() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join(STATE_DB_FILE);
        {
            let old = Connection::open(&path).expect("create");
            old.execute_batch(
                "CREATE TABLE engine_state (engine TEXT NOT NULL, key TEXT NOT NULL,
                     value BLOB NOT NULL, PRIMARY KEY (engine, key)) WITHOUT ROWID;
                 CREATE TABLE engine_usage (engine TEXT PRIMARY KEY, bytes INTEGER NOT NULL)
                     WITHOUT ROWID;
                 INSERT INTO engine_state VALUES ('lossless', 'k1', x'0102'), ('lossless', 'ключ', x'03');
                 INSERT INTO engine_usage VALUES ('lossless', 11);",
            )
            .expect("old layout");
        }
        let store = StateStore::open(&path, &StateConfig::default()).expect("migrates");
        assert_eq!(store.get("lossless", "k1").expect("get"), Some(vec![1, 2]));
        assert_eq!(store.get("lossless", "ключ").expect("get"), Some(vec![3]));
        assert_eq!(
            store.usage("lossless").expect("usage"),
            (2 + 2) + (8 + 1) + 2 * ENTRY_OVERHEAD_BYTES,
            "usage recounted in bytes, with the overhead"
        );
        drop(store);
        let again = StateStore::open(&path, &StateConfig::default()).expect("reopens");
        assert_eq!(again.get("lossless", "k1").expect("get"), Some(vec![1, 2]));
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
    fn a_search_does_not_wait_for_the_writer() {
        use crate::contract::index::{IndexDocument, IndexScope};
        let (_dir, store) = store(1 << 20);
        let store = std::sync::Arc::new(store);
        let document = IndexDocument {
            id: "a".to_owned(),
            text: "written before".to_owned(),
            metadata: None,
        };
        let writes = CallWrites {
            state: Vec::new(),
            index: vec![IndexOp::Put {
                session_id: None,
                document,
            }],
        };
        store.commit("e", writes, None).expect("puts");
        let writer = store.connection();
        let searcher = {
            let store = store.clone();
            std::thread::spawn(move || {
                let query = IndexQuery {
                    text: "before".to_owned(),
                    scope: IndexScope::Engine,
                    limit: 10,
                    offset: 0,
                };
                store.search("e", None, &query)
            })
        };
        let started = std::time::Instant::now();
        while !searcher.is_finished() {
            assert!(
                started.elapsed() < std::time::Duration::from_secs(10),
                "the search waits for the writer's connection"
            );
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        drop(writer);
        let page = searcher.join().expect("joins").expect("searches");
        assert_eq!(page.hits.len(), 1);
    }

    #[test]
    fn a_database_of_version_2_gains_the_index() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join(STATE_DB_FILE);
        {
            let old = Connection::open(&path).expect("create");
            old.execute_batch(
                "CREATE TABLE engines (number INTEGER PRIMARY KEY, id TEXT NOT NULL UNIQUE,
                     bytes INTEGER NOT NULL DEFAULT 0, keys INTEGER NOT NULL DEFAULT 0);
                 CREATE TABLE entries (engine INTEGER NOT NULL, key TEXT NOT NULL,
                     value BLOB NOT NULL, PRIMARY KEY (engine, key)) WITHOUT ROWID;
                 INSERT INTO engines (number, id, bytes, keys) VALUES (1, 'e', 66, 1);
                 INSERT INTO entries VALUES (1, 'k', x'01');
                 PRAGMA user_version = 2;",
            )
            .expect("version 2");
        }
        let store = StateStore::open(&path, &StateConfig::default()).expect("migrates");
        assert_eq!(store.get("e", "k").expect("get"), Some(vec![1]));
        let document = crate::contract::index::IndexDocument {
            id: "d".to_owned(),
            text: "indexed after the migration".to_owned(),
            metadata: None,
        };
        let cost = index::document_cost(&document);
        let writes = CallWrites {
            state: Vec::new(),
            index: vec![IndexOp::Put {
                session_id: None,
                document,
            }],
        };
        store.commit("e", writes, None).expect("indexes");
        assert_eq!(store.usage("e").expect("usage"), 66 + cost);
        let query = IndexQuery {
            text: "migration".to_owned(),
            scope: crate::contract::index::IndexScope::Engine,
            limit: 10,
            offset: 0,
        };
        assert_eq!(
            store
                .search("e", None, &query)
                .expect("searches")
                .hits
                .len(),
            1
        );
        drop(store);
        let version: i64 = Connection::open(&path)
            .expect("opens")
            .query_row("PRAGMA user_version", [], |row| row.get(0))
            .expect("version");
        assert_eq!(version, SCHEMA_VERSION);
    }

    #[test]
    fn prefix_end_is_the_next_string() {
        assert_eq!(prefix_end("ab").as_deref(), Some("ac"));
        assert_eq!(prefix_end("a\u{10FFFF}").as_deref(), Some("b"));
        assert_eq!(prefix_end("\u{D7FF}").as_deref(), Some("\u{E000}"));
        assert_eq!(prefix_end(""), None);
    }
}
