//! Durable quarantine records (ARCHITECTURE.md §4): which engines misbehaved, how and
//! when, kept by a [`QuarantineBackend`] — an embedded SQLite database
//! ([`SqliteQuarantine`]) or the shared PostgreSQL one (`PostgresQuarantine`,
//! whose records every host sharing it reads) — so `ctxbox health` shows them
//! after a restart. The first failure wins: later failures of a quarantined
//! engine only count up (and, with back-off, push the next retry out).
//! A retried engine's record clears only after a run of good answers over
//! its last back-off ([`crate::engines::conduct`]), so an engine that
//! answers its retry and then fails again keeps doubling its back-off.
//! Re-registering an engine clears its record.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rusqlite::{Connection, params};
use serde::{Deserialize, Serialize};

use crate::contract::failure::{EngineFailure, FailureKind, Operation};
use crate::contract::text::{
    MAX_ENGINE_TEXT_BYTES, MAX_STDERR_TAIL_BYTES, untrusted_line, untrusted_tail,
};
use crate::engines::conduct::{Conduct, GoodRun, PROBATION_CALLS};

/// How long a host answers from its copy of a shared backend's records
/// before reading them again: a quarantine another host writes is seen
/// within this, at one query per interval however many calls there are.
pub const SHARED_REFRESH: Duration = Duration::from_secs(1);

/// Longest retry delay back-off grows to.
const MAX_BACKOFF: Duration = Duration::from_secs(6 * 60 * 60);

/// One quarantined engine.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct QuarantineRecord {
    /// The engine's id.
    pub engine_id: String,
    /// Who registered it (`core` or `plugin:<name>`).
    pub owner: String,
    /// Fingerprint of the engine artifact that failed (SHA-256 of the
    /// component), so registering the same artifact again after a restart
    /// keeps it quarantined while a new build gets a fresh chance.
    pub fingerprint: Option<String>,
    /// The operation that first failed.
    pub operation: String,
    /// How it failed (`timeout`, `panic`, …).
    pub classification: String,
    /// What happened.
    pub reason: String,
    /// The tail of the engine's stderr.
    pub stderr_tail: String,
    /// When it was quarantined, ms since the Unix epoch.
    pub at_ms: i64,
    /// Failures counted while quarantined (1 = just the first).
    pub failures: u32,
    /// When the engine may be tried again, ms since the Unix epoch; `None`:
    /// never (until re-registered).
    pub retry_at_ms: Option<i64>,
}

impl QuarantineRecord {
    /// Whether the engine may be tried again at `now_ms`.
    pub fn retry_due(&self, now_ms: i64) -> bool {
        self.retry_at_ms.is_some_and(|retry_at| now_ms >= retry_at)
    }
}

/// Why the quarantine database could not be used.
#[derive(Debug, thiserror::Error)]
pub enum QuarantineError {
    /// The embedded database failed.
    #[error("quarantine database `{}`: {source}", path.display())]
    Sqlite {
        /// The database file.
        path: PathBuf,
        /// The SQLite error.
        source: rusqlite::Error,
    },
    /// The shared store failed.
    #[error("quarantine records: {0}")]
    Store(#[from] crate::store::StoreError),
}

/// Where quarantine records are kept. The policy (first failure wins,
/// back-off) is [`QuarantineStore`]'s; a backend stores and returns records.
pub trait QuarantineBackend: Send + Sync {
    /// Every record.
    fn load_all(&self) -> Result<HashMap<String, QuarantineRecord>, QuarantineError>;
    /// The record of `engine_id`, if any.
    fn get(&self, engine_id: &str) -> Result<Option<QuarantineRecord>, QuarantineError>;
    /// Stores `record`: a new one whole; over an existing one only its
    /// failure count and retry time (the first failure wins).
    fn write(&self, record: &QuarantineRecord) -> Result<(), QuarantineError>;
    /// Deletes the record of `engine_id`.
    fn delete(&self, engine_id: &str) -> Result<(), QuarantineError>;
    /// Whether other hosts write the same records (then this host's copy is
    /// re-read every [`SHARED_REFRESH`]).
    fn is_shared(&self) -> bool;
}

/// Quarantine records in an SQLite database file.
pub struct SqliteQuarantine {
    path: PathBuf,
    connection: Mutex<Connection>,
}

/// The time as the store reads it: milliseconds since the Unix epoch.
pub type Clock = Arc<dyn Fn() -> i64 + Send + Sync>;

/// The quarantine records, in a backend with an in-memory copy for the hot
/// path (re-read from a shared backend every [`SHARED_REFRESH`], so a
/// quarantine another host wrote is seen within it).
pub struct QuarantineStore {
    backend: Box<dyn QuarantineBackend>,
    records: Mutex<HashMap<String, QuarantineRecord>>,
    /// When the copy was last read from a shared backend (`None`: not yet).
    refreshed: Mutex<Option<std::time::Instant>>,
    backoff: Option<Duration>,
    clock: Clock,
    /// What engines did lately (stops at the deadline notice, good runs
    /// after a back-off), on this host.
    conduct: Conduct,
}

impl QuarantineStore {
    /// Opens (creating if needed) the database at `path`. With `backoff`, a
    /// quarantined engine is retried after that delay, doubling with each
    /// further failure (up to six hours); without, it stays quarantined until it
    /// is registered again.
    pub fn open(path: &Path, backoff: Option<Duration>) -> Result<Self, QuarantineError> {
        Self::with_backend(Box::new(SqliteQuarantine::open(path)?), backoff)
    }

    /// The records kept in `backend`, with `backoff` as in [`Self::open`].
    pub fn with_backend(
        backend: Box<dyn QuarantineBackend>,
        backoff: Option<Duration>,
    ) -> Result<Self, QuarantineError> {
        let records = backend.load_all()?;
        Ok(Self {
            backend,
            records: Mutex::new(records),
            refreshed: Mutex::new(None),
            backoff,
            clock: Arc::new(now_ms),
            conduct: Conduct::default(),
        })
    }

    /// The same store reading the time from `clock` instead of the system
    /// clock (to test back-off without waiting for it).
    pub fn with_clock(mut self, clock: Clock) -> Self {
        self.clock = clock;
        self
    }

    /// The record of `engine_id`, if it is quarantined.
    pub fn get(&self, engine_id: &str) -> Option<QuarantineRecord> {
        self.refresh(false);
        self.records
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(engine_id)
            .cloned()
    }

    /// Re-reads a shared backend's records when the copy is older than
    /// [`SHARED_REFRESH`] (or `force`). If they cannot be read, the copy
    /// answers (and the next read is tried an interval later).
    fn refresh(&self, force: bool) {
        if !self.backend.is_shared() {
            return;
        }
        let mut refreshed = self
            .refreshed
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if !force && refreshed.is_some_and(|at| at.elapsed() < SHARED_REFRESH) {
            return;
        }
        *refreshed = Some(std::time::Instant::now());
        match self.backend.load_all() {
            Ok(all) => *self.records.lock().unwrap_or_else(PoisonError::into_inner) = all,
            Err(error) => {
                tracing::warn!(%error, "cannot read the shared quarantine records; using this host's copy");
            }
        }
    }

    /// Whether calls to `engine_id` must go elsewhere now (quarantined and no
    /// retry due).
    pub fn is_blocked(&self, engine_id: &str) -> bool {
        self.get(engine_id)
            .is_some_and(|record| !record.retry_due((self.clock)()))
    }

    /// Every record, oldest first.
    pub fn list(&self) -> Vec<QuarantineRecord> {
        self.refresh(true);
        let mut records: Vec<QuarantineRecord> = self
            .records
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .values()
            .cloned()
            .collect();
        records.sort_by(|a, b| a.at_ms.cmp(&b.at_ms).then(a.engine_id.cmp(&b.engine_id)));
        records
    }

    /// Records a failure of `owner`'s engine (artifact `fingerprint`). The
    /// first failure is kept as the record; a later one counts up and pushes
    /// the retry out. Answers the record as stored.
    pub fn record(
        &self,
        owner: &str,
        fingerprint: Option<&str>,
        failure: &EngineFailure,
    ) -> Result<QuarantineRecord, QuarantineError> {
        let now = (self.clock)();
        let existing = if self.backend.is_shared() {
            self.backend.get(&failure.engine_id)?
        } else {
            None
        };
        let mut records = self.records.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(existing) = existing {
            records.insert(existing.engine_id.clone(), existing);
        }
        let record = match records.get(&failure.engine_id) {
            Some(existing) => {
                let failures = existing.failures.saturating_add(1);
                QuarantineRecord {
                    failures,
                    retry_at_ms: self.retry_at(now, failures),
                    ..existing.clone()
                }
            }
            None => QuarantineRecord {
                engine_id: failure.engine_id.clone(),
                owner: owner.to_owned(),
                fingerprint: fingerprint.map(str::to_owned),
                operation: failure.operation.as_str().to_owned(),
                classification: failure.kind.as_str().to_owned(),
                reason: untrusted_line(&failure.message, MAX_ENGINE_TEXT_BYTES),
                stderr_tail: untrusted_tail(&failure.stderr_tail, MAX_STDERR_TAIL_BYTES),
                at_ms: now,
                failures: 1,
                retry_at_ms: self.retry_at(now, 1),
            },
        };
        self.backend.write(&record)?;
        records.insert(record.engine_id.clone(), record.clone());
        self.conduct.forget_run(&record.engine_id);
        Ok(record)
    }

    /// `engine_id` answered a call in time. Its stops at the deadline notice
    /// in a row end; when it is quarantined (serving again because its retry
    /// is due), the answer extends its good run, and a run of
    /// [`PROBATION_CALLS`] over at least its last back-off clears the
    /// record. Answers the run that cleared it, if one did.
    pub fn answered(&self, engine_id: &str) -> Result<Option<GoodRun>, QuarantineError> {
        let Some(record) = self.get(engine_id) else {
            // Not quarantined: its stops end, and no clock is read on the
            // hot path of every good call.
            self.conduct.answered(engine_id, 0, false);
            return Ok(None);
        };
        let run = self.conduct.answered(engine_id, (self.clock)(), true);
        let last_backoff = self
            .backoff_delay(record.failures)
            .map_or(i64::MAX, |delay| delay.as_millis() as i64);
        if run.calls < PROBATION_CALLS || run.span_ms < last_backoff {
            return Ok(None);
        }
        self.clear(engine_id)?;
        Ok(Some(run))
    }

    /// `engine_id` stopped at its deadline notice without an answer:
    /// answers how many times in a row it has.
    pub fn stopped_at_deadline(&self, engine_id: &str) -> u32 {
        self.conduct.stopped(engine_id)
    }

    /// Clears `engine_id`'s record (on re-registration, or when a retried
    /// engine answers again). Answers whether there was one.
    pub fn clear(&self, engine_id: &str) -> Result<bool, QuarantineError> {
        let mut records = self.records.lock().unwrap_or_else(PoisonError::into_inner);
        let existed = records.remove(engine_id).is_some()
            || (self.backend.is_shared() && self.backend.get(engine_id)?.is_some());
        self.backend.delete(engine_id)?;
        self.conduct.forget_run(engine_id);
        Ok(existed)
    }

    fn retry_at(&self, now: i64, failures: u32) -> Option<i64> {
        let delay = self.backoff_delay(failures)?;
        Some(now.saturating_add(delay.as_millis() as i64))
    }

    /// The back-off after `failures` failures: the base, doubled for each
    /// failure after the first, up to six hours; `None` without back-off.
    fn backoff_delay(&self, failures: u32) -> Option<Duration> {
        let base = self.backoff?;
        let doubling = 2u32.saturating_pow(failures.saturating_sub(1).min(31));
        Some(base.saturating_mul(doubling).min(MAX_BACKOFF))
    }
}

impl SqliteQuarantine {
    /// Opens (creating if needed) the database at `path`.
    pub fn open(path: &Path) -> Result<Self, QuarantineError> {
        let fail = |source| QuarantineError::Sqlite {
            path: path.to_owned(),
            source,
        };
        if let Some(parent) = path.parent() {
            // A missing directory surfaces as SQLite's own "unable to open".
            let _ = std::fs::create_dir_all(parent);
        }
        let connection = Connection::open(path).map_err(fail)?;
        connection
            .execute_batch(
                "PRAGMA journal_mode = WAL;
                 PRAGMA busy_timeout = 5000;
                 CREATE TABLE IF NOT EXISTS quarantine (
                     engine_id      TEXT PRIMARY KEY,
                     owner          TEXT NOT NULL,
                     fingerprint    TEXT,
                     operation      TEXT NOT NULL,
                     classification TEXT NOT NULL,
                     reason         TEXT NOT NULL,
                     stderr_tail    TEXT NOT NULL,
                     at_ms          INTEGER NOT NULL,
                     failures       INTEGER NOT NULL,
                     retry_at_ms    INTEGER
                 );",
            )
            .map_err(fail)?;
        Ok(Self {
            path: path.to_owned(),
            connection: Mutex::new(connection),
        })
    }

    fn connection(&self) -> std::sync::MutexGuard<'_, Connection> {
        self.connection
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    fn error(&self, source: rusqlite::Error) -> QuarantineError {
        QuarantineError::Sqlite {
            path: self.path.clone(),
            source,
        }
    }
}

impl QuarantineBackend for SqliteQuarantine {
    fn load_all(&self) -> Result<HashMap<String, QuarantineRecord>, QuarantineError> {
        load_all(&self.connection()).map_err(|source| self.error(source))
    }

    fn get(&self, engine_id: &str) -> Result<Option<QuarantineRecord>, QuarantineError> {
        Ok(self.load_all()?.remove(engine_id))
    }

    fn delete(&self, engine_id: &str) -> Result<(), QuarantineError> {
        self.connection()
            .execute(
                "DELETE FROM quarantine WHERE engine_id = ?1",
                params![engine_id],
            )
            .map_err(|source| self.error(source))?;
        Ok(())
    }

    fn is_shared(&self) -> bool {
        false
    }

    fn write(&self, record: &QuarantineRecord) -> Result<(), QuarantineError> {
        self.connection
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .execute(
                "INSERT INTO quarantine (engine_id, owner, fingerprint, operation, classification,
                                         reason, stderr_tail, at_ms, failures, retry_at_ms)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)
                 ON CONFLICT (engine_id) DO UPDATE SET
                     failures = excluded.failures, retry_at_ms = excluded.retry_at_ms",
                params![
                    record.engine_id,
                    record.owner,
                    record.fingerprint,
                    record.operation,
                    record.classification,
                    record.reason,
                    record.stderr_tail,
                    record.at_ms,
                    record.failures,
                    record.retry_at_ms,
                ],
            )
            .map_err(|source| self.error(source))?;
        Ok(())
    }
}

fn load_all(connection: &Connection) -> rusqlite::Result<HashMap<String, QuarantineRecord>> {
    let mut statement = connection.prepare(
        "SELECT engine_id, owner, fingerprint, operation, classification, reason, stderr_tail,
                at_ms, failures, retry_at_ms
         FROM quarantine",
    )?;
    let rows = statement.query_map([], |row| {
        Ok(QuarantineRecord {
            engine_id: row.get(0)?,
            owner: row.get(1)?,
            fingerprint: row.get(2)?,
            operation: row.get(3)?,
            classification: row.get(4)?,
            // Records written before text was made safe at the boundary
            // are made safe on the way out.
            reason: untrusted_line(&row.get::<_, String>(5)?, MAX_ENGINE_TEXT_BYTES),
            stderr_tail: untrusted_tail(&row.get::<_, String>(6)?, MAX_STDERR_TAIL_BYTES),
            at_ms: row.get(7)?,
            failures: row.get(8)?,
            retry_at_ms: row.get(9)?,
        })
    })?;
    rows.map(|row| row.map(|record| (record.engine_id.clone(), record)))
        .collect()
}

/// The record of an engine as a failure again (for errors in strict mode).
impl From<&QuarantineRecord> for EngineFailure {
    fn from(record: &QuarantineRecord) -> Self {
        EngineFailure::new(
            &record.engine_id,
            Operation::Load,
            FailureKind::Load,
            format!(
                "quarantined since its {} failed ({}): {}",
                record.operation, record.classification, record.reason
            ),
        )
    }
}

/// Milliseconds since the Unix epoch.
fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.as_millis() as i64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rusqlite::OptionalExtension;

    /// The failure count stored for `engine_id`, read straight from SQLite.
    fn stored(connection: &Connection, engine_id: &str) -> Option<u32> {
        connection
            .query_row(
                "SELECT failures FROM quarantine WHERE engine_id = ?1",
                params![engine_id],
                |row| row.get(0),
            )
            .optional()
            .ok()
            .flatten()
    }

    fn failure(engine_id: &str, kind: FailureKind, message: &str) -> EngineFailure {
        EngineFailure {
            engine_id: engine_id.into(),
            operation: Operation::Assemble,
            kind,
            message: message.into(),
            stderr_tail: "panicked at src/lib.rs".into(),
        }
    }

    #[test]
    fn records_survive_a_restart_and_the_first_failure_wins() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("ctxbox.sqlite3");
        {
            let store = QuarantineStore::open(&path, None).expect("open");
            store
                .record(
                    "plugin:acme",
                    Some("sha-1"),
                    &failure("acme", FailureKind::Timeout, "slow"),
                )
                .expect("record");
            let second = store
                .record(
                    "plugin:acme",
                    Some("sha-1"),
                    &failure("acme", FailureKind::Panic, "boom"),
                )
                .expect("record again");
            assert_eq!(second.classification, "timeout", "first failure wins");
            assert_eq!(second.failures, 2);
        }
        let reopened = QuarantineStore::open(&path, None).expect("reopen");
        let record = reopened.get("acme").expect("still quarantined");
        assert_eq!(record.owner, "plugin:acme");
        assert_eq!(record.fingerprint.as_deref(), Some("sha-1"));
        assert_eq!(record.operation, "assemble");
        assert_eq!(record.reason, "slow");
        assert_eq!(record.stderr_tail, "panicked at src/lib.rs");
        assert_eq!(record.failures, 2);
        assert!(reopened.is_blocked("acme"));
        assert!(!reopened.is_blocked("other"));
        let connection = Connection::open(&path).expect("raw");
        assert_eq!(stored(&connection, "acme"), Some(2));
    }

    #[test]
    fn clearing_removes_the_record_durably() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("q.sqlite3");
        let store = QuarantineStore::open(&path, None).expect("open");
        store
            .record("plugin:x", None, &failure("x", FailureKind::Memory, "big"))
            .expect("record");
        assert!(store.clear("x").expect("clear"));
        assert!(!store.clear("x").expect("clear again"));
        assert!(
            QuarantineStore::open(&path, None)
                .expect("reopen")
                .get("x")
                .is_none()
        );
    }

    #[test]
    fn backoff_allows_a_retry_later_and_doubles() {
        let dir = tempfile::tempdir().expect("temp dir");
        let store =
            QuarantineStore::open(&dir.path().join("q.sqlite3"), Some(Duration::from_secs(60)))
                .expect("open");
        let first = store
            .record("plugin:x", None, &failure("x", FailureKind::Panic, "boom"))
            .expect("record");
        let first_delay = first.retry_at_ms.expect("retry scheduled") - first.at_ms;
        assert!((59_000..=61_000).contains(&first_delay), "{first_delay}");
        assert!(store.is_blocked("x"));
        assert!(first.retry_due(first.at_ms + 60_001));
        let second = store
            .record("plugin:x", None, &failure("x", FailureKind::Panic, "boom"))
            .expect("record");
        let second_delay = second.retry_at_ms.expect("retry") - now_ms();
        assert!(second_delay > 110_000, "doubled: {second_delay}");
    }

    #[test]
    fn a_record_clears_only_after_good_answers_spanning_the_last_back_off() {
        use std::sync::atomic::{AtomicI64, Ordering};
        let dir = tempfile::tempdir().expect("temp dir");
        let now = Arc::new(AtomicI64::new(0));
        let clock = now.clone();
        let store =
            QuarantineStore::open(&dir.path().join("q.sqlite3"), Some(Duration::from_secs(60)))
                .expect("open")
                .with_clock(Arc::new(move || clock.load(Ordering::Relaxed)));
        let boom = failure("x", FailureKind::Panic, "boom");
        store.record("plugin:x", None, &boom).expect("record");
        store.record("plugin:x", None, &boom).expect("record");
        // Two failures: the last back-off was two minutes.
        now.store(120_000, Ordering::Relaxed);
        for _ in 0..PROBATION_CALLS {
            assert_eq!(store.answered("x").expect("answered"), None);
        }
        now.store(239_999, Ordering::Relaxed);
        assert_eq!(
            store.answered("x").expect("answered"),
            None,
            "not yet two minutes"
        );
        // A failure ends the run: it starts over.
        store.record("plugin:x", None, &boom).expect("record");
        now.store(1_000_000, Ordering::Relaxed);
        store.answered("x").expect("answered");
        store.answered("x").expect("answered");
        now.store(1_240_000, Ordering::Relaxed);
        assert_eq!(
            store.answered("x").expect("answered"),
            Some(GoodRun {
                calls: 3,
                span_ms: 240_000
            }),
            "three answers over the last back-off (four minutes)"
        );
        assert!(store.get("x").is_none(), "cleared");
        assert_eq!(store.answered("x").expect("answered"), None);
    }

    #[test]
    fn a_failure_that_keeps_repeating_grows_to_the_cap_and_keeps_its_reason() {
        let dir = tempfile::tempdir().expect("temp dir");
        let store = QuarantineStore::open(
            &dir.path().join("q.sqlite3"),
            Some(Duration::from_secs(300)),
        )
        .expect("open");
        let mut last = None;
        for attempt in 0..12 {
            let message = if attempt == 0 {
                "first reason"
            } else {
                "later"
            };
            last = Some(
                store
                    .record(
                        "plugin:x",
                        None,
                        &failure("x", FailureKind::Timeout, message),
                    )
                    .expect("record"),
            );
        }
        let record = last.expect("recorded");
        assert_eq!(record.failures, 12);
        assert_eq!(
            record.reason, "first reason",
            "the first failure is the record"
        );
        let delay = record.retry_at_ms.expect("still retried") - now_ms();
        let cap = MAX_BACKOFF.as_millis() as i64;
        assert!(
            delay <= cap && delay > cap - 5_000,
            "capped at six hours: {delay}"
        );
    }

    #[test]
    fn an_unwritable_location_is_an_error_naming_the_file() {
        let error = QuarantineStore::open(Path::new("/proc/ctxbox/q.sqlite3"), None)
            .err()
            .expect("cannot open");
        assert!(
            error.to_string().contains("/proc/ctxbox/q.sqlite3"),
            "{error}"
        );
    }
}
