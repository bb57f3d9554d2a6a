//! The SQL power's host side (`wit/sql.wit`, ARCHITECTURE.md §5): a SQLite
//! database (FTS5 included) of each engine's own, kept by the host.
//!
//! - [`SqlService`]: the databases of every engine of a host, in the data
//!   directory (`files`: a folder per engine id, a file per database);
//! - [`Database`]: one instance's connection to one of its engine's
//!   databases — never shared with another engine, another instance or the
//!   host's stores — and the statements it runs (`database`);
//! - [`CallTransaction`]: one engine call's transaction on the databases it
//!   used, committed with the call's state batch or rolled back with it
//!   (`transaction`: the engine's `BEGIN`/`COMMIT`/`ROLLBACK` become a
//!   savepoint inside it);
//! - `authorizer`: what a statement may do; [`SqlConfig`]: the limits.
//!
//! Every operation blocks (SQLite): callers run it on the blocking pool. A
//! statement is interrupted at its call's deadline notice or abort, and a
//! call waits for another call of its engine that writes the same database
//! at most until then.

mod authorizer;
mod database;
mod files;
mod limits;
mod transaction;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use tokio_util::sync::CancellationToken;

pub use self::authorizer::PRAGMAS;
pub use self::database::Database;
pub use self::files::{MAX_NAME_CHARS, SQL_DIR};
pub use self::limits::SqlConfig;
pub use self::transaction::CallTransaction;
use crate::services::state::EngineState;

/// Longest message of a [`SqlError`], bytes.
pub const MAX_MESSAGE_BYTES: usize = 1024;

/// A value in a row or a parameter (the WIT `value`).
#[derive(Debug, Clone, PartialEq)]
pub enum SqlValue {
    /// `NULL`.
    Null,
    /// An integer.
    Integer(i64),
    /// A floating-point number.
    Real(f64),
    /// Text.
    Text(String),
    /// Bytes.
    Blob(Vec<u8>),
}

impl SqlValue {
    /// Bytes the value counts for in an answer or a call's input.
    pub fn wire_bytes(&self) -> usize {
        match self {
            Self::Null => 1,
            Self::Integer(_) | Self::Real(_) => 8,
            Self::Text(text) => text.len(),
            Self::Blob(blob) => blob.len(),
        }
    }
}

/// A statement's parameters (the WIT `params`).
#[derive(Debug, Clone, PartialEq, Default)]
pub enum SqlParams {
    /// None.
    #[default]
    None,
    /// `?` and `?NNN` parameters, in order.
    Positional(Vec<SqlValue>),
    /// `:name`, `@name` and `$name` parameters, each with its prefix.
    Named(Vec<(String, SqlValue)>),
}

impl SqlParams {
    /// Bytes the parameters count for in a call's input.
    pub fn wire_bytes(&self) -> usize {
        match self {
            Self::None => 0,
            Self::Positional(values) => values.iter().map(SqlValue::wire_bytes).sum(),
            Self::Named(values) => values
                .iter()
                .map(|(name, value)| name.len() + value.wire_bytes())
                .sum(),
        }
    }
}

/// Why a statement failed (the WIT `error-kind`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SqlErrorKind {
    /// SQLite refused or failed it; the code is SQLite's extended code.
    Sqlite,
    /// The host refused what it does (`authorizer`).
    Refused,
    /// The engine's databases would grow past its quota.
    QuotaExceeded,
    /// A limit of the power ([`SqlConfig`], a handle used wrongly).
    Limit,
    /// The call was cancelled or reached its deadline notice.
    Aborted,
    /// The host could not serve the database: not the engine's doing.
    Unavailable,
}

/// A failed statement (the WIT `sql-error`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct SqlError {
    /// Why.
    pub kind: SqlErrorKind,
    /// SQLite's extended result code (kind `Sqlite`), else 0.
    pub code: i32,
    /// What happened, escaped, at most [`MAX_MESSAGE_BYTES`].
    pub message: String,
}

impl SqlError {
    /// An error of `kind` saying `message` (escaped and capped).
    pub fn new(kind: SqlErrorKind, message: impl AsRef<str>) -> Self {
        Self {
            kind,
            code: 0,
            message: crate::contract::text::untrusted_line(message.as_ref(), MAX_MESSAGE_BYTES),
        }
    }

    /// Whether the host, not the engine, failed (a disk error, a host that
    /// keeps no SQL databases).
    pub fn is_host_fault(&self) -> bool {
        self.kind == SqlErrorKind::Unavailable
    }
}

/// What a statement that returns no rows did (the WIT `changes`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SqlChanges {
    /// Rows inserted, updated or deleted.
    pub changes: u64,
    /// The rowid of the most recent successful insert on the connection.
    pub last_insert_rowid: i64,
}

/// Rows a query returned (the WIT `rows`).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct SqlRows {
    /// Column names, in order.
    pub columns: Vec<String>,
    /// Each row's values.
    pub rows: Vec<Vec<SqlValue>>,
    /// Whether more rows were left out by a limit.
    pub truncated: bool,
}

/// The file of `engine`'s database `name` (`None`: its main one) in the
/// data directory `data_dir`, or why the name is refused.
pub fn database_path(data_dir: &Path, engine: &str, name: Option<&str>) -> Result<PathBuf, String> {
    files::database_file(&files::engine_dir(&data_dir.join(SQL_DIR), engine), name)
}

/// What a statement runs under: the call whose transaction it joins, when
/// it must stop, and what cancels it.
#[derive(Debug, Clone)]
pub struct SqlCall {
    /// The call's transaction.
    pub transaction: CallTransaction,
    /// The call's deadline notice: statements are interrupted then.
    pub deadline: Instant,
    /// The caller's abort.
    pub abort: CancellationToken,
}

/// The SQL databases of every engine of a host, under its data directory
/// (share it behind an `Arc`).
#[derive(Debug)]
pub struct SqlService {
    shared: Arc<Shared>,
}

/// What every database of a service needs.
#[derive(Debug)]
pub(crate) struct Shared {
    dir: PathBuf,
    config: SqlConfig,
    /// The engines' state, whose usage shares the quota with their databases.
    state: Arc<dyn EngineState>,
}

impl SqlService {
    /// The service keeping databases in `data_dir`'s [`SQL_DIR`] (created
    /// if needed), held to `config` and, with the state and index in
    /// `state`, to each engine's quota.
    pub fn open_in(
        data_dir: &Path,
        config: SqlConfig,
        state: Arc<dyn EngineState>,
    ) -> Result<Self, String> {
        config.validate()?;
        let dir = data_dir.join(SQL_DIR);
        std::fs::create_dir_all(&dir)
            .map_err(|error| format!("cannot create `{}`: {error}", dir.display()))?;
        Ok(Self {
            shared: Arc::new(Shared { dir, config, state }),
        })
    }

    /// The limits in force.
    pub fn config(&self) -> &SqlConfig {
        &self.shared.config
    }

    /// Bytes `engine`'s databases take on disk (with their logs): what they
    /// count against its quota. A folder that cannot be read counts 0.
    pub fn bytes(&self, engine: &str) -> u64 {
        files::bytes_in(&files::engine_dir(&self.shared.dir, engine), None).unwrap_or(0)
    }

    /// A new connection to `engine`'s database `name` (`None`: its main
    /// one), creating it if needed: for one instance of the engine.
    /// Blocks.
    pub fn open(&self, engine: &str, name: Option<&str>) -> Result<Database, SqlError> {
        Database::open(self.shared.clone(), engine, name)
    }
}
