//! One engine call's transaction on the databases it uses
//! ([`CallTransaction`]): opened by the call's first statement on each
//! database (`BEGIN IMMEDIATE`, so two calls of one engine writing one
//! database take turns instead of failing on a stale snapshot), committed
//! once the call's answer is accepted and its state batch committed, rolled
//! back when the call fails or its answer is refused (dropping the last
//! handle of the call does it; a connection whose call is gone is rolled
//! back before its next use, and closing it does too).
//!
//! Waiting: a call waits for another call of its engine holding the same
//! database at most until its own deadline notice; a call that already
//! holds one of its engine's databases does not wait for another (it gets
//! `SQLITE_BUSY` at once), so two calls taking two databases in opposite
//! orders cannot wait for each other.
//!
//! The engine's own transaction statements run inside the call's: `BEGIN`
//! opens the savepoint `ctxbox_engine`, `COMMIT`/`END` releases it (durable
//! with the call), `ROLLBACK` rolls back to it and releases it; one left
//! open at the end of the call is rolled back. Errors read as SQLite's.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::{Duration, Instant};

use rusqlite::Connection;

use super::authorizer::{EngineTransaction, Gate};
use super::database::{Conn, Database};
use super::limits::page_limit;
use super::{SqlCall, SqlConfig, SqlError, SqlErrorKind, files};
use crate::services::state_files::checkpoint_past_limit;

/// The savepoint an engine's `BEGIN` opens.
const ENGINE_SAVEPOINT: &str = "ctxbox_engine";

/// One engine call's transaction (cheap to clone: every clone is the same
/// transaction). Dropping the last clone uncommitted rolls it back.
#[derive(Debug, Clone, Default)]
pub struct CallTransaction {
    inner: Arc<CallInner>,
}

/// What a call's transaction holds.
#[derive(Debug, Default)]
pub(super) struct CallInner {
    /// The databases with the call's transaction open, in the order it
    /// opened them.
    databases: Mutex<Vec<Arc<Database>>>,
    /// Statements the call ran.
    statements: AtomicU32,
}

impl CallTransaction {
    /// Whether the call has a transaction open on any database.
    pub fn is_open(&self) -> bool {
        !self.inner.databases().is_empty()
    }

    /// Counts one statement of the call, refused past
    /// `sql.maxStatementsPerCall`.
    pub(super) fn count_statement(&self, config: &SqlConfig) -> Result<(), SqlError> {
        let ran = self.inner.statements.fetch_add(1, Ordering::Relaxed) + 1;
        if ran > config.max_statements_per_call {
            return Err(SqlError::new(
                SqlErrorKind::Limit,
                format!(
                    "the call ran more than {} statements (sql.maxStatementsPerCall)",
                    config.max_statements_per_call
                ),
            ));
        }
        Ok(())
    }

    /// Commits the call's transaction on every database it used (an engine
    /// transaction left open is rolled back first). A database that cannot
    /// commit is the host's failure; the others are still committed. Blocks.
    pub fn commit(&self) -> Result<(), SqlError> {
        let databases = std::mem::take(&mut *self.inner.databases());
        let mut failed = None;
        for database in databases {
            let mut conn = database.lock();
            if !owned_by(&conn, &self.inner) {
                continue;
            }
            if conn.connection.is_autocommit() {
                // SQLite rolled it back after an error the engine was told of.
                conn.owner = None;
                conn.engine_transaction = false;
                continue;
            }
            let committed = database.gate.host(|| {
                close_engine_transaction(&mut conn)?;
                conn.connection.execute_batch("COMMIT")
            });
            conn.owner = None;
            if let Err(error) = committed {
                let _ = database
                    .gate
                    .host(|| conn.connection.execute_batch("ROLLBACK"));
                failed.get_or_insert_with(|| {
                    SqlError::new(
                        SqlErrorKind::Unavailable,
                        format!("the host could not commit the call's SQL writes: {error}"),
                    )
                });
                continue;
            }
            checkpoint_past_limit(&conn.connection, &database.path);
        }
        failed.map_or(Ok(()), Err)
    }
}

impl CallTransaction {
    /// Rolls back the call's transaction on every database it used (a
    /// failed call, or one whose state could not be committed).
    pub fn rollback(&self) {
        let databases = std::mem::take(&mut *self.inner.databases());
        roll_back(&self.inner, databases);
    }
}

impl CallInner {
    fn databases(&self) -> std::sync::MutexGuard<'_, Vec<Arc<Database>>> {
        self.databases
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }
}

impl Drop for CallInner {
    fn drop(&mut self) {
        let databases = std::mem::take(
            self.databases
                .get_mut()
                .unwrap_or_else(PoisonError::into_inner),
        );
        roll_back(self, databases);
    }
}

/// Rolls back `call`'s transaction on `databases`. A connection still busy
/// with one of the call's statements (stopped at the deadline) is rolled
/// back by its next use or when it closes.
fn roll_back(call: &CallInner, databases: Vec<Arc<Database>>) {
    for database in databases {
        let Ok(mut conn) = database.conn.try_lock() else {
            continue;
        };
        if conn
            .owner
            .as_ref()
            .is_some_and(|owner| std::ptr::eq(owner.as_ptr(), call as *const CallInner))
        {
            rollback(&database.gate, &mut conn);
        }
    }
}

/// Whether `conn`'s open transaction is `call`'s.
fn owned_by(conn: &Conn, call: &Arc<CallInner>) -> bool {
    conn.owner
        .as_ref()
        .is_some_and(|owner| std::ptr::eq(owner.as_ptr(), Arc::as_ptr(call)))
}

/// Whether `call`'s transaction is open on `conn`: a statement of the call
/// can run on it without waiting for any lock.
pub(super) fn holds_open(conn: &Conn, call: &SqlCall) -> bool {
    owned_by(conn, &call.transaction.inner) && !conn.connection.is_autocommit()
}

/// Rolls back whatever transaction `conn` has open.
fn rollback(gate: &Gate, conn: &mut Conn) {
    if !conn.connection.is_autocommit() {
        let _ = gate.host(|| conn.connection.execute_batch("ROLLBACK"));
    }
    conn.owner = None;
    conn.engine_transaction = false;
}

/// Rolls back the engine's `BEGIN` left open (with the gate open).
fn close_engine_transaction(conn: &mut Conn) -> rusqlite::Result<()> {
    if std::mem::take(&mut conn.engine_transaction) {
        conn.connection.execute_batch(&format!(
            "ROLLBACK TO {ENGINE_SAVEPOINT}; RELEASE {ENGINE_SAVEPOINT};"
        ))?;
    }
    Ok(())
}

/// Puts `conn` in `call`'s transaction, opening it if this is the call's
/// first statement on `database` (see the module's notes on waiting), with
/// the database's page limit set from the engine's quota.
pub(super) fn join(
    database: &Arc<Database>,
    conn: &mut Conn,
    call: &SqlCall,
) -> Result<(), SqlError> {
    let inner = &call.transaction.inner;
    if owned_by(conn, inner) {
        if conn.connection.is_autocommit() {
            return Err(SqlError {
                code: rusqlite::ffi::SQLITE_ABORT_ROLLBACK,
                ..SqlError::new(
                    SqlErrorKind::Sqlite,
                    "SQLite rolled back this call's transaction after an earlier error: its earlier statements on this database are undone",
                )
            });
        }
        return Ok(());
    }
    if let Some(owner) = &conn.owner {
        if owner.strong_count() > 0 {
            return Err(SqlError::new(
                SqlErrorKind::Unavailable,
                "the database is still held by an earlier call of this instance whose answer is being committed",
            ));
        }
        rollback(&database.gate, conn);
    } else if !conn.connection.is_autocommit() {
        rollback(&database.gate, conn);
    }
    let holds_another = !inner.databases().is_empty();
    let wait = if holds_another {
        Duration::ZERO
    } else {
        call.deadline.saturating_duration_since(Instant::now())
    };
    let begun = database.gate.host(|| {
        conn.connection.busy_timeout(wait)?;
        conn.connection.execute_batch("BEGIN IMMEDIATE")
    });
    if let Err(error) = begun {
        return Err(match error.sqlite_error_code() {
            Some(rusqlite::ErrorCode::DatabaseBusy) if holds_another => SqlError {
                code: rusqlite::ffi::SQLITE_BUSY,
                ..SqlError::new(
                    SqlErrorKind::Sqlite,
                    "database is locked: another call of this engine is writing it, and a call that holds one of its databases does not wait for another",
                )
            },
            Some(rusqlite::ErrorCode::DatabaseBusy) => SqlError::new(
                SqlErrorKind::Aborted,
                "another call of this engine held the database until this call's deadline notice",
            ),
            _ => SqlError::new(
                SqlErrorKind::Unavailable,
                format!("the host could not open a transaction: {error}"),
            ),
        });
    }
    if let Err(error) = set_page_limit(database, conn) {
        rollback(&database.gate, conn);
        return Err(error);
    }
    conn.owner = Some(Arc::downgrade(inner));
    inner.databases().push(database.clone());
    Ok(())
}

/// Sets `database`'s `max_page_count` to what the engine's quota leaves it
/// beside its state, index and other databases.
fn set_page_limit(database: &Database, conn: &Conn) -> Result<(), SqlError> {
    let unavailable = |error: String| {
        SqlError::new(
            SqlErrorKind::Unavailable,
            format!("the host could not size the database: {error}"),
        )
    };
    let shared = &database.shared;
    let engine_dir = files::engine_dir(&shared.dir, &database.engine);
    let elsewhere = files::bytes_in(&engine_dir, Some(&database.path))
        .map_err(|error| unavailable(error.to_string()))?
        + shared
            .state
            .usage(&database.engine)
            .map_err(|error| unavailable(error.to_string()))?;
    let quota = shared.state.limits().quota_bytes;
    database
        .gate
        .host(|| {
            let read = |pragma: &str| {
                conn.connection
                    .query_row(&format!("PRAGMA {pragma}"), [], |row| row.get::<_, i64>(0))
            };
            let (page_size, pages) = (read("page_size")?, read("page_count")?);
            let limit = page_limit(
                quota,
                elsewhere,
                page_size.max(1) as u64,
                pages.max(0) as u64,
            );
            conn.connection
                .query_row(&format!("PRAGMA max_page_count = {limit}"), [], |_| Ok(()))
        })
        .map_err(|error| unavailable(error.to_string()))
}

/// Runs the engine's `BEGIN`, `COMMIT` or `ROLLBACK` as a savepoint of the
/// call's transaction (`open`: whether the engine's transaction is open).
pub(super) fn engine_statement(
    connection: &Connection,
    open: &mut bool,
    gate: &Gate,
    operation: EngineTransaction,
) -> Result<(), SqlError> {
    let refuse = |message: &str| SqlError {
        code: rusqlite::ffi::SQLITE_ERROR,
        ..SqlError::new(SqlErrorKind::Sqlite, message)
    };
    let sql = match (operation, *open) {
        (EngineTransaction::Begin, true) => {
            return Err(refuse("cannot start a transaction within a transaction"));
        }
        (EngineTransaction::Commit, false) => {
            return Err(refuse("cannot commit - no transaction is active"));
        }
        (EngineTransaction::Rollback, false) => {
            return Err(refuse("cannot rollback - no transaction is active"));
        }
        (EngineTransaction::Begin, false) => format!("SAVEPOINT {ENGINE_SAVEPOINT}"),
        (EngineTransaction::Commit, true) => format!("RELEASE {ENGINE_SAVEPOINT}"),
        (EngineTransaction::Rollback, true) => {
            format!("ROLLBACK TO {ENGINE_SAVEPOINT}; RELEASE {ENGINE_SAVEPOINT};")
        }
    };
    gate.host(|| connection.execute_batch(&sql))
        .map_err(|error| SqlError {
            code: error
                .sqlite_error()
                .map_or(rusqlite::ffi::SQLITE_ERROR, |code| code.extended_code),
            ..SqlError::new(SqlErrorKind::Sqlite, error.to_string())
        })?;
    *open = operation == EngineTransaction::Begin;
    Ok(())
}

/// What a weak handle on a call's transaction is (for `Conn`).
pub(super) type CallRef = Weak<CallInner>;
