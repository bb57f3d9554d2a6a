//! A live engine instance (one wasmtime `Store`) and the way every call runs
//! on it: budgets set just before the export runs, the deadline watched from
//! both sides, the history lent and taken back, failures classified.

use std::sync::Arc;

use async_trait::async_trait;
use wasmtime::Store;
use wasmtime::component::Resource;

use super::bindings::{EngineExports, EngineExportsPre};
use super::call::{self, CallClock, CallState, Request, Response};
use super::classify::classify;
use super::config::SandboxConfig;
use super::convert;
use super::history_resource::HistoryHandle;
use super::pool::{DisposalFailures, PoolTicket};
use super::sql;
use super::store::StoreState;
use super::wire_size;
use crate::contract::engine::{CallOptions, CommitRefusal, HeldWrites, PendingWrites};
use crate::contract::failure::{EngineFailure, FailureKind, Operation};
use crate::contract::services::{HostServices, ServiceError};
use crate::contract::text::{MAX_ENGINE_TEXT_BYTES, untrusted_line};

/// How a call on a live instance failed.
pub(crate) enum CallError {
    /// The store is unusable (trap, interrupt, dropped call): discard it.
    Poisoned(EngineFailure),
    /// The engine answered, but with an error or an oversized answer; the
    /// instance itself is fine.
    Answered(EngineFailure),
}

impl CallError {
    pub(crate) fn into_failure(self) -> EngineFailure {
        match self {
            Self::Poisoned(failure) | Self::Answered(failure) => failure,
        }
    }
}

/// An instantiated engine with its store.
pub(crate) struct Live {
    store: Store<StoreState>,
    bindings: EngineExports,
    calls: u64,
    _ticket: PoolTicket,
}

impl Live {
    /// Where this instance's `dispose` failure goes.
    pub(crate) fn disposals(&self) -> &DisposalFailures {
        &self.store.data().disposals
    }

    /// Instantiates `pre` in a fresh store holding `state`, under the
    /// instantiation fuel budget and the plain call deadline. `operation` is
    /// the call that needed the instance (for the failure record).
    pub(crate) async fn start(
        pre: &EngineExportsPre<StoreState>,
        state: StoreState,
        ticket: PoolTicket,
        operation: Operation,
    ) -> Result<Self, EngineFailure> {
        let fuel = state.config.fuel_per_instantiation;
        let grace = state.config.abort_grace();
        let clock = state.call.clock.clone();
        let abort = state.call.abort.clone();
        let mut store = Store::new(pre.engine(), state);
        store.limiter(|state| &mut state.memory);
        if let Err(error) = yield_for_deadlines(&mut store).and_then(|()| arm(&mut store, fuel)) {
            return Err(failure_of(
                &store,
                operation,
                FailureKind::Trap,
                error.to_string(),
            ));
        }

        // Biased: the instantiation is polled first, so one that finishes
        // without waiting never arms the expiry's timer.
        let outcome = tokio::select! {
            biased;
            result = pre.instantiate_async(&mut store) => Ok(result),
            kind = call::expiry(&clock, &abort, grace) => Err(kind),
        };
        match outcome {
            Ok(Ok(bindings)) => {
                if let Err(refusal) = commit_state(&mut store).await {
                    let (kind, message) = refusal_failure(refusal);
                    return Err(failure_of(&store, operation, kind, message));
                }
                Ok(Self {
                    store,
                    bindings,
                    calls: 0,
                    _ticket: ticket,
                })
            }
            Ok(Err(error)) => {
                let (kind, message) = classify(&error);
                Err(failure_of(
                    &store,
                    operation,
                    kind,
                    format!("instantiating the engine failed: {message}"),
                ))
            }
            Err(kind) => Err(failure_of(
                &store,
                operation,
                kind,
                "instantiating the engine did not finish in time".to_owned(),
            )),
        }
    }

    /// Names the engine in this instance's logs, records and state (once its
    /// `info` is known).
    pub(crate) fn rename(&mut self, engine_id: Arc<str>) {
        self.store.data_mut().engine_id = engine_id;
    }

    /// Calls completed on this instance.
    pub(crate) fn calls(&self) -> u64 {
        self.calls
    }

    /// Bytes of linear memory the instance holds.
    pub(crate) fn memory_used(&self) -> usize {
        self.store.data().memory.used()
    }

    /// Runs one export call under fresh per-call budgets. A call that fails
    /// leaves no SQL transaction open behind it.
    pub(crate) async fn call(
        &mut self,
        request: &Request<'_>,
        options: &CallOptions,
    ) -> Result<Response, CallError> {
        let result = self.run_call(request, options).await;
        if result.is_err() {
            self.store.data().call.sql.rollback();
        }
        result
    }

    async fn run_call(
        &mut self,
        request: &Request<'_>,
        options: &CallOptions,
    ) -> Result<Response, CallError> {
        let operation = request.operation();
        let budget = call::budgeted_as(operation, options);
        let config = self.store.data().config.clone();
        let clock = Arc::new(CallClock::start(budget, &config, options.compaction_window));
        self.store.data_mut().call = CallState {
            runtime_settings: request.runtime_settings().map(str::to_owned),
            request_id: options.request_id.clone(),
            client: options.client,
            transcript_fence: options.transcript_fence.clone(),
            write_fence: options.write_fence.clone(),
            ..CallState::new(
                operation,
                request.session().cloned(),
                request.history().cloned(),
                clock.clone(),
                options.abort.clone(),
            )
        };
        let fuel = config.fuel_for(budget);
        if let Err(error) = arm(&mut self.store, fuel) {
            return Err(CallError::Poisoned(self.failure(
                operation,
                FailureKind::Trap,
                error.to_string(),
            )));
        }

        // Lend the history for this call only; the handle is deleted after.
        let lent = match request.history() {
            Some(history) => match self
                .store
                .data_mut()
                .table
                .push(HistoryHandle(history.clone()))
            {
                Ok(handle) => Some(handle),
                Err(error) => {
                    return Err(CallError::Poisoned(self.failure(
                        operation,
                        FailureKind::HostLimit,
                        format!("cannot lend the history: {error}"),
                    )));
                }
            },
            None => None,
        };
        let lent_rep = lent.as_ref().map(Resource::rep);

        // Biased: the export is polled first, so a call that finishes
        // without waiting (most do) never arms the expiry's timer.
        let outcome = tokio::select! {
            biased;
            result = invoke(&self.bindings, &mut self.store, request, lent_rep) => Ok(result),
            kind = call::expiry(&clock, &options.abort, config.abort_grace()) => Err(kind),
        };

        if let Some(handle) = lent {
            // Fails only if the store is already poisoned; it is dropped then.
            let _ = self.store.data_mut().table.delete(handle);
        }
        // Nor is the history kept past the call: the session's next appends
        // then grow it in place instead of copying it.
        self.store.data_mut().call.history = None;
        self.report_dropped_logs(operation);
        self.calls += 1;
        if let Ok(left) = self.store.get_fuel() {
            tracing::debug!(%operation, fuel_used = fuel.saturating_sub(left), fuel, "engine call");
        }

        match outcome {
            Ok(Ok(Ok(response))) => {
                let bytes = response_bytes(&response);
                let limit = config.max_output_kib.saturating_mul(1024) as usize;
                if bytes > limit {
                    return Err(CallError::Answered(self.failure(
                        operation,
                        FailureKind::InvalidOutput,
                        format!("the answer is {bytes} bytes, over the {limit} byte limit"),
                    )));
                }
                // Left for the caller to commit once it accepts the answer
                // (the guard, after validating it), or else durable before
                // the answer is used; a call that failed above never gets
                // here and its writes are dropped.
                if let Some(slot) = &options.held_writes {
                    hold_state(&mut self.store, slot, &config);
                } else if let Err(refusal) = commit_state(&mut self.store).await {
                    let (kind, message) = refusal_failure(refusal);
                    return Err(CallError::Answered(self.failure(operation, kind, message)));
                }
                Ok(response)
            }
            Ok(Ok(Err(error))) => {
                let reason = format!(
                    "{}: {}",
                    convert::engine_error_kind(error.kind),
                    untrusted_line(&error.message, MAX_ENGINE_TEXT_BYTES)
                );
                // Told to stop by `host.aborted()` (the deadline was near,
                // not the caller's abort) and it did: stopped in time.
                let (kind, message) = if clock.near_deadline() && !options.abort.is_cancelled() {
                    (
                        FailureKind::StoppedAtDeadline,
                        format!("the engine stopped within its deadline notice: {reason}"),
                    )
                } else if let Some(fault) = &self.store.data().call.host_fault {
                    // The host failed it first: the engine's error is the
                    // host's doing.
                    (
                        FailureKind::HostFault,
                        format!("the engine failed after the host failed it ({fault}): {reason}"),
                    )
                } else {
                    (FailureKind::EngineError, reason)
                };
                Err(CallError::Answered(self.failure(operation, kind, message)))
            }
            Ok(Err(error)) => {
                let (kind, message) = classify(&error);
                log_trap_frames(operation, &error);
                Err(CallError::Poisoned(self.failure(operation, kind, message)))
            }
            Err(kind) => {
                let message = match kind {
                    FailureKind::Aborted => {
                        "the caller aborted and the engine did not return within the grace period"
                    }
                    _ => "the call ran past its wall-clock deadline",
                };
                Err(CallError::Poisoned(self.failure(
                    operation,
                    kind,
                    message.to_owned(),
                )))
            }
        }
    }

    fn report_dropped_logs(&self, operation: Operation) {
        let call = &self.store.data().call;
        if call.logs_dropped > 0 {
            tracing::warn!(
                engine = &*self.store.data().engine_id,
                operation = operation.as_str(),
                dropped = call.logs_dropped,
                "engine log records over the per-call limit were dropped"
            );
        }
    }

    fn failure(&self, operation: Operation, kind: FailureKind, message: String) -> EngineFailure {
        failure_of(&self.store, operation, kind, message)
    }
}

/// Commits the state writes the call in `store` left pending, in one
/// transaction, then its SQL transaction; the error says why they could not
/// be (a store failure, or concurrent calls of the engine that together
/// passed its limits, or the session's lease taken over by another host).
async fn commit_state(store: &mut Store<StoreState>) -> Result<(), CommitRefusal> {
    let state = store.data();
    if !state.call.has_writes() {
        return Ok(());
    }
    commit_call(&state.services, &state.engine_id, &state.call).await
}

/// Commits `call`'s state batch, then (only if that succeeded) its SQL
/// transaction, which is otherwise rolled back: the SQL writes never
/// outlive state writes that were refused.
async fn commit_call(
    services: &Arc<dyn HostServices>,
    engine_id: &str,
    call: &CallState,
) -> Result<(), CommitRefusal> {
    let committed = match services.commit_state(call.service_call(engine_id)).await {
        Ok(()) => sql::commit(&call.sql).await,
        Err(error) => Err(error),
    };
    if committed.is_err() {
        call.sql.rollback();
    }
    committed.map_err(commit_refusal)
}

/// How a refused commit reads.
fn commit_refusal(error: ServiceError) -> CommitRefusal {
    let message = format!("the call's state writes could not be committed: {error}");
    match error {
        ServiceError::LeaseLost(_) => CommitRefusal::LeaseLost(message),
        ServiceError::HostFault(_) => CommitRefusal::HostFault(message),
        _ => CommitRefusal::Refused(message),
    }
}

/// The failure a refused commit makes of the call: the engine's for a store
/// that refused its writes, the host's for a lost lease or a store that
/// failed.
fn refusal_failure(refusal: CommitRefusal) -> (FailureKind, String) {
    match refusal {
        CommitRefusal::Refused(message) => (FailureKind::HostLimit, message),
        CommitRefusal::LeaseLost(message) => (FailureKind::LeaseLost, message),
        CommitRefusal::HostFault(message) => (FailureKind::HostFault, message),
    }
}

/// Moves the state writes the call in `store` left pending into `slot`, for
/// whoever accepts the answer to commit ([`HeldWrites`]).
fn hold_state(store: &mut Store<StoreState>, slot: &HeldWrites, config: &SandboxConfig) {
    if !store.data().call.has_writes() {
        return;
    }
    let state = store.data_mut();
    let call = std::mem::replace(&mut state.call, CallState::instantiation(config));
    slot.hold(Box::new(HeldCall {
        services: state.services.clone(),
        engine_id: state.engine_id.clone(),
        call,
    }));
}

/// A call's state writes, held until its answer is accepted.
struct HeldCall {
    services: Arc<dyn HostServices>,
    engine_id: Arc<str>,
    call: CallState,
}

#[async_trait]
impl PendingWrites for HeldCall {
    async fn commit(self: Box<Self>) -> Result<(), CommitRefusal> {
        commit_call(&self.services, &self.engine_id, &self.call).await
    }
}

/// Makes the guest yield to the executor every [`call::FUEL_PER_YIELD`]
/// units of fuel, so [`call::expiry`] can stop a call that never waits.
/// Does nothing in a sandbox measured without guards.
fn yield_for_deadlines(store: &mut Store<StoreState>) -> wasmtime::Result<()> {
    if !store.data().config.guards {
        return Ok(());
    }
    store.fuel_async_yield_interval(Some(call::FUEL_PER_YIELD))
}

/// Gives the next call its fuel, just before it runs. Does nothing in a
/// sandbox measured without guards.
fn arm(store: &mut Store<StoreState>, fuel: u64) -> wasmtime::Result<()> {
    if !store.data().config.guards {
        return Ok(());
    }
    store.set_fuel(fuel)
}

fn failure_of(
    store: &Store<StoreState>,
    operation: Operation,
    kind: FailureKind,
    message: String,
) -> EngineFailure {
    let state = store.data();
    EngineFailure::new(&*state.engine_id, operation, kind, message)
        .with_stderr_tail(&state.stderr.contents())
}

/// Bytes of an answer, for the output cap.
fn response_bytes(response: &Response) -> usize {
    match response {
        Response::Info(info) => wire_size::strings([
            Some(info.id.as_str()),
            Some(info.name.as_str()),
            info.version.as_deref(),
        ]),
        Response::Bootstrap(result) => wire_size::strings([result.reason.as_deref()]),
        Response::Assemble(result) => {
            wire_size::items(&result.items)
                + wire_size::strings([result.system_prompt_addition.as_deref()])
        }
        Response::Compact(result) => wire_size::strings([
            result.reason.as_deref(),
            result.summary.as_deref(),
            result.first_kept_entry_id.as_deref(),
            result.details.as_deref(),
        ]),
        Response::Maintain(result) => wire_size::strings([result.reason.as_deref()]),
        Response::Spawn(id) => wire_size::strings([id.as_deref()]),
        Response::Tools(tools) => tools
            .iter()
            .map(|tool| {
                wire_size::strings([
                    Some(tool.name.as_str()),
                    Some(tool.description.as_str()),
                    Some(tool.parameters_json.as_str()),
                ])
            })
            .sum(),
        Response::ToolResult(result) => result.len(),
        Response::Ingest(_) | Response::IngestBatch(_) | Response::Done => 0,
    }
}

/// The guest's reported error, as the bindings give it.
type WitEngineError = super::bindings::ctxbox::engine::types::EngineError;

/// Calls the export for `request`.
async fn invoke(
    bindings: &EngineExports,
    store: &mut Store<StoreState>,
    request: &Request<'_>,
    lent_history: Option<u32>,
) -> wasmtime::Result<Result<Response, WitEngineError>> {
    let engine = bindings.engine();
    let lent = || {
        lent_history
            .map(Resource::<HistoryHandle>::new_borrow)
            .ok_or_else(|| wasmtime::format_err!("no history lent for a call that needs one"))
    };
    Ok(match request {
        Request::Info => engine
            .call_info(&mut *store)
            .await?
            .map(|info| Response::Info(convert::from_wit_info(info))),
        Request::Bootstrap { session, .. } => engine
            .call_bootstrap(&mut *store, &convert::to_wit_session(session), lent()?)
            .await?
            .map(|result| Response::Bootstrap(convert::from_wit_bootstrap(result))),
        Request::Ingest {
            session,
            entry,
            is_heartbeat,
        } => engine
            .call_ingest(
                &mut *store,
                &convert::to_wit_session(session),
                &convert::to_wit_entry(entry),
                *is_heartbeat,
            )
            .await?
            .map(|result| Response::Ingest(convert::from_wit_ingest(result))),
        Request::IngestBatch {
            session,
            entries,
            is_heartbeat,
        } => {
            let entries: Vec<_> = entries.iter().map(convert::to_wit_entry).collect();
            engine
                .call_ingest_batch(
                    &mut *store,
                    &convert::to_wit_session(session),
                    &entries,
                    *is_heartbeat,
                )
                .await?
                .map(|result| Response::IngestBatch(convert::from_wit_ingest_batch(result)))
        }
        Request::Assemble {
            session, params, ..
        } => engine
            .call_assemble(
                &mut *store,
                &convert::to_wit_session(session),
                lent()?,
                &convert::to_wit_assemble_params(params),
            )
            .await?
            .map(|result| Response::Assemble(convert::from_wit_assemble(result))),
        Request::Compact {
            session, params, ..
        } => engine
            .call_compact(
                &mut *store,
                &convert::to_wit_session(session),
                lent()?,
                &convert::to_wit_compact_params(params),
            )
            .await?
            .map(|result| Response::Compact(convert::from_wit_compact_result(result))),
        Request::AfterTurn {
            session, params, ..
        } => engine
            .call_after_turn(
                &mut *store,
                &convert::to_wit_session(session),
                lent()?,
                &convert::to_wit_after_turn_params(params),
            )
            .await?
            .map(|()| Response::Done),
        Request::Maintain {
            session,
            reason,
            runtime_context,
            ..
        } => {
            let runtime_context = runtime_context.map(str::to_owned);
            engine
                .call_maintain(
                    &mut *store,
                    &convert::to_wit_session(session),
                    lent()?,
                    convert::to_wit_maintain_reason(*reason),
                    runtime_context.as_ref(),
                )
                .await?
                .map(|result| Response::Maintain(convert::from_wit_maintain(result)))
        }
        Request::PrepareSubagentSpawn(spawn) => engine
            .call_prepare_subagent_spawn(&mut *store, &convert::to_wit_spawn(spawn))
            .await?
            .map(Response::Spawn),
        Request::RollbackSubagentSpawn(id) => engine
            .call_rollback_subagent_spawn(&mut *store, id)
            .await?
            .map(|()| Response::Done),
        Request::OnSubagentEnded {
            child_session_key,
            reason,
        } => engine
            .call_on_subagent_ended(
                &mut *store,
                child_session_key,
                convert::to_wit_end_reason(*reason),
            )
            .await?
            .map(|()| Response::Done),
        Request::Dispose => engine
            .call_dispose(&mut *store)
            .await?
            .map(|()| Response::Done),
        Request::ListTools => match bindings.tools() {
            Some(tools) => Ok(Response::Tools(super::powers::from_wit_tools(
                tools.call_list_tools(&mut *store).await?,
            ))),
            None => Ok(Response::Tools(Vec::new())),
        },
        Request::CallTool {
            session,
            name,
            arguments_json,
        } => match bindings.tools() {
            Some(tools) => tools
                .call_call_tool(
                    &mut *store,
                    &convert::to_wit_session(session),
                    name,
                    &(*arguments_json).to_owned(),
                )
                .await?
                .map(Response::ToolResult),
            None => Err(WitEngineError {
                kind: super::bindings::ctxbox::engine::types::EngineErrorKind::Unsupported,
                message: "the engine exports no tools".into(),
            }),
        },
    })
}

/// Frames of a trap's wasm backtrace logged at `debug`: where in the engine a
/// call ran out of fuel or trapped, for whoever sizes its budget or fixes it.
/// The names come from the engine's own name section, so they are escaped.
fn log_trap_frames(operation: Operation, error: &wasmtime::Error) {
    const MOST_FRAMES: usize = 24;
    if !tracing::enabled!(tracing::Level::DEBUG) {
        return;
    }
    let Some(backtrace) = error.downcast_ref::<wasmtime::WasmBacktrace>() else {
        return;
    };
    let frames: Vec<String> = backtrace
        .frames()
        .iter()
        .take(MOST_FRAMES)
        .map(|frame| match frame.func_name() {
            Some(name) => untrusted_line(name, 120),
            None => format!("#{}", frame.func_index()),
        })
        .collect();
    tracing::debug!(operation = %operation, frames = %frames.join(" < "), "engine call trapped");
}
