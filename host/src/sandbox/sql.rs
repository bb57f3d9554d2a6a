//! The host side of the `sql` import (`wit/sql.wit`): the `database` and
//! `statement` resources of one instance, each import charging what the
//! guest passed against the call's input budget, then running on the
//! blocking pool in the call's SQL transaction (`services::sql`) — except a
//! read that can be answered at once, which runs on the call's own thread
//! (`Database::query_at_once`). A host without SQL databases
//! ([`SqlAccess::Refused`]) still loads engines that import `sql`
//! (componentize-js and componentize-py import every interface of the
//! world, used or not); their `open` answers `unavailable`, naming why.

use std::sync::Arc;

use wasmtime::component::Resource;

use super::bindings::ctxbox::engine::sql as wit_sql;
use super::store::{HostTrap, StoreState};
use crate::contract::failure::FailureKind;
use crate::contract::services::ServiceError;
use crate::services::sql::{
    CallTransaction, Database, SqlCall, SqlChanges, SqlError, SqlErrorKind, SqlParams, SqlRows,
    SqlService, SqlValue,
};

/// The interface an engine imports for SQL.
const SQL_INTERFACE: &str = "ctxbox:engine/sql";

/// Whether `imports` (a component's) hold the SQL power.
pub(super) fn imports_sql(imports: &[String]) -> bool {
    imports
        .iter()
        .any(|import| import.split('@').next() == Some(SQL_INTERFACE))
}

/// Whether a host serves engines' SQL databases.
#[derive(Debug, Clone)]
pub enum SqlAccess {
    /// It does, with this service.
    Served(Arc<SqlService>),
    /// It does not, for this reason: `database.open` answers `unavailable`
    /// with it.
    Refused(Arc<str>),
}

impl Default for SqlAccess {
    fn default() -> Self {
        Self::Refused(
            "this host keeps no SQL databases (it was built without a data directory for them)"
                .into(),
        )
    }
}

/// A `database` handle: the instance's connection to one database.
pub struct DatabaseHandle(Arc<Database>);

/// A `statement` handle: a compiled statement of a database (run through
/// the connection's statement cache).
pub struct StatementHandle {
    database: Arc<Database>,
    sql: String,
    columns: Vec<String>,
}

type SqlResult<T> = Result<T, wit_sql::SqlError>;

impl StoreState {
    /// `error` as the guest gets it; the host's own failure is noted on the
    /// call (never the engine's).
    fn sql_answer<T>(&mut self, result: Result<T, SqlError>) -> SqlResult<T> {
        result.map_err(|error| {
            if error.is_host_fault() {
                self.call
                    .host_fault
                    .get_or_insert_with(|| error.message.clone());
            }
            to_wit_error(error)
        })
    }

    /// Runs `work` on `database` on the blocking pool, in the call's
    /// transaction and under its deadline notice and abort.
    async fn sql_run<T: Send + 'static>(
        &mut self,
        database: Arc<Database>,
        work: impl FnOnce(&Arc<Database>, &SqlCall) -> Result<T, SqlError> + Send + 'static,
    ) -> SqlResult<T> {
        let call = self.sql_call();
        let result = tokio::task::spawn_blocking(move || work(&database, &call))
            .await
            .unwrap_or_else(|error| Err(unavailable(format!("the SQL task failed: {error}"))));
        self.sql_answer(result)
    }

    /// What a statement of the current call runs under.
    fn sql_call(&self) -> SqlCall {
        SqlCall {
            transaction: self.call.sql.clone(),
            deadline: self.call.clock.notice_at(),
            abort: self.call.abort.clone(),
        }
    }

    fn database(&self, handle: &Resource<DatabaseHandle>) -> wasmtime::Result<Arc<Database>> {
        Ok(self.table.get(handle)?.0.clone())
    }

    /// The database and text of a prepared statement.
    fn statement(
        &self,
        handle: &Resource<StatementHandle>,
    ) -> wasmtime::Result<(Arc<Database>, String)> {
        let statement = self.table.get(handle)?;
        Ok((statement.database.clone(), statement.sql.clone()))
    }

    /// Runs `sql` on `database` and reports its changes.
    async fn execute_on(
        &mut self,
        database: Arc<Database>,
        sql: String,
        params: SqlParams,
    ) -> SqlResult<wit_sql::Changes> {
        self.sql_run(database, move |database, call| {
            database.execute(call, &sql, params)
        })
        .await
        .map(to_wit_changes)
    }

    /// Runs `sql` on `database` and returns its rows.
    async fn query_on(
        &mut self,
        database: Arc<Database>,
        sql: String,
        params: SqlParams,
        max_rows: Option<u32>,
    ) -> SqlResult<wit_sql::Rows> {
        if let Some(answer) = database.query_at_once(&self.sql_call(), &sql, &params, max_rows) {
            return self.sql_answer(answer).map(to_wit_rows);
        }
        self.sql_run(database, move |database, call| {
            database.query(call, &sql, params, max_rows)
        })
        .await
        .map(to_wit_rows)
    }
}

fn unavailable(message: String) -> SqlError {
    SqlError::new(SqlErrorKind::Unavailable, message)
}

impl wit_sql::Host for StoreState {}

impl wit_sql::HostDatabase for StoreState {
    async fn open(
        &mut self,
        name: Option<String>,
    ) -> wasmtime::Result<SqlResult<Resource<DatabaseHandle>>> {
        self.charge(name.as_ref().map_or(0, String::len))?;
        let service = match &self.sql {
            SqlAccess::Served(service) => service.clone(),
            SqlAccess::Refused(why) => {
                let error = unavailable(why.to_string());
                return Ok(self.sql_answer(Err(error)));
            }
        };
        let database = match self.sql_databases.get(&name) {
            Some(database) => database.clone(),
            None if self.sql_databases.len() >= service.config().max_databases as usize => {
                let error = SqlError::new(
                    SqlErrorKind::Limit,
                    "the instance has opened as many databases as its engine may have (sql.maxDatabases)",
                );
                return Ok(self.sql_answer(Err(error)));
            }
            None => {
                let engine = self.engine_id.to_string();
                let wanted = name.clone();
                let opened =
                    tokio::task::spawn_blocking(move || service.open(&engine, wanted.as_deref()))
                        .await
                        .unwrap_or_else(|error| {
                            Err(unavailable(format!("opening the database failed: {error}")))
                        });
                match self.sql_answer(opened) {
                    Ok(database) => {
                        let database = Arc::new(database);
                        self.sql_databases.insert(name, database.clone());
                        database
                    }
                    Err(error) => return Ok(Err(error)),
                }
            }
        };
        let handle = self.table.push(DatabaseHandle(database)).map_err(|error| {
            HostTrap::error(
                FailureKind::HostLimit,
                format!("cannot hand out a database: {error}"),
            )
        })?;
        Ok(Ok(handle))
    }

    async fn execute_batch(
        &mut self,
        handle: Resource<DatabaseHandle>,
        sql: String,
    ) -> wasmtime::Result<SqlResult<()>> {
        self.charge(sql.len())?;
        let database = self.database(&handle)?;
        Ok(self
            .sql_run(database, move |database, call| {
                database.execute_batch(call, &sql)
            })
            .await)
    }

    async fn execute(
        &mut self,
        handle: Resource<DatabaseHandle>,
        sql: String,
        params: wit_sql::Params,
    ) -> wasmtime::Result<SqlResult<wit_sql::Changes>> {
        let params = from_wit_params(params);
        self.charge(sql.len() + params.wire_bytes())?;
        let database = self.database(&handle)?;
        Ok(self.execute_on(database, sql, params).await)
    }

    async fn query(
        &mut self,
        handle: Resource<DatabaseHandle>,
        sql: String,
        params: wit_sql::Params,
        max_rows: Option<u32>,
    ) -> wasmtime::Result<SqlResult<wit_sql::Rows>> {
        let params = from_wit_params(params);
        self.charge(sql.len() + params.wire_bytes())?;
        let database = self.database(&handle)?;
        Ok(self.query_on(database, sql, params, max_rows).await)
    }

    async fn prepare(
        &mut self,
        handle: Resource<DatabaseHandle>,
        sql: String,
    ) -> wasmtime::Result<SqlResult<Resource<StatementHandle>>> {
        self.charge(sql.len())?;
        let database = self.database(&handle)?;
        let compiled = {
            let sql = sql.clone();
            self.sql_run(database.clone(), move |database, _| database.prepare(&sql))
                .await
        };
        let columns = match compiled {
            Ok(columns) => columns,
            Err(error) => return Ok(Err(error)),
        };
        let statement = StatementHandle {
            database,
            sql,
            columns,
        };
        let handle = self.table.push(statement).map_err(|error| {
            HostTrap::error(
                FailureKind::HostLimit,
                format!("cannot hand out a statement: {error}"),
            )
        })?;
        Ok(Ok(handle))
    }

    fn drop(&mut self, handle: Resource<DatabaseHandle>) -> wasmtime::Result<()> {
        self.table.delete(handle)?;
        Ok(())
    }
}

impl wit_sql::HostStatement for StoreState {
    fn columns(&mut self, handle: Resource<StatementHandle>) -> wasmtime::Result<Vec<String>> {
        Ok(self.table.get(&handle)?.columns.clone())
    }

    async fn execute(
        &mut self,
        handle: Resource<StatementHandle>,
        params: wit_sql::Params,
    ) -> wasmtime::Result<SqlResult<wit_sql::Changes>> {
        let params = from_wit_params(params);
        self.charge(params.wire_bytes())?;
        let (database, sql) = self.statement(&handle)?;
        Ok(self.execute_on(database, sql, params).await)
    }

    async fn query(
        &mut self,
        handle: Resource<StatementHandle>,
        params: wit_sql::Params,
        max_rows: Option<u32>,
    ) -> wasmtime::Result<SqlResult<wit_sql::Rows>> {
        let params = from_wit_params(params);
        self.charge(params.wire_bytes())?;
        let (database, sql) = self.statement(&handle)?;
        Ok(self.query_on(database, sql, params, max_rows).await)
    }

    fn drop(&mut self, handle: Resource<StatementHandle>) -> wasmtime::Result<()> {
        self.table.delete(handle)?;
        Ok(())
    }
}

/// Commits the call's SQL transaction (after its state batch): a failure
/// is the host's.
pub(super) async fn commit(transaction: &CallTransaction) -> Result<(), ServiceError> {
    if !transaction.is_open() {
        return Ok(());
    }
    let transaction = transaction.clone();
    tokio::task::spawn_blocking(move || transaction.commit())
        .await
        .map_err(|error| ServiceError::HostFault(format!("the SQL commit task failed: {error}")))?
        .map_err(|error| ServiceError::HostFault(error.message))
}

fn from_wit_value(value: wit_sql::Value) -> SqlValue {
    match value {
        wit_sql::Value::Null => SqlValue::Null,
        wit_sql::Value::Integer(value) => SqlValue::Integer(value),
        wit_sql::Value::Real(value) => SqlValue::Real(value),
        wit_sql::Value::Text(value) => SqlValue::Text(value),
        wit_sql::Value::Blob(value) => SqlValue::Blob(value),
    }
}

fn to_wit_value(value: SqlValue) -> wit_sql::Value {
    match value {
        SqlValue::Null => wit_sql::Value::Null,
        SqlValue::Integer(value) => wit_sql::Value::Integer(value),
        SqlValue::Real(value) => wit_sql::Value::Real(value),
        SqlValue::Text(value) => wit_sql::Value::Text(value),
        SqlValue::Blob(value) => wit_sql::Value::Blob(value),
    }
}

fn from_wit_params(params: wit_sql::Params) -> SqlParams {
    match params {
        wit_sql::Params::None => SqlParams::None,
        wit_sql::Params::Positional(values) => {
            SqlParams::Positional(values.into_iter().map(from_wit_value).collect())
        }
        wit_sql::Params::Named(values) => SqlParams::Named(
            values
                .into_iter()
                .map(|named| (named.name, from_wit_value(named.value)))
                .collect(),
        ),
    }
}

fn to_wit_changes(changes: SqlChanges) -> wit_sql::Changes {
    wit_sql::Changes {
        changes: changes.changes,
        last_insert_rowid: changes.last_insert_rowid,
    }
}

fn to_wit_rows(rows: SqlRows) -> wit_sql::Rows {
    wit_sql::Rows {
        columns: rows.columns,
        rows: rows
            .rows
            .into_iter()
            .map(|row| row.into_iter().map(to_wit_value).collect())
            .collect(),
        truncated: rows.truncated,
    }
}

fn to_wit_error(error: SqlError) -> wit_sql::SqlError {
    wit_sql::SqlError {
        kind: match error.kind {
            SqlErrorKind::Sqlite => wit_sql::ErrorKind::Sqlite,
            SqlErrorKind::Refused => wit_sql::ErrorKind::Refused,
            SqlErrorKind::QuotaExceeded => wit_sql::ErrorKind::QuotaExceeded,
            SqlErrorKind::Limit => wit_sql::ErrorKind::Limit,
            SqlErrorKind::Aborted => wit_sql::ErrorKind::Aborted,
            SqlErrorKind::Unavailable => wit_sql::ErrorKind::Unavailable,
        },
        code: error.code,
        message: error.message,
    }
}
