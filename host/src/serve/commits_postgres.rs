//! [`PostgresCommits`]: turn commits in the shared PostgreSQL database. The
//! session and advancement key are the primary key, so a turn retried on
//! another host after a failover is answered `duplicate` there too, and
//! another session's turn with the same key is its own.

use std::sync::Arc;

use super::commits::{CommitError, CommitStatus, HistoryTail, TurnCommits, messages_json};
use super::sessions::RawMessage;
use super::stored_histories::replace_suffix;
use crate::contract::engine::WriteFence;
use crate::store::{Postgres, require_lease};

/// Turn commits in PostgreSQL.
#[derive(Debug, Clone)]
pub struct PostgresCommits {
    postgres: Arc<Postgres>,
}

impl PostgresCommits {
    /// The commits in `postgres`.
    pub fn new(postgres: Arc<Postgres>) -> Self {
        Self { postgres }
    }
}

impl TurnCommits for PostgresCommits {
    fn commit_with_history(
        &self,
        key: &str,
        session_id: &str,
        messages: &[RawMessage],
        tail: Option<HistoryTail<'_>>,
        fence: Option<&WriteFence>,
    ) -> Result<CommitStatus, CommitError> {
        let json = messages_json(messages);
        let count = messages.len() as i64;
        let history = tail.map(|tail| {
            let texts: Vec<String> = messages.iter().map(|raw| raw.get().to_owned()).collect();
            (tail.from as i64, texts, tail.digests.to_vec())
        });
        let now = crate::transcript::unix_millis(std::time::SystemTime::now());
        let (key, session_id, postgres) =
            (key.to_owned(), session_id.to_owned(), self.postgres.clone());
        let fence = fence.cloned();
        self.postgres.run(move |mut client| async move {
            let fail = |error| postgres.query_error("commit a turn", &error);
            let transaction = client.transaction().await.map_err(fail)?;
            require_lease(&transaction, fence.as_ref())
                .await
                .map_err(|refusal| refusal.into_error::<CommitError>(|error| fail(error).into()))?;
            let inserted = transaction
                .execute(
                    "INSERT INTO ctxbox_turn_commits
                         (advancement_key, session_id, message_count, messages_json, committed_at_ms)
                     VALUES ($1, $2, $3, $4, $5)
                     ON CONFLICT (session_id, advancement_key) DO NOTHING",
                    &[&key, &session_id, &count, &json, &now],
                )
                .await
                .map_err(fail)?;
            if inserted == 1
                && let Some((from, texts, digests)) = &history
            {
                replace_suffix(&transaction, &session_id, *from, texts, digests)
                    .await
                    .map_err(fail)?;
            }
            transaction.commit().await.map_err(fail)?;
            Ok(if inserted == 1 {
                CommitStatus::Committed
            } else {
                CommitStatus::Duplicate
            })
        })
    }

    fn get(&self, session_id: &str, key: &str) -> Result<Option<u64>, CommitError> {
        let (session_id, key, postgres) =
            (session_id.to_owned(), key.to_owned(), self.postgres.clone());
        self.postgres.run(move |client| async move {
            client
                .query_opt(
                    "SELECT message_count FROM ctxbox_turn_commits
                     WHERE session_id = $1 AND advancement_key = $2",
                    &[&session_id, &key],
                )
                .await
                .map(|row| row.map(|row| row.get::<_, i64>(0).max(0) as u64))
                .map_err(|error| postgres.query_error("read a turn commit", &error).into())
        })
    }

    fn count(&self, session_id: &str) -> Result<u64, CommitError> {
        let (session_id, postgres) = (session_id.to_owned(), self.postgres.clone());
        self.postgres.run(move |client| async move {
            client
                .query_one(
                    "SELECT count(*) FROM ctxbox_turn_commits WHERE session_id = $1",
                    &[&session_id],
                )
                .await
                .map(|row| row.get::<_, i64>(0).max(0) as u64)
                .map_err(|error| postgres.query_error("count turn commits", &error).into())
        })
    }

    fn keys(&self, session_id: &str) -> Result<Vec<String>, CommitError> {
        let (session_id, postgres) = (session_id.to_owned(), self.postgres.clone());
        self.postgres.run(move |client| async move {
            client
                .query(
                    "SELECT advancement_key FROM ctxbox_turn_commits
                     WHERE session_id = $1 ORDER BY seq",
                    &[&session_id],
                )
                .await
                .map(|rows| rows.iter().map(|row| row.get(0)).collect())
                .map_err(|error| postgres.query_error("list turn commits", &error).into())
        })
    }
}
