//! The engine's own SQL database (`wit/sql.wit`): SQLite with FTS5, kept by
//! the host, synchronous.
//!
//! A call's statements run in one transaction of the call: they become
//! durable when the call answers and the host accepts the answer, and a call
//! that fails leaves none of them. `BEGIN`/`COMMIT`/`ROLLBACK` work as in
//! SQLite, inside that transaction. The database counts against the engine's
//! state quota; limits and refused operations (`ATTACH`, extensions, most
//! PRAGMAs) are listed in `wit/sql.wit`.
//!
//! ```no_run
//! use ctxbox_guest::host::sql::{Database, SqlError};
//! use ctxbox_guest::sql_params;
//!
//! fn remember(text: &str) -> Result<Vec<String>, SqlError> {
//!     let db = Database::open()?;
//!     db.execute_batch(
//!         "CREATE TABLE IF NOT EXISTS notes(id INTEGER PRIMARY KEY, text TEXT NOT NULL);
//!          CREATE VIRTUAL TABLE IF NOT EXISTS notes_fts USING fts5(text);",
//!     )?;
//!     let id = db.execute("INSERT INTO notes(text) VALUES (?)", sql_params![text])?.last_insert_rowid;
//!     db.execute("INSERT INTO notes_fts(rowid, text) VALUES (?, ?)", sql_params![id, text])?;
//!     let rows = db.query("SELECT n.text FROM notes_fts f JOIN notes n ON n.id = f.rowid WHERE notes_fts MATCH ?", sql_params!["deploy"])?;
//!     rows.iter().map(|row| row.get::<String>(0)).collect()
//! }
//! ```

use crate::__private::bindings::ctxbox::engine::sql as raw;

pub use raw::{Changes, ErrorKind, NamedValue, Params, SqlError, Value};

/// A database of the engine's (its main one, or a named one).
#[derive(Debug)]
pub struct Database(raw::Database);

impl Database {
    /// Opens the engine's main database.
    pub fn open() -> Result<Self, SqlError> {
        raw::Database::open(None).map(Self)
    }

    /// Opens the engine's database `name` (1 to 64 of `A-Z a-z 0-9 _ -`),
    /// e.g. one per agent; it shares the engine's quota.
    pub fn open_named(name: &str) -> Result<Self, SqlError> {
        raw::Database::open(Some(name)).map(Self)
    }

    /// Runs statements separated by `;`, without parameters, discarding
    /// rows (`node:sqlite`'s `exec`).
    pub fn execute_batch(&self, sql: &str) -> Result<(), SqlError> {
        self.0.execute_batch(sql)
    }

    /// Runs one statement and reports its changes.
    pub fn execute(&self, sql: &str, params: impl Into<Params>) -> Result<Changes, SqlError> {
        self.0.execute(sql, &params.into())
    }

    /// Runs one statement and returns its rows (at most the host's
    /// `sql.maxRows`; see [`Rows::truncated`]).
    pub fn query(&self, sql: &str, params: impl Into<Params>) -> Result<Rows, SqlError> {
        self.0.query(sql, &params.into(), None).map(Rows::from)
    }

    /// Runs one statement and returns at most `max_rows` of its rows.
    pub fn query_at_most(
        &self,
        sql: &str,
        params: impl Into<Params>,
        max_rows: u32,
    ) -> Result<Rows, SqlError> {
        self.0
            .query(sql, &params.into(), Some(max_rows))
            .map(Rows::from)
    }

    /// The first row of a query, if it has one.
    pub fn query_row(&self, sql: &str, params: impl Into<Params>) -> Result<Option<Row>, SqlError> {
        let rows = self.query_at_most(sql, params, 1)?;
        Ok(rows.rows.into_iter().next().map(|values| Row {
            columns: rows.columns,
            values,
        }))
    }

    /// Compiles one statement to run many times.
    pub fn prepare(&self, sql: &str) -> Result<Statement, SqlError> {
        self.0.prepare(sql).map(Statement)
    }
}

/// A compiled statement of a [`Database`].
#[derive(Debug)]
pub struct Statement(raw::Statement);

impl Statement {
    /// Its result columns.
    pub fn columns(&self) -> Vec<String> {
        self.0.columns()
    }

    /// Runs it and reports its changes.
    pub fn execute(&self, params: impl Into<Params>) -> Result<Changes, SqlError> {
        self.0.execute(&params.into())
    }

    /// Runs it and returns its rows.
    pub fn query(&self, params: impl Into<Params>) -> Result<Rows, SqlError> {
        self.0.query(&params.into(), None).map(Rows::from)
    }
}

/// Rows a query returned.
#[derive(Debug, Clone, PartialEq)]
pub struct Rows {
    /// Column names, in order.
    pub columns: Vec<String>,
    /// Each row's values.
    pub rows: Vec<Vec<Value>>,
    /// Whether the host left rows out (a row or byte limit).
    pub truncated: bool,
}

impl From<raw::Rows> for Rows {
    fn from(rows: raw::Rows) -> Self {
        Self {
            columns: rows.columns,
            rows: rows.rows,
            truncated: rows.truncated,
        }
    }
}

impl Rows {
    /// Each row, with typed access to its columns.
    pub fn iter(&self) -> impl Iterator<Item = RowRef<'_>> {
        self.rows.iter().map(|values| RowRef {
            columns: &self.columns,
            values,
        })
    }

    /// How many rows there are.
    pub fn len(&self) -> usize {
        self.rows.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }
}

/// One row of [`Rows`], borrowed.
#[derive(Debug, Clone, Copy)]
pub struct RowRef<'a> {
    columns: &'a [String],
    values: &'a [Value],
}

/// One row, owned ([`Database::query_row`]).
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    columns: Vec<String>,
    values: Vec<Value>,
}

impl Row {
    /// The value of column `column` (its index or name) as `T`.
    pub fn get<T: FromValue>(&self, column: impl Column) -> Result<T, SqlError> {
        self.as_ref().get(column)
    }

    /// The row, borrowed.
    pub fn as_ref(&self) -> RowRef<'_> {
        RowRef {
            columns: &self.columns,
            values: &self.values,
        }
    }
}

impl RowRef<'_> {
    /// The value of column `column` (its index or name) as `T`.
    pub fn get<T: FromValue>(&self, column: impl Column) -> Result<T, SqlError> {
        let index = column.index(self.columns)?;
        let value = self.values.get(index).ok_or_else(|| {
            usage(format!(
                "column {index} is out of range ({} columns)",
                self.values.len()
            ))
        })?;
        T::from_value(value)
    }

    /// The raw values.
    pub fn values(&self) -> &[Value] {
        self.values
    }
}

/// A column named by its index or its name.
pub trait Column {
    /// The column's index among `columns`.
    fn index(&self, columns: &[String]) -> Result<usize, SqlError>;
}

impl Column for usize {
    fn index(&self, _: &[String]) -> Result<usize, SqlError> {
        Ok(*self)
    }
}

impl Column for &str {
    fn index(&self, columns: &[String]) -> Result<usize, SqlError> {
        columns
            .iter()
            .position(|column| column == self)
            .ok_or_else(|| usage(format!("no column named `{self}`")))
    }
}

/// A Rust type a [`Value`] converts to.
pub trait FromValue: Sized {
    /// `value` as `Self`, or why not.
    fn from_value(value: &Value) -> Result<Self, SqlError>;
}

fn usage(message: String) -> SqlError {
    SqlError {
        kind: ErrorKind::Limit,
        code: 0,
        message,
    }
}

fn mismatch(value: &Value, wanted: &str) -> SqlError {
    let found = match value {
        Value::Null => "NULL",
        Value::Integer(_) => "an integer",
        Value::Real(_) => "a real",
        Value::Text(_) => "text",
        Value::Blob(_) => "a blob",
    };
    usage(format!("the column holds {found}, not {wanted}"))
}

impl FromValue for Value {
    fn from_value(value: &Value) -> Result<Self, SqlError> {
        Ok(value.clone())
    }
}

impl FromValue for i64 {
    fn from_value(value: &Value) -> Result<Self, SqlError> {
        match value {
            Value::Integer(value) => Ok(*value),
            other => Err(mismatch(other, "an integer")),
        }
    }
}

impl FromValue for bool {
    fn from_value(value: &Value) -> Result<Self, SqlError> {
        i64::from_value(value).map(|value| value != 0)
    }
}

impl FromValue for f64 {
    fn from_value(value: &Value) -> Result<Self, SqlError> {
        match value {
            Value::Real(value) => Ok(*value),
            Value::Integer(value) => Ok(*value as f64),
            other => Err(mismatch(other, "a number")),
        }
    }
}

impl FromValue for String {
    fn from_value(value: &Value) -> Result<Self, SqlError> {
        match value {
            Value::Text(value) => Ok(value.clone()),
            other => Err(mismatch(other, "text")),
        }
    }
}

impl FromValue for Vec<u8> {
    fn from_value(value: &Value) -> Result<Self, SqlError> {
        match value {
            Value::Blob(value) => Ok(value.clone()),
            Value::Text(value) => Ok(value.as_bytes().to_vec()),
            other => Err(mismatch(other, "a blob")),
        }
    }
}

impl<T: FromValue> FromValue for Option<T> {
    fn from_value(value: &Value) -> Result<Self, SqlError> {
        match value {
            Value::Null => Ok(None),
            other => T::from_value(other).map(Some),
        }
    }
}

macro_rules! value_from {
    ($($type:ty => |$value:ident| $make:expr),* $(,)?) => {
        $(impl From<$type> for Value {
            fn from($value: $type) -> Self {
                $make
            }
        })*
    };
}

value_from! {
    i64 => |value| Value::Integer(value),
    i32 => |value| Value::Integer(i64::from(value)),
    u32 => |value| Value::Integer(i64::from(value)),
    bool => |value| Value::Integer(i64::from(value)),
    f64 => |value| Value::Real(value),
    String => |value| Value::Text(value),
    &str => |value| Value::Text(value.to_owned()),
    &String => |value| Value::Text(value.clone()),
    Vec<u8> => |value| Value::Blob(value),
    &[u8] => |value| Value::Blob(value.to_vec()),
}

impl<T: Into<Value>> From<Option<T>> for Value {
    fn from(value: Option<T>) -> Self {
        value.map_or(Value::Null, Into::into)
    }
}

impl From<()> for Params {
    fn from((): ()) -> Self {
        Params::None
    }
}

impl From<Vec<Value>> for Params {
    fn from(values: Vec<Value>) -> Self {
        Params::Positional(values)
    }
}

impl<const N: usize> From<[(&str, Value); N]> for Params {
    fn from(values: [(&str, Value); N]) -> Self {
        Params::Named(
            values
                .into_iter()
                .map(|(name, value)| NamedValue {
                    name: name.to_owned(),
                    value,
                })
                .collect(),
        )
    }
}

/// An error's kind as the contract spells it (`quota-exceeded`).
pub fn error_kind(kind: ErrorKind) -> &'static str {
    match kind {
        ErrorKind::Sqlite => "sqlite",
        ErrorKind::Refused => "refused",
        ErrorKind::QuotaExceeded => "quota-exceeded",
        ErrorKind::Limit => "limit",
        ErrorKind::Aborted => "aborted",
        ErrorKind::Unavailable => "unavailable",
    }
}

impl From<SqlError> for crate::EngineError {
    fn from(error: SqlError) -> Self {
        let kind = if error.kind == ErrorKind::Unavailable {
            crate::EngineErrorKind::HostFailure
        } else {
            crate::EngineErrorKind::Internal
        };
        crate::EngineError::new(
            kind,
            format!(
                "sql {} ({}): {}",
                error_kind(error.kind),
                error.code,
                error.message
            ),
        )
    }
}

/// Positional parameters for a statement: `sql_params![id, "text", None::<i64>]`.
#[macro_export]
macro_rules! sql_params {
    () => { $crate::host::sql::Params::None };
    ($($value:expr),+ $(,)?) => {
        $crate::host::sql::Params::Positional(vec![$($crate::host::sql::Value::from($value)),+])
    };
}
