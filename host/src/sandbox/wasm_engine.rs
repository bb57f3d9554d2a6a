//! A wasm component as a [`ContextEngine`]: one instance per session, created
//! on the session's first call, replaced after any failure that poisons it.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, PoisonError};

use async_trait::async_trait;

use super::Sandbox;
use super::bindings::EngineExportsPre;
use super::call::{Request, Response};
use super::config::{EngineLimits, SandboxConfig};
use super::instance::{CallError, Live};
use super::load::LoadedComponent;
use super::pool::{DisposalFailures, SlotCell, dispose_instance};
use super::store::StoreState;
use crate::contract::engine::{CallOptions, ContextEngine, EngineResult};
use crate::contract::failure::{EngineFailure, FailureKind, Operation};
use crate::contract::history::History;
use crate::contract::services::HostServices;
use crate::contract::tools::EngineTool;
use crate::contract::types::{
    AfterTurnParams, AssembleParams, AssembleResult, BootstrapResult, CompactParams, CompactResult,
    EngineInfo, IngestBatchResult, IngestResult, MaintainReason, MaintainResult, MessageEntry,
    SessionRef, SubagentEndReason, SubagentSpawn,
};
use crate::contract::validate;

/// A sandboxed engine. Cheap to clone; clones share instances.
#[derive(Clone)]
pub struct WasmEngine {
    shared: Arc<Shared>,
}

struct Shared {
    sandbox: Sandbox,
    pre: EngineExportsPre<StoreState>,
    /// The name of its state store, logs and failures.
    id: Arc<str>,
    /// Who registered it, for logs.
    owner: Arc<str>,
    info: EngineInfo,
    services: Arc<dyn HostServices>,
    /// Its `plugins.entries.<id>.config`, handed to every instance.
    engine_config: Option<Arc<str>>,
    /// The sandbox's limits with its own `plugins.entries.<id>.limits` in
    /// place, for every instance.
    limits: Arc<SandboxConfig>,
    sessions: Mutex<HashMap<String, Arc<SlotCell>>>,
    /// The instance for calls that belong to no session (`info`, subagent
    /// hooks).
    control: Arc<SlotCell>,
    /// A failed `dispose` of a recycled instance, to report.
    disposals: Arc<DisposalFailures>,
    /// Its tools, once asked (the same for every session).
    tools: std::sync::OnceLock<Vec<EngineTool>>,
}

/// Who the host knows a sandboxed engine as.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EngineIdentity {
    /// The id the engine was registered under: the namespace of its
    /// `state-*` store and its name in logs and failures, whatever id its
    /// `info` declares (so a plugin cannot reach another engine's state by
    /// declaring that engine's id).
    pub id: String,
    /// Who registered it (`core`, `plugin:<name>`), for logs.
    pub owner: String,
    /// Its `plugins.entries.<id>.config` as JSON: what `host.engine-config`
    /// answers.
    pub config: Option<Arc<str>>,
    /// Its `plugins.entries.<id>.limits`: call limits in place of the
    /// sandbox's, for this engine alone.
    pub limits: EngineLimits,
}

impl EngineIdentity {
    /// The identity engine `id` runs with outside a registry (a check, a
    /// bench) when `configs` or `limits` (by id, as
    /// `plugins.entries.<id>` gives them) hold settings or limits of its
    /// own; `None` when neither does.
    pub fn configured(
        id: &str,
        owner: &str,
        configs: &BTreeMap<String, Arc<str>>,
        limits: &BTreeMap<String, EngineLimits>,
    ) -> Option<Self> {
        let config = configs.get(id).cloned();
        let limits = limits.get(id).cloned().unwrap_or_default();
        (config.is_some() || !limits.is_empty()).then(|| Self {
            id: id.to_owned(),
            owner: owner.to_owned(),
            config,
            limits,
        })
    }
}

/// Owner named in the logs of an engine instantiated outside any registry.
const UNREGISTERED: &str = "unregistered";

impl Sandbox {
    /// Instantiates `component` outside any registry (inspection, benches,
    /// checks): the engine is known by the id its `info` declares, and its
    /// state lives under that id. Hosts with a registry use
    /// [`Sandbox::instantiate_as`].
    pub async fn instantiate(
        &self,
        component: &LoadedComponent,
        services: Arc<dyn HostServices>,
    ) -> Result<WasmEngine, EngineFailure> {
        self.instantiate_scoped(component, None, services).await
    }

    /// Instantiates `component` as the engine `identity` names: its state,
    /// logs and failures use `identity.id`, never the id its `info` declares.
    pub async fn instantiate_as(
        &self,
        component: &LoadedComponent,
        identity: EngineIdentity,
        services: Arc<dyn HostServices>,
    ) -> Result<WasmEngine, EngineFailure> {
        self.instantiate_scoped(component, Some(identity), services)
            .await
    }

    /// Instantiates `component` once, asks its `info` and checks it: the
    /// engine is ready for calls. `services` answers its service imports.
    async fn instantiate_scoped(
        &self,
        component: &LoadedComponent,
        identity: Option<EngineIdentity>,
        services: Arc<dyn HostServices>,
    ) -> Result<WasmEngine, EngineFailure> {
        // Until `info` answers, an unregistered engine is known by its file
        // name.
        let label: Arc<str> = match &identity {
            Some(identity) => identity.id.as_str().into(),
            None => component.name().into(),
        };
        let pool = &self.inner.pool;
        let ticket = pool.reserve().await.ok_or_else(|| {
            EngineFailure::new(&*label, Operation::Load, FailureKind::Overloaded, NO_SLOT)
        })?;
        let disposals = Arc::new(DisposalFailures::default());
        let engine_config = identity
            .as_ref()
            .and_then(|identity| identity.config.clone());
        let limits = match &identity {
            Some(identity) if !identity.limits.is_empty() => {
                Arc::new(self.inner.config.with_engine_limits(&identity.limits))
            }
            _ => self.inner.config.clone(),
        };
        let state = StoreState::new(
            label.clone(),
            limits.clone(),
            services.clone(),
            disposals.clone(),
        )
        .with_engine_config(engine_config.clone())
        .with_sql(self.sql.clone());
        let mut live = Live::start(&component.pre, state, ticket, Operation::Load).await?;
        let info = match live.call(&Request::Info, &CallOptions::default()).await {
            Ok(Response::Info(info)) => info,
            Ok(_) => return Err(unexpected(&label, Operation::Info)),
            Err(error) => return Err(error.into_failure()),
        };
        if let Some(problem) = validate::info_problem(&info) {
            // Made but refused: its `dispose` runs before the instance goes.
            dispose_instance(&mut live).await;
            return Err(EngineFailure::new(
                &*label,
                Operation::Info,
                FailureKind::InvalidOutput,
                problem,
            ));
        }
        let (id, owner): (Arc<str>, Arc<str>) = match identity {
            Some(identity) => (label, identity.owner.into()),
            None => {
                let id: Arc<str> = info.id.as_str().into();
                live.rename(id.clone());
                (id, UNREGISTERED.into())
            }
        };
        let control = pool.new_cell();
        *control.live.lock().await = Some(live);
        Ok(WasmEngine {
            shared: Arc::new(Shared {
                sandbox: self.clone(),
                pre: component.pre.clone(),
                id,
                owner,
                info,
                services,
                engine_config,
                limits,
                sessions: Mutex::new(HashMap::new()),
                control,
                disposals,
                tools: std::sync::OnceLock::new(),
            }),
        })
    }
}

const NO_SLOT: &str =
    "no engine instance slot is free (sandbox.maxInstances reached and every instance is busy)";

fn unexpected(engine_id: &str, operation: Operation) -> EngineFailure {
    EngineFailure::new(
        engine_id,
        operation,
        FailureKind::InvalidOutput,
        "the engine answered a different call than the one made",
    )
}

impl WasmEngine {
    /// Instances of this engine alive now (sessions plus the control one).
    pub async fn live_instances(&self) -> usize {
        let mut cells: Vec<Arc<SlotCell>> = self.session_cells();
        cells.push(self.shared.control.clone());
        let mut live = 0;
        for cell in cells {
            if cell.live.lock().await.is_some() {
                live += 1;
            }
        }
        live
    }

    /// Creates the instance for `session_id` now, if it has none, so its first
    /// call does not pay for instantiation.
    pub async fn prewarm(&self, session_id: &str) -> EngineResult<()> {
        let cell = self.cell_for_session(session_id);
        let mut slot = cell.live.lock().await;
        cell.touch(&self.shared.sandbox.inner.pool);
        if slot.is_none() {
            *slot = Some(self.start_instance(Operation::Load).await?);
        }
        Ok(())
    }

    fn session_cells(&self) -> Vec<Arc<SlotCell>> {
        let sessions = self
            .shared
            .sessions
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        sessions.values().cloned().collect()
    }

    fn cell_for(&self, request: &Request<'_>) -> Arc<SlotCell> {
        match request.session() {
            Some(session) => self.cell_for_session(&session.session_id),
            None => self.shared.control.clone(),
        }
    }

    fn cell_for_session(&self, session_id: &str) -> Arc<SlotCell> {
        let mut sessions = self
            .shared
            .sessions
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(cell) = sessions.get(session_id) {
            return cell.clone();
        }
        let cell = self.shared.sandbox.inner.pool.new_cell();
        sessions.insert(session_id.to_owned(), cell.clone());
        cell
    }

    fn failure(&self, operation: Operation, kind: FailureKind, message: &str) -> EngineFailure {
        EngineFailure::new(&*self.shared.id, operation, kind, message)
    }

    /// Runs `request` on the instance of its session, creating the instance
    /// if there is none and dropping it if the call poisons it.
    async fn call(&self, request: Request<'_>, options: &CallOptions) -> EngineResult<Response> {
        let operation = request.operation();
        if options.abort.is_cancelled() {
            return Err(self.failure(
                operation,
                FailureKind::Aborted,
                "the caller aborted before the call started",
            ));
        }
        if let Some(failure) = self.shared.disposals.take() {
            return Err(failure);
        }
        let cell = self.cell_for(&request);
        let pool = &self.shared.sandbox.inner.pool;
        let mut slot = cell.live.lock().await;
        cell.touch(pool);
        let live = match &mut *slot {
            Some(live) => live,
            empty => empty.insert(self.start_instance(operation).await?),
        };
        match live.call(&request, options).await {
            Ok(response) => {
                if let Some(reason) = self.recycle_reason(live) {
                    self.trace_recycle(&request, reason);
                    if let Some(mut old) = slot.take() {
                        dispose_instance(&mut old).await;
                    }
                }
                Ok(response)
            }
            Err(CallError::Poisoned(failure)) => {
                // The failure itself is the decision the guard reports; the
                // next call of this session gets a fresh instance.
                *slot = None;
                tracing::debug!(
                    engine = &*self.shared.id,
                    operation = operation.as_str(),
                    "failed instance dropped"
                );
                Err(failure)
            }
            Err(CallError::Answered(failure)) => Err(failure),
        }
    }

    async fn start_instance(&self, operation: Operation) -> EngineResult<Live> {
        let shared = &self.shared;
        let ticket = shared
            .sandbox
            .inner
            .pool
            .reserve()
            .await
            .ok_or_else(|| self.failure(operation, FailureKind::Overloaded, NO_SLOT))?;
        let state = StoreState::new(
            shared.id.clone(),
            shared.limits.clone(),
            shared.services.clone(),
            shared.disposals.clone(),
        )
        .with_engine_config(shared.engine_config.clone())
        .with_sql(shared.sandbox.sql.clone());
        Live::start(&shared.pre, state, ticket, operation).await
    }

    /// Why a healthy instance should be replaced now, if it should.
    fn recycle_reason(&self, live: &Live) -> Option<&'static str> {
        let config = &self.shared.limits;
        if live.calls() >= config.recycle_after_calls {
            Some("the instance reached sandbox.recycleAfterCalls")
        } else if live.memory_used() >= config.memory_limit_bytes() / 4 * 3 {
            Some("the instance's memory passed 3/4 of its budget")
        } else {
            None
        }
    }

    /// The one event of a recycle decision (a healthy instance replaced).
    fn trace_recycle(&self, request: &Request<'_>, reason: &str) {
        tracing::info!(
            engine = &*self.shared.id,
            owner = &*self.shared.owner,
            session = request
                .session()
                .map_or("", |session| session.session_id.as_str()),
            operation = request.operation().as_str(),
            classification = "recycle",
            reason,
            "engine instance recycled"
        );
    }

    async fn dispose_cell(cell: &SlotCell) {
        if let Some(mut live) = cell.live.lock().await.take() {
            dispose_instance(&mut live).await;
        }
    }
}

/// Unpacks the response variant a method expects.
macro_rules! expect_response {
    ($self:ident, $response:expr, $operation:expr, $variant:ident) => {
        match $response {
            Response::$variant(value) => Ok(value),
            _ => Err(unexpected(&$self.shared.id, $operation)),
        }
    };
    ($self:ident, $response:expr, $operation:expr) => {
        match $response {
            Response::Done => Ok(()),
            _ => Err(unexpected(&$self.shared.id, $operation)),
        }
    };
}

#[async_trait]
impl ContextEngine for WasmEngine {
    fn info(&self) -> &EngineInfo {
        &self.shared.info
    }

    async fn bootstrap(
        &self,
        call: &CallOptions,
        session: &SessionRef,
        history: &History,
    ) -> EngineResult<BootstrapResult> {
        let response = self
            .call(Request::Bootstrap { session, history }, call)
            .await?;
        expect_response!(self, response, Operation::Bootstrap, Bootstrap)
    }

    async fn ingest(
        &self,
        call: &CallOptions,
        session: &SessionRef,
        entry: &MessageEntry,
        is_heartbeat: bool,
    ) -> EngineResult<IngestResult> {
        let request = Request::Ingest {
            session,
            entry,
            is_heartbeat,
        };
        let response = self.call(request, call).await?;
        expect_response!(self, response, Operation::Ingest, Ingest)
    }

    async fn ingest_batch(
        &self,
        call: &CallOptions,
        session: &SessionRef,
        entries: &[MessageEntry],
        is_heartbeat: bool,
    ) -> EngineResult<IngestBatchResult> {
        // However many messages the caller has, the engine gets them in
        // batches its memory budget holds: a large batch is the caller's
        // doing, never a reason for a correct engine to fail.
        let max_bytes = self.shared.limits.memory_limit_bytes() / INGEST_SHARE_OF_MEMORY;
        let mut ingested = 0u32;
        for batch in batches(entries, max_bytes, MAX_INGEST_BATCH) {
            let request = Request::IngestBatch {
                session,
                entries: batch,
                is_heartbeat,
            };
            let response = self.call(request, call).await?;
            let result: IngestBatchResult =
                expect_response!(self, response, Operation::IngestBatch, IngestBatch)?;
            ingested = ingested.saturating_add(result.ingested_count);
        }
        Ok(IngestBatchResult {
            ingested_count: ingested,
        })
    }

    async fn assemble(
        &self,
        call: &CallOptions,
        session: &SessionRef,
        history: &History,
        params: &AssembleParams,
    ) -> EngineResult<AssembleResult> {
        let request = Request::Assemble {
            session,
            history,
            params,
        };
        let response = self.call(request, call).await?;
        expect_response!(self, response, Operation::Assemble, Assemble)
    }

    async fn compact(
        &self,
        call: &CallOptions,
        session: &SessionRef,
        history: &History,
        params: &CompactParams,
    ) -> EngineResult<CompactResult> {
        let request = Request::Compact {
            session,
            history,
            params,
        };
        let response = self.call(request, call).await?;
        expect_response!(self, response, Operation::Compact, Compact)
    }

    async fn after_turn(
        &self,
        call: &CallOptions,
        session: &SessionRef,
        history: &History,
        params: &AfterTurnParams,
    ) -> EngineResult<()> {
        let request = Request::AfterTurn {
            session,
            history,
            params,
        };
        let response = self.call(request, call).await?;
        expect_response!(self, response, Operation::AfterTurn)
    }

    async fn maintain(
        &self,
        call: &CallOptions,
        session: &SessionRef,
        history: &History,
        reason: MaintainReason,
        runtime_context: Option<&str>,
    ) -> EngineResult<MaintainResult> {
        let request = Request::Maintain {
            session,
            history,
            reason,
            runtime_context,
        };
        let response = self.call(request, call).await?;
        expect_response!(self, response, Operation::Maintain, Maintain)
    }

    async fn prepare_subagent_spawn(
        &self,
        call: &CallOptions,
        spawn: &SubagentSpawn,
    ) -> EngineResult<Option<String>> {
        let response = self
            .call(Request::PrepareSubagentSpawn(spawn), call)
            .await?;
        expect_response!(self, response, Operation::PrepareSubagentSpawn, Spawn)
    }

    async fn rollback_subagent_spawn(
        &self,
        call: &CallOptions,
        preparation_id: &str,
    ) -> EngineResult<()> {
        let response = self
            .call(Request::RollbackSubagentSpawn(preparation_id), call)
            .await?;
        expect_response!(self, response, Operation::RollbackSubagentSpawn)
    }

    async fn on_subagent_ended(
        &self,
        call: &CallOptions,
        child_session_key: &str,
        reason: SubagentEndReason,
    ) -> EngineResult<()> {
        let request = Request::OnSubagentEnded {
            child_session_key,
            reason,
        };
        let response = self.call(request, call).await?;
        expect_response!(self, response, Operation::OnSubagentEnded)
    }

    async fn tools(&self, call: &CallOptions) -> EngineResult<Vec<EngineTool>> {
        if !self.shared.pre.has_tools() {
            return Ok(Vec::new());
        }
        if let Some(tools) = self.shared.tools.get() {
            return Ok(tools.clone());
        }
        let response = self.call(Request::ListTools, call).await?;
        let tools = expect_response!(self, response, Operation::ListTools, Tools)?;
        Ok(self.shared.tools.get_or_init(|| tools).clone())
    }

    async fn call_tool(
        &self,
        call: &CallOptions,
        session: &SessionRef,
        name: &str,
        arguments_json: &str,
    ) -> EngineResult<String> {
        let request = Request::CallTool {
            session,
            name,
            arguments_json,
        };
        let response = self.call(request, call).await?;
        expect_response!(self, response, Operation::CallTool, ToolResult)
    }

    async fn close_session(&self, session_id: &str) {
        let cell = {
            let mut sessions = self
                .shared
                .sessions
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            sessions.remove(session_id)
        };
        if let Some(cell) = cell {
            Self::dispose_cell(&cell).await;
        }
    }

    async fn dispose(&self) -> EngineResult<()> {
        let cells = {
            let mut sessions = self
                .shared
                .sessions
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            sessions.drain().map(|(_, cell)| cell).collect::<Vec<_>>()
        };
        for cell in cells {
            Self::dispose_cell(&cell).await;
        }
        Self::dispose_cell(&self.shared.control).await;
        self.shared.disposals.take().map_or(Ok(()), Err)
    }
}

/// The share of an instance's memory budget one `ingest-batch` call's
/// messages may take on the wire (the guest's own copy of them is several
/// times that).
const INGEST_SHARE_OF_MEMORY: usize = 16;

/// Most messages one `ingest-batch` call carries.
const MAX_INGEST_BATCH: usize = 4_096;

/// `entries` cut into consecutive batches of at most `max_entries` and
/// (unless one message alone is larger) `max_bytes` on the wire.
fn batches(
    entries: &[MessageEntry],
    max_bytes: usize,
    max_entries: usize,
) -> impl Iterator<Item = &[MessageEntry]> {
    let mut rest = entries;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let mut bytes = 0;
        let mut end = 0;
        while end < rest.len() && end < max_entries {
            let size = super::wire_size::entry(&rest[end]);
            if end > 0 && bytes + size > max_bytes {
                break;
            }
            bytes += size;
            end += 1;
        }
        let (batch, tail) = rest.split_at(end);
        rest = tail;
        Some(batch)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batches_keep_order_and_bounds() {
        let entries: Vec<MessageEntry> = (0..200)
            .map(|index| MessageEntry {
                id: format!("m{index}"),
                parent_id: None,
                timestamp_ms: 0,
                message: crate::contract::types::AgentMessage::user_text(format!(
                    "message {index}"
                )),
            })
            .collect();
        let one = super::super::wire_size::entry(&entries[0]);
        let cut: Vec<&[MessageEntry]> = batches(&entries, one * 3, 7).collect();
        assert!(
            cut.iter()
                .all(|batch| !batch.is_empty() && batch.len() <= 7)
        );
        let joined: Vec<&str> = cut
            .iter()
            .flat_map(|batch| batch.iter().map(|e| e.id.as_str()))
            .collect();
        let all: Vec<&str> = entries.iter().map(|e| e.id.as_str()).collect();
        assert_eq!(joined, all, "every entry once, in order");
        // A message larger than the bound still goes, alone.
        assert_eq!(batches(&entries[..2], 1, 10).count(), 2);
        assert_eq!(batches(&[], 100, 10).count(), 0);
    }
}
