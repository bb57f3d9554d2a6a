//! Subagents: the engine prepares for a spawn, and when the spawn fails the
//! preparation is rolled back exactly once — even when it failed because the
//! caller aborted.

use std::future::Future;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::TurnRunner;
use crate::contract::engine::{CallOptions, ContextEngine};
use crate::contract::failure::EngineFailure;
use crate::contract::types::{SubagentEndReason, SubagentSpawn};

/// How long a rollback may take once the spawn failed (the sandbox's own
/// per-call limits apply within it too).
const ROLLBACK_TIMEOUT: Duration = Duration::from_secs(30);

/// How [`TurnRunner::spawn_subagent`] ended when the spawn did not succeed.
#[derive(Debug, thiserror::Error)]
pub enum SpawnOutcome<E: std::error::Error + 'static> {
    /// The engine could not prepare; nothing was spawned.
    #[error("preparing the subagent spawn failed: {0}")]
    PrepareFailed(EngineFailure),
    /// The spawn failed; the preparation was rolled back (`rollback` tells
    /// how that went, `None` when there was nothing to roll back).
    #[error("spawning the subagent failed: {error}")]
    SpawnFailed {
        /// The spawner's error.
        error: E,
        /// The rollback's outcome.
        rollback: Option<Result<(), EngineFailure>>,
    },
}

impl TurnRunner {
    /// Asks the engine to prepare for `spawn`, then runs `start` (the host's
    /// actual spawn). If `start` fails, the engine's preparation is rolled
    /// back, exactly once.
    pub async fn spawn_subagent<T, E, F>(
        &self,
        spawn: &SubagentSpawn,
        abort: &CancellationToken,
        start: F,
    ) -> Result<T, SpawnOutcome<E>>
    where
        E: std::error::Error + 'static,
        F: Future<Output = Result<T, E>>,
    {
        let call = CallOptions::with_abort(abort.clone());
        let preparation = self
            .engine
            .prepare_subagent_spawn(&call, spawn)
            .await
            .map_err(SpawnOutcome::PrepareFailed)?;
        match start.await {
            Ok(spawned) => Ok(spawned),
            Err(error) => {
                let rollback = match preparation {
                    Some(id) => Some(self.roll_back(&id).await),
                    None => None,
                };
                Err(SpawnOutcome::SpawnFailed { error, rollback })
            }
        }
    }

    /// Rolls back preparation `id` with call options of its own: the spawn
    /// may have failed because the caller aborted, and an aborted rollback
    /// would leak the preparation. Its own deadline bounds it instead.
    async fn roll_back(&self, id: &str) -> Result<(), EngineFailure> {
        let deadline = CancellationToken::new();
        let timer = tokio::spawn({
            let deadline = deadline.clone();
            async move {
                tokio::time::sleep(ROLLBACK_TIMEOUT).await;
                deadline.cancel();
            }
        });
        let result = self
            .engine
            .rollback_subagent_spawn(&CallOptions::with_abort(deadline), id)
            .await;
        timer.abort();
        result
    }

    /// Tells the engine a subagent's session ended.
    pub async fn subagent_ended(
        &self,
        child_session_key: &str,
        reason: SubagentEndReason,
        abort: &CancellationToken,
    ) -> Result<(), EngineFailure> {
        let call = CallOptions::with_abort(abort.clone());
        self.engine
            .on_subagent_ended(&call, child_session_key, reason)
            .await
    }
}
