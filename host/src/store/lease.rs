//! One session, one writer: before a host works on a session it takes the
//! session's lease, a row in `ctxbox_session_leases` naming the host and
//! when the lease ends (the database's clock, so hosts' clocks do not
//! matter). The holder renews it while it works and deletes it when done; a
//! host that dies leaves a lease that simply runs out. Another host asking
//! meanwhile waits up to its bound, then hears [`LeaseError::Busy`].
//!
//! Every grant gets a fresh fencing token (a database sequence, so it only
//! grows): writes made for the session carry it
//! ([`WriteFence`]) and check, in their own transaction, that it is still
//! the session's lease ([`require_lease`]), or are refused with a
//! [`StaleLease`]. A host that stalls past its
//! lease (a long pause, SIGSTOP) while another takes the session over finds
//! its writes refused when it wakes, instead of overwriting the new
//! holder's.
//!
//! With the embedded store there is one host, whose per-session lock already
//! serializes the work: leases are granted at once, cost nothing and fence
//! nothing.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::error::StoreError;
use super::postgres::Postgres;
use crate::contract::engine::WriteFence;

/// How often a busy lease is asked for again while waiting.
const RETRY_EVERY: Duration = Duration::from_millis(50);

/// Why a lease was not granted.
#[derive(Debug, thiserror::Error)]
pub enum LeaseError {
    /// Another host holds the session.
    #[error(
        "session busy: `{session}` is being served by host `{holder}` (waited {waited_ms} ms; its lease runs out in {expires_in_ms} ms unless renewed)"
    )]
    Busy {
        /// The session.
        session: String,
        /// The host holding it.
        holder: String,
        /// How long this request waited.
        waited_ms: u64,
        /// When the holder's lease ends if it is not renewed.
        expires_in_ms: u64,
    },
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// The leases of one host.
pub struct SessionLeases {
    holder: String,
    shared: Option<Shared>,
}

struct Shared {
    postgres: Arc<Postgres>,
    ttl: Duration,
    wait: Duration,
}

/// A granted lease: renewed in the background while held, released on drop.
pub struct Lease {
    held: Option<Held>,
}

struct Held {
    postgres: Arc<Postgres>,
    session: String,
    token: i64,
    renewal: tokio::task::JoinHandle<()>,
}

impl SessionLeases {
    /// Leases of a host alone with its data (the embedded store): always
    /// granted.
    pub fn local() -> Self {
        Self {
            holder: host_id(),
            shared: None,
        }
    }

    /// Leases in the shared database: each lasts `ttl` unless renewed; a
    /// busy session is waited for up to `wait`.
    pub fn postgres(postgres: Arc<Postgres>, ttl: Duration, wait: Duration) -> Self {
        Self {
            holder: host_id(),
            shared: Some(Shared {
                postgres,
                ttl: ttl.max(Duration::from_millis(100)),
                wait,
            }),
        }
    }

    /// This host's name in lease rows (`hostname:pid:random`).
    pub fn holder(&self) -> &str {
        &self.holder
    }

    /// Takes `session`'s lease, waiting while another host holds it (up to
    /// the configured bound).
    pub async fn acquire(&self, session: &str) -> Result<Lease, LeaseError> {
        let Some(shared) = &self.shared else {
            return Ok(Lease { held: None });
        };
        let started = Instant::now();
        loop {
            let (granted, holder, expires_in_ms) = try_take(shared, session, &self.holder).await?;
            if let Some(token) = granted {
                return Ok(Lease {
                    held: Some(Held {
                        postgres: shared.postgres.clone(),
                        session: session.to_owned(),
                        token,
                        renewal: renew(shared, session, &self.holder, token),
                    }),
                });
            }
            let waited = started.elapsed();
            if waited >= shared.wait {
                return Err(LeaseError::Busy {
                    session: session.to_owned(),
                    holder,
                    waited_ms: waited.as_millis() as u64,
                    expires_in_ms,
                });
            }
            tokio::time::sleep(RETRY_EVERY.min(shared.wait - waited)).await;
        }
    }
}

impl Lease {
    /// Whether this lease is a row in the shared database (not a local one).
    pub fn is_shared(&self) -> bool {
        self.held.is_some()
    }

    /// What writes made under this lease carry: its session and fencing
    /// token (`None` for a local lease, which fences nothing).
    pub fn fence(&self) -> Option<WriteFence> {
        self.held.as_ref().map(|held| WriteFence {
            session_id: held.session.clone(),
            token: held.token,
        })
    }
}

/// A write fenced by a lease that is no longer its session's: another host
/// took the session over, and the write was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "session `{session}`: another host took the session over (this host's lease, token {token}, is no longer current)"
)]
pub struct StaleLease {
    /// The session.
    pub session: String,
    /// The stale lease's fencing token.
    pub token: i64,
}

/// Why a fenced write may not go ahead.
#[derive(Debug)]
pub enum FenceRefusal {
    /// The lease was taken over.
    Stale(StaleLease),
    /// The check itself failed.
    Query(tokio_postgres::Error),
}

impl FenceRefusal {
    /// This refusal as the writer's error `E`: a stale lease as `E`'s own,
    /// a failed check through `query`.
    pub fn into_error<E: From<StaleLease>>(
        self,
        query: impl FnOnce(tokio_postgres::Error) -> E,
    ) -> E {
        match self {
            Self::Stale(stale) => stale.into(),
            Self::Query(error) => query(error),
        }
    }
}

/// Checks inside `transaction` that `fence`, if there is one, is still its
/// session's lease. The lease row stays locked (`FOR SHARE`) until the
/// transaction ends, so no other host can take the session over between the
/// check and the commit of the writes it guards.
pub async fn require_lease(
    transaction: &deadpool_postgres::Transaction<'_>,
    fence: Option<&WriteFence>,
) -> Result<(), FenceRefusal> {
    let Some(fence) = fence else {
        return Ok(());
    };
    let current = transaction
        .query_opt(
            "SELECT 1 FROM ctxbox_session_leases WHERE session_id = $1 AND token = $2 FOR SHARE",
            &[&fence.session_id, &fence.token],
        )
        .await
        .map_err(FenceRefusal::Query)?
        .is_some();
    if current {
        Ok(())
    } else {
        Err(FenceRefusal::Stale(StaleLease {
            session: fence.session_id.clone(),
            token: fence.token,
        }))
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        let Some(held) = self.held.take() else {
            return;
        };
        held.renewal.abort();
        let pool = held.postgres.pool().clone();
        held.postgres.spawn(async move {
            // If this is lost, the lease runs out by itself.
            if let Ok(client) = pool.get().await {
                let _ = client
                    .execute(
                        "DELETE FROM ctxbox_session_leases WHERE session_id = $1 AND token = $2",
                        &[&held.session, &held.token],
                    )
                    .await;
            }
        });
    }
}

/// One attempt: (the fencing token if granted, current holder, ms until its
/// lease ends). Every grant gets a new token, the same holder's next request
/// included: the previous request's release (in the background) deletes
/// only its own token's row, never the lease granted after it.
async fn try_take(
    shared: &Shared,
    session: &str,
    holder: &str,
) -> Result<(Option<i64>, String, u64), StoreError> {
    let postgres = shared.postgres.clone();
    let (session, holder) = (session.to_owned(), holder.to_owned());
    let ttl_ms = shared.ttl.as_millis() as i64;
    let worker = shared.postgres.clone();
    let task = worker.run_async(move |client| async move {
        let taken = client
            .query_opt(
                "INSERT INTO ctxbox_session_leases AS lease (session_id, holder, expires_at, token)
                 VALUES ($1, $2, now() + make_interval(secs => $3::bigint / 1000.0),
                         nextval('ctxbox_lease_tokens'))
                 ON CONFLICT (session_id) DO UPDATE
                     SET holder = excluded.holder, expires_at = excluded.expires_at,
                         token = excluded.token
                     WHERE lease.expires_at < now() OR lease.holder = excluded.holder
                 RETURNING token",
                &[&session, &holder, &ttl_ms],
            )
            .await
            .map_err(|error| postgres.query_error("take a session lease", &error))?;
        if let Some(row) = taken {
            return Ok((Some(row.get(0)), holder, 0));
        }
        let row = client
            .query_opt(
                "SELECT holder, greatest(0, (extract(epoch FROM expires_at - now()) * 1000)::bigint)
                 FROM ctxbox_session_leases WHERE session_id = $1",
                &[&session],
            )
            .await
            .map_err(|error| postgres.query_error("read a session lease", &error))?;
        Ok(match row {
            Some(row) => (None, row.get(0), row.get::<_, i64>(1).max(0) as u64),
            // Released in between: the next attempt takes it.
            None => (None, String::new(), 0),
        })
    });
    task.await
}

/// Renews the lease every third of its lifetime until aborted, as long as
/// it is still this holder's with this token.
fn renew(shared: &Shared, session: &str, holder: &str, token: i64) -> tokio::task::JoinHandle<()> {
    let pool = shared.postgres.pool().clone();
    let (session, holder) = (session.to_owned(), holder.to_owned());
    let ttl = shared.ttl;
    let ttl_ms = ttl.as_millis() as i64;
    shared.postgres.spawn(async move {
        loop {
            tokio::time::sleep(ttl / 3).await;
            let renewed = match pool.get().await {
                Ok(client) => client
                    .execute(
                        "UPDATE ctxbox_session_leases
                         SET expires_at = now() + make_interval(secs => $3::bigint / 1000.0)
                         WHERE session_id = $1 AND holder = $2 AND token = $4",
                        &[&session, &holder, &ttl_ms, &token],
                    )
                    .await
                    .map(|rows| rows == 1)
                    .unwrap_or(false),
                Err(_) => false,
            };
            if !renewed {
                tracing::warn!(%session, %holder, "the session's lease could not be renewed; another host may take it when it runs out");
            }
        }
    })
}

/// A name for this host process, unique across restarts.
fn host_id() -> String {
    let host = std::fs::read_to_string("/etc/hostname")
        .ok()
        .map(|name| name.trim().to_owned())
        .filter(|name| !name.is_empty())
        .unwrap_or_else(|| "host".to_owned());
    let random = uuid::Uuid::new_v4().simple().to_string();
    format!("{host}:{}:{}", std::process::id(), &random[..8])
}
