//! [`PostgresQuarantine`]: quarantine records in the shared PostgreSQL
//! database, so an engine one host quarantined is quarantined for all. The
//! first failure wins there too: a second host's write of the same engine
//! only updates the failure count and retry time.

use std::collections::HashMap;
use std::sync::Arc;

use super::quarantine::{QuarantineBackend, QuarantineError, QuarantineRecord};
use crate::contract::text::{
    MAX_ENGINE_TEXT_BYTES, MAX_STDERR_TAIL_BYTES, untrusted_line, untrusted_tail,
};
use crate::store::Postgres;

/// Quarantine records in PostgreSQL.
#[derive(Debug, Clone)]
pub struct PostgresQuarantine {
    postgres: Arc<Postgres>,
}

impl PostgresQuarantine {
    /// The records in `postgres`.
    pub fn new(postgres: Arc<Postgres>) -> Self {
        Self { postgres }
    }

    fn select(&self, engine_id: Option<String>) -> Result<Vec<QuarantineRecord>, QuarantineError> {
        let postgres = self.postgres.clone();
        self.postgres.run(move |client| async move {
            let rows = client
                .query(
                    "SELECT engine_id, owner, fingerprint, operation, classification, reason,
                            stderr_tail, at_ms, failures, retry_at_ms
                     FROM ctxbox_quarantine WHERE $1::text IS NULL OR engine_id = $1",
                    &[&engine_id],
                )
                .await
                .map_err(|error| postgres.query_error("read quarantine records", &error))?;
            Ok(rows
                .iter()
                .map(|row| QuarantineRecord {
                    engine_id: row.get(0),
                    owner: row.get(1),
                    fingerprint: row.get(2),
                    operation: row.get(3),
                    classification: row.get(4),
                    reason: untrusted_line(&row.get::<_, String>(5), MAX_ENGINE_TEXT_BYTES),
                    stderr_tail: untrusted_tail(&row.get::<_, String>(6), MAX_STDERR_TAIL_BYTES),
                    at_ms: row.get(7),
                    failures: u32::try_from(row.get::<_, i64>(8).max(0)).unwrap_or(u32::MAX),
                    retry_at_ms: row.get(9),
                })
                .collect())
        })
    }
}

impl QuarantineBackend for PostgresQuarantine {
    fn load_all(&self) -> Result<HashMap<String, QuarantineRecord>, QuarantineError> {
        Ok(self
            .select(None)?
            .into_iter()
            .map(|record| (record.engine_id.clone(), record))
            .collect())
    }

    fn get(&self, engine_id: &str) -> Result<Option<QuarantineRecord>, QuarantineError> {
        Ok(self.select(Some(engine_id.to_owned()))?.pop())
    }

    fn write(&self, record: &QuarantineRecord) -> Result<(), QuarantineError> {
        let (record, postgres) = (record.clone(), self.postgres.clone());
        self.postgres.run(move |client| async move {
            client
                .execute(
                    "INSERT INTO ctxbox_quarantine (engine_id, owner, fingerprint, operation,
                         classification, reason, stderr_tail, at_ms, failures, retry_at_ms)
                     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)
                     ON CONFLICT (engine_id) DO UPDATE SET
                         failures = excluded.failures, retry_at_ms = excluded.retry_at_ms",
                    &[
                        &record.engine_id,
                        &record.owner,
                        &record.fingerprint,
                        &record.operation,
                        &record.classification,
                        &record.reason,
                        &record.stderr_tail,
                        &record.at_ms,
                        &i64::from(record.failures),
                        &record.retry_at_ms,
                    ],
                )
                .await
                .map(|_| ())
                .map_err(|error| {
                    postgres
                        .query_error("write a quarantine record", &error)
                        .into()
                })
        })
    }

    fn delete(&self, engine_id: &str) -> Result<(), QuarantineError> {
        let (engine_id, postgres) = (engine_id.to_owned(), self.postgres.clone());
        self.postgres.run(move |client| async move {
            client
                .execute(
                    "DELETE FROM ctxbox_quarantine WHERE engine_id = $1",
                    &[&engine_id],
                )
                .await
                .map(|_| ())
                .map_err(|error| {
                    postgres
                        .query_error("clear a quarantine record", &error)
                        .into()
                })
        })
    }

    fn is_shared(&self) -> bool {
        true
    }
}
