//! Sessions' histories in the shared store, so a session that moves to
//! another host (its host died, was restarted, or routing changed) or that
//! this host gave up (idle, over `serve.maxSessions`) is loaded from the
//! store instead of the client being asked to resend it. Each request that
//! changes a history writes the changed suffix, in one transaction fenced by
//! the request's lease (a host that lost its lease cannot overwrite the new
//! holder's history). The client stays the source of truth: a stored history
//! that does not reach the client's `sync.base`, or whose anchor digest
//! differs, is answered `history-mismatch` as before, and the client resends.
//!
//! Only with a shared store: a host alone with its data has nowhere to move
//! a session to, and a released session comes back through a resend.

use std::sync::Arc;

use serde_json::value::RawValue;

use super::sessions::RawMessage;
use crate::contract::engine::WriteFence;
use crate::store::{Postgres, StaleLease, StoreError, require_lease};

/// Why a history was not stored.
#[derive(Debug, thiserror::Error)]
pub enum HistoryWriteError {
    /// The shared store failed.
    #[error("session history store: {0}")]
    Store(#[from] StoreError),
    /// Another host took the session over; this host's copy was not
    /// written.
    #[error("{0}; its history was not written")]
    LeaseLost(#[from] StaleLease),
}

/// The sessions' histories in PostgreSQL (`ctxbox_session_messages`).
#[derive(Debug, Clone)]
pub struct StoredHistories {
    postgres: Arc<Postgres>,
}

impl StoredHistories {
    /// The histories in `postgres`.
    pub fn new(postgres: Arc<Postgres>) -> Self {
        Self { postgres }
    }

    /// Every stored message of `session`, in order, with its digest. A row
    /// that is not JSON (written by hand) ends the history there: what
    /// follows it cannot be trusted to be the client's.
    pub async fn load(
        &self,
        session: &str,
    ) -> Result<(Vec<RawMessage>, Vec<Option<String>>), StoreError> {
        let (session, postgres) = (session.to_owned(), self.postgres.clone());
        let rows: Vec<(String, Option<String>)> = self
            .postgres
            .run_async(move |client| async move {
                client
                    .query(
                        "SELECT message, digest FROM ctxbox_session_messages
                         WHERE session_id = $1 ORDER BY position",
                        &[&session],
                    )
                    .await
                    .map(|rows| rows.iter().map(|row| (row.get(0), row.get(1))).collect())
                    .map_err(|error| postgres.query_error("load a session's history", &error))
            })
            .await?;
        let mut messages = Vec::with_capacity(rows.len());
        let mut digests = Vec::with_capacity(rows.len());
        for (message, digest) in rows {
            let Ok(raw) = RawValue::from_string(message) else {
                break;
            };
            messages.push(raw);
            digests.push(digest);
        }
        Ok((messages, digests))
    }

    /// Makes `session`'s stored history its first `base` messages followed
    /// by `messages` (with their `digests`), unless `fence` is no longer the
    /// session's lease.
    pub async fn write(
        &self,
        session: &str,
        base: usize,
        messages: &[RawMessage],
        digests: &[Option<String>],
        fence: Option<&WriteFence>,
    ) -> Result<(), HistoryWriteError> {
        let texts: Vec<String> = messages.iter().map(|raw| raw.get().to_owned()).collect();
        let digests = digests.to_vec();
        let (session, fence, postgres) =
            (session.to_owned(), fence.cloned(), self.postgres.clone());
        let base = base as i64;
        self.postgres
            .run_async(move |mut client| async move {
                let fail = |error| postgres.query_error("store a session's history", &error);
                let transaction = client.transaction().await.map_err(fail)?;
                require_lease(&transaction, fence.as_ref())
                    .await
                    .map_err(|refusal| {
                        refusal.into_error::<HistoryWriteError>(|error| fail(error).into())
                    })?;
                replace_suffix(&transaction, &session, base, &texts, &digests)
                    .await
                    .map_err(fail)?;
                transaction.commit().await.map_err(fail)?;
                Ok(())
            })
            .await
    }
}

/// Inside `transaction`: `session`'s stored history from position `base` on
/// becomes `texts` (the messages' JSON text) with their `digests`.
pub(super) async fn replace_suffix(
    transaction: &deadpool_postgres::Transaction<'_>,
    session: &str,
    base: i64,
    texts: &[String],
    digests: &[Option<String>],
) -> Result<(), tokio_postgres::Error> {
    transaction
        .execute(
            "DELETE FROM ctxbox_session_messages WHERE session_id = $1 AND position >= $2",
            &[&session, &base],
        )
        .await?;
    if !texts.is_empty() {
        transaction
            .execute(
                "INSERT INTO ctxbox_session_messages (session_id, position, message, digest)
                 SELECT $1, $2 + ordinality - 1, message, digest
                 FROM unnest($3::text[], $4::text[]) WITH ORDINALITY AS m (message, digest)",
                &[&session, &base, &texts, &digests],
            )
            .await?;
    }
    Ok(())
}
