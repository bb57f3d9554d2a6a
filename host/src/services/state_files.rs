//! The embedded state store's files: one SQLite database per engine under
//! `<data_dir>/state/` ([`engine_file`]), so one engine's long write or
//! search holds only its own file (SQLite has one writer per file, and the
//! read connection of each file is its own engine's). Each file has the
//! schema of the one shared database before it (version 5, [`migrate`]);
//! a shared `state.sqlite3` of an older host is split into per-engine files
//! when the store opens ([`split_shared`]), one engine at a time and
//! resumable, then removed; older engine files are brought to the current
//! layout then too ([`upgrade_all`]).
//!
//! Work is bounded by the engine call it serves: [`bounded`] interrupts a
//! statement at a deadline (SQLite's progress handler), and
//! [`checkpoint_past_limit`] truncates a write-ahead log a large commit left
//! past [`WAL_LIMIT_BYTES`]; closing a file ([`EngineFile`]'s drop) does too.

use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use rusqlite::{Connection, ErrorCode, OpenFlags, TransactionBehavior, params};
use sha2::{Digest, Sha256};

use super::index_sqlite;
use super::state::ENTRY_OVERHEAD_BYTES;

/// Folder of the engines' databases in the data directory.
pub const STATE_DIR: &str = "state";

/// File name of the shared database of hosts before per-engine files,
/// split on open ([`split_shared`]).
pub const STATE_DB_FILE: &str = "state.sqlite3";

/// The size the write-ahead log is cut back to after a checkpoint, and past
/// which a commit checkpoints it ([`checkpoint_past_limit`]).
pub const WAL_LIMIT_BYTES: u64 = 4 * 1024 * 1024;

/// The page cache of each connection to a database, KiB (`PRAGMA
/// cache_size`).
pub const PAGE_CACHE_KIB: i64 = 4 * 1024;

/// The layout of a database, in `PRAGMA user_version`: 5 keeps entries in
/// a rowid table found through an index of their keys
/// ([`ENTRIES_BY_ROWID`]); 4 writes the full-text table without triggers;
/// 3 adds the engines' searchable memory; 2 numbers the engines; 0 (before
/// it) keyed every row by the engine's id text.
pub(super) const SCHEMA_VERSION: i64 = 5;

/// Version 5: the entries move from a `WITHOUT ROWID` table, whose B-tree
/// holds each whole row in the key order, to a rowid table with a unique
/// index of `(engine, key)`. Seeking a key in the old table compared it
/// with the rows on the way, and SQLite reads the whole of a row that
/// spills onto overflow pages to compare its key: a lookup among large
/// values read several of them in full, a `pread` per 4 KiB page (54,000
/// of them in one replay of a long session with `lossless`). The index
/// holds only the keys; the value is read once, by its row.
const ENTRIES_BY_ROWID: &str = "
    CREATE TABLE entries_by_rowid (
        engine INTEGER NOT NULL,
        key TEXT NOT NULL,
        value BLOB NOT NULL
    );
    INSERT INTO entries_by_rowid (engine, key, value)
        SELECT engine, key, value FROM entries ORDER BY engine, key;
    DROP TABLE entries;
    ALTER TABLE entries_by_rowid RENAME TO entries;
    CREATE UNIQUE INDEX entries_by_key ON entries (engine, key);
";

/// SQLite virtual-machine steps between two looks at the deadline.
const STEPS_PER_CHECK: i32 = 1_000;

/// How long a connection waits for another connection of the same file
/// (the engine's own other call, or a checkpoint).
const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// The database file of `engine` in `dir`: a readable part of its id and a
/// digest of all of it, so any id makes a short, safe and distinct name.
pub(super) fn engine_file(dir: &Path, engine: &str) -> PathBuf {
    dir.join(format!("{}.sqlite3", engine_stem(engine)))
}

/// A short, safe and distinct file name stem for `engine`: a readable part
/// of its id and a digest of all of it (also the folder of its SQL
/// databases, `services::sql`).
pub(super) fn engine_stem(engine: &str) -> String {
    let readable: String = engine
        .chars()
        .take(48)
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    let digest = Sha256::digest(engine.as_bytes());
    format!("{readable}-{}", hex::encode(&digest[..8]))
}

/// One engine's database: a connection for writes (and plain reads) and a
/// read-only one for searches, which in WAL mode read while writes go on.
#[derive(Debug)]
pub(super) struct EngineFile {
    path: PathBuf,
    writer: Mutex<Connection>,
    reader: Mutex<Connection>,
}

impl EngineFile {
    /// Opens (creating if needed) the database at `path`.
    pub(super) fn open(path: &Path) -> rusqlite::Result<Self> {
        let writer = open_writer(path)?;
        let reader = Connection::open_with_flags(
            path,
            OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )?;
        reader.execute_batch(&format!("PRAGMA cache_size = -{PAGE_CACHE_KIB};"))?;
        reader.busy_timeout(BUSY_TIMEOUT)?;
        Ok(Self {
            path: path.to_owned(),
            writer: Mutex::new(writer),
            reader: Mutex::new(reader),
        })
    }

    /// The file.
    pub(super) fn path(&self) -> &Path {
        &self.path
    }

    /// The connection for writes and reads.
    pub(super) fn writer(&self) -> MutexGuard<'_, Connection> {
        // SQLite rolls back a transaction that a panic left open; the
        // connection itself stays usable.
        self.writer.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The connection for writes and reads if no one holds it (`None`: in
    /// use).
    pub(super) fn try_writer(&self) -> Option<MutexGuard<'_, Connection>> {
        match self.writer.try_lock() {
            Ok(connection) => Some(connection),
            Err(std::sync::TryLockError::Poisoned(poisoned)) => Some(poisoned.into_inner()),
            Err(std::sync::TryLockError::WouldBlock) => None,
        }
    }

    /// The read-only connection for searches.
    pub(super) fn reader(&self) -> MutexGuard<'_, Connection> {
        self.reader.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Drop for EngineFile {
    /// Leaves no write-ahead log behind: what it holds goes into the
    /// database and the log is cut to nothing.
    fn drop(&mut self) {
        let writer = self
            .writer
            .get_mut()
            .unwrap_or_else(PoisonError::into_inner);
        if let Err(error) = writer.execute_batch("PRAGMA wal_checkpoint(TRUNCATE);") {
            tracing::warn!(path = %self.path.display(), %error, "cannot checkpoint the state database");
        }
    }
}

/// A connection for writes to the database at `path`, its tables created
/// or migrated.
/// Statements the writer connection keeps prepared.
const WRITER_STATEMENTS: usize = 64;

fn open_writer(path: &Path) -> rusqlite::Result<Connection> {
    let mut connection = Connection::open(path)?;
    connection.busy_timeout(BUSY_TIMEOUT)?;
    // Every read and write statement of the store and the index stays
    // prepared (the default keeps 16).
    connection.set_prepared_statement_cache_capacity(WRITER_STATEMENTS);
    connection.execute_batch(&format!(
        "PRAGMA journal_mode = WAL;
         PRAGMA synchronous = FULL;
         PRAGMA journal_size_limit = {WAL_LIMIT_BYTES};
         PRAGMA cache_size = -{PAGE_CACHE_KIB};"
    ))?;
    migrate(&mut connection)?;
    Ok(connection)
}

/// Runs `work` on `connection`, interrupted once `deadline` passes (it then
/// fails with [`is_interrupted`]); without a deadline, unbounded.
pub(super) fn bounded<T>(
    connection: &mut Connection,
    deadline: Option<Instant>,
    work: impl FnOnce(&mut Connection) -> rusqlite::Result<T>,
) -> rusqlite::Result<T> {
    let Some(deadline) = deadline else {
        return work(connection);
    };
    connection.progress_handler(STEPS_PER_CHECK, Some(move || Instant::now() >= deadline))?;
    let result = work(connection);
    connection.progress_handler(0, None::<fn() -> bool>)?;
    result
}

/// Whether `error` is a statement interrupted by [`bounded`].
pub(super) fn is_interrupted(error: &rusqlite::Error) -> bool {
    error.sqlite_error_code() == Some(ErrorCode::OperationInterrupted)
}

/// Checkpoints the write-ahead log of the database at `path` and truncates
/// it when it has grown past [`WAL_LIMIT_BYTES`] (a large commit): the log
/// otherwise keeps its size until the next write, or after the host exits.
/// A checkpoint that would wait for a reader is left for the next commit.
pub(super) fn checkpoint_past_limit(connection: &Connection, path: &Path) {
    let mut wal = path.as_os_str().to_owned();
    wal.push("-wal");
    let size = std::fs::metadata(&wal).map_or(0, |meta| meta.len());
    if size <= WAL_LIMIT_BYTES {
        return;
    }
    let checkpoint = connection
        .busy_timeout(Duration::ZERO)
        .and_then(|()| connection.execute_batch("PRAGMA wal_checkpoint(TRUNCATE);"));
    let restored = connection.busy_timeout(BUSY_TIMEOUT);
    if let Err(error) = checkpoint.and(restored) {
        tracing::debug!(path = %path.display(), %error, "the state database's checkpoint waits for a reader");
    }
}

/// Splits the shared database `shared` of an older host (any schema
/// version) into one file per engine in `dir`, then removes it. An engine
/// whose file exists was split before (by a run that stopped part way) and
/// is skipped; each file is written under a temporary name and renamed
/// once complete, so a stop at any point loses nothing.
pub(super) fn split_shared(shared: &Path, dir: &Path) -> rusqlite::Result<()> {
    if !shared.exists() {
        return Ok(());
    }
    let source = open_writer(shared)?;
    let engines: Vec<(i64, String)> = source
        .prepare("SELECT number, id FROM engines ORDER BY number")?
        .query_map([], |row| Ok((row.get(0)?, row.get(1)?)))?
        .collect::<rusqlite::Result<_>>()?;
    drop(source);
    for (number, engine) in engines {
        let target = engine_file(dir, &engine);
        if target.exists() {
            continue;
        }
        let mut partial = target.clone().into_os_string();
        partial.push(".partial");
        let partial = PathBuf::from(partial);
        remove_database(&partial);
        copy_engine(shared, &partial, number)?;
        std::fs::rename(&partial, &target)
            .map_err(|error| io_failure(&format!("rename {}: {error}", partial.display())))?;
    }
    remove_database(shared);
    Ok(())
}

/// Brings every engine's database in `dir` to the current layout
/// ([`migrate`]) when the store opens, so an upgrade that copies a file's
/// rows (version 5) runs before any engine call, never inside one and
/// under its deadline. A file already current is only read. A file that
/// cannot be read or upgraded is left as it is, with a warning: its
/// engine's first call meets the same error, and the other engines'
/// files are not held up by it.
pub(super) fn upgrade_all(dir: &Path) {
    let listing = match std::fs::read_dir(dir) {
        Ok(listing) => listing,
        Err(error) => {
            tracing::warn!(dir = %dir.display(), %error, "cannot list the engines' state databases");
            return;
        }
    };
    for entry in listing.flatten() {
        let path = entry.path();
        if path
            .extension()
            .is_none_or(|extension| extension != "sqlite3")
        {
            continue;
        }
        if let Err(error) = upgrade(&path) {
            tracing::warn!(path = %path.display(), %error, "cannot upgrade an engine's state database");
        }
    }
}

/// Brings the database at `path` to the current layout if it is older.
fn upgrade(path: &Path) -> rusqlite::Result<()> {
    let version: i64 = Connection::open_with_flags(path, OpenFlags::SQLITE_OPEN_READ_ONLY)?
        .query_row("PRAGMA user_version", [], |row| row.get(0))?;
    if version >= SCHEMA_VERSION {
        return Ok(());
    }
    let started = Instant::now();
    let connection = open_writer(path)?;
    // The copy left the old table's pages free: the file is given back
    // its size (an upgrade would otherwise double it until they are reused).
    connection.execute_batch(
        "PRAGMA wal_checkpoint(TRUNCATE); VACUUM; PRAGMA wal_checkpoint(TRUNCATE);",
    )?;
    drop(connection);
    tracing::info!(
        path = %path.display(),
        from = version,
        to = SCHEMA_VERSION,
        elapsed_ms = started.elapsed().as_millis() as u64,
        "upgraded an engine's state database"
    );
    Ok(())
}

/// Copies engine `number`'s rows of `shared` into a new database at
/// `target`, in one transaction (the full-text index rebuilt from them).
fn copy_engine(shared: &Path, target: &Path, number: i64) -> rusqlite::Result<()> {
    let mut connection = open_writer(target)?;
    connection.execute(
        "ATTACH DATABASE ?1 AS shared",
        params![shared.to_string_lossy()],
    )?;
    let transaction = connection.transaction_with_behavior(TransactionBehavior::Immediate)?;
    transaction.execute(
        "INSERT INTO engines (number, id, bytes, keys)
         SELECT number, id, bytes, keys FROM shared.engines WHERE number = ?1",
        params![number],
    )?;
    transaction.execute(
        "INSERT INTO entries (engine, key, value)
         SELECT engine, key, value FROM shared.entries WHERE engine = ?1",
        params![number],
    )?;
    transaction.execute(
        "INSERT INTO index_documents (engine, session, id, text, metadata, cost)
         SELECT engine, session, id, text, metadata, cost FROM shared.index_documents
         WHERE engine = ?1 ORDER BY number",
        params![number],
    )?;
    index_sqlite::rebuild(&transaction)?;
    transaction.commit()?;
    connection.execute_batch("DETACH DATABASE shared; PRAGMA wal_checkpoint(TRUNCATE);")?;
    connection.close().map_err(|(_, error)| error)
}

/// Removes the database at `path` with its log and shared-memory files.
fn remove_database(path: &Path) {
    for suffix in ["", "-wal", "-shm"] {
        let mut file = path.as_os_str().to_owned();
        file.push(suffix);
        let _ = std::fs::remove_file(PathBuf::from(file));
    }
}

fn io_failure(message: &str) -> rusqlite::Error {
    rusqlite::Error::SqliteFailure(
        rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_IOERR),
        Some(message.to_owned()),
    )
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
    if version < 4 {
        transaction.execute_batch(index_sqlite::WITHOUT_TRIGGERS)?;
    }
    if version < 5 {
        transaction.execute_batch(ENTRIES_BY_ROWID)?;
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

/// Bytes of the store's files in `data_dir`: every engine's database with
/// its log and shared memory.
#[cfg(test)]
pub(super) fn store_bytes(data_dir: &Path) -> u64 {
    let mut total = 0;
    let files = std::fs::read_dir(data_dir.join(STATE_DIR)).expect("the store's folder");
    for entry in files.flatten() {
        total += entry.metadata().map_or(0, |meta| meta.len());
    }
    total
}
