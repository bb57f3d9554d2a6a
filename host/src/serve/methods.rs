//! What each `ctxbox serve` method does: resolve the engine, bring the
//! session's history up to date, and make the call through the guarded
//! engine, which enforces the sandbox limits, quarantines a misbehaving
//! engine and lets `legacy` answer instead.

use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

use serde::Deserialize;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::commits::{CommitError, CommitStatus, CommitStore, HistoryTail, TurnCommits};
use super::commits_postgres::PostgresCommits;
use super::heap::HeapTrim;
use super::hearing::EngineHearing;
use super::metrics::{LiveFigures, MetricsSnapshot, RequestOutcome, ServeMetrics};
use super::protocol::{Answer, ErrorCode, PROTOCOL_VERSION, ProtocolError, params};
use super::resident::{Released, ResidentSessions};
use super::sessions::{Batch, RawMessage, SessionHistory, Sync, raw_json};
use super::stored_histories::{HistoryWriteError, StoredHistories};
use crate::contract::engine::{CallOptions, ContextEngine};
use crate::contract::failure::{EngineFailure, FailureKind};
use crate::contract::types::{
    AfterTurnParams, AssembleParams, CompactParams, CompactionTarget, ContextMode, MaintainReason,
    SessionRef, SubagentEndReason, SubagentSpawn,
};
use crate::engines::guard::GuardedEngine;
use crate::engines::registry::{EngineFactory, RegisterOptions};
use crate::provider::completion::NoModel;
use crate::runtime::Runtime;
use crate::store::{Lease, LeaseError, SessionLeases};

/// The plugin name `.wasm` engines named by clients are registered under.
pub const SERVE_OWNER: &str = "serve";

/// The state behind a server: the host, the sessions, the commit store, the
/// session leases.
pub struct Service {
    runtime: Runtime,
    sessions: ResidentSessions,
    /// Sessions given up so far (idle or over `serve.maxSessions`).
    released: AtomicU64,
    /// Gives memory freed by released sessions and large requests back.
    heap: Arc<HeapTrim>,
    commits: Arc<dyn TurnCommits>,
    leases: SessionLeases,
    /// Sessions' histories in the shared store (none without one).
    histories: Option<StoredHistories>,
    default_engine: Option<String>,
    /// Engine ids of the `.wasm` paths clients named, by path.
    wasm_ids: Mutex<HashMap<String, String>>,
    started: Instant,
    /// What the process has done, counted.
    metrics: Arc<ServeMetrics>,
}

/// Which session a call is about, and with which engine.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Target {
    session_id: String,
    #[serde(default)]
    session_key: Option<String>,
    #[serde(default)]
    session_file: Option<String>,
    #[serde(default)]
    engine: Option<String>,
    #[serde(default)]
    sync: Option<Sync>,
}

impl Target {
    fn session(&self) -> SessionRef {
        SessionRef {
            session_id: self.session_id.clone(),
            session_key: self.session_key.clone(),
            session_file: self.session_file.clone().unwrap_or_default(),
        }
    }
}

/// A method's own parameters plus its [`Target`].
#[derive(Debug)]
struct With<T> {
    target: Target,
    own: T,
}

/// Reads a method's [`With`] parameters: its target and its own fields, each
/// straight from the request's text (each skips the other's fields, so a
/// long history is read once and never held as a JSON tree). The text is
/// dropped once read: the messages are not held twice while the call runs.
fn with<T: serde::de::DeserializeOwned>(
    raw: Box<serde_json::value::RawValue>,
) -> Result<With<T>, ProtocolError> {
    Ok(With {
        target: params(&raw)?,
        own: params(&raw)?,
    })
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct AssembleArgs {
    token_budget: Option<u64>,
    #[serde(default)]
    available_tools: Vec<String>,
    citations_mode: Option<String>,
    model: Option<String>,
    prompt: Option<String>,
    runtime_settings: Option<Value>,
    /// `"ranges"`: answer with [`SessionHistory::ranges`] instead of the
    /// messages themselves.
    answer: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct CommitArgs {
    advancement_key: String,
    messages: Vec<RawMessage>,
    #[serde(default)]
    digests: Option<Vec<String>>,
    #[serde(default)]
    is_heartbeat: bool,
    token_budget: Option<u64>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct IngestArgs {
    #[serde(default)]
    messages: Vec<RawMessage>,
    #[serde(default)]
    digests: Option<Vec<String>>,
    #[serde(default)]
    is_heartbeat: bool,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct AfterTurnArgs {
    #[serde(default)]
    pre_prompt_message_count: u32,
    token_budget: Option<u64>,
    #[serde(default)]
    is_heartbeat: bool,
    runtime_context: Option<Value>,
    runtime_settings: Option<Value>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct MaintainArgs {
    reason: Option<MaintainReason>,
    runtime_context: Option<Value>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct CompactArgs {
    token_budget: Option<u64>,
    #[serde(default)]
    force: bool,
    current_token_count: Option<u64>,
    compaction_target: Option<CompactionTarget>,
    custom_instructions: Option<String>,
    runtime_settings: Option<Value>,
    runtime_context: Option<Value>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct SpawnArgs {
    engine: Option<String>,
    parent_session_key: String,
    child_session_key: String,
    context_mode: Option<ContextMode>,
    ttl_ms: Option<u64>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct RollbackArgs {
    engine: Option<String>,
    preparation_id: String,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct EndedArgs {
    engine: Option<String>,
    child_session_key: String,
    reason: SubagentEndReason,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct EngineArg {
    engine: Option<String>,
}

impl Service {
    /// A service over `runtime`, its commit store under the data directory
    /// (or in the runtime's shared store, with leases there);
    /// `default_engine` serves requests that name none.
    pub fn new(
        runtime: Runtime,
        default_engine: Option<String>,
    ) -> Result<Self, super::commits::CommitError> {
        let (commits, leases): (Arc<dyn TurnCommits>, SessionLeases) = match runtime.shared_store()
        {
            None => (
                Arc::new(CommitStore::open(
                    &runtime.data_dir().join(super::commits::COMMITS_FILE),
                )?),
                SessionLeases::local(),
            ),
            Some(postgres) => {
                let store = &runtime.config().store;
                (
                    Arc::new(PostgresCommits::new(postgres.clone())),
                    SessionLeases::postgres(
                        postgres.clone(),
                        std::time::Duration::from_millis(store.lease_ms),
                        std::time::Duration::from_millis(store.lease_wait_ms),
                    ),
                )
            }
        };
        let histories = runtime.shared_store().cloned().map(StoredHistories::new);
        let bounds = &runtime.config().serve;
        let sessions = ResidentSessions::new(bounds.max_sessions, bounds.idle_limit());
        let metrics = Arc::new(ServeMetrics::default());
        runtime.engines().call_observers().install(metrics.clone());
        Ok(Self {
            metrics,
            runtime,
            sessions,
            released: AtomicU64::new(0),
            heap: Arc::default(),
            commits,
            leases,
            histories,
            default_engine,
            wasm_ids: Mutex::new(HashMap::new()),
            started: Instant::now(),
        })
    }

    /// Loads the default engine in the background, so the first call does
    /// not wait for it to be compiled.
    pub fn warm_up(self: &Arc<Self>) {
        let Some(spec) = self.default_engine.clone() else {
            return;
        };
        let service = self.clone();
        tokio::spawn(async move {
            if let Err(error) = service.engine(Some(&spec)).await {
                tracing::warn!(engine = %spec, reason = %error.message, "cannot load the default engine");
            }
        });
    }

    /// The host.
    pub fn runtime(&self) -> &Runtime {
        &self.runtime
    }

    /// What the process has done, counted.
    pub fn metrics(&self) -> &Arc<ServeMetrics> {
        &self.metrics
    }

    /// The figures read now: sessions, warm instances, quarantines, store
    /// round trips, engines' completions.
    pub fn live_figures(&self) -> LiveFigures {
        LiveFigures {
            sessions: self.sessions.len(),
            released_sessions: self.released.load(Ordering::Relaxed),
            warm_instances: self.runtime.engines().sandbox().live_instances(),
            quarantined: self
                .runtime
                .engines()
                .quarantine()
                .list()
                .into_iter()
                .map(|record| record.engine_id)
                .collect(),
            store_round_trips: self.runtime.shared_store().map(|store| store.round_trips()),
            completions: self.runtime.completions().totals(),
        }
    }

    /// Everything counted, with the live figures.
    pub fn snapshot(&self) -> MetricsSnapshot {
        self.metrics.snapshot(self.live_figures())
    }

    /// Counts a request that ended with `answer` after `elapsed`: by its
    /// method (`unknown` for none the server has) and the engine it named
    /// or the default (`unknown` for one never resolved, `none` without).
    pub fn request_done(
        &self,
        method: &str,
        named_engine: Option<&str>,
        answer: &Result<Answer, ProtocolError>,
        elapsed: std::time::Duration,
    ) {
        let unknown_method = matches!(answer, Err(error) if error.code == ErrorCode::UnknownMethod);
        let method = if unknown_method { "unknown" } else { method };
        let spec = named_engine.or(self.default_engine.as_deref());
        let engine = match spec {
            None => "none".to_owned(),
            Some(spec) => self
                .known_engine_id(spec)
                .unwrap_or_else(|| "unknown".to_owned()),
        };
        let outcome = RequestOutcome::of(answer, &engine);
        self.metrics.request_done(method, &engine, outcome, elapsed);
    }

    /// The id `spec` resolves to without registering anything.
    fn known_engine_id(&self, spec: &str) -> Option<String> {
        let registry = self.runtime.engines().registry();
        if spec == crate::engines::registry::LEGACY_ID || registry.get(spec).is_some() {
            return Some(spec.to_owned());
        }
        self.wasm_ids
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(spec)
            .cloned()
    }

    /// The answer to `hello`'s handshake at protocol `version` from client
    /// `client` (a connection); the completions of engine calls made for
    /// that client go to `client_model` from now on when it offers one,
    /// else to the configured provider's model, else nowhere (an engine's
    /// `host.complete` is `unavailable`; its `host.summarize` falls back to
    /// the host's summarizer). Other clients keep their own.
    pub fn hello(
        &self,
        version: u64,
        client: u64,
        client_model: Option<super::reverse::ClientCompletions>,
    ) -> Value {
        let model: Arc<dyn crate::provider::completion::ModelCompletions> =
            match (client_model, self.runtime.config().provider.completions()) {
                (Some(client_model), _) => Arc::new(client_model),
                (None, Some(provider)) => provider,
                (None, None) => Arc::new(NoModel(
                    "the client offers no model (protocol 2's `complete` capability) and no [provider] is configured".into(),
                )),
            };
        self.runtime.completions().set_client_model(client, model);
        json!({
            "protocol": version,
            "capabilities": if version >= 2 { json!(["complete", "tools"]) } else { json!([]) },
            "protocols": super::protocol::SUPPORTED_PROTOCOLS,
            "server": "ctxbox",
            "version": env!("CARGO_PKG_VERSION"),
            "defaultEngine": self.default_engine,
            "engines": self.engine_ids(),
            "callTimeoutMs": self.runtime.config().sandbox.call_timeout_ms,
        })
    }

    fn engine_ids(&self) -> Vec<String> {
        let mut ids: Vec<String> = self
            .runtime
            .engines()
            .registry()
            .ids()
            .into_iter()
            .map(|(id, _)| id)
            .collect();
        ids.sort();
        ids
    }

    /// Runs `method` with `params` (taken over: the text is dropped as soon
    /// as it is read) for client `client`'s request `request_id`; `abort` is
    /// cancelled when the client cancels the request or its deadline passes.
    pub async fn call(
        &self,
        method: &str,
        params_value: Box<serde_json::value::RawValue>,
        abort: CancellationToken,
        client: u64,
        request_id: String,
    ) -> Result<Answer, ProtocolError> {
        let call = CallOptions::with_abort(abort)
            .serving(request_id)
            .for_client(client);
        let answer = match method {
            "health" => self.health(),
            "info" => {
                let args: EngineArg = params(&params_value)?;
                let engine = self.engine(args.engine.as_deref()).await?;
                let info = engine.info();
                Ok(json!({
                    "selected": engine.selected_id(),
                    "serving": engine.serving_id(),
                    "info": {
                        "id": info.id,
                        "name": info.name,
                        "version": info.version,
                        "ownsCompaction": info.owns_compaction,
                        "acceptedHostParams": info.accepted_host_params,
                        "turnMaintenanceMode": info.turn_maintenance_mode,
                    },
                }))
            }
            "bootstrap" => self.bootstrap(&call, params(&params_value)?).await,
            "ingest" | "ingestBatch" => self.ingest(&call, with(params_value)?).await,
            "assemble" => return self.assemble(&call, with(params_value)?).await,
            "commitTurn" => self.commit_turn(&call, with(params_value)?).await,
            "afterTurn" => self.after_turn(&call, with(params_value)?).await,
            "maintain" => self.maintain(&call, with(params_value)?).await,
            "compact" => self.compact(&call, with(params_value)?).await,
            "prepareSubagentSpawn" => self.prepare_spawn(&call, params(&params_value)?).await,
            "rollbackSubagentSpawn" => {
                let args: RollbackArgs = params(&params_value)?;
                let engine = self.engine(args.engine.as_deref()).await?;
                engine
                    .rollback_subagent_spawn(&call, &args.preparation_id)
                    .await
                    .map_err(|failure| engine_error(&call, failure))?;
                Ok(json!({}))
            }
            "subagentEnded" => {
                let args: EndedArgs = params(&params_value)?;
                let engine = self.engine(args.engine.as_deref()).await?;
                engine
                    .on_subagent_ended(&call, &args.child_session_key, args.reason)
                    .await
                    .map_err(|failure| engine_error(&call, failure))?;
                Ok(json!({}))
            }
            "tools" => {
                let args: EngineArg = params(&params_value)?;
                self.tools(&call, args.engine.as_deref()).await
            }
            "callTool" => self.call_tool(&call, params(&params_value)?).await,
            "closeSession" => {
                let target: Target = params(&params_value)?;
                let engine = self.engine(target.engine.as_deref()).await?;
                engine.close_session(&target.session_id).await;
                let closed = self.sessions.remove(&target.session_id);
                self.heap.freed();
                Ok(json!({ "closed": closed }))
            }
            other => Err(ProtocolError::new(
                ErrorCode::UnknownMethod,
                format!("no method `{other}`"),
            )),
        };
        answer.map(Answer::from)
    }

    fn health(&self) -> Result<Value, ProtocolError> {
        Ok(json!({
            "protocol": PROTOCOL_VERSION,
            "uptimeMs": self.started.elapsed().as_millis() as u64,
            "sessions": self.sessions.len(),
            "releasedSessions": self.released.load(Ordering::Relaxed),
            "warmInstances": self.runtime.engines().sandbox().live_instances(),
            "engines": self.engine_ids(),
            "quarantined": self.runtime.engines().quarantine().list(),
        }))
    }

    /// The guarded engine `spec` names (a registered id or a `.wasm` file,
    /// registered on first use), or the default.
    pub(super) async fn engine(
        &self,
        spec: Option<&str>,
    ) -> Result<Arc<GuardedEngine>, ProtocolError> {
        let Some(spec) = spec.or(self.default_engine.as_deref()) else {
            return Err(ProtocolError::invalid(
                "no `engine` given and the server has no default (`ctxbox serve --engine`)",
            ));
        };
        let id = self.engine_id(spec)?;
        Ok(self.runtime.select(Some(&id)).await)
    }

    fn engine_id(&self, spec: &str) -> Result<String, ProtocolError> {
        if let Some(id) = self.known_engine_id(spec) {
            return Ok(id);
        }
        let registry = self.runtime.engines().registry();
        let mut known = self.wasm_ids.lock().unwrap_or_else(PoisonError::into_inner);
        // Another request may have registered it since.
        if let Some(id) = known.get(spec) {
            return Ok(id.clone());
        }
        let path = Path::new(spec);
        if !(spec.ends_with(".wasm") && path.is_file()) {
            return Err(ProtocolError::new(
                ErrorCode::UnknownEngine,
                format!(
                    "no engine `{spec}`: not registered ({}) and not a .wasm file",
                    self.engine_ids().join(", ")
                ),
            ));
        }
        let id = path
            .file_stem()
            .map(|stem| stem.to_string_lossy().replace('_', "-"))
            .unwrap_or_else(|| spec.to_owned());
        registry
            .plugin(SERVE_OWNER)
            .register(
                &id,
                EngineFactory::WasmFile(path.to_owned()),
                RegisterOptions::default(),
            )
            .map_err(|error| {
                ProtocolError::new(
                    ErrorCode::UnknownEngine,
                    format!("cannot register `{spec}` as `{id}`: {error}"),
                )
            })?;
        known.insert(spec.to_owned(), id.clone());
        Ok(id)
    }

    /// Locks the target's session, held for `engine`, takes its lease
    /// (with a shared store: no other host works on it until the request
    /// ends) and applies its `sync`.
    async fn open(
        &self,
        target: &mut Target,
        engine: &Arc<GuardedEngine>,
    ) -> Result<OpenSession, ProtocolError> {
        if target.session_id.trim().is_empty() {
            return Err(ProtocolError::invalid("`sessionId` is empty"));
        }
        let (held, released) = self.sessions.hold(&target.session_id, engine);
        self.close_released(released);
        let mut history = held.lock_owned().await;
        let lease = self
            .leases
            .acquire(&target.session_id)
            .await
            .map_err(|error| match error {
                LeaseError::Busy { .. } => {
                    ProtocolError::new(ErrorCode::SessionBusy, error.to_string())
                }
                LeaseError::Store(_) => ProtocolError::new(ErrorCode::Storage, error.to_string()),
            })?;
        // New to this host (moved here, or given up since): the history
        // the last host stored, so the client need not resend it.
        let fresh = !history.loaded;
        if fresh {
            self.load_history(&mut history, &target.session_id).await?;
        }
        let mut session = OpenSession { history, lease };
        // Taken, not copied: a sync may carry most of a 64 MiB line.
        let Some(sync) = target.sync.take() else {
            return Ok(session);
        };
        let base = sync.base;
        match session
            .history
            .check_base(base, sync.base_digest.as_deref())
        {
            // This host's copy is older than the store's (another host
            // served the session meanwhile): the store's, then the sync.
            Err(mismatch) if mismatch.code == ErrorCode::HistoryMismatch && !fresh => {
                if self.histories.is_none() {
                    return Err(mismatch);
                }
                self.load_history(&mut session.history, &target.session_id)
                    .await?;
            }
            other => other?,
        }
        session.history.sync(sync)?;
        self.store_history(&session, &target.session_id, base)
            .await?;
        Ok(session)
    }

    /// Replaces `history` with the one the shared store holds for
    /// `session_id`, if it holds one (nothing without a shared store).
    async fn load_history(
        &self,
        history: &mut SessionHistory,
        session_id: &str,
    ) -> Result<(), ProtocolError> {
        let Some(stored) = &self.histories else {
            return Ok(());
        };
        let (messages, digests) = stored
            .load(session_id)
            .await
            .map_err(|error| ProtocolError::new(ErrorCode::Storage, error.to_string()))?;
        if !messages.is_empty() {
            history.replace_from(0, Batch::from_store(messages, digests)?);
        }
        history.loaded = true;
        Ok(())
    }

    /// Stores `session`'s history from position `from` on in the shared
    /// store (nothing without one), fenced by its lease.
    async fn store_history(
        &self,
        session: &OpenSession,
        session_id: &str,
        from: usize,
    ) -> Result<(), ProtocolError> {
        let Some(stored) = &self.histories else {
            return Ok(());
        };
        let (messages, digests) = session.history.suffix(from);
        stored
            .write(
                session_id,
                from,
                messages,
                digests,
                session.lease.fence().as_ref(),
            )
            .await
            .map_err(|error| match error {
                HistoryWriteError::LeaseLost(_) => {
                    ProtocolError::new(ErrorCode::SessionBusy, error.to_string())
                }
                HistoryWriteError::Store(_) => {
                    ProtocolError::new(ErrorCode::Storage, error.to_string())
                }
            })
    }

    /// Gives up the sessions idle past `serve.idleSessionSeconds`.
    pub fn release_idle(&self) {
        self.close_released(self.sessions.release_idle(Instant::now()));
    }

    /// How often [`Self::release_idle`] should run, if sessions age out.
    pub fn sweep_interval(&self) -> Option<std::time::Duration> {
        self.sessions.sweep_interval()
    }

    /// Closes given-up sessions' instances in the background (each
    /// `dispose` under the sandbox's dispose deadline), off every request's
    /// path.
    fn close_released(&self, released: Vec<Released>) {
        if released.is_empty() {
            return;
        }
        self.released
            .fetch_add(released.len() as u64, Ordering::Relaxed);
        let heap = self.heap.clone();
        tokio::spawn(async move {
            for session in released {
                for engine in &session.engines {
                    engine.close_session(&session.session_id).await;
                }
            }
            heap.released();
        });
    }

    /// A request's parameters, or an answer once written, of `bytes` were
    /// let go: when large, what they used is given back.
    pub fn memory_freed(&self, bytes: usize) {
        if bytes >= super::heap::LARGE_BYTES {
            self.heap.freed();
        }
    }

    async fn bootstrap(
        &self,
        call: &CallOptions,
        mut target: Target,
    ) -> Result<Value, ProtocolError> {
        let engine = self.engine(target.engine.as_deref()).await?;
        let session = self.open(&mut target, &engine).await?;
        let call = &session.fenced(call);
        let history = session.history();
        let result = engine
            .bootstrap(call, &target.session(), &history)
            .await
            .map_err(|failure| engine_error(call, failure))?;
        Ok(json!({
            "bootstrapped": result.bootstrapped,
            "importedMessages": result.imported_messages,
            "reason": result.reason,
            "length": session.len(),
            "servedBy": engine.served_by(call),
        }))
    }

    async fn ingest(
        &self,
        call: &CallOptions,
        mut args: With<IngestArgs>,
    ) -> Result<Value, ProtocolError> {
        let engine = self.engine(args.target.engine.as_deref()).await?;
        let mut session = self.open(&mut args.target, &engine).await?;
        let call = &session.fenced(call);
        let before = session.len();
        let batch = Batch::from_client(args.own.messages, args.own.digests, before)?;
        let first_new = session.append(batch);
        self.store_history(&session, &args.target.session_id, before)
            .await?;
        let history = session.history();
        let result = engine
            .ingest_batch(
                call,
                &args.target.session(),
                &history.entries()[first_new..],
                args.own.is_heartbeat,
            )
            .await
            .map_err(|failure| engine_error(call, failure))?;
        Ok(json!({
            "ingestedCount": result.ingested_count,
            "length": session.len(),
            "servedBy": engine.served_by(call),
        }))
    }

    async fn assemble(
        &self,
        call: &CallOptions,
        mut args: With<AssembleArgs>,
    ) -> Result<Answer, ProtocolError> {
        let engine = self.engine(args.target.engine.as_deref()).await?;
        let session = self.open(&mut args.target, &engine).await?;
        let call = &session.fenced(call);
        let history = session.history();
        let own = args.own;
        let by_reference = match own.answer.as_deref() {
            None | Some("messages") => false,
            Some("ranges") => true,
            Some(other) => {
                return Err(ProtocolError::invalid(format!(
                    "`answer` is `messages` or `ranges`, not `{other}`"
                )));
            }
        };
        let assemble = AssembleParams {
            token_budget: own.token_budget,
            available_tools: own.available_tools,
            citations_mode: own.citations_mode,
            model: own.model,
            prompt: own.prompt,
            runtime_settings: own.runtime_settings.map(|value| value.to_string()),
        };
        let result = engine
            .assemble(call, &args.target.session(), &history, &assemble)
            .await
            .map_err(|failure| engine_error(call, failure))?;
        let prompt = if by_reference {
            session.ranges(&result.items)
        } else {
            session.materialize(&result.items)
        };
        let (prompt, served_by) = match prompt {
            Ok(prompt) => (prompt, engine.served_by(call)),
            Err(why) => {
                tracing::warn!(engine = engine.selected_id(), %why, "assembled prompt cannot be encoded; passing history through");
                let all = if by_reference {
                    vec![raw_json(&json!({ "keep": [0, session.len()] }))]
                } else {
                    session.raw()
                };
                (all, "pass-through".to_owned())
            }
        };
        let answer = json!({
            "estimatedTokens": result.estimated_tokens,
            "systemPromptAddition": result.system_prompt_addition,
            "length": session.len(),
            "servedBy": served_by,
        });
        let key = if by_reference { "items" } else { "messages" };
        Ok(Answer::with_list(answer, key, prompt))
    }

    async fn commit_turn(
        &self,
        call: &CallOptions,
        mut args: With<CommitArgs>,
    ) -> Result<Value, ProtocolError> {
        let own = args.own;
        if own.advancement_key.trim().is_empty() {
            return Err(ProtocolError::invalid("`advancementKey` is empty"));
        }
        let engine = self.engine(args.target.engine.as_deref()).await?;
        let mut session = self.open(&mut args.target, &engine).await?;
        // A session this host does not hold (never sent, given up, or the
        // server restarted) would reach the engine's after-turn as this turn
        // alone: refused before anything is stored, so the client's resend
        // with its history commits the turn.
        if !session.is_known() {
            return Err(ProtocolError::new(
                ErrorCode::SessionUnknown,
                "the server does not hold this session (never sent, given up idle or over \
                 `serve.maxSessions`, or the server restarted); nothing was committed: \
                 resend the session's history with a `sync` and commit again",
            )
            .with_data(json!({ "length": session.len() })));
        }
        let call = &session.fenced(call);
        // Read and checked before anything is stored, so a bad message is
        // not committed (named by its place in the turn).
        let batch = Batch::from_client(own.messages, own.digests, 0)?;
        // Past its deadline (or cancelled) before anything is written: not
        // committed, and the client is told so.
        if call.abort.is_cancelled() {
            return Err(ProtocolError::new(
                ErrorCode::DeadlineExceeded,
                "the turn was not committed: the request ran out of time before it could be",
            ));
        }
        // The store waits for its disk (or database): off the async workers.
        // The batch goes along and comes back: never copied. A shared store
        // keeps the turn's messages as the session's history in the same
        // transaction, so the next host to serve it need not be resent them.
        let commits = self.commits.clone();
        let (key, session_id) = (own.advancement_key, args.target.session_id.clone());
        let fence = call.write_fence.clone();
        let from = session.len();
        let (status, batch) = tokio::task::spawn_blocking(move || {
            let tail = HistoryTail {
                from,
                digests: batch.digests(),
            };
            let status = commits.commit_with_history(
                &key,
                &session_id,
                batch.messages(),
                Some(tail),
                fence.as_ref(),
            );
            (status, batch)
        })
        .await
        .map_err(|error| {
            ProtocolError::new(
                ErrorCode::Internal,
                format!("the commit task failed: {error}"),
            )
        })?;
        let status = status.map_err(|error| match error {
            // Another host serves the session now: the client retries there.
            CommitError::LeaseLost(_) => {
                ProtocolError::new(ErrorCode::SessionBusy, error.to_string())
            }
            _ => ProtocolError::new(ErrorCode::Storage, error.to_string()),
        })?;
        if status == CommitStatus::Duplicate {
            return Ok(json!({ "status": status, "length": session.len() }));
        }
        let before = session.history().len() as u32;
        let first_new = session.append(batch);
        let reference = args.target.session();
        let history = session.history();
        // The turn is durable now; the engine's hearing of it goes through
        // the guard like every call, so it cannot undo the commit. How it
        // went is in the answer's `afterTurn` (`EngineHearing`).
        let mut hearing = EngineHearing::Done;
        if let Err(failure) = engine
            .ingest_batch(
                call,
                &reference,
                &history.entries()[first_new..],
                own.is_heartbeat,
            )
            .await
        {
            hearing = hearing.and(&failure);
            tracing::warn!(%failure, "a committed turn's ingest failed");
        }
        let after = AfterTurnParams {
            pre_prompt_message_count: before,
            token_budget: own.token_budget,
            is_heartbeat: own.is_heartbeat,
            runtime_context: None,
            runtime_settings: None,
        };
        if let Err(failure) = engine.after_turn(call, &reference, &history, &after).await {
            hearing = hearing.and(&failure);
            tracing::warn!(%failure, "a committed turn's after-turn failed");
        }
        Ok(json!({
            "status": status,
            "length": session.len(),
            "servedBy": engine.served_by(call),
            "afterTurn": hearing.as_str(),
        }))
    }

    async fn after_turn(
        &self,
        call: &CallOptions,
        mut args: With<AfterTurnArgs>,
    ) -> Result<Value, ProtocolError> {
        let engine = self.engine(args.target.engine.as_deref()).await?;
        let session = self.open(&mut args.target, &engine).await?;
        let call = &session.fenced(call);
        let history = session.history();
        let own = args.own;
        let after = AfterTurnParams {
            pre_prompt_message_count: own.pre_prompt_message_count,
            token_budget: own.token_budget,
            is_heartbeat: own.is_heartbeat,
            runtime_context: own.runtime_context.map(|context| context.to_string()),
            runtime_settings: own.runtime_settings.map(|value| value.to_string()),
        };
        engine
            .after_turn(call, &args.target.session(), &history, &after)
            .await
            .map_err(|failure| engine_error(call, failure))?;
        Ok(json!({ "length": session.len(), "servedBy": engine.served_by(call) }))
    }

    async fn maintain(
        &self,
        call: &CallOptions,
        mut args: With<MaintainArgs>,
    ) -> Result<Value, ProtocolError> {
        let engine = self.engine(args.target.engine.as_deref()).await?;
        let session = self.open(&mut args.target, &engine).await?;
        let call = &CallOptions {
            deferred_compaction: args.own.runtime_context.as_ref().is_some_and(|context| {
                context["allowDeferredCompactionExecution"] == Value::Bool(true)
            }),
            ..session.fenced(call)
        };
        let history = session.history();
        let context = args.own.runtime_context.map(|context| context.to_string());
        let result = engine
            .maintain(
                call,
                &args.target.session(),
                &history,
                args.own.reason.unwrap_or(MaintainReason::Turn),
                context.as_deref(),
            )
            .await
            .map_err(|failure| engine_error(call, failure))?;
        Ok(json!({
            "changed": result.changed,
            "bytesFreed": 0,
            "rewrittenEntries": result.rewritten_entries,
            "reason": result.reason,
            "servedBy": engine.served_by(call),
        }))
    }

    async fn compact(
        &self,
        call: &CallOptions,
        mut args: With<CompactArgs>,
    ) -> Result<Value, ProtocolError> {
        let engine = self.engine(args.target.engine.as_deref()).await?;
        let session = self.open(&mut args.target, &engine).await?;
        let call = &session.fenced(call);
        let history = session.history();
        let own = args.own;
        let compact = CompactParams {
            token_budget: own.token_budget,
            force: own.force,
            current_token_count: own.current_token_count,
            compaction_target: own.compaction_target.unwrap_or_default(),
            custom_instructions: own.custom_instructions,
            runtime_settings: own.runtime_settings.map(|value| value.to_string()),
            runtime_context: own.runtime_context.map(|value| value.to_string()),
        };
        let result = engine
            .compact(call, &args.target.session(), &history, &compact)
            .await
            .map_err(|failure| engine_error(call, failure))?;
        let details = result
            .details
            .as_deref()
            .and_then(|text| serde_json::from_str::<Value>(text).ok());
        // A failed compaction says what kind of failure it is and what the
        // user can do, as the reference surfaces it.
        let failure = (!result.ok).then(|| {
            json!({
                "kind": "compaction_failure",
                "hint": crate::runner::COMPACTION_FAILURE_HINT,
            })
        });
        Ok(json!({
            "ok": result.ok,
            "compacted": result.compacted,
            "reason": result.reason,
            "failure": failure,
            "result": {
                "summary": result.summary,
                "firstKeptEntryId": result.first_kept_entry_id,
                "tokensBefore": result.tokens_before,
                "tokensAfter": result.tokens_after,
                "details": details,
            },
            "servedBy": engine.served_by(call),
        }))
    }

    async fn prepare_spawn(
        &self,
        call: &CallOptions,
        args: SpawnArgs,
    ) -> Result<Value, ProtocolError> {
        let engine = self.engine(args.engine.as_deref()).await?;
        let spawn = SubagentSpawn {
            parent_session_key: args.parent_session_key,
            child_session_key: args.child_session_key,
            context_mode: args.context_mode.unwrap_or(ContextMode::Isolated),
            ttl_ms: args.ttl_ms,
        };
        let preparation = engine
            .prepare_subagent_spawn(call, &spawn)
            .await
            .map_err(|failure| engine_error(call, failure))?;
        Ok(json!({ "preparationId": preparation }))
    }
}

/// A session a request works on: its history, locked in this host, and its
/// lease, held until the request ends.
struct OpenSession {
    history: tokio::sync::OwnedMutexGuard<SessionHistory>,
    lease: Lease,
}

impl OpenSession {
    /// `call`, its writes fenced by this session's lease (a shared store's:
    /// refused once another host took the session over).
    fn fenced(&self, call: &CallOptions) -> CallOptions {
        call.clone().fenced_by(self.lease.fence())
    }
}

impl std::ops::Deref for OpenSession {
    type Target = SessionHistory;

    fn deref(&self) -> &SessionHistory {
        &self.history
    }
}

impl std::ops::DerefMut for OpenSession {
    fn deref_mut(&mut self) -> &mut SessionHistory {
        &mut self.history
    }
}

/// A failed engine call as the protocol reports it: a cancelled call as
/// `cancelled`, anything else the guard reported as `engine-failed`.
fn engine_error(call: &CallOptions, failure: EngineFailure) -> ProtocolError {
    if call.abort.is_cancelled() {
        return ProtocolError::new(ErrorCode::Cancelled, failure.to_string());
    }
    if failure.kind == FailureKind::Overloaded {
        return ProtocolError::new(ErrorCode::Overloaded, failure.to_string());
    }
    if failure.kind == FailureKind::LeaseLost {
        // Another host serves the session now: the client retries there.
        return ProtocolError::new(ErrorCode::SessionBusy, failure.to_string());
    }
    ProtocolError::new(ErrorCode::EngineFailed, failure.to_string())
}
