//! The engines' durable key-value store behind the `state-*` host imports:
//! the [`EngineState`] trait, with [`StateStore`] — one SQLite database per
//! engine in the host's data directory (`state_files`) — as the embedded
//! implementation (the shared one is `PostgresState`); in either, a private
//! key space per engine id, and limits per engine that bound what it takes
//! on disk: a byte quota counting each entry's key, value and
//! [`ENTRY_OVERHEAD_BYTES`], and a number of keys. Every write is one
//! transaction: it happens entirely or not at all. An engine call's writes
//! are one batch ([`EngineState::commit`]): one transaction and one sync per
//! call, not per `state-set`.
//!
//! The same store keeps the engines' searchable memory (`host.index-*`):
//! documents count against the same limits as entries
//! ([`document_cost`](super::index::document_cost), one key each), a call's
//! index writes commit in the same transaction as its state writes
//! ([`CallWrites`]), and [`EngineState::search`] finds them (the embedded
//! index is `index_sqlite`, searched on its engine's read connection so a
//! long search never holds up writes).
//!
//! Work done for an engine call is bounded by that call: a commit and a
//! search given a deadline stop at it ([`StateError::Interrupted`]), and
//! holding one engine's database never holds another's.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params};
use serde::{Deserialize, Serialize};

use super::state_files::{self, EngineFile};
pub use super::state_files::{PAGE_CACHE_KIB, STATE_DB_FILE, STATE_DIR, WAL_LIMIT_BYTES};
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
    /// The work ran to the deadline of the engine call it was for and was
    /// stopped there (a write stopped so wrote nothing).
    #[error("{what} for engine `{engine}` was stopped at the call's deadline")]
    Interrupted {
        /// The engine id.
        engine: String,
        /// What was stopped.
        what: &'static str,
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

    /// [`get`](Self::get) when it can answer at once, without waiting for a
    /// lock, a file to open or a peer: `None` otherwise (and by default), to
    /// be asked on the blocking pool. For a caller on an async thread that
    /// must never stall other work.
    fn get_at_once(
        &self,
        _engine: &str,
        _key: &str,
    ) -> Option<Result<Option<Vec<u8>>, StateError>> {
        None
    }

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

    /// [`index_footprint`](Self::index_footprint) when it can answer at
    /// once (as [`get_at_once`](Self::get_at_once)); `None` otherwise.
    fn index_footprint_at_once(
        &self,
        _engine: &str,
        _session: Option<&str>,
        _id: &str,
    ) -> Option<Result<Footprint, StateError>> {
        None
    }

    /// Applies one call's state and index writes in one durable
    /// transaction: all of them, or none if the batch would take `engine`
    /// past a limit (judged where the whole batch ends), a write breaks a
    /// rule or the store fails.
    /// With `fence`, in a shared store: refused ([`StateError::LeaseLost`])
    /// when the session's current lease is not the fence's; an embedded
    /// store has one host and no leases, and ignores it.
    /// With `deadline`, stopped then ([`StateError::Interrupted`]), having
    /// written nothing.
    fn commit(
        &self,
        engine: &str,
        writes: CallWrites,
        fence: Option<&WriteFence>,
        deadline: Option<Instant>,
    ) -> Result<(), StateError>;

    /// One page of `engine`'s documents containing every word of `query`
    /// (case-insensitively, as substrings), best first, with snippets: in
    /// `session`'s scope only, or (`None`) all of them, the engine's own and
    /// every session's. `query.scope` is the caller's to turn into
    /// `session`; the store reads the text, limit and offset.
    /// With `deadline`, stopped then ([`StateError::Interrupted`]).
    fn search(
        &self,
        engine: &str,
        session: Option<&str>,
        query: &IndexQuery,
        deadline: Option<Instant>,
    ) -> Result<IndexPage, StateError>;
}

/// The embedded state store: one database per engine in the data
/// directory's `state/` folder (`state_files`), opened on the engine's
/// first use (share the store behind an `Arc`).
#[derive(Debug)]
pub struct StateStore {
    dir: PathBuf,
    limits: Limits,
    engines: Mutex<HashMap<String, Arc<EngineFile>>>,
}

impl StateStore {
    /// Opens the store in `data_dir` (creating its folder if needed),
    /// splitting a shared `state.sqlite3` of an older host into per-engine
    /// files first and bringing older engine files to the current layout.
    pub fn open_in(data_dir: &Path, config: &StateConfig) -> Result<Self, StateError> {
        let dir = data_dir.join(STATE_DIR);
        std::fs::create_dir_all(&dir).map_err(|source| StateError::DataDir {
            path: dir.clone(),
            source,
        })?;
        let shared = data_dir.join(STATE_DB_FILE);
        state_files::split_shared(&shared, &dir).map_err(|source| StateError::Sqlite {
            path: shared,
            source,
        })?;
        state_files::upgrade_all(&dir);
        Ok(Self {
            dir,
            limits: Limits {
                quota_bytes: config.quota_bytes,
                max_keys: config.max_keys,
            },
            engines: Mutex::new(HashMap::new()),
        })
    }

    /// The database file of `engine` (which may not exist yet).
    pub fn engine_path(&self, engine: &str) -> PathBuf {
        state_files::engine_file(&self.dir, engine)
    }

    /// `read` of `engine`'s file when it can run without waiting: the file
    /// is open and its connection free (no other call of the engine is
    /// writing). `None` otherwise. One indexed read of a local database in
    /// WAL mode, which no writer blocks.
    fn at_once<T>(
        &self,
        engine: &str,
        read: impl FnOnce(&EngineFile, &Connection) -> Result<T, StateError>,
    ) -> Option<Result<T, StateError>> {
        let file = self
            .engines
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(engine)
            .cloned()?;
        let connection = file.try_writer()?;
        Some(read(&file, &connection))
    }

    /// `engine`'s database, opened on first use.
    fn file(&self, engine: &str) -> Result<Arc<EngineFile>, StateError> {
        let open = || self.engines.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(file) = open().get(engine) {
            return Ok(file.clone());
        }
        // Opened outside the lock: other engines' calls never wait for it.
        let path = self.engine_path(engine);
        let opened = EngineFile::open(&path)
            .map(Arc::new)
            .map_err(|source| StateError::Sqlite { path, source })?;
        // Another call may have opened it meanwhile: the first one is kept
        // (and `opened` closed once the lock is released).
        let kept = open()
            .entry(engine.to_owned())
            .or_insert_with(|| opened.clone())
            .clone();
        Ok(kept)
    }
}

/// What `engine` stores in `file` and what its document `id` of
/// `session`'s scope counts for, read on `connection`.
fn read_document_footprint(
    file: &EngineFile,
    connection: &Connection,
    engine: &str,
    session: Option<&str>,
    id: &str,
) -> Result<Footprint, StateError> {
    index_sqlite::footprint(connection, engine, session, id)
        .map_err(|source| failure(file, engine, "reading the index", source))
}

/// The largest value [`StateStore::get_at_once`] reads on the calling
/// thread; a larger one is copied on the blocking pool.
const AT_ONCE_VALUE_BYTES: i64 = 64 * 1024;

/// The value of `engine`'s `key` in `file`, read on `connection` when it
/// is at most [`AT_ONCE_VALUE_BYTES`] long (`Ok(None)`: it is longer; its
/// length is read from the row's header, not its content).
fn read_small_entry(
    file: &EngineFile,
    connection: &Connection,
    engine: &str,
    key: &str,
) -> Result<Option<Option<Vec<u8>>>, StateError> {
    connection
        .prepare_cached(
            "SELECT CASE WHEN length(value) <= ?3 THEN value END FROM entries
             WHERE engine = (SELECT number FROM engines WHERE id = ?1) AND key = ?2",
        )
        .and_then(|mut statement| {
            statement
                .query_row(params![engine, key, AT_ONCE_VALUE_BYTES], |row| {
                    row.get::<_, Option<Vec<u8>>>(0)
                })
                .optional()
        })
        .map(|found| match found {
            None => Some(None),
            Some(Some(value)) => Some(Some(value)),
            Some(None) => None,
        })
        .map_err(|source| failure(file, engine, "reading state", source))
}

/// The value of `engine`'s `key` in `file`, read on `connection`.
fn read_entry(
    file: &EngineFile,
    connection: &Connection,
    engine: &str,
    key: &str,
) -> Result<Option<Vec<u8>>, StateError> {
    connection
        .prepare_cached(
            "SELECT value FROM entries
             WHERE engine = (SELECT number FROM engines WHERE id = ?1) AND key = ?2",
        )
        .and_then(|mut statement| {
            statement
                .query_row(params![engine, key], |row| row.get(0))
                .optional()
        })
        .map_err(|source| failure(file, engine, "reading state", source))
}

/// `source` as the store's error about `file`, naming what was stopped
/// when the deadline interrupted it.
fn failure(
    file: &EngineFile,
    engine: &str,
    what: &'static str,
    source: rusqlite::Error,
) -> StateError {
    if state_files::is_interrupted(&source) {
        StateError::Interrupted {
            engine: engine.to_owned(),
            what,
        }
    } else {
        StateError::Sqlite {
            path: file.path().to_owned(),
            source,
        }
    }
}

impl StateStore {
    /// Applies `writes`, then `index`, in one transaction, all or none,
    /// refused past the engine's limits ([`Limits::check_growth`] on the
    /// whole batch) and stopped at `deadline`; answers how many of the
    /// deleted keys existed.
    fn apply(
        &self,
        engine: &str,
        writes: &[StateWrite],
        index: &[IndexOp],
        deadline: Option<Instant>,
    ) -> Result<usize, StateError> {
        for (key, _) in writes {
            check_key(key)?;
        }
        for op in index {
            index::check_op(op)?;
        }
        let file = self.file(engine)?;
        let mut connection = file.writer();
        let mut refused = None;
        let removed = state_files::bounded(&mut connection, deadline, |connection| {
            let transaction =
                connection.transaction_with_behavior(TransactionBehavior::Immediate)?;
            let number = engine_number(&transaction, engine)?;
            let before = usage_of(&transaction, number)?;
            let mut after = before;
            let mut removed = 0;
            for (key, value) in writes {
                let old = entry_bytes(&transaction, number, key)?;
                match value {
                    Some(value) => {
                        after = Limits::after_write(after, old, entry_cost(key, value.len()));
                        transaction
                            .prepare_cached(
                                "INSERT INTO entries (engine, key, value) VALUES (?1, ?2, ?3)
                                 ON CONFLICT (engine, key) DO UPDATE SET value = excluded.value",
                            )?
                            .execute(params![number, key, value])?;
                    }
                    None => {
                        let Some(old) = old else { continue };
                        after = Limits::after_delete(after, old);
                        removed += 1;
                        transaction
                            .prepare_cached("DELETE FROM entries WHERE engine = ?1 AND key = ?2")?
                            .execute(params![number, key])?;
                    }
                }
            }
            let after = index_sqlite::apply(&transaction, number, index, after)?;
            if let Err(error) = self.limits.check_growth(engine, before, after) {
                // Refused: the transaction is dropped, rolling every write back.
                refused = Some(error);
                return Ok(0);
            }
            set_usage(&transaction, number, after)?;
            transaction.commit()?;
            Ok(removed)
        })
        .map_err(|source| {
            failure(
                &file,
                engine,
                "writing the call's state and documents",
                source,
            )
        })?;
        if let Some(error) = refused {
            return Err(error);
        }
        state_files::checkpoint_past_limit(&connection, file.path());
        Ok(removed)
    }
}

impl EngineState for StateStore {
    /// The value of `key` in `engine`'s store.
    fn get(&self, engine: &str, key: &str) -> Result<Option<Vec<u8>>, StateError> {
        check_key(key)?;
        let file = self.file(engine)?;
        read_entry(&file, &file.writer(), engine, key)
    }

    /// Reads at once when `engine`'s file is open, its connection free
    /// ([`StateStore::at_once`]) and the value at most 64 KiB.
    fn get_at_once(&self, engine: &str, key: &str) -> Option<Result<Option<Vec<u8>>, StateError>> {
        if let Err(error) = check_key(key) {
            return Some(Err(error));
        }
        self.at_once(engine, |file, connection| {
            read_small_entry(file, connection, engine, key)
        })?
        .transpose()
    }

    /// Stores `value` under `key`, unless that takes `engine` past its quota
    /// (writes that shrink its usage always succeed).
    fn set(&self, engine: &str, key: &str, value: &[u8]) -> Result<(), StateError> {
        self.apply(engine, &[(key.to_owned(), Some(value.to_vec()))], &[], None)
            .map(|_| ())
    }

    /// Deletes `key`; answers whether it existed.
    fn delete(&self, engine: &str, key: &str) -> Result<bool, StateError> {
        self.apply(engine, &[(key.to_owned(), None)], &[], None)
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
        let file = self.file(engine)?;
        let sqlite = |source| failure(&file, engine, "scanning state", source);
        let connection = file.writer();
        let mut statement = connection
            .prepare_cached(
                "SELECT key, value FROM entries
                 WHERE engine = (SELECT number FROM engines WHERE id = ?1) AND key >= ?2 AND (?3 IS NULL OR key < ?3) AND (?4 IS NULL OR key > ?4)
                 ORDER BY key LIMIT ?5",
            )
            .map_err(sqlite)?;
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
            .map_err(sqlite)?;
        rows.collect::<Result<_, _>>().map_err(sqlite)
    }

    /// Bytes `engine` uses now, as the quota counts them.
    fn usage(&self, engine: &str) -> Result<u64, StateError> {
        let file = self.file(engine)?;
        file.writer()
            .query_row(
                "SELECT bytes FROM engines WHERE id = ?1",
                params![engine],
                |row| row.get::<_, i64>(0),
            )
            .optional()
            .map(|bytes| bytes.map_or(0, |bytes| bytes.max(0) as u64))
            .map_err(|source| failure(&file, engine, "reading state usage", source))
    }

    fn limits(&self) -> Limits {
        self.limits
    }

    fn footprint(&self, engine: &str, key: &str) -> Result<Footprint, StateError> {
        check_key(key)?;
        let file = self.file(engine)?;
        file.writer()
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
            .map_err(|source| failure(&file, engine, "reading state", source))
    }

    fn index_footprint(
        &self,
        engine: &str,
        session: Option<&str>,
        id: &str,
    ) -> Result<Footprint, StateError> {
        let file = self.file(engine)?;
        read_document_footprint(&file, &file.writer(), engine, session, id)
    }

    /// Reads at once when `engine`'s file is open and its connection free
    /// ([`StateStore::at_once`]).
    fn index_footprint_at_once(
        &self,
        engine: &str,
        session: Option<&str>,
        id: &str,
    ) -> Option<Result<Footprint, StateError>> {
        self.at_once(engine, |file, connection| {
            read_document_footprint(file, connection, engine, session, id)
        })
    }

    fn commit(
        &self,
        engine: &str,
        writes: CallWrites,
        _fence: Option<&WriteFence>,
        deadline: Option<Instant>,
    ) -> Result<(), StateError> {
        self.apply(engine, &writes.state, &writes.index, deadline)
            .map(|_| ())
    }

    fn search(
        &self,
        engine: &str,
        session: Option<&str>,
        query: &IndexQuery,
        deadline: Option<Instant>,
    ) -> Result<IndexPage, StateError> {
        let words = index::check_search(session, query)?;
        let file = self.file(engine)?;
        let found = state_files::bounded(&mut file.reader(), deadline, |reader| {
            index_sqlite::search(reader, engine, session, &words, query)
        })
        .map_err(|source| failure(&file, engine, "searching the index", source))?;
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
    connection
        .prepare_cached("INSERT INTO engines (id) VALUES (?1) ON CONFLICT (id) DO NOTHING")?
        .execute(params![engine])?;
    connection
        .prepare_cached("SELECT number FROM engines WHERE id = ?1")?
        .query_row(params![engine], |row| row.get(0))
}

/// What the entry under `key` counts for, if there is one.
fn entry_bytes(connection: &Connection, engine: i64, key: &str) -> rusqlite::Result<Option<u64>> {
    connection
        .prepare_cached("SELECT length(value) FROM entries WHERE engine = ?1 AND key = ?2")?
        .query_row(params![engine, key], |row| row.get::<_, i64>(0))
        .optional()
        .map(|length| length.map(|length| entry_cost(key, length.max(0) as usize)))
}

fn usage_of(connection: &Connection, engine: i64) -> rusqlite::Result<StateUsage> {
    connection
        .prepare_cached("SELECT bytes, keys FROM engines WHERE number = ?1")?
        .query_row(params![engine], |row| {
            Ok(StateUsage {
                bytes: row.get::<_, i64>(0)?.max(0) as u64,
                keys: row.get::<_, i64>(1)?.max(0) as u64,
            })
        })
}

fn set_usage(connection: &Connection, engine: i64, usage: StateUsage) -> rusqlite::Result<()> {
    let clamp = |value: u64| i64::try_from(value).unwrap_or(i64::MAX);
    connection
        .prepare_cached("UPDATE engines SET bytes = ?2, keys = ?3 WHERE number = ?1")?
        .execute(params![engine, clamp(usage.bytes), clamp(usage.keys)])
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
        let on_disk = state_files::store_bytes(dir.path());
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
        let store = StateStore::open_in(dir.path(), &StateConfig::default()).expect("migrates");
        assert_eq!(store.get("lossless", "k1").expect("get"), Some(vec![1, 2]));
        assert_eq!(store.get("lossless", "ключ").expect("get"), Some(vec![3]));
        assert_eq!(
            store.usage("lossless").expect("usage"),
            (2 + 2) + (8 + 1) + 2 * ENTRY_OVERHEAD_BYTES,
            "usage recounted in bytes, with the overhead"
        );
        drop(store);
        assert!(!path.exists(), "split into per-engine files");
        let again = StateStore::open_in(dir.path(), &StateConfig::default()).expect("reopens");
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
    fn reads_at_once_only_what_needs_no_wait() {
        let (_dir, store) = store(1 << 20);
        assert!(
            store.get_at_once("e", "k").is_none(),
            "a file not open yet is opened on the blocking pool"
        );
        store.set("e", "k", b"v").expect("set");
        assert_eq!(
            store.get_at_once("e", "k").map(Result::ok),
            Some(Some(Some(b"v".to_vec())))
        );
        assert_eq!(
            store.get_at_once("e", "missing").map(Result::ok),
            Some(Some(None))
        );
        let large = vec![7; AT_ONCE_VALUE_BYTES as usize + 1];
        store.set("e", "large", &large).expect("set");
        assert!(
            store.get_at_once("e", "large").is_none(),
            "a large value is copied on the blocking pool"
        );
        assert_eq!(store.get("e", "large").expect("get"), Some(large));
        let file = store.file("e").expect("open");
        let writing = file.writer();
        assert!(
            store.get_at_once("e", "k").is_none(),
            "a connection in use is waited for on the blocking pool"
        );
        drop(writing);
        assert!(matches!(
            store.get_at_once("e", ""),
            Some(Err(StateError::BadKey { .. }))
        ));
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
        store.commit("e", writes, None, None).expect("puts");
        let file = store.file("e").expect("opens");
        let writer = file.writer();
        let searcher = {
            let store = store.clone();
            std::thread::spawn(move || {
                let query = IndexQuery {
                    text: "before".to_owned(),
                    scope: IndexScope::Engine,
                    limit: 10,
                    offset: 0,
                };
                store.search("e", None, &query, None)
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
        let store = StateStore::open_in(dir.path(), &StateConfig::default()).expect("migrates");
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
        store.commit("e", writes, None, None).expect("indexes");
        assert_eq!(store.usage("e").expect("usage"), 66 + cost);
        let query = IndexQuery {
            text: "migration".to_owned(),
            scope: crate::contract::index::IndexScope::Engine,
            limit: 10,
            offset: 0,
        };
        assert_eq!(
            store
                .search("e", None, &query, None)
                .expect("searches")
                .hits
                .len(),
            1
        );
        let engine_file = store.engine_path("e");
        drop(store);
        assert!(!path.exists(), "split into per-engine files");
        let version: i64 = Connection::open(engine_file)
            .expect("opens")
            .query_row("PRAGMA user_version", [], |row| row.get(0))
            .expect("version");
        assert_eq!(version, state_files::SCHEMA_VERSION);
    }

    #[test]
    fn an_engine_file_of_version_4_is_upgraded_when_the_store_opens() {
        let dir = tempfile::tempdir().expect("temp dir");
        let state_dir = dir.path().join(STATE_DIR);
        std::fs::create_dir_all(&state_dir).expect("state dir");
        let large = vec![7u8; 50_000];
        {
            // Written by a host of version 4: entries in a table without
            // rowids, values large enough to spill onto overflow pages.
            let old = Connection::open(state_files::engine_file(&state_dir, "e")).expect("create");
            old.execute_batch(&format!(
                "CREATE TABLE engines (number INTEGER PRIMARY KEY, id TEXT NOT NULL UNIQUE,
                     bytes INTEGER NOT NULL DEFAULT 0, keys INTEGER NOT NULL DEFAULT 0);
                 CREATE TABLE entries (engine INTEGER NOT NULL, key TEXT NOT NULL,
                     value BLOB NOT NULL, PRIMARY KEY (engine, key)) WITHOUT ROWID;
                 {}
                 INSERT INTO engines (number, id, bytes, keys) VALUES (1, 'e', 100300, 3);
                 PRAGMA user_version = 4;",
                index_sqlite::SCHEMA
            ))
            .expect("version 4");
            for key in ["a", "b", "c"] {
                old.execute(
                    "INSERT INTO entries VALUES (1, ?1, ?2)",
                    params![key, if key == "b" { vec![2u8] } else { large.clone() }],
                )
                .expect("entry");
            }
        }
        // A file that is not a database beside it: the store opens all the
        // same, and only that engine's calls fail.
        std::fs::write(
            state_files::engine_file(&state_dir, "broken"),
            b"not a database",
        )
        .expect("junk");
        let store = StateStore::open_in(dir.path(), &StateConfig::default()).expect("opens");
        let path = store.engine_path("e");
        let file = Connection::open(&path).expect("opens the file");
        let version: i64 = file
            .query_row("PRAGMA user_version", [], |row| row.get(0))
            .expect("version");
        assert_eq!(version, state_files::SCHEMA_VERSION, "upgraded on open");
        let layout: String = file
            .query_row(
                "SELECT sql FROM sqlite_master WHERE name = 'entries'",
                [],
                |row| row.get(0),
            )
            .expect("entries");
        assert!(!layout.contains("WITHOUT ROWID"), "{layout}");
        let free_pages: i64 = file
            .query_row("PRAGMA freelist_count", [], |row| row.get(0))
            .expect("free pages");
        assert_eq!(free_pages, 0, "the old table's pages are given back");
        drop(file);
        assert_eq!(store.get("e", "a").expect("get"), Some(large.clone()));
        assert_eq!(store.get("e", "b").expect("get"), Some(vec![2]));
        assert_eq!(store.usage("e").expect("usage"), 100_300);
        // A key replaced, one added, one deleted: the unique key index
        // still decides what a write replaces.
        let writes = CallWrites {
            state: vec![
                ("b".to_owned(), Some(vec![3])),
                ("d".to_owned(), Some(vec![4])),
                ("c".to_owned(), None),
            ],
            index: Vec::new(),
        };
        store.commit("e", writes, None, None).expect("writes");
        assert_eq!(store.get("e", "b").expect("get"), Some(vec![3]));
        assert_eq!(store.get("e", "c").expect("get"), None);
        let keys: Vec<String> = store
            .scan("e", "", None, 10)
            .expect("scans")
            .into_iter()
            .map(|(key, _)| key)
            .collect();
        assert_eq!(keys, ["a", "b", "d"]);
        let error = store.get("broken", "k").expect_err("not a database");
        assert!(error.to_string().contains("broken"), "{error}");
    }

    /// A document of `bytes` of text with no repeating trigrams (the most
    /// index per byte).
    fn random_document(id: &str, bytes: usize) -> IndexOp {
        let mut seed = bytes as u64 + id.len() as u64;
        let text = (0..bytes)
            .map(|_| {
                seed = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
                char::from(b'!' + ((seed >> 33) % 94) as u8)
            })
            .collect();
        IndexOp::Put {
            session_id: None,
            document: crate::contract::index::IndexDocument {
                id: id.to_owned(),
                text,
                metadata: None,
            },
        }
    }

    fn documents(ops: Vec<IndexOp>) -> CallWrites {
        CallWrites {
            state: Vec::new(),
            index: ops,
        }
    }

    #[test]
    fn a_shared_database_of_version_3_is_split_into_one_file_per_engine() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join(STATE_DB_FILE);
        {
            // Written by a host of one shared database: two engines'
            // entries and documents side by side.
            let shared = EngineFile::open(&path).expect("version 3");
            shared
                .writer()
                .execute_batch(
                    "INSERT INTO engines (number, id, bytes, keys) VALUES (1, 'a', 300, 2), (2, 'plugin:b/ü', 70, 1);
                     INSERT INTO entries VALUES (1, 'k', x'01'), (2, 'k', x'02');
                     INSERT INTO index_documents (engine, session, id, text, metadata, cost)
                         VALUES (1, 's1', 'd1', 'the blue whale sings', '{}', 200),
                                (2, '', 'd2', 'whales of engine b', NULL, 150);",
                )
                .expect("rows");
        }
        let store = StateStore::open_in(dir.path(), &StateConfig::default()).expect("splits");
        assert!(!path.exists(), "the shared database is gone once split");
        assert_eq!(store.get("a", "k").expect("get"), Some(vec![1]));
        assert_eq!(store.get("plugin:b/ü", "k").expect("get"), Some(vec![2]));
        assert_eq!(store.usage("a").expect("usage"), 300);
        assert_eq!(store.usage("plugin:b/ü").expect("usage"), 70);
        let query = IndexQuery {
            text: "whale".to_owned(),
            scope: crate::contract::index::IndexScope::Engine,
            limit: 10,
            offset: 0,
        };
        let hits = |engine: &str| {
            let page = store.search(engine, None, &query, None).expect("searches");
            page.hits
                .into_iter()
                .map(|hit| (hit.id, hit.session_id, hit.metadata))
                .collect::<Vec<_>>()
        };
        assert_eq!(
            hits("a"),
            [(
                "d1".to_owned(),
                Some("s1".to_owned()),
                Some("{}".to_owned())
            )]
        );
        assert_eq!(hits("plugin:b/ü"), [("d2".to_owned(), None, None)]);
        assert_ne!(store.engine_path("a"), store.engine_path("plugin:b/ü"));
        let names: Vec<String> = std::fs::read_dir(dir.path().join(STATE_DIR))
            .expect("state dir")
            .flatten()
            .map(|entry| entry.file_name().to_string_lossy().into_owned())
            .filter(|name| name.ends_with(".sqlite3"))
            .collect();
        assert_eq!(names.len(), 2, "{names:?}");
        assert!(
            names
                .iter()
                .all(|name| !name.contains('/') && !name.contains(':')),
            "{names:?}"
        );
    }

    #[test]
    fn one_engines_held_database_does_not_hold_another_engines() {
        let (_dir, store) = store(1 << 20);
        let store = std::sync::Arc::new(store);
        store.set("slow", "k", b"x").expect("set");
        let file = store.file("slow").expect("opens");
        // As a long commit of `slow` would.
        let held = file.writer();
        let other = {
            let store = store.clone();
            std::thread::spawn(move || store.set("quick", "k", b"tiny"))
        };
        let started = std::time::Instant::now();
        while !other.is_finished() {
            assert!(
                started.elapsed() < std::time::Duration::from_secs(20),
                "another engine's write waits for `slow`'s database"
            );
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        drop(held);
        other.join().expect("joins").expect("writes");
        assert_eq!(
            store.get("quick", "k").expect("get"),
            Some(b"tiny".to_vec())
        );
    }

    #[test]
    fn work_past_its_deadline_is_stopped_and_a_stopped_commit_writes_nothing() {
        let (_dir, store) = store(64 << 20);
        let ops = (0..40)
            .map(|n| random_document(&format!("d{n}"), 16 * 1024))
            .collect();
        store
            .commit("e", documents(ops), None, None)
            .expect("indexes");
        let used = store.usage("e").expect("usage");
        let past = Some(std::time::Instant::now());
        let error = store
            .commit(
                "e",
                documents(vec![random_document("late", 512 * 1024)]),
                None,
                past,
            )
            .expect_err("past its deadline");
        assert!(matches!(error, StateError::Interrupted { .. }), "{error}");
        assert!(error.to_string().contains("deadline"), "{error}");
        assert_eq!(store.usage("e").expect("usage"), used, "nothing written");
        // Short words only: every document's text is scanned.
        let query = IndexQuery {
            text: "a b c d e f g h".to_owned(),
            scope: crate::contract::index::IndexScope::Engine,
            limit: 10,
            offset: 0,
        };
        let error = store
            .search("e", None, &query, past)
            .expect_err("past its deadline");
        assert!(matches!(error, StateError::Interrupted { .. }), "{error}");
        store
            .search("e", None, &query, None)
            .expect("the reader still works");
        store.set("e", "k", b"v").expect("the writer still works");
    }

    #[test]
    fn a_large_commit_leaves_no_large_write_ahead_log() {
        let (dir, store) = store(256 << 20);
        let value = vec![7u8; 2 << 20];
        let writes = CallWrites {
            state: (0..6)
                .map(|n| (format!("big-{n}"), Some(value.clone())))
                .collect(),
            index: Vec::new(),
        };
        store.commit("e", writes, None, None).expect("commits");
        let mut wal = store.engine_path("e").into_os_string();
        wal.push("-wal");
        let wal_bytes = std::fs::metadata(&wal).map_or(0, |meta| meta.len());
        assert!(
            wal_bytes <= WAL_LIMIT_BYTES,
            "{wal_bytes} bytes of log after a 12 MiB commit, the store still open"
        );
        drop(store);
        let on_disk = state_files::store_bytes(&dir.path().join("data"));
        assert!(
            on_disk < 14 << 20,
            "{on_disk} bytes on disk for 12 MiB stored, the store closed"
        );
    }

    #[test]
    fn prefix_end_is_the_next_string() {
        assert_eq!(prefix_end("ab").as_deref(), Some("ac"));
        assert_eq!(prefix_end("a\u{10FFFF}").as_deref(), Some("b"));
        assert_eq!(prefix_end("\u{D7FF}").as_deref(), Some("\u{E000}"));
        assert_eq!(prefix_end(""), None);
    }
}
