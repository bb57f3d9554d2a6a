//! The one trait every context engine implements inside the host, native or
//! sandboxed (ARCHITECTURE.md §3). Nothing above it knows which kind it is talking to.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use async_trait::async_trait;
use tokio_util::sync::CancellationToken;

use crate::contract::failure::EngineFailure;
use crate::contract::history::History;
use crate::contract::tools::EngineTool;
use crate::contract::types::{
    AfterTurnParams, AssembleParams, AssembleResult, BootstrapResult, CompactParams, CompactResult,
    EngineInfo, IngestBatchResult, IngestResult, MaintainReason, MaintainResult, MessageEntry,
    SessionRef, SubagentEndReason, SubagentSpawn,
};

/// Per-call options from the caller.
#[derive(Debug, Clone, Default)]
pub struct CallOptions {
    /// Cancelled when the caller gives up (the run was cancelled). Engines see
    /// it through `aborted()` and are interrupted soon after.
    pub abort: CancellationToken,
    /// The embedding host's id for the request this call serves (`ctxbox
    /// serve`: the client's request id), handed to services that call back
    /// into that host, such as model completions.
    pub request_id: Option<String>,
    /// The embedding host's id of the client the call serves (`ctxbox
    /// serve`: its connection), for services that call back into that
    /// client: model completions use the model that client offered, not
    /// another client's. `None`: the host's own.
    pub client: Option<u64>,
    /// Where an engine that answers leaves its call's state writes instead
    /// of committing them, for the caller to commit once it has accepted
    /// the answer (the guard's validation); `None`: committed as the call
    /// answers.
    pub held_writes: Option<HeldWrites>,
    /// Whether a `maintain` call may pay the engine's deferred compaction
    /// (its runtime context says `allowDeferredCompactionExecution`: it
    /// runs in the background, after the turn returned): it then runs under
    /// a compaction's window, watchdog and fuel, as `after-turn` does.
    pub deferred_compaction: bool,
    /// The compaction window of the agent the call serves
    /// (`agents.list[].compaction.timeoutSeconds`) for `compact` and
    /// `after-turn`; `None`: the host's (`agents.defaults`).
    pub compaction_window: Option<Duration>,
    /// The id of the current turn's first transcript entry while the turn's
    /// prompt is being built (`bootstrap`, `assemble`): the engine's
    /// `read-transcript-delta` stops before it, as the reference's
    /// current-turn fence does. `None`: unfenced.
    pub transcript_fence: Option<String>,
    /// The lease under which the call's session is worked on in a shared
    /// store: the call's state and index writes are refused once another
    /// host holds a newer lease on the session. `None`: unfenced (a host
    /// alone with its data).
    pub write_fence: Option<WriteFence>,
    /// Who answered the call, written by the guard (the selected engine, or
    /// `legacy` in its place); shared by the options' clones, so the caller
    /// reads it after the call.
    pub served_by: ServedBy,
}

/// The id of the engine that answered a call ([`CallOptions::served_by`]).
#[derive(Clone, Default)]
pub struct ServedBy(Arc<Mutex<Option<String>>>);

impl ServedBy {
    /// Notes that `engine_id` answered.
    pub fn set(&self, engine_id: &str) {
        *self.0.lock().unwrap_or_else(PoisonError::into_inner) = Some(engine_id.to_owned());
    }

    /// The engine that answered the latest call made with these options, if
    /// a guard noted one.
    pub fn get(&self) -> Option<String> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

impl std::fmt::Debug for ServedBy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("ServedBy").field(&self.get()).finish()
    }
}

/// A host's right to write for one session in a shared store: the fencing
/// token of its lease on the session. Writes made under an older token than
/// the session's current lease are refused, so a host that stalled past its
/// lease cannot overwrite what the host that took over wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WriteFence {
    /// The session the lease is on.
    pub session_id: String,
    /// The lease's fencing token (grows with every takeover).
    pub token: i64,
}

impl CallOptions {
    /// Options with this abort token.
    pub fn with_abort(abort: CancellationToken) -> Self {
        Self {
            abort,
            ..Self::default()
        }
    }

    /// These options, for an agent whose compaction window is `window`.
    pub fn compacting_within(mut self, window: Option<Duration>) -> Self {
        self.compaction_window = window;
        self
    }

    /// These options, with transcript reads fenced before entry `id` (see
    /// [`CallOptions::transcript_fence`]).
    pub fn fenced_before(mut self, id: Option<String>) -> Self {
        self.transcript_fence = id;
        self
    }

    /// These options, with writes fenced by `fence` (see
    /// [`CallOptions::write_fence`]).
    pub fn fenced_by(mut self, fence: Option<WriteFence>) -> Self {
        self.write_fence = fence;
        self
    }

    /// These options, serving a request of the embedding host's client
    /// `client` (see [`CallOptions::client`]).
    pub fn for_client(mut self, client: u64) -> Self {
        self.client = Some(client);
        self
    }

    /// These options, serving the embedding host's request `id`.
    pub fn serving(mut self, id: impl Into<String>) -> Self {
        self.request_id = Some(id.into());
        self
    }
}

/// Why a call's writes were not committed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CommitRefusal {
    /// The store refused or failed them (a store failure, or concurrent
    /// calls of the engine that together passed its limits).
    #[error("{0}")]
    Refused(String),
    /// Another host took the session's lease over
    /// ([`CallOptions::write_fence`]): not the engine's doing.
    #[error("{0}")]
    LeaseLost(String),
    /// The host's own store failed (not the engine's doing).
    #[error("{0}")]
    HostFault(String),
}

/// The state writes of a call that answered, not yet committed.
#[async_trait]
pub trait PendingWrites: Send {
    /// Commits the writes in one transaction, or says why they were not.
    async fn commit(self: Box<Self>) -> Result<(), CommitRefusal>;
}

/// A slot for the state writes of one call ([`CallOptions::held_writes`]):
/// the engine leaves them here when it answers; whoever holds the slot
/// commits them once the answer is accepted, or drops them with a refused
/// one — a call that fails leaves none of its writes (`wit/host.wit`).
#[derive(Clone, Default)]
pub struct HeldWrites(Arc<Mutex<Option<Box<dyn PendingWrites>>>>);

impl HeldWrites {
    /// Leaves `writes` in the slot (replacing any left before).
    pub fn hold(&self, writes: Box<dyn PendingWrites>) {
        *self.0.lock().unwrap_or_else(PoisonError::into_inner) = Some(writes);
    }

    /// Takes the writes left in the slot, if any.
    pub fn take(&self) -> Option<Box<dyn PendingWrites>> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner).take()
    }
}

impl std::fmt::Debug for HeldWrites {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let held = self
            .0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .is_some();
        f.debug_struct("HeldWrites").field("held", &held).finish()
    }
}

/// Result of an engine call.
pub type EngineResult<T> = Result<T, EngineFailure>;

/// A context engine as the host calls it. Methods mirror the contract's
/// exports (see `wit/engine.wit` for what each must do).
#[async_trait]
pub trait ContextEngine: Send + Sync {
    /// Who the engine is (cached at load).
    fn info(&self) -> &EngineInfo;

    /// First sight of a session.
    async fn bootstrap(
        &self,
        call: &CallOptions,
        session: &SessionRef,
        history: &History,
    ) -> EngineResult<BootstrapResult>;

    /// A new message.
    async fn ingest(
        &self,
        call: &CallOptions,
        session: &SessionRef,
        entry: &MessageEntry,
        is_heartbeat: bool,
    ) -> EngineResult<IngestResult>;

    /// Several new messages.
    async fn ingest_batch(
        &self,
        call: &CallOptions,
        session: &SessionRef,
        entries: &[MessageEntry],
        is_heartbeat: bool,
    ) -> EngineResult<IngestBatchResult>;

    /// Builds the prompt.
    async fn assemble(
        &self,
        call: &CallOptions,
        session: &SessionRef,
        history: &History,
        params: &AssembleParams,
    ) -> EngineResult<AssembleResult>;

    /// Compacts the session.
    async fn compact(
        &self,
        call: &CallOptions,
        session: &SessionRef,
        history: &History,
        params: &CompactParams,
    ) -> EngineResult<CompactResult>;

    /// The turn is over.
    async fn after_turn(
        &self,
        call: &CallOptions,
        session: &SessionRef,
        history: &History,
        params: &AfterTurnParams,
    ) -> EngineResult<()>;

    /// Housekeeping.
    async fn maintain(
        &self,
        call: &CallOptions,
        session: &SessionRef,
        history: &History,
        reason: MaintainReason,
        runtime_context: Option<&str>,
    ) -> EngineResult<MaintainResult>;

    /// A subagent is about to be spawned; `Some(id)` if there is something to
    /// roll back.
    async fn prepare_subagent_spawn(
        &self,
        call: &CallOptions,
        spawn: &SubagentSpawn,
    ) -> EngineResult<Option<String>>;

    /// Undoes a preparation after a failed spawn.
    async fn rollback_subagent_spawn(
        &self,
        call: &CallOptions,
        preparation_id: &str,
    ) -> EngineResult<()>;

    /// A subagent's session ended.
    async fn on_subagent_ended(
        &self,
        call: &CallOptions,
        child_session_key: &str,
        reason: SubagentEndReason,
    ) -> EngineResult<()>;

    /// The tools the engine offers the model (`wit/tools.wit`); none by
    /// default.
    async fn tools(&self, _call: &CallOptions) -> EngineResult<Vec<EngineTool>> {
        Ok(Vec::new())
    }

    /// Answers the model's call to the engine's tool `name` with
    /// `arguments_json` in `session`: the tool result the model reads. By
    /// default there are no tools, so every call is an `unsupported` error.
    async fn call_tool(
        &self,
        _call: &CallOptions,
        _session: &SessionRef,
        name: &str,
        _arguments_json: &str,
    ) -> EngineResult<String> {
        Err(EngineFailure::new(
            &self.info().id,
            crate::contract::failure::Operation::CallTool,
            crate::contract::failure::FailureKind::EngineError,
            format!(
                "the engine has no tool `{}`",
                crate::contract::text::clip(name, 64)
            ),
        ))
    }

    /// The host is done with a session: release what the engine holds for it
    /// (a sandboxed engine disposes and drops the session's instance).
    async fn close_session(&self, _session_id: &str) {}

    /// The engine is being dropped.
    async fn dispose(&self) -> EngineResult<()>;
}
