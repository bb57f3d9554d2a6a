//! Subagents: how a child's context starts (the reference's spawn-context
//! rules: isolated unless a fork is asked for, no fork of a parent too large
//! to fit, and no engine preparation for a light isolated child), the
//! child's own session (its key `agent:<agent>:subagent:<uuid>`, its own
//! session id and transcript, a copy of the parent's active branch for a
//! fork), then the engine prepares for the spawn. When the spawn fails the
//! preparation is rolled back exactly once — even when it failed because the
//! caller aborted — and the child's transcript is deleted; when the child
//! ends, the engine hears so once.

use std::future::Future;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::{Session, TurnRunner};
use crate::contract::engine::{CallOptions, ContextEngine};
use crate::contract::failure::EngineFailure;
use crate::contract::types::{ContextMode, SessionRef, SubagentEndReason, SubagentSpawn};
use crate::transcript::TranscriptError;

/// The largest parent context, tokens, a subagent may fork from (the
/// reference's default); a larger parent's child starts isolated instead.
pub const PARENT_FORK_MAX_TOKENS: u64 = 100_000;

/// What the caller asked of a subagent's context.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SubagentRequest {
    /// `fork` or `isolated`; `None` (the default): isolated.
    pub context: Option<ContextMode>,
    /// A light child: when it starts isolated, the engine is not asked to
    /// prepare for it.
    pub light_context: bool,
}

/// How a subagent starts: [`TurnRunner::plan_subagent`]'s answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubagentPlan {
    /// The child's context mode.
    pub context_mode: ContextMode,
    /// Whether the engine is asked to prepare for the spawn.
    pub prepare_engine: bool,
    /// Why a requested fork became isolated, in words for the user.
    pub note: Option<String>,
}

/// How long a rollback may take once the spawn failed (the sandbox's own
/// per-call limits apply within it too).
const ROLLBACK_TIMEOUT: Duration = Duration::from_secs(30);

/// A new session key for a subagent of agent `agent_id`, as the reference
/// mints them: `agent:<agent_id>:subagent:<uuid>`.
pub fn subagent_session_key(agent_id: &str) -> String {
    format!("agent:{agent_id}:subagent:{}", uuid::Uuid::new_v4())
}

/// A subagent whose spawn succeeded: [`TurnRunner::start_subagent`]'s answer.
/// Hand it back to [`TurnRunner::end_subagent`] when the child ends.
pub struct Subagent<T> {
    /// The child's own session (its key: `session.session_ref().session_key`).
    pub session: Session,
    /// How its context started.
    pub plan: SubagentPlan,
    /// What the host's spawn answered.
    pub spawned: T,
}

/// What [`TurnRunner::start_subagent`] is asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubagentStart {
    /// The agent the child runs as (the key's `<agent>`).
    pub agent_id: String,
    /// Its context.
    pub request: SubagentRequest,
    /// How long the child may live, if the host bounds it.
    pub ttl_ms: Option<u64>,
}

/// How [`TurnRunner::spawn_subagent`] ended when the spawn did not succeed.
#[derive(Debug, thiserror::Error)]
pub enum SpawnOutcome<E: std::error::Error + 'static> {
    /// The child's transcript could not be created; nothing was spawned and
    /// the engine was not asked.
    #[error("creating the subagent's session failed: {0}")]
    SessionFailed(TranscriptError),
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
    /// How a subagent of `parent` starts, given `request`: isolated unless a
    /// fork was asked for; a fork of a parent whose context is over
    /// [`PARENT_FORK_MAX_TOKENS`] (the larger of its reported usage and the
    /// host's estimate) starts isolated, with a note saying so.
    pub fn plan_subagent(&self, parent: &Session, request: &SubagentRequest) -> SubagentPlan {
        let mut plan = SubagentPlan {
            context_mode: request.context.unwrap_or(ContextMode::Isolated),
            prepare_engine: true,
            note: None,
        };
        if plan.context_mode == ContextMode::Fork {
            let parent_tokens = parent.context_tokens().max(parent.history().total_tokens());
            if parent_tokens > PARENT_FORK_MAX_TOKENS {
                plan.context_mode = ContextMode::Isolated;
                plan.note = Some(format!(
                    "Parent context is too large to fork ({parent_tokens}/{PARENT_FORK_MAX_TOKENS} tokens); starting with isolated context instead."
                ));
            }
        }
        plan.prepare_engine =
            !(request.light_context && plan.context_mode == ContextMode::Isolated);
        plan
    }

    /// The session of a subagent of `parent` running as `agent_id`, as
    /// `plan` says: a new key and session id, and a transcript next to the
    /// parent's naming it as its parent, holding a copy of the parent's
    /// active branch (up to its last completed answer) for a fork, empty
    /// otherwise.
    pub fn create_subagent_session(
        &self,
        parent: &Session,
        agent_id: &str,
        plan: &SubagentPlan,
    ) -> Result<Session, TranscriptError> {
        let session_id = uuid::Uuid::new_v4().to_string();
        let transcript = self.transcripts.create_child(
            parent.transcript(),
            &session_id,
            plan.context_mode == ContextMode::Fork,
        )?;
        Ok(Session::new(
            transcript,
            Some(subagent_session_key(agent_id)),
        ))
    }

    /// Starts a subagent of `parent`: plans its context, creates its session
    /// ([`create_subagent_session`](Self::create_subagent_session)), asks
    /// the engine to prepare (unless the plan needs none) and runs `start`
    /// (the host's actual spawn) with the child's session. If the spawn or
    /// the preparation fails, what was prepared is undone: the engine's
    /// preparation rolled back exactly once and the child's transcript
    /// deleted (a deletion that fails is logged; the spawn's error is what
    /// the caller hears).
    pub async fn start_subagent<T, E, F, Fut>(
        &self,
        parent: &Session,
        child: &SubagentStart,
        abort: &CancellationToken,
        start: F,
    ) -> Result<Subagent<T>, SpawnOutcome<E>>
    where
        E: std::error::Error + 'static,
        F: FnOnce(SessionRef) -> Fut,
        Fut: Future<Output = Result<T, E>>,
    {
        let plan = self.plan_subagent(parent, &child.request);
        let session = self
            .create_subagent_session(parent, &child.agent_id, &plan)
            .map_err(SpawnOutcome::SessionFailed)?;
        let parent_ref = parent.session_ref();
        let spawn = SubagentSpawn {
            parent_session_key: parent_ref
                .session_key
                .clone()
                .unwrap_or_else(|| parent_ref.session_id.clone()),
            child_session_key: session
                .session_ref()
                .session_key
                .clone()
                .unwrap_or_default(),
            context_mode: plan.context_mode,
            ttl_ms: child.ttl_ms,
        };
        let started = start(session.session_ref().clone());
        match self
            .spawn_planned_subagent(&plan, &spawn, abort, started)
            .await
        {
            Ok(spawned) => Ok(Subagent {
                session,
                plan,
                spawned,
            }),
            Err(outcome) => {
                let transcript = session.transcript().clone();
                drop(session);
                if let Err(error) = self.transcripts.discard(transcript) {
                    tracing::warn!(%error, "the failed subagent's transcript was not deleted");
                }
                Err(outcome)
            }
        }
    }

    /// A subagent [`started`](Self::start_subagent) has ended: its last
    /// background maintenance is waited for, then the engine is told,
    /// once (the child is consumed). Its transcript stays.
    pub async fn end_subagent<T>(
        &self,
        mut child: Subagent<T>,
        reason: SubagentEndReason,
        abort: &CancellationToken,
    ) -> Result<(), EngineFailure> {
        child.session.wait_for_maintenance().await;
        let key = child
            .session
            .session_ref()
            .session_key
            .clone()
            .unwrap_or_default();
        self.subagent_ended(&key, reason, abort).await
    }

    /// [`spawn_subagent`](Self::spawn_subagent) as `plan` says: without
    /// asking the engine when the plan needs no preparation.
    pub async fn spawn_planned_subagent<T, E, F>(
        &self,
        plan: &SubagentPlan,
        spawn: &SubagentSpawn,
        abort: &CancellationToken,
        start: F,
    ) -> Result<T, SpawnOutcome<E>>
    where
        E: std::error::Error + 'static,
        F: Future<Output = Result<T, E>>,
    {
        let spawn = SubagentSpawn {
            context_mode: plan.context_mode,
            ..spawn.clone()
        };
        if !plan.prepare_engine {
            return start.await.map_err(|error| SpawnOutcome::SpawnFailed {
                error,
                rollback: None,
            });
        }
        self.spawn_subagent(&spawn, abort, start).await
    }

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
