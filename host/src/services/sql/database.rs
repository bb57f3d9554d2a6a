//! [`Database`]: one instance's connection to one of its engine's
//! databases, and the statements it runs for the instance's calls. Each
//! statement joins its call's transaction (`transaction`), runs under the
//! authorizer (`authorizer`) and is interrupted at the call's deadline
//! notice or abort; what it returns is cut to the answer limits.

use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Instant;

use rusqlite::config::DbConfig;
use rusqlite::fallible_iterator::FallibleIterator;
use rusqlite::limits::Limit;
use rusqlite::types::{ToSqlOutput, ValueRef};
use rusqlite::{Connection, OpenFlags, Statement, ToSql};

use super::authorizer::{self, EngineTransaction, Gate};
use super::limits;
use super::transaction;
use super::{
    Shared, SqlCall, SqlChanges, SqlError, SqlErrorKind, SqlParams, SqlRows, SqlValue, files,
};
use crate::services::state_files::WAL_LIMIT_BYTES;

/// SQLite virtual-machine steps between two looks at the deadline.
const STEPS_PER_CHECK: i32 = 1_000;

/// The longest LIKE or GLOB pattern a statement may use, in bytes. SQLite
/// matches each `%` of a pattern one C call deeper, so its default (50,000)
/// lets an engine's pattern recurse past the 2 MiB stack of a blocking-pool
/// thread and bring the host down; at this length the deepest match needs
/// a few hundred KiB.
const MAX_PATTERN_BYTES: i32 = 4_096;

/// Looks at the deadline ([`STEPS_PER_CHECK`] steps apart) a read may take
/// on the caller's own thread ([`Database::query_at_once`]) before it is
/// stopped and sent to the blocking pool: well under a millisecond.
const CHECKS_AT_ONCE: u32 = 20;

/// Statements a connection remembers as not to be tried at once; past
/// this many it forgets them all and learns again.
const MAX_POOL_ONLY: usize = 256;

/// SQLite's limits on what recurses in C, lowered while a read runs on the
/// caller's own thread — a wasmtime fiber with 1 MiB of native stack for
/// host code — so that nothing an engine writes can run that stack out. A
/// statement over them is sent to the blocking pool, where SQLite's
/// defaults apply.
const LIMITS_AT_ONCE: [(Limit, i32); 4] = [
    (Limit::SQLITE_LIMIT_EXPR_DEPTH, 40),
    (Limit::SQLITE_LIMIT_PARSER_DEPTH, 40),
    (Limit::SQLITE_LIMIT_COMPOUND_SELECT, 8),
    (Limit::SQLITE_LIMIT_LIKE_PATTERN_LENGTH, 1_000),
];

/// One instance's connection to one database of its engine.
#[derive(Debug)]
pub struct Database {
    pub(super) shared: Arc<Shared>,
    pub(super) engine: String,
    pub(super) path: PathBuf,
    pub(super) gate: Arc<Gate>,
    pub(super) conn: Mutex<Conn>,
}

/// The connection and what the host knows of its transaction.
#[derive(Debug)]
pub(super) struct Conn {
    pub(super) connection: Connection,
    /// The call whose transaction is open on it.
    pub(super) owner: Option<transaction::CallRef>,
    /// Whether the engine's own `BEGIN` (a savepoint) is open.
    pub(super) engine_transaction: bool,
    /// Statements that could not be answered at once (they write, ran
    /// long or failed): they go straight to the pool next time, instead of
    /// paying for the try again.
    pub(super) pool_only: HashSet<String>,
}

impl Database {
    /// Opens (creating if needed) `engine`'s database `name`.
    pub(super) fn open(
        shared: Arc<Shared>,
        engine: &str,
        name: Option<&str>,
    ) -> Result<Self, SqlError> {
        let engine_dir = files::engine_dir(&shared.dir, engine);
        let path = files::database_file(&engine_dir, name)
            .map_err(|why| SqlError::new(SqlErrorKind::Limit, why))?;
        if !path.exists() {
            check_room_for_new(&shared, engine, &engine_dir)?;
            std::fs::create_dir_all(&engine_dir).map_err(|error| {
                SqlError::new(
                    SqlErrorKind::Unavailable,
                    format!("cannot create the engine's SQL folder: {error}"),
                )
            })?;
        }
        let gate = Arc::new(Gate::default());
        let connection = open_connection(&path, &shared.config, gate.clone()).map_err(|error| {
            SqlError::new(
                SqlErrorKind::Unavailable,
                format!("cannot open the engine's database: {error}"),
            )
        })?;
        Ok(Self {
            shared,
            engine: engine.to_owned(),
            path,
            gate,
            conn: Mutex::new(Conn {
                connection,
                owner: None,
                engine_transaction: false,
                pool_only: HashSet::new(),
            }),
        })
    }

    pub(super) fn lock(&self) -> MutexGuard<'_, Conn> {
        // SQLite keeps the connection consistent whatever panicked.
        self.conn.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Runs `sql` (one or more statements, no parameters), discarding rows;
    /// the engine's transaction statements among them are mapped as they
    /// come.
    pub fn execute_batch(self: &Arc<Self>, call: &SqlCall, sql: &str) -> Result<(), SqlError> {
        self.run(call, sql, |conn, gate| {
            let Conn {
                connection,
                engine_transaction,
                ..
            } = conn;
            let mut batch = rusqlite::Batch::new(connection, sql);
            loop {
                gate.take_transaction();
                let Some(statement) = batch.next()? else {
                    return Ok(());
                };
                call.transaction.count_statement(&self.shared.config)?;
                match gate.take_transaction() {
                    Some(operation) => transaction::engine_statement(
                        connection,
                        engine_transaction,
                        gate,
                        operation,
                    )?,
                    None => step_all(statement)?,
                }
            }
        })
    }

    /// Runs one statement, stepping through any rows it returns, and reports
    /// its changes.
    pub fn execute(
        self: &Arc<Self>,
        call: &SqlCall,
        sql: &str,
        params: SqlParams,
    ) -> Result<SqlChanges, SqlError> {
        self.run(call, sql, |conn, gate| {
            if self.counted_transaction_statement(conn, gate, call, sql)? {
                return Ok(changes(&conn.connection, 0));
            }
            let mut statement = conn.connection.prepare_cached(sql)?;
            bind(&mut statement, &params)?;
            step_all_cached(&mut statement)?;
            drop(statement);
            let changed = conn.connection.changes();
            Ok(changes(&conn.connection, changed))
        })
    }

    /// Runs one statement and returns its rows, at most `max_rows` (and
    /// never more than `sql.maxRows` or `sql.maxAnswerBytes`).
    pub fn query(
        self: &Arc<Self>,
        call: &SqlCall,
        sql: &str,
        params: SqlParams,
        max_rows: Option<u32>,
    ) -> Result<SqlRows, SqlError> {
        let config = &self.shared.config;
        let max_rows = max_rows.map_or(config.max_rows, |rows| rows.min(config.max_rows));
        let max_bytes = config.max_answer_bytes;
        self.run(call, sql, |conn, gate| {
            if self.counted_transaction_statement(conn, gate, call, sql)? {
                return Ok(SqlRows::default());
            }
            let mut statement = conn.connection.prepare_cached(sql)?;
            bind(&mut statement, &params)?;
            Ok(rows_of(&mut statement, max_rows, max_bytes)?)
        })
    }

    /// Answers a read-only query on the caller's own thread when that can
    /// be done at once, saving the hop to the blocking pool that would cost
    /// a point select far more than SQLite's work: the call already holds
    /// its transaction on this connection (so no lock can make it wait), no
    /// other thread is using the connection, and the statement writes
    /// nothing and finishes within [`CHECKS_AT_ONCE`] under
    /// [`LIMITS_AT_ONCE`]. `None` otherwise, and for any error: then
    /// [`Database::query`] runs it from the start on the pool and reports
    /// what it finds (a read stopped here leaves nothing behind); a
    /// statement that was tried and sent there is not tried again.
    pub fn query_at_once(
        self: &Arc<Self>,
        call: &SqlCall,
        sql: &str,
        params: &SqlParams,
        max_rows: Option<u32>,
    ) -> Option<Result<SqlRows, SqlError>> {
        let config = &self.shared.config;
        if check_length(config, sql).is_err()
            || first_word_is_transaction(sql)
            || call.abort.is_cancelled()
            || Instant::now() >= call.deadline
        {
            return None;
        }
        let mut conn = self.conn.try_lock().ok()?;
        if !transaction::holds_open(&conn, call) || conn.pool_only.contains(sql) {
            return None;
        }
        let max_rows = max_rows.map_or(config.max_rows, |rows| rows.min(config.max_rows));
        self.watch(&mut conn, call, Some(CHECKS_AT_ONCE)).ok()?;
        let defaults = LIMITS_AT_ONCE.map(|(limit, value)| {
            (
                limit,
                conn.connection.set_limit(limit, value).unwrap_or(value),
            )
        });
        let answer = (|| {
            let mut statement = conn.connection.prepare_cached(sql).ok()?;
            if !statement.readonly() {
                return None;
            }
            bind(&mut statement, params).ok()?;
            rows_of(&mut statement, max_rows, config.max_answer_bytes).ok()
        })();
        for (limit, value) in defaults {
            let _ = conn.connection.set_limit(limit, value);
        }
        let _ = conn.connection.progress_handler(0, None::<fn() -> bool>);
        self.gate.take_refusal();
        self.gate.take_heap_stop();
        let Some(rows) = answer else {
            if conn.pool_only.len() >= MAX_POOL_ONLY {
                conn.pool_only.clear();
            }
            conn.pool_only.insert(sql.to_owned());
            return None;
        };
        Some(call.transaction.count_statement(config).map(|()| rows))
    }

    /// Counts `sql` as one of the call's statements and, when it is the
    /// engine's `BEGIN`, `COMMIT` or `ROLLBACK`, runs it as the call's
    /// savepoint; answers whether it was one.
    fn counted_transaction_statement(
        &self,
        conn: &mut Conn,
        gate: &Gate,
        call: &SqlCall,
        sql: &str,
    ) -> Result<bool, Failure> {
        call.transaction.count_statement(&self.shared.config)?;
        let Some(operation) = engine_transaction(conn, gate, sql)? else {
            return Ok(false);
        };
        transaction::engine_statement(
            &conn.connection,
            &mut conn.engine_transaction,
            gate,
            operation,
        )?;
        Ok(true)
    }

    /// Compiles `sql` (one statement) and answers its result columns: what
    /// a prepared statement of the engine's starts from.
    pub fn prepare(&self, sql: &str) -> Result<Vec<String>, SqlError> {
        check_length(&self.shared.config, sql)?;
        let conn = self.lock();
        self.gate.take_refusal();
        let compiled = if first_word_is_transaction(sql) {
            conn.connection
                .prepare(sql)
                .map(|statement| columns_of(&statement))
        } else {
            conn.connection
                .prepare_cached(sql)
                .map(|statement| columns_of(&statement))
        };
        compiled.map_err(|error| self.error(&conn, error))
    }

    /// Runs `work` on the connection for one engine statement `sql`: its
    /// length checked, in the call's transaction, interrupted at the call's
    /// deadline notice or abort; SQLite's errors made the engine's.
    fn run<T>(
        self: &Arc<Self>,
        call: &SqlCall,
        sql: &str,
        work: impl FnOnce(&mut Conn, &Gate) -> Result<T, Failure>,
    ) -> Result<T, SqlError> {
        check_length(&self.shared.config, sql)?;
        if first_word_is(sql, &["VACUUM"]) {
            return Err(SqlError::new(
                SqlErrorKind::Refused,
                "VACUUM is refused: the host keeps the database's file (and VACUUM INTO would write another)",
            ));
        }
        if call.abort.is_cancelled() || Instant::now() >= call.deadline {
            return Err(aborted());
        }
        let mut conn = self.lock();
        transaction::join(self, &mut conn, call)?;
        if let Err(error) = self.watch(&mut conn, call, None) {
            return Err(self.error(&conn, error));
        }
        self.gate.take_refusal();
        self.gate.take_heap_stop();
        let result = work(&mut conn, &self.gate);
        let _ = conn.connection.progress_handler(0, None::<fn() -> bool>);
        result.map_err(|failure| {
            let mut error = match failure {
                Failure::Sqlite(error) => self.error(&conn, error),
                Failure::Sql(error) => error,
            };
            if conn.connection.is_autocommit() {
                error.message = crate::contract::text::untrusted_line(
                    &format!(
                        "{}; SQLite rolled back the call's transaction with it: the call's earlier statements on this database are undone",
                        error.message
                    ),
                    super::MAX_MESSAGE_BYTES,
                );
            }
            error
        })
    }

    /// Arms the connection's progress handler for `call`: a statement is
    /// interrupted at the call's deadline notice or abort, when SQLite's
    /// memory passes `sql.maxHeapMib`, and after `checks` looks at the
    /// deadline when given.
    fn watch(&self, conn: &mut Conn, call: &SqlCall, checks: Option<u32>) -> rusqlite::Result<()> {
        let (deadline, abort) = (call.deadline, call.abort.clone());
        let heap_cap = i64::from(self.shared.config.max_heap_mib) * 1024 * 1024;
        let gate = self.gate.clone();
        let mut checks_left = checks;
        conn.connection.progress_handler(
            STEPS_PER_CHECK,
            Some(move || {
                if let Some(left) = &mut checks_left {
                    if *left == 0 {
                        return true;
                    }
                    *left -= 1;
                }
                if Instant::now() >= deadline || abort.is_cancelled() {
                    return true;
                }
                let over = limits::heap_used() > heap_cap;
                if over {
                    gate.note_heap_stop();
                }
                over
            }),
        )
    }

    /// `error` as the engine sees it: a refusal by the authorizer names its
    /// rule; an interrupt is `aborted`; a full database is the quota's (or
    /// the host's disk's); the host's I/O failures are `unavailable`.
    fn error(&self, conn: &Conn, error: rusqlite::Error) -> SqlError {
        if let Some(why) = self.gate.take_refusal() {
            return SqlError::new(SqlErrorKind::Refused, why);
        }
        let Some(code) = error.sqlite_error() else {
            let mut sql = SqlError::new(SqlErrorKind::Sqlite, error.to_string());
            sql.code = rusqlite::ffi::SQLITE_MISUSE;
            if matches!(error, rusqlite::Error::MultipleStatement) {
                sql = SqlError::new(
                    SqlErrorKind::Limit,
                    "one statement at a time here: run several with execute-batch",
                );
            }
            return sql;
        };
        use rusqlite::ffi;
        let message = match &error {
            rusqlite::Error::SqliteFailure(_, Some(message)) => message.clone(),
            other => other.to_string(),
        };
        match code.extended_code & 0xff {
            ffi::SQLITE_INTERRUPT if self.gate.take_heap_stop() => SqlError::new(
                SqlErrorKind::Limit,
                format!(
                    "the statement was stopped: the host's SQLite memory passed {} MiB (sql.maxHeapMib)",
                    self.shared.config.max_heap_mib
                ),
            ),
            ffi::SQLITE_INTERRUPT => aborted(),
            ffi::SQLITE_FULL if self.temp_is_fuller(conn) => SqlError::new(
                SqlErrorKind::Limit,
                format!(
                    "temporary tables and indexes are capped at {} KiB (sql.maxTempKib)",
                    self.shared.config.max_temp_kib
                ),
            ),
            // The page limit the quota set (a disk that is really full
            // reads the same, and is told as the quota's).
            ffi::SQLITE_FULL => SqlError::new(
                SqlErrorKind::QuotaExceeded,
                format!(
                    "the engine's databases would grow past its quota of {} bytes (state.quotaBytes, shared with its state and index)",
                    self.shared.state.limits().quota_bytes
                ),
            ),
            ffi::SQLITE_IOERR
            | ffi::SQLITE_CORRUPT
            | ffi::SQLITE_CANTOPEN
            | ffi::SQLITE_NOMEM
            | ffi::SQLITE_NOTADB
            | ffi::SQLITE_PROTOCOL => SqlError::new(
                SqlErrorKind::Unavailable,
                format!("the host could not serve the database: {message}"),
            ),
            // SQLite's own refusal to write its schema table (no
            // writable_schema here): the host's rule as well.
            _ if message.contains("may not be modified") => SqlError::new(
                SqlErrorKind::Refused,
                format!("{message}: the schema table is written only by CREATE, ALTER and DROP"),
            ),
            _ => SqlError {
                code: code.extended_code,
                ..SqlError::new(SqlErrorKind::Sqlite, message)
            },
        }
    }

    /// Whether the temporary database has less room left under its page
    /// limit than the main one: which of the two a full answer is about.
    fn temp_is_fuller(&self, conn: &Conn) -> bool {
        let read = |pragma: String| {
            conn.connection
                .query_row(&pragma, [], |row| row.get::<_, i64>(0))
        };
        let room = |schema: &str| -> rusqlite::Result<i64> {
            self.gate.host(|| {
                let most = read(format!("PRAGMA {schema}.max_page_count"))?;
                let used = read(format!("PRAGMA {schema}.page_count"))?;
                Ok((most - used) * read(format!("PRAGMA {schema}.page_size"))?)
            })
        };
        matches!((room("temp"), room("main")), (Ok(temp), Ok(main)) if temp < main)
    }
}

/// Why a statement's work failed: SQLite (mapped by [`Database::error`]) or
/// the host's own rule.
pub(super) enum Failure {
    Sqlite(rusqlite::Error),
    Sql(SqlError),
}

impl From<rusqlite::Error> for Failure {
    fn from(error: rusqlite::Error) -> Self {
        Self::Sqlite(error)
    }
}

impl From<SqlError> for Failure {
    fn from(error: SqlError) -> Self {
        Self::Sql(error)
    }
}

fn aborted() -> SqlError {
    SqlError::new(
        SqlErrorKind::Aborted,
        "the statement was stopped: the call reached its deadline notice or was cancelled",
    )
}

fn check_length(config: &super::SqlConfig, sql: &str) -> Result<(), SqlError> {
    if sql.len() > config.max_statement_bytes as usize {
        return Err(SqlError::new(
            SqlErrorKind::Limit,
            format!(
                "the statement is {} bytes, over the {} byte limit (sql.maxStatementBytes)",
                sql.len(),
                config.max_statement_bytes
            ),
        ));
    }
    Ok(())
}

/// Refuses a new database when the engine has as many as it may, or has
/// used its quota up.
fn check_room_for_new(
    shared: &Shared,
    engine: &str,
    engine_dir: &std::path::Path,
) -> Result<(), SqlError> {
    let unavailable = |error: String| SqlError::new(SqlErrorKind::Unavailable, error);
    let databases =
        files::databases_in(engine_dir).map_err(|error| unavailable(error.to_string()))?;
    if databases >= shared.config.max_databases as usize {
        return Err(SqlError::new(
            SqlErrorKind::Limit,
            format!("the engine has {databases} databases, its limit (sql.maxDatabases)"),
        ));
    }
    let used = files::bytes_in(engine_dir, None).map_err(|error| unavailable(error.to_string()))?
        + shared
            .state
            .usage(engine)
            .map_err(|error| unavailable(error.to_string()))?;
    let quota = shared.state.limits().quota_bytes;
    if used >= quota {
        return Err(SqlError::new(
            SqlErrorKind::QuotaExceeded,
            format!(
                "the engine uses {used} bytes, its whole quota of {quota} (state.quotaBytes): no room for another database"
            ),
        ));
    }
    Ok(())
}

/// A connection to `path` with the host's settings and `gate` as its
/// authorizer: WAL, full sync, the page cache and in-memory temporary
/// storage of `config`, no URI names, defensive mode (no writable schema),
/// foreign keys enforced (as `node:sqlite` does by default).
fn open_connection(
    path: &std::path::Path,
    config: &super::SqlConfig,
    gate: Arc<Gate>,
) -> rusqlite::Result<Connection> {
    let mut connection = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_WRITE
            | OpenFlags::SQLITE_OPEN_CREATE
            | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )?;
    connection.set_db_config(DbConfig::SQLITE_DBCONFIG_DEFENSIVE, true)?;
    connection.set_db_config(DbConfig::SQLITE_DBCONFIG_TRUSTED_SCHEMA, false)?;
    connection.execute_batch(&format!(
        "PRAGMA journal_mode = WAL;
         PRAGMA synchronous = FULL;
         PRAGMA journal_size_limit = {WAL_LIMIT_BYTES};
         PRAGMA cache_size = -{};
         PRAGMA temp_store = MEMORY;
         PRAGMA foreign_keys = ON;",
        config.cache_kib
    ))?;
    let temp_page: i64 = connection.query_row("PRAGMA temp.page_size", [], |row| row.get(0))?;
    let temp_pages = (i64::from(config.max_temp_kib) * 1024 / temp_page.max(512)).max(1);
    connection.execute_batch(&format!("PRAGMA temp.max_page_count = {temp_pages};"))?;
    connection.set_limit(Limit::SQLITE_LIMIT_LIKE_PATTERN_LENGTH, MAX_PATTERN_BYTES)?;
    authorizer::install(&mut connection, gate)?;
    Ok(connection)
}

/// The engine transaction statement `sql` is, compiled once with the
/// authorizer noting it (never cached, so every one is seen).
fn engine_transaction(
    conn: &Conn,
    gate: &Gate,
    sql: &str,
) -> Result<Option<EngineTransaction>, Failure> {
    if !first_word_is_transaction(sql) {
        return Ok(None);
    }
    gate.take_transaction();
    conn.connection.prepare(sql)?;
    Ok(gate.take_transaction())
}

/// Whether `sql`'s first word (after spaces and comments) may start a
/// transaction statement: `BEGIN`, `COMMIT`, `END` or `ROLLBACK`.
fn first_word_is_transaction(sql: &str) -> bool {
    first_word_is(sql, &["BEGIN", "COMMIT", "END", "ROLLBACK"])
}

/// Whether `sql`'s first word (after spaces and comments) is one of
/// `keywords`, in any case.
fn first_word_is(sql: &str, keywords: &[&str]) -> bool {
    let word: String = skip_blank(sql)
        .chars()
        .take_while(char::is_ascii_alphabetic)
        .collect();
    keywords
        .iter()
        .any(|keyword| word.eq_ignore_ascii_case(keyword))
}

/// `sql` after leading whitespace and comments.
fn skip_blank(mut sql: &str) -> &str {
    loop {
        let trimmed = sql.trim_start();
        if let Some(rest) = trimmed.strip_prefix("--") {
            sql = rest.split_once('\n').map_or("", |(_, rest)| rest);
        } else if let Some(rest) = trimmed.strip_prefix("/*") {
            sql = rest.split_once("*/").map_or("", |(_, rest)| rest);
        } else {
            return trimmed;
        }
    }
}

fn columns_of(statement: &Statement<'_>) -> Vec<String> {
    statement.column_names().map(str::to_owned).collect()
}

fn changes(connection: &Connection, changed: u64) -> SqlChanges {
    SqlChanges {
        changes: changed,
        last_insert_rowid: connection.last_insert_rowid(),
    }
}

/// Binds `params` to `statement`, naming a parameter it does not have.
fn bind(statement: &mut Statement<'_>, params: &SqlParams) -> Result<(), Failure> {
    let range = |message: String| {
        Failure::Sql(SqlError {
            code: rusqlite::ffi::SQLITE_RANGE,
            ..SqlError::new(SqlErrorKind::Sqlite, message)
        })
    };
    let count = statement.parameter_count();
    match params {
        SqlParams::None => {}
        SqlParams::Positional(values) => {
            if values.len() > count {
                return Err(range(format!(
                    "{} parameters given, the statement has {count}",
                    values.len()
                )));
            }
            for (index, value) in values.iter().enumerate() {
                statement.raw_bind_parameter(index + 1, value)?;
            }
        }
        SqlParams::Named(values) => {
            for (name, value) in values {
                let Some(index) = statement.parameter_index(name)? else {
                    return Err(range(format!("the statement has no parameter `{name}`")));
                };
                statement.raw_bind_parameter(index, value)?;
            }
        }
    }
    Ok(())
}

/// The rows `statement` returns, at most `max_rows` of them and
/// `max_bytes` in all (`truncated` when cut).
fn rows_of(
    statement: &mut Statement<'_>,
    max_rows: u32,
    max_bytes: u64,
) -> rusqlite::Result<SqlRows> {
    let columns = columns_of(statement);
    let width = columns.len();
    let mut bytes: u64 = columns.iter().map(|column| column.len() as u64).sum();
    let mut answer = SqlRows {
        columns,
        ..SqlRows::default()
    };
    let mut rows = statement.raw_query();
    while let Some(row) = rows.next()? {
        if answer.rows.len() as u64 >= u64::from(max_rows) {
            answer.truncated = true;
            break;
        }
        let mut values = Vec::with_capacity(width);
        for column in 0..width {
            let value = from_sql(row.get_ref(column)?);
            bytes += value.wire_bytes() as u64;
            values.push(value);
        }
        if bytes > max_bytes {
            answer.truncated = true;
            break;
        }
        answer.rows.push(values);
    }
    Ok(answer)
}

/// Steps through every row of a statement of a batch.
fn step_all(mut statement: Statement<'_>) -> Result<(), Failure> {
    step_all_cached(&mut statement)
}

fn step_all_cached(statement: &mut Statement<'_>) -> Result<(), Failure> {
    let mut rows = statement.raw_query();
    while rows.next()?.is_some() {}
    Ok(())
}

impl ToSql for SqlValue {
    fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
        Ok(ToSqlOutput::Borrowed(match self {
            Self::Null => ValueRef::Null,
            Self::Integer(value) => ValueRef::Integer(*value),
            Self::Real(value) => ValueRef::Real(*value),
            Self::Text(value) => ValueRef::Text(value.as_bytes()),
            Self::Blob(value) => ValueRef::Blob(value),
        }))
    }
}

fn from_sql(value: ValueRef<'_>) -> SqlValue {
    match value {
        ValueRef::Null => SqlValue::Null,
        ValueRef::Integer(value) => SqlValue::Integer(value),
        ValueRef::Real(value) => SqlValue::Real(value),
        ValueRef::Text(text) => SqlValue::Text(String::from_utf8_lossy(text).into_owned()),
        ValueRef::Blob(blob) => SqlValue::Blob(blob.to_vec()),
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use tokio_util::sync::CancellationToken;

    use super::super::{CallTransaction, SqlConfig, SqlService};
    use super::*;
    use crate::services::state::{StateConfig, StateStore};

    /// Engine `e`'s main database in a service under `dir`, and a call with
    /// a minute to go.
    fn database_and_call(dir: &std::path::Path) -> (Arc<Database>, SqlCall) {
        let state =
            StateStore::open_in(&dir.join("state"), &StateConfig::default()).expect("state");
        let service =
            SqlService::open_in(dir, SqlConfig::default(), Arc::new(state)).expect("service");
        let call = SqlCall {
            transaction: CallTransaction::default(),
            deadline: Instant::now() + Duration::from_secs(60),
            abort: CancellationToken::new(),
        };
        (Arc::new(service.open("e", None).expect("database")), call)
    }

    #[test]
    fn a_like_pattern_cannot_recurse_past_a_pool_threads_stack() {
        let dir = tempfile::tempdir().expect("temp dir");
        let (database, call) = database_and_call(dir.path());
        let like = |pattern: String| {
            let (database, call) = (database.clone(), call.clone());
            // A blocking-pool thread's stack (tokio's default).
            std::thread::Builder::new()
                .stack_size(2 * 1024 * 1024)
                .spawn(move || {
                    let text = SqlValue::Text("a".repeat(pattern.len()));
                    let params = SqlParams::Positional(vec![text, SqlValue::Text(pattern)]);
                    database.query(&call, "SELECT ? LIKE ?", params, None)
                })
                .expect("thread")
                .join()
                .expect("the thread ends")
        };
        // The deepest match SQLite's default length allows: one `%` in two bytes.
        let refused = like("%a".repeat(24_000)).expect_err("too long");
        assert!(
            refused.message.contains("too complex"),
            "{}",
            refused.message
        );
        let longest = like("%a".repeat(MAX_PATTERN_BYTES as usize / 2)).expect("matches");
        assert_eq!(longest.rows, vec![vec![SqlValue::Integer(1)]]);
        call.transaction.commit().expect("commit");
    }

    #[test]
    fn only_a_short_read_in_the_calls_open_transaction_is_answered_at_once() {
        let dir = tempfile::tempdir().expect("temp dir");
        let (database, call) = database_and_call(dir.path());
        let none = SqlParams::None;
        assert!(
            database
                .query_at_once(&call, "SELECT 1", &none, None)
                .is_none(),
            "before the call holds its transaction, the pool opens it"
        );
        database
            .execute_batch(
                &call,
                "CREATE TABLE notes(id INTEGER PRIMARY KEY, text TEXT)",
            )
            .expect("schema");
        let one = SqlParams::Positional(vec![SqlValue::Text("one".into())]);
        database
            .execute(&call, "INSERT INTO notes(text) VALUES (?)", one)
            .expect("insert");

        let select = "SELECT text FROM notes WHERE id = ?";
        let first = SqlParams::Positional(vec![SqlValue::Integer(1)]);
        let at_once = database
            .query_at_once(&call, select, &first, None)
            .expect("answered at once")
            .expect("rows");
        assert_eq!(at_once.rows, vec![vec![SqlValue::Text("one".into())]]);
        assert_eq!(
            at_once,
            database.query(&call, select, first, None).expect("rows")
        );

        let write = "INSERT INTO notes(text) VALUES ('two') RETURNING id";
        let deep = format!("SELECT 1{}", " + 1".repeat(400));
        let long = "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 10000000) SELECT count(*) FROM n";
        for sql in [write, "BEGIN", deep.as_str(), long, "SELECT * FROM nowhere"] {
            assert!(
                database.query_at_once(&call, sql, &none, None).is_none(),
                "{sql:.60} goes to the pool"
            );
        }
        {
            let conn = database.lock();
            assert!(conn.pool_only.contains(long) && conn.pool_only.contains(write));
        }
        let count = "SELECT count(*) FROM notes";
        let rows = database
            .query(&call, count, none.clone(), None)
            .expect("count");
        assert_eq!(
            rows.rows,
            vec![vec![SqlValue::Integer(1)]],
            "the write never ran"
        );
        let sum = database
            .query(&call, &deep, none, None)
            .expect("the pool compiles it");
        assert_eq!(sum.rows, vec![vec![SqlValue::Integer(401)]]);
        call.transaction.commit().expect("commit");
    }

    #[test]
    fn transaction_words_are_found_after_comments() {
        assert!(first_word_is_transaction(
            "  -- x\n /* y */ begin immediate"
        ));
        assert!(first_word_is_transaction("COMMIT"));
        assert!(first_word_is_transaction("end transaction"));
        assert!(!first_word_is_transaction("SELECT 'BEGIN'"));
        assert!(!first_word_is_transaction("beginning"));
    }
}
