//! [`PostgresState`]: engine state in the shared PostgreSQL database, with
//! the same keys, limits and answers as the embedded [`StateStore`]. A write
//! locks the engine's usage row (`SELECT … FOR UPDATE`) for its transaction,
//! so writes of one engine from many hosts are serialized and its quota and
//! key limit hold across all of them. A call's batch of writes is one
//! transaction: one commit flush, however many keys it writes. Keys compare bytewise (`COLLATE "C"`),
//! as in SQLite. The engines' documents (`index_postgres`) are written in
//! the same transaction and counted in the same usage row.
//!
//! Work done for an engine call is bounded by that call: a commit or search
//! given a deadline runs under `SET LOCAL statement_timeout` of the time
//! left (PostgreSQL cancels it then: [`StateError::Interrupted`]), and one
//! engine holds at most its share of the pooled connections at once
//! ([`PoolShare`]).
//!
//! [`StateStore`]: super::state::StateStore

use std::future::Future;
use std::sync::Arc;
use std::time::Instant;

use tokio_postgres::error::SqlState;

use super::pool_share::PoolShare;
use super::state::{
    CallWrites, EngineState, Footprint, Limits, StateConfig, StateError, StateUsage, StateWrite,
    check_key, entry_cost, prefix_end,
};
use super::{index, index_postgres};
use crate::contract::engine::WriteFence;
use crate::contract::index::{IndexOp, IndexPage, IndexQuery};
use crate::store::Postgres;

/// Engine state in PostgreSQL.
#[derive(Debug, Clone)]
pub struct PostgresState {
    postgres: Arc<Postgres>,
    limits: Limits,
    share: Arc<PoolShare>,
}

impl PostgresState {
    /// The engines' state in `postgres`, limited per `config`.
    pub fn new(postgres: Arc<Postgres>, config: &StateConfig) -> Self {
        let share = Arc::new(PoolShare::new(postgres.pool().status().max_size));
        Self {
            postgres,
            share,
            limits: Limits {
                quota_bytes: config.quota_bytes,
                max_keys: config.max_keys,
            },
        }
    }
}

fn clamp(value: u64) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

/// `error` of work `what` for `engine` as the store's error: a statement
/// PostgreSQL cancelled at its timeout is work stopped at the deadline.
fn failure(
    postgres: &Postgres,
    engine: &str,
    what: &'static str,
    error: &tokio_postgres::Error,
) -> StateError {
    if error.code() == Some(&SqlState::QUERY_CANCELED) {
        StateError::Interrupted {
            engine: engine.to_owned(),
            what,
        }
    } else {
        postgres.query_error(what, error).into()
    }
}

/// Cancels the statements of `transaction` once `deadline` passes.
async fn limit_time(
    transaction: &deadpool_postgres::Transaction<'_>,
    deadline: Option<Instant>,
) -> Result<(), tokio_postgres::Error> {
    let Some(deadline) = deadline else {
        return Ok(());
    };
    // 0 would turn the timeout off: at least a millisecond.
    let left = deadline
        .saturating_duration_since(Instant::now())
        .as_millis()
        .max(1);
    transaction
        .batch_execute(&format!("SET LOCAL statement_timeout = {left}"))
        .await
}

impl PostgresState {
    /// Runs `work` for `engine` with a pooled connection, once the engine
    /// holds less than its share of them, waiting until `deadline` at most.
    fn run_for<T, F, Fut>(
        &self,
        engine: &str,
        deadline: Option<Instant>,
        work: F,
    ) -> Result<T, StateError>
    where
        T: Send + 'static,
        F: FnOnce(deadpool_postgres::Object) -> Fut + Send + 'static,
        Fut: Future<Output = Result<T, StateError>> + Send + 'static,
    {
        let Some(_held) = self.share.take(engine, deadline) else {
            return Err(StateError::Interrupted {
                engine: engine.to_owned(),
                what: "waiting for one of the engine's share of the store's connections",
            });
        };
        self.postgres.run(work)
    }

    /// Applies `writes`, then `index`, in one transaction, all or none,
    /// refused past the engine's limits ([`Limits::check_growth`] on the
    /// whole batch) and cancelled at `deadline`; answers how many of the
    /// deleted keys existed.
    fn apply(
        &self,
        engine: &str,
        writes: Vec<StateWrite>,
        index: Vec<IndexOp>,
        fence: Option<WriteFence>,
        deadline: Option<Instant>,
    ) -> Result<usize, StateError> {
        for (key, _) in &writes {
            check_key(key)?;
        }
        for op in &index {
            index::check_op(op)?;
        }
        let (postgres, limits) = (self.postgres.clone(), self.limits);
        let owned = engine.to_owned();
        self.run_for(engine, deadline, move |mut client| async move {
            let engine = owned;
            let fail = |error: tokio_postgres::Error| -> StateError {
                failure(&postgres, &engine, "write engine state", &error)
            };
            let transaction = client.transaction().await.map_err(fail)?;
            limit_time(&transaction, deadline).await.map_err(fail)?;
            crate::store::require_lease(&transaction, fence.as_ref())
                .await
                .map_err(|refusal| refusal.into_error(fail))?;
            let before = lock_usage(&transaction, &engine).await.map_err(fail)?;
            let mut after = before;
            let mut removed = 0;
            for (key, value) in &writes {
                match value {
                    Some(value) => {
                        let old: Option<u64> = transaction
                            .query_opt(
                                "SELECT octet_length(value) FROM ctxbox_state_entries WHERE engine = $1 AND key = $2",
                                &[&engine, key],
                            )
                            .await
                            .map_err(fail)?
                            .map(|row| entry_cost(key, row.get::<_, i32>(0).max(0) as usize));
                        after = Limits::after_write(after, old, entry_cost(key, value.len()));
                        transaction
                            .execute(
                                "INSERT INTO ctxbox_state_entries (engine, key, value) VALUES ($1, $2, $3)
                                 ON CONFLICT (engine, key) DO UPDATE SET value = excluded.value",
                                &[&engine, key, value],
                            )
                            .await
                            .map_err(fail)?;
                    }
                    None => {
                        let deleted = transaction
                            .query_opt(
                                "DELETE FROM ctxbox_state_entries WHERE engine = $1 AND key = $2
                                 RETURNING octet_length(value)",
                                &[&engine, key],
                            )
                            .await
                            .map_err(fail)?;
                        if let Some(row) = deleted {
                            let old = entry_cost(key, row.get::<_, i32>(0).max(0) as usize);
                            after = Limits::after_delete(after, old);
                            removed += 1;
                        }
                    }
                }
            }
            let after = index_postgres::apply(&transaction, &engine, &index, after)
                .await
                .map_err(fail)?;
            // Refused: the transaction is dropped, rolling every write back.
            limits.check_growth(&engine, before, after)?;
            set_usage(&transaction, &engine, after).await.map_err(fail)?;
            transaction.commit().await.map_err(fail)?;
            Ok(removed)
        })
    }
}

impl EngineState for PostgresState {
    fn get(&self, engine: &str, key: &str) -> Result<Option<Vec<u8>>, StateError> {
        check_key(key)?;
        let (owned, key, postgres) = (engine.to_owned(), key.to_owned(), self.postgres.clone());
        self.run_for(engine, None, move |client| async move {
            let engine = owned;
            client
                .query_opt(
                    "SELECT value FROM ctxbox_state_entries WHERE engine = $1 AND key = $2",
                    &[&engine, &key],
                )
                .await
                .map(|row| row.map(|row| row.get(0)))
                .map_err(|error| postgres.query_error("read engine state", &error).into())
        })
    }

    fn set(&self, engine: &str, key: &str, value: &[u8]) -> Result<(), StateError> {
        self.apply(
            engine,
            vec![(key.to_owned(), Some(value.to_vec()))],
            Vec::new(),
            None,
            None,
        )
        .map(|_| ())
    }

    fn delete(&self, engine: &str, key: &str) -> Result<bool, StateError> {
        self.apply(engine, vec![(key.to_owned(), None)], Vec::new(), None, None)
            .map(|removed| removed > 0)
    }

    fn scan(
        &self,
        engine: &str,
        prefix: &str,
        start_after: Option<&str>,
        limit: u32,
    ) -> Result<Vec<(String, Vec<u8>)>, StateError> {
        let (owned, prefix, postgres) =
            (engine.to_owned(), prefix.to_owned(), self.postgres.clone());
        let end = prefix_end(&prefix);
        let start_after = start_after.map(str::to_owned);
        let limit = i64::from(limit);
        self.run_for(engine, None, move |client| async move {
            let engine = owned;
            client
                .query(
                    "SELECT key, value FROM ctxbox_state_entries
                     WHERE engine = $1 AND key >= $2
                       AND ($3::text IS NULL OR key < $3) AND ($4::text IS NULL OR key > $4)
                     ORDER BY key LIMIT $5",
                    &[&engine, &prefix, &end, &start_after, &limit],
                )
                .await
                .map(|rows| rows.iter().map(|row| (row.get(0), row.get(1))).collect())
                .map_err(|error| postgres.query_error("scan engine state", &error).into())
        })
    }

    fn usage(&self, engine: &str) -> Result<u64, StateError> {
        let (owned, postgres) = (engine.to_owned(), self.postgres.clone());
        self.run_for(engine, None, move |client| async move {
            let engine = owned;
            client
                .query_opt(
                    "SELECT bytes FROM ctxbox_state_engines WHERE id = $1",
                    &[&engine],
                )
                .await
                .map(|row| row.map_or(0, |row| row.get::<_, i64>(0).max(0) as u64))
                .map_err(|error| {
                    postgres
                        .query_error("read engine state usage", &error)
                        .into()
                })
        })
    }

    fn limits(&self) -> Limits {
        self.limits
    }

    fn footprint(&self, engine: &str, key: &str) -> Result<Footprint, StateError> {
        check_key(key)?;
        let (owned, key, postgres) = (engine.to_owned(), key.to_owned(), self.postgres.clone());
        self.run_for(engine, None, move |client| async move {
            let engine = owned;
            client
                .query_opt(
                    "SELECT bytes, keys,
                            (SELECT octet_length(value) FROM ctxbox_state_entries
                             WHERE engine = $1 AND key = $2)
                     FROM ctxbox_state_engines WHERE id = $1",
                    &[&engine, &key],
                )
                .await
                .map(|row| {
                    row.map_or_else(Footprint::default, |row| Footprint {
                        usage: StateUsage {
                            bytes: row.get::<_, i64>(0).max(0) as u64,
                            keys: row.get::<_, i64>(1).max(0) as u64,
                        },
                        entry: row
                            .get::<_, Option<i32>>(2)
                            .map(|length| entry_cost(&key, length.max(0) as usize)),
                    })
                })
                .map_err(|error| postgres.query_error("read engine state", &error).into())
        })
    }

    fn index_footprint(
        &self,
        engine: &str,
        session: Option<&str>,
        id: &str,
    ) -> Result<Footprint, StateError> {
        let (owned, id, postgres) = (engine.to_owned(), id.to_owned(), self.postgres.clone());
        let session = session.map(str::to_owned);
        self.run_for(engine, None, move |client| async move {
            let engine = owned;
            index_postgres::footprint(&client, &engine, session.as_deref(), &id)
                .await
                .map_err(|error| {
                    postgres
                        .query_error("read the engine's index", &error)
                        .into()
                })
        })
    }

    fn commit(
        &self,
        engine: &str,
        writes: CallWrites,
        fence: Option<&WriteFence>,
        deadline: Option<Instant>,
    ) -> Result<(), StateError> {
        self.apply(engine, writes.state, writes.index, fence.cloned(), deadline)
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
        let (owned, query, postgres) = (engine.to_owned(), query.clone(), self.postgres.clone());
        let session = session.map(str::to_owned);
        self.run_for(engine, deadline, move |mut client| async move {
            let engine = owned;
            let fail = |error: tokio_postgres::Error| -> StateError {
                failure(&postgres, &engine, "search the engine's index", &error)
            };
            let session = session.as_deref();
            if deadline.is_none() {
                // One statement, without a transaction's two round trips.
                return index_postgres::search(&client, &engine, session, &words, &query)
                    .await
                    .map_err(fail);
            }
            // A transaction of its own, for the timeout to end with it.
            let transaction = client.transaction().await.map_err(fail)?;
            limit_time(&transaction, deadline).await.map_err(fail)?;
            let page = index_postgres::search(&transaction, &engine, session, &words, &query)
                .await
                .map_err(fail)?;
            transaction.commit().await.map_err(fail)?;
            Ok(page)
        })
    }
}

/// The engine's usage, its row created if needed and locked until the
/// transaction ends.
async fn lock_usage(
    transaction: &deadpool_postgres::Transaction<'_>,
    engine: &str,
) -> Result<StateUsage, tokio_postgres::Error> {
    transaction
        .execute(
            "INSERT INTO ctxbox_state_engines (id) VALUES ($1) ON CONFLICT (id) DO NOTHING",
            &[&engine],
        )
        .await?;
    let row = transaction
        .query_one(
            "SELECT bytes, keys FROM ctxbox_state_engines WHERE id = $1 FOR UPDATE",
            &[&engine],
        )
        .await?;
    Ok(StateUsage {
        bytes: row.get::<_, i64>(0).max(0) as u64,
        keys: row.get::<_, i64>(1).max(0) as u64,
    })
}

async fn set_usage(
    transaction: &deadpool_postgres::Transaction<'_>,
    engine: &str,
    usage: StateUsage,
) -> Result<u64, tokio_postgres::Error> {
    transaction
        .execute(
            "UPDATE ctxbox_state_engines SET bytes = $2, keys = $3 WHERE id = $1",
            &[&engine, &clamp(usage.bytes), &clamp(usage.keys)],
        )
        .await
}
