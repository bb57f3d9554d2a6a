//! The guard (ARCHITECTURE.md §5, "Guard semantics"): wraps the selected engine so a
//! misbehaving plugin never fails an agent turn.
//!
//! Around every call it projects the host-added parameters the engine did not
//! ask for, validates answers from non-core engines, and on failure
//! quarantines the engine (except for a caller abort, a full pool and a
//! first stop at the deadline notice, see [`crate::engines::conduct`]) and
//! falls back:
//! `ingest`, `ingest-batch`, `assemble`, `after-turn`, `bootstrap` and
//! `maintain` are retried on `legacy` in the same call; `compact` answers
//! `ok: false` and `prepare-subagent-spawn` an error for that call; later
//! calls go to `legacy`. In strict mode a failure fails the call instead.
//! Who answered each call is written into its `CallOptions::served_by`.
//!
//! Every decision (a fallback, a quarantine, a report, a recovery) is one
//! [`GuardEvent`] and one `tracing` event (`engine call guarded`) with the
//! engine id, owner, session, operation, classification and reason. A failed
//! resolution is reported with the first call it affects, so it too names a
//! session.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

use async_trait::async_trait;
use serde::Serialize;

use crate::contract::engine::{
    CallOptions, CommitRefusal, ContextEngine, EngineResult, HeldWrites,
};
use crate::contract::failure::{EngineFailure, FailureKind, Operation};
use crate::contract::history::History;
use crate::contract::tools::EngineTool;
use crate::contract::types::{
    AfterTurnParams, AssembleParams, AssembleResult, BootstrapResult, CompactParams, CompactResult,
    EngineInfo, HostParam, IngestBatchResult, IngestResult, MaintainReason, MaintainResult,
    MessageEntry, SessionRef, SubagentEndReason, SubagentSpawn,
};
use crate::contract::validate::{self, Violation};
use crate::engines::conduct::STOPS_THAT_QUARANTINE;
use crate::engines::observe::{CallObservers, CallOutcome};
use crate::engines::quarantine::QuarantineStore;
use crate::engines::registry::Owner;

/// What the guard did about a call, for the caller's reports.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct GuardEvent {
    /// The selected engine.
    pub engine_id: String,
    /// Its owner.
    pub owner: String,
    /// The session of the call, if any.
    pub session_id: Option<String>,
    /// The operation.
    pub operation: Operation,
    /// What happened.
    pub action: GuardAction,
    /// How the engine failed (`timeout`, `panic`, …).
    pub classification: FailureKind,
    /// Why, in words.
    pub reason: String,
}

/// A guard decision.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum GuardAction {
    /// The engine was quarantined and the call served by `legacy`.
    FellBack,
    /// The engine was quarantined and the call reported as failed
    /// (`compact`, `prepare-subagent-spawn`, or strict mode).
    Reported,
    /// The caller aborted: nothing quarantined, the call reported as aborted.
    Aborted,
    /// No instance slot was free (the host could not admit the engine): the
    /// call failed `overloaded` for the caller to retry, as the reference's
    /// host admission failure does; nothing quarantined, and no other
    /// engine served it in the engine's place.
    Overloaded,
    /// A quarantined engine answered again after its back-off and was
    /// cleared.
    Recovered,
    /// The caller's parameters left the engine no answer the host could
    /// use (a token budget under what any minimal answer needs): the call
    /// was served by `legacy` (reported, in strict mode), nothing
    /// quarantined.
    Declined,
    /// The engine stopped within its deadline notice, as `host.aborted()`
    /// asked, without an answer, and its previous call had answered in
    /// time: the call was served by `legacy` (reported, for `compact` and
    /// in strict mode), nothing quarantined. A second stop in a row is a
    /// failure ([`crate::engines::conduct`]).
    Stopped,
    /// Another host took the session's lease over before the call's writes
    /// were committed: they were refused and the call failed for the caller
    /// to retry; nothing quarantined.
    LeaseLost,
}

impl GuardAction {
    /// The kebab-case name used in reports and logs.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::FellBack => "fell-back",
            Self::Reported => "reported",
            Self::Aborted => "aborted",
            Self::Overloaded => "overloaded",
            Self::Recovered => "recovered",
            Self::Declined => "declined",
            Self::Stopped => "stopped",
            Self::LeaseLost => "lease-lost",
        }
    }
}

/// Which registered engine a guard stands for.
#[derive(Debug, Clone)]
pub struct Selected {
    /// The registered id.
    pub id: String,
    /// Who registered it.
    pub owner: Owner,
    /// Its artifact's fingerprint, recorded with a quarantine.
    pub fingerprint: Option<String>,
}

/// How the guard treats failures.
#[derive(Debug, Clone, Copy, Default)]
pub struct GuardPolicy {
    /// Fail the call instead of falling back to `legacy`.
    pub strict: bool,
}

/// An engine behind the guard, with `legacy` to fall back on.
pub struct GuardedEngine {
    id: String,
    owner: Owner,
    fingerprint: Option<String>,
    primary: Option<Arc<dyn ContextEngine>>,
    /// Why there is no primary (resolution failed), for strict mode.
    unavailable: Option<EngineFailure>,
    /// Whether the fallback from a failed resolution has been reported (with
    /// the first call it served, which names the session).
    announced: AtomicBool,
    legacy: Arc<dyn ContextEngine>,
    quarantine: Arc<QuarantineStore>,
    policy: GuardPolicy,
    events: Mutex<Vec<GuardEvent>>,
    /// Calls `legacy` served in place of the selected engine.
    served_by_legacy: AtomicU64,
    /// Who hears of each call.
    observers: Arc<CallObservers>,
}

type Pending<'a, T> = Pin<Box<dyn Future<Output = EngineResult<T>> + Send + 'a>>;

/// What to do with a call when the selected engine fails it.
enum OnFailure<T> {
    /// Serve the same call with `legacy`.
    Retry,
    /// Answer what this makes of the failure instead (e.g. `ok: false`
    /// with the engine's reason).
    Answer(fn(&EngineFailure) -> T),
    /// Report the failure as the call's error.
    Fail,
}

impl GuardedEngine {
    /// Guards `primary`, the engine `selected` names.
    pub fn new(
        selected: Selected,
        primary: Arc<dyn ContextEngine>,
        legacy: Arc<dyn ContextEngine>,
        quarantine: Arc<QuarantineStore>,
        policy: GuardPolicy,
    ) -> Self {
        Self::build(selected, Some(primary), None, legacy, quarantine, policy)
    }

    /// Stands in for the engine `selected` names, which could not be made
    /// (`failure`): every call goes to `legacy` (or fails, in strict mode),
    /// except when the host could not admit it (`overloaded`: no free
    /// instance slot), where every call is refused `overloaded` and `legacy`
    /// answers none.
    pub fn unavailable(
        selected: Selected,
        failure: EngineFailure,
        legacy: Arc<dyn ContextEngine>,
        quarantine: Arc<QuarantineStore>,
        policy: GuardPolicy,
    ) -> Self {
        Self::build(selected, None, Some(failure), legacy, quarantine, policy)
    }

    /// Just `legacy`, selected on purpose: nothing to guard.
    pub fn legacy_only(legacy: Arc<dyn ContextEngine>, quarantine: Arc<QuarantineStore>) -> Self {
        let selected = Selected {
            id: legacy.info().id.clone(),
            owner: Owner::Core,
            fingerprint: None,
        };
        Self::build(
            selected,
            None,
            None,
            legacy,
            quarantine,
            GuardPolicy::default(),
        )
    }

    fn build(
        selected: Selected,
        primary: Option<Arc<dyn ContextEngine>>,
        unavailable: Option<EngineFailure>,
        legacy: Arc<dyn ContextEngine>,
        quarantine: Arc<QuarantineStore>,
        policy: GuardPolicy,
    ) -> Self {
        Self {
            id: selected.id,
            owner: selected.owner,
            fingerprint: selected.fingerprint,
            primary,
            unavailable,
            announced: AtomicBool::new(false),
            legacy,
            quarantine,
            policy,
            events: Mutex::new(Vec::new()),
            served_by_legacy: AtomicU64::new(0),
            observers: Arc::default(),
        }
    }

    /// The selected engine's id (which may be quarantined).
    pub fn selected_id(&self) -> &str {
        &self.id
    }

    /// Whether calls go to the selected engine now: it is not quarantined and
    /// could be made (always, when `legacy` itself was selected).
    pub fn serving_selected(&self) -> bool {
        !self.primary_was_wanted() || self.active_primary().is_some()
    }

    /// The engine that serves calls now: the selected one, or `legacy`.
    pub fn serving_id(&self) -> &str {
        match self.active_primary() {
            Some(_) => &self.id,
            None => &self.legacy.info().id,
        }
    }

    /// Why the selected engine could not be made, if it could not (every
    /// call then goes to `legacy`, or fails in strict mode).
    pub fn resolution_failure(&self) -> Option<&EngineFailure> {
        self.unavailable.as_ref()
    }

    /// How many calls `legacy` has served in place of the selected engine:
    /// after its failure, while it was quarantined or could not be made, or
    /// because no instance slot was free (none when `legacy` was selected).
    pub fn calls_served_by_legacy(&self) -> u64 {
        self.served_by_legacy.load(Ordering::Relaxed)
    }

    /// Takes the decisions made since the last call.
    pub fn take_events(&self) -> Vec<GuardEvent> {
        std::mem::take(&mut *self.events.lock().unwrap_or_else(PoisonError::into_inner))
    }

    fn active_primary(&self) -> Option<&Arc<dyn ContextEngine>> {
        self.primary
            .as_ref()
            .filter(|_| !self.quarantine.is_blocked(&self.id))
    }

    /// Validation applies to everything the host did not write itself.
    fn validates(&self) -> bool {
        self.owner != Owner::Core
    }

    fn accepts(&self, param: HostParam) -> bool {
        self.primary
            .as_ref()
            .is_some_and(|primary| primary.info().accepts(param))
    }

    fn project_session(&self, session: &SessionRef) -> SessionRef {
        SessionRef {
            session_key: session
                .session_key
                .clone()
                .filter(|_| self.accepts(HostParam::SessionKey)),
            ..session.clone()
        }
    }

    fn project_context(&self, context: &Option<String>) -> Option<String> {
        context
            .clone()
            .filter(|_| self.accepts(HostParam::RuntimeContext))
    }

    fn project_settings(&self, settings: &Option<String>) -> Option<String> {
        settings
            .clone()
            .filter(|_| self.accepts(HostParam::RuntimeSettings))
    }

    /// Runs `call` on the selected engine; on failure records what happened
    /// and applies `on_failure`. `legacy` is the same call on `legacy`: it
    /// serves when there is no usable selected engine, and after a failure
    /// when `on_failure` says to retry. In strict mode a plugin that cannot
    /// serve fails the call instead.
    /// Each call is reported to the host's
    /// [`CallObserver`](crate::engines::observe::CallObserver), if it has one.
    #[allow(clippy::too_many_arguments)]
    async fn guard<'a, T: Send + 'a>(
        &'a self,
        operation: Operation,
        session: Option<&'a SessionRef>,
        options: &'a CallOptions,
        call: impl FnOnce(&'a dyn ContextEngine) -> Pending<'a, T>,
        check: impl FnOnce(&T) -> Result<(), Violation>,
        legacy: Pending<'a, T>,
        on_failure: OnFailure<T>,
    ) -> EngineResult<T> {
        let guarded = self.guarded(operation, session, options, call, check, legacy, on_failure);
        let Some(observer) = self.observers.get() else {
            return guarded.await.0;
        };
        let started = Instant::now();
        let (result, outcome) = guarded.await;
        observer.call_done(&self.id, operation, outcome, started.elapsed());
        result
    }

    /// [`Self::guard`]'s work, and how the call ended.
    #[allow(clippy::too_many_arguments)]
    async fn guarded<'a, T: Send + 'a>(
        &'a self,
        operation: Operation,
        session: Option<&'a SessionRef>,
        options: &'a CallOptions,
        call: impl FnOnce(&'a dyn ContextEngine) -> Pending<'a, T>,
        check: impl FnOnce(&T) -> Result<(), Violation>,
        legacy: Pending<'a, T>,
        on_failure: OnFailure<T>,
    ) -> (EngineResult<T>, CallOutcome) {
        let Some(primary) = self.active_primary() else {
            // The host could not admit the engine at selection: the call
            // fails for the caller to retry, rather than a stateful engine
            // silently missing it.
            if let Some(refusal) = self.admission_refusal(operation) {
                self.announce_resolution_fallback(operation, session, false);
                return (Err(refusal), CallOutcome::Overloaded);
            }
            let strict = self.policy.strict && self.primary_was_wanted();
            self.announce_resolution_fallback(operation, session, strict);
            if strict {
                return (
                    Err(self.strict_refusal(operation)),
                    CallOutcome::Quarantined,
                );
            }
            if !self.primary_was_wanted() {
                return (self.by_legacy(options, legacy).await, CallOutcome::Served);
            }
            self.served_by_legacy.fetch_add(1, Ordering::Relaxed);
            return (self.by_legacy(options, legacy).await, CallOutcome::FellBack);
        };
        // Whether the answer broke a rule only because of what the caller
        // asked (a budget no minimal answer fits): not the engine's failure.
        let mut declined = false;
        let outcome = match call(primary.as_ref()).await {
            // A compaction answered after the caller aborted is not used:
            // the caller has moved on, as the reference's compaction
            // rejects with the abort's reason whatever came back. Its state
            // writes are dropped with it.
            Ok(_) if operation == Operation::Compact && options.abort.is_cancelled() => {
                Err(EngineFailure::new(
                    &self.id,
                    operation,
                    FailureKind::Aborted,
                    "the caller aborted the compaction; the answer given after it is not used",
                ))
            }
            Ok(answer) => match self.validates().then(|| check(&answer)) {
                Some(Err(violation)) => {
                    declined = violation.is_callers_doing();
                    Err(self.invalid_output(operation, &violation, declined))
                }
                // Accepted: the call's state writes become durable now, and
                // only now (a refused answer's are dropped with the slot).
                _ => self.commit_held(operation, options).await.map(|()| answer),
            },
            Err(failure) => Err(failure),
        };
        let failure = match outcome {
            Ok(answer) => {
                options.served_by.set(&self.id);
                self.answered(operation, session);
                return (Ok(answer), CallOutcome::Served);
            }
            Err(failure) => EngineFailure {
                engine_id: self.id.clone(),
                ..failure
            }
            .sanitized(),
        };
        // Once the caller has aborted, whatever the engine does next (being
        // interrupted, or reporting the cancelled host service as an error)
        // is the abort's doing: reported to the caller, never quarantined.
        if options.abort.is_cancelled() {
            let failure = EngineFailure {
                kind: FailureKind::Aborted,
                ..failure
            };
            self.note(&failure, session, GuardAction::Aborted);
            return (Err(failure), CallOutcome::Aborted);
        }
        if failure.kind == FailureKind::Overloaded {
            // Not the engine's failure, and no other engine may answer in
            // its place: the caller retries.
            self.note(&failure, session, GuardAction::Overloaded);
            return (Err(failure), CallOutcome::Overloaded);
        }
        if failure.kind == FailureKind::LeaseLost {
            // Another host took the session over while this one worked on
            // it: its writes were refused, the engine did nothing wrong,
            // and nobody may answer from here.
            self.note(&failure, session, GuardAction::LeaseLost);
            return (Err(failure), CallOutcome::LeaseLost);
        }
        // An engine that stopped because the host said its time was nearly
        // up did what it was asked: its call is served elsewhere, and it
        // keeps serving — once. Stopping again on the next call is a
        // failure like a timeout: each stop cost the caller a full deadline.
        let (stopped, failure) = self.judge_stop(failure);
        // A `compact` the engine itself refuses (an `engine-error`) is an
        // answer, as in the reference: reported, and the next compaction
        // asks the engine again. Its code failing (trap, limits, a bad
        // answer) still quarantines.
        // Likewise a tool that reports an error: the model is told, as of any
        // failed tool.
        let refused = matches!(operation, Operation::Compact | Operation::CallTool)
            && failure.kind == FailureKind::EngineError;
        // The host failed the engine's work (its own store): served
        // elsewhere, the engine not blamed.
        let host_fault = failure.kind == FailureKind::HostFault;
        if !refused && !declined && !stopped && !host_fault {
            self.quarantine_engine(&failure);
        }
        let action = match (&on_failure, self.policy.strict) {
            _ if stopped => GuardAction::Stopped,
            (OnFailure::Retry, false) if declined => GuardAction::Declined,
            (OnFailure::Retry, false) => GuardAction::FellBack,
            _ => GuardAction::Reported,
        };
        self.note(&failure, session, action);
        let outcome = if refused {
            CallOutcome::Refused
        } else if host_fault {
            CallOutcome::FellBack
        } else if matches!(
            failure.kind,
            FailureKind::Timeout | FailureKind::StoppedAtDeadline
        ) {
            CallOutcome::Deadline
        } else {
            CallOutcome::Quarantined
        };
        let result = match on_failure {
            _ if self.policy.strict => Err(failure),
            OnFailure::Retry => {
                self.served_by_legacy.fetch_add(1, Ordering::Relaxed);
                self.by_legacy(options, legacy).await
            }
            OnFailure::Answer(answer) => Ok(answer(&failure)),
            OnFailure::Fail => Err(failure),
        };
        (result, outcome)
    }

    /// `legacy`'s call, noted in the call's options as the one serving it.
    fn by_legacy<'a, T>(&self, options: &CallOptions, legacy: Pending<'a, T>) -> Pending<'a, T> {
        options.served_by.set(&self.legacy.info().id);
        legacy
    }

    /// Whether `failure` is a stop at the deadline notice the engine is
    /// forgiven (its first in a row), and the failure as held against it
    /// otherwise: a repeated stop names how many in a row.
    fn judge_stop(&self, failure: EngineFailure) -> (bool, EngineFailure) {
        if failure.kind != FailureKind::StoppedAtDeadline {
            return (false, failure);
        }
        let stops = self.quarantine.stopped_at_deadline(&self.id);
        if stops < STOPS_THAT_QUARANTINE {
            return (true, failure);
        }
        let message = format!(
            "{stops} calls in a row stopped at the deadline notice without an answer, each costing a full deadline: {}",
            failure.message
        );
        (false, EngineFailure { message, ..failure }.sanitized())
    }

    /// Who answered the last call made with `call`: the engine the guard
    /// noted, else the one serving now.
    pub fn served_by(&self, call: &CallOptions) -> String {
        call.served_by
            .get()
            .unwrap_or_else(|| self.serving_id().to_owned())
    }

    /// Reports this engine's calls to `observers` from now on.
    pub fn observed_by(self, observers: Arc<CallObservers>) -> Self {
        Self { observers, ..self }
    }

    /// `compact`, with `host_check` judging the selected engine's answer,
    /// after the contract's rules, against what the host itself did during
    /// the call (the turn runner checks that a reported rotation is one the
    /// host performed). A violation is the engine's `invalid-output`
    /// failure: quarantine, and the call answers `ok: false`.
    pub async fn compact_checked(
        &self,
        call: &CallOptions,
        session: &SessionRef,
        history: &History,
        params: &CompactParams,
        host_check: impl FnOnce(&CompactResult) -> Result<(), Violation> + Send,
    ) -> EngineResult<CompactResult> {
        let held = Self::holding(call);
        let call = &held;
        let projected_session = self.project_session(session);
        let projected = CompactParams {
            runtime_settings: self.project_settings(&params.runtime_settings),
            runtime_context: self.project_context(&params.runtime_context),
            ..params.clone()
        };
        // After a failure this call reports `ok: false` with the engine's
        // reason; while the engine is quarantined, legacy compacts (it serves
        // the session's prompts then, so the context it compacts is its own)
        // and says so.
        let by_legacy = self.primary_was_wanted() && self.active_primary().is_none();
        let fallback = self.legacy.compact(call, session, history, params);
        let result = self
            .guard(
                Operation::Compact,
                Some(session),
                call,
                |engine| {
                    Box::pin(async move {
                        engine
                            .compact(call, &projected_session, history, &projected)
                            .await
                    })
                },
                |result| validate::check_compact(history, result).and_then(|()| host_check(result)),
                fallback,
                OnFailure::Answer(|failure| {
                    CompactResult::failed(format!(
                        "engine `{}` failed to compact ({}): {}",
                        failure.engine_id,
                        failure.kind.as_str(),
                        failure.message
                    ))
                }),
            )
            .await?;
        Ok(if by_legacy {
            self.compacted_by_legacy(result, session)
        } else {
            result
        })
    }

    /// The `invalid-output` failure of an answer that broke `violation`;
    /// `declined` when it broke it only because of the caller's parameters.
    fn invalid_output(
        &self,
        operation: Operation,
        violation: &Violation,
        declined: bool,
    ) -> EngineFailure {
        let message = if declined {
            format!(
                "not held against the engine: the caller's budget is under the {} tokens a minimal answer may need, and {violation}",
                validate::MIN_ANSWER_BUDGET_TOKENS
            )
        } else {
            violation.to_string()
        };
        EngineFailure::new(&self.id, operation, FailureKind::InvalidOutput, message)
    }

    /// Commits the state writes the selected engine left in the call's
    /// slot (see [`Self::holding`]) once its answer is accepted; a store that
    /// refuses them fails the call, as it would have inside the sandbox.
    async fn commit_held(&self, operation: Operation, options: &CallOptions) -> EngineResult<()> {
        let Some(writes) = options.held_writes.as_ref().and_then(HeldWrites::take) else {
            return Ok(());
        };
        writes.commit().await.map_err(|refusal| {
            let kind = match refusal {
                CommitRefusal::Refused(_) => FailureKind::HostLimit,
                CommitRefusal::LeaseLost(_) => FailureKind::LeaseLost,
                CommitRefusal::HostFault(_) => FailureKind::HostFault,
            };
            EngineFailure::new(&self.id, operation, kind, refusal.to_string())
        })
    }

    /// `call` with a slot for the selected engine's state writes, which
    /// [`Self::guard`] commits only after it accepted the answer.
    fn holding(call: &CallOptions) -> CallOptions {
        CallOptions {
            held_writes: Some(HeldWrites::default()),
            ..call.clone()
        }
    }

    /// Holds against the selected engine an answer the host found broken
    /// only after using it (a compaction whose claim its next prompt
    /// contradicts): an `invalid-output` failure of `operation` for `reason` —
    /// quarantine, one guard event, and `legacy` serves from now on. Only
    /// an engine serving now and not the host's own can be blamed; answers
    /// whether it was.
    pub fn blame(&self, operation: Operation, session: &SessionRef, reason: &str) -> bool {
        if !self.validates() || self.active_primary().is_none() {
            return false;
        }
        let failure =
            EngineFailure::new(&self.id, operation, FailureKind::InvalidOutput, reason).sanitized();
        self.quarantine_engine(&failure);
        self.note(&failure, Some(session), GuardAction::FellBack);
        true
    }

    /// Whether a plugin was selected (as opposed to `legacy` on purpose).
    fn primary_was_wanted(&self) -> bool {
        self.primary.is_some() || self.unavailable.is_some()
    }

    fn strict_refusal(&self, operation: Operation) -> EngineFailure {
        let base = match (&self.unavailable, self.quarantine.get(&self.id)) {
            (Some(failure), _) => failure.clone(),
            (None, Some(record)) => EngineFailure::from(&record),
            (None, None) => {
                EngineFailure::new(&self.id, operation, FailureKind::Load, "unavailable")
            }
        };
        EngineFailure {
            operation,
            message: format!("strict mode: {}", base.message),
            ..base
        }
        .sanitized()
    }

    /// Persists the quarantine of `failure`; the decision's one event is
    /// [`Self::note`]'s.
    fn quarantine_engine(&self, failure: &EngineFailure) {
        let owner = self.owner.to_string();
        if let Err(error) = self
            .quarantine
            .record(&owner, self.fingerprint.as_deref(), failure)
        {
            tracing::error!(
                engine = %failure.engine_id,
                owner,
                %error,
                "cannot persist a quarantine record; the engine stays in use"
            );
        }
    }

    /// The failure every call answers while the host could not admit the
    /// engine at selection (no free instance slot), for `operation`.
    fn admission_refusal(&self, operation: Operation) -> Option<EngineFailure> {
        let failure = self.unavailable.as_ref()?;
        (failure.kind == FailureKind::Overloaded).then(|| EngineFailure {
            operation,
            message: format!(
                "{} (the host could not admit the engine when it was selected; retry)",
                failure.message
            ),
            ..failure.clone()
        })
    }

    /// The first call served without the selected engine because resolving
    /// it failed reports that fallback, once, with its session.
    fn announce_resolution_fallback(
        &self,
        operation: Operation,
        session: Option<&SessionRef>,
        strict: bool,
    ) {
        let Some(failure) = &self.unavailable else {
            return;
        };
        if self.announced.swap(true, Ordering::Relaxed) {
            return;
        }
        let action = if strict {
            GuardAction::Reported
        } else if failure.kind == FailureKind::Overloaded {
            GuardAction::Overloaded
        } else {
            GuardAction::FellBack
        };
        let failure = EngineFailure {
            message: format!(
                "{} (while resolving the engine, before this {operation} call)",
                failure.message
            ),
            ..failure.clone()
        }
        .sanitized();
        self.note(&failure, session, action);
    }

    /// Reports a compaction `legacy` made in place of the quarantined (or
    /// unavailable) selected engine, in its result and as a guard event.
    fn compacted_by_legacy(&self, result: CompactResult, session: &SessionRef) -> CompactResult {
        let why = self
            .quarantine
            .get(&self.id)
            .map(|record| EngineFailure::from(&record))
            .or_else(|| self.unavailable.clone())
            .unwrap_or_else(|| {
                EngineFailure::new(
                    &self.id,
                    Operation::Compact,
                    FailureKind::Load,
                    "unavailable",
                )
            });
        let note = format!(
            "compacted by legacy: engine `{}` is quarantined ({}: {})",
            self.id,
            why.kind.as_str(),
            why.message
        );
        let failure = EngineFailure {
            operation: Operation::Compact,
            message: note.clone(),
            ..why
        }
        .sanitized();
        self.note(&failure, Some(session), GuardAction::FellBack);
        CompactResult {
            reason: Some(match result.reason {
                Some(reason) => format!("{}; {reason}", failure.message),
                None => failure.message,
            }),
            ..result
        }
    }

    /// The selected engine answered in time: a quarantined one (retried
    /// after its back-off) whose good run is now long enough is cleared.
    fn answered(&self, operation: Operation, session: Option<&SessionRef>) {
        let run = match self.quarantine.answered(&self.id) {
            Ok(Some(run)) => run,
            Ok(None) => return,
            Err(error) => {
                tracing::error!(engine = %self.id, %error, "cannot clear a quarantine record");
                return;
            }
        };
        let failure = EngineFailure::new(
            &self.id,
            operation,
            FailureKind::Load,
            format!(
                "answered {} calls in a row over {} s after its back-off",
                run.calls,
                run.span_ms / 1_000
            ),
        );
        self.note(&failure, session, GuardAction::Recovered);
    }

    /// Records a decision and emits its one tracing event, with engine id,
    /// owner, session, operation, classification and reason.
    fn note(&self, failure: &EngineFailure, session: Option<&SessionRef>, action: GuardAction) {
        let event = GuardEvent {
            engine_id: failure.engine_id.clone(),
            owner: self.owner.to_string(),
            session_id: session.map(|session| session.session_id.clone()),
            operation: failure.operation,
            action,
            classification: failure.kind,
            reason: failure.message.clone(),
        };
        tracing::warn!(
            engine = %event.engine_id,
            owner = %event.owner,
            session = event.session_id.as_deref().unwrap_or(""),
            operation = event.operation.as_str(),
            classification = event.classification.as_str(),
            reason = %event.reason,
            action = event.action.as_str(),
            "engine call guarded"
        );
        self.events
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(event);
    }
}

fn no_check<T>(_: &T) -> Result<(), Violation> {
    Ok(())
}

#[async_trait]
impl ContextEngine for GuardedEngine {
    fn info(&self) -> &EngineInfo {
        match self.active_primary() {
            Some(primary) => primary.info(),
            None => self.legacy.info(),
        }
    }

    async fn bootstrap(
        &self,
        call: &CallOptions,
        session: &SessionRef,
        history: &History,
    ) -> EngineResult<BootstrapResult> {
        let held = Self::holding(call);
        let call = &held;
        let projected = self.project_session(session);
        let fallback = self.legacy.bootstrap(call, session, history);
        self.guard(
            Operation::Bootstrap,
            Some(session),
            call,
            |engine| Box::pin(async move { engine.bootstrap(call, &projected, history).await }),
            no_check,
            fallback,
            OnFailure::Retry,
        )
        .await
    }

    async fn ingest(
        &self,
        call: &CallOptions,
        session: &SessionRef,
        entry: &MessageEntry,
        is_heartbeat: bool,
    ) -> EngineResult<IngestResult> {
        let held = Self::holding(call);
        let call = &held;
        let projected = self.project_session(session);
        let fallback = self.legacy.ingest(call, session, entry, is_heartbeat);
        self.guard(
            Operation::Ingest,
            Some(session),
            call,
            |engine| {
                Box::pin(async move { engine.ingest(call, &projected, entry, is_heartbeat).await })
            },
            no_check,
            fallback,
            OnFailure::Retry,
        )
        .await
    }

    async fn ingest_batch(
        &self,
        call: &CallOptions,
        session: &SessionRef,
        entries: &[MessageEntry],
        is_heartbeat: bool,
    ) -> EngineResult<IngestBatchResult> {
        let held = Self::holding(call);
        let call = &held;
        let projected = self.project_session(session);
        let fallback = self
            .legacy
            .ingest_batch(call, session, entries, is_heartbeat);
        self.guard(
            Operation::IngestBatch,
            Some(session),
            call,
            |engine| {
                Box::pin(async move {
                    engine
                        .ingest_batch(call, &projected, entries, is_heartbeat)
                        .await
                })
            },
            no_check,
            fallback,
            OnFailure::Retry,
        )
        .await
    }

    async fn assemble(
        &self,
        call: &CallOptions,
        session: &SessionRef,
        history: &History,
        params: &AssembleParams,
    ) -> EngineResult<AssembleResult> {
        let held = Self::holding(call);
        let call = &held;
        let projected_session = self.project_session(session);
        let projected = AssembleParams {
            prompt: params
                .prompt
                .clone()
                .filter(|_| self.accepts(HostParam::Prompt)),
            runtime_settings: self.project_settings(&params.runtime_settings),
            ..params.clone()
        };
        let fallback = self.legacy.assemble(call, session, history, params);
        self.guard(
            Operation::Assemble,
            Some(session),
            call,
            |engine| {
                Box::pin(async move {
                    engine
                        .assemble(call, &projected_session, history, &projected)
                        .await
                })
            },
            |result| {
                validate::check_assemble(history, result)
                    .and_then(|()| validate::check_additions_fit(result, params.token_budget))
            },
            fallback,
            OnFailure::Retry,
        )
        .await
    }

    async fn compact(
        &self,
        call: &CallOptions,
        session: &SessionRef,
        history: &History,
        params: &CompactParams,
    ) -> EngineResult<CompactResult> {
        self.compact_checked(call, session, history, params, no_check)
            .await
    }

    async fn after_turn(
        &self,
        call: &CallOptions,
        session: &SessionRef,
        history: &History,
        params: &AfterTurnParams,
    ) -> EngineResult<()> {
        let held = Self::holding(call);
        let call = &held;
        let projected_session = self.project_session(session);
        let projected = AfterTurnParams {
            runtime_context: self.project_context(&params.runtime_context),
            runtime_settings: self.project_settings(&params.runtime_settings),
            ..params.clone()
        };
        let fallback = self.legacy.after_turn(call, session, history, params);
        self.guard(
            Operation::AfterTurn,
            Some(session),
            call,
            |engine| {
                Box::pin(async move {
                    engine
                        .after_turn(call, &projected_session, history, &projected)
                        .await
                })
            },
            no_check,
            fallback,
            OnFailure::Retry,
        )
        .await
    }

    async fn maintain(
        &self,
        call: &CallOptions,
        session: &SessionRef,
        history: &History,
        reason: MaintainReason,
        runtime_context: Option<&str>,
    ) -> EngineResult<MaintainResult> {
        let held = Self::holding(call);
        let call = &held;
        let projected_session = self.project_session(session);
        let projected = self.project_context(&runtime_context.map(str::to_owned));
        let fallback = self
            .legacy
            .maintain(call, session, history, reason, runtime_context);
        self.guard(
            Operation::Maintain,
            Some(session),
            call,
            |engine| {
                Box::pin(async move {
                    engine
                        .maintain(
                            call,
                            &projected_session,
                            history,
                            reason,
                            projected.as_deref(),
                        )
                        .await
                })
            },
            no_check,
            fallback,
            OnFailure::Retry,
        )
        .await
    }

    async fn prepare_subagent_spawn(
        &self,
        call: &CallOptions,
        spawn: &SubagentSpawn,
    ) -> EngineResult<Option<String>> {
        let held = Self::holding(call);
        let call = &held;
        let fallback = self.legacy.prepare_subagent_spawn(call, spawn);
        self.guard(
            Operation::PrepareSubagentSpawn,
            None,
            call,
            |engine| Box::pin(async move { engine.prepare_subagent_spawn(call, spawn).await }),
            no_check,
            fallback,
            OnFailure::Fail,
        )
        .await
    }

    async fn rollback_subagent_spawn(
        &self,
        call: &CallOptions,
        preparation_id: &str,
    ) -> EngineResult<()> {
        // The preparation was made by the selected engine: only it can undo
        // it, so a failure is reported, never retried elsewhere.
        let Some(primary) = self.primary.as_ref() else {
            return self
                .legacy
                .rollback_subagent_spawn(call, preparation_id)
                .await;
        };
        primary
            .rollback_subagent_spawn(call, preparation_id)
            .await
            .inspect_err(|failure| {
                self.quarantine_engine(failure);
                self.note(failure, None, GuardAction::Reported);
            })
    }

    async fn on_subagent_ended(
        &self,
        call: &CallOptions,
        child_session_key: &str,
        reason: SubagentEndReason,
    ) -> EngineResult<()> {
        let held = Self::holding(call);
        let call = &held;
        let fallback = self
            .legacy
            .on_subagent_ended(call, child_session_key, reason);
        self.guard(
            Operation::OnSubagentEnded,
            None,
            call,
            |engine| {
                Box::pin(async move {
                    engine
                        .on_subagent_ended(call, child_session_key, reason)
                        .await
                })
            },
            no_check,
            fallback,
            OnFailure::Retry,
        )
        .await
    }

    async fn tools(&self, call: &CallOptions) -> EngineResult<Vec<EngineTool>> {
        let held = Self::holding(call);
        let call = &held;
        // `legacy` offers no tools: a quarantined engine's are withdrawn.
        self.guard(
            Operation::ListTools,
            None,
            call,
            |engine| Box::pin(async move { engine.tools(call).await }),
            |tools: &Vec<EngineTool>| validate::check_tools(tools),
            Box::pin(async { Ok(Vec::new()) }),
            OnFailure::Retry,
        )
        .await
    }

    async fn call_tool(
        &self,
        call: &CallOptions,
        session: &SessionRef,
        name: &str,
        arguments_json: &str,
    ) -> EngineResult<String> {
        let held = Self::holding(call);
        let call = &held;
        let session = &self.project_session(session);
        let unavailable = EngineFailure::new(
            &self.id,
            Operation::CallTool,
            FailureKind::EngineError,
            format!(
                "engine `{}` cannot answer tools now (it is quarantined or was not loaded)",
                self.id
            ),
        );
        self.guard(
            Operation::CallTool,
            Some(session),
            call,
            |engine| {
                Box::pin(async move { engine.call_tool(call, session, name, arguments_json).await })
            },
            |result: &String| validate::check_tool_result(result),
            Box::pin(async move { Err(unavailable) }),
            OnFailure::Fail,
        )
        .await
    }

    async fn close_session(&self, session_id: &str) {
        if let Some(primary) = &self.primary {
            primary.close_session(session_id).await;
        }
        self.legacy.close_session(session_id).await;
    }

    async fn dispose(&self) -> EngineResult<()> {
        if let Some(primary) = &self.primary
            && let Err(failure) = primary.dispose().await
        {
            tracing::warn!(engine = %self.id, reason = %failure, "engine failed to dispose");
        }
        Ok(())
    }
}
