//! One engine call: what it asks, its clock (deadline, compaction watchdog,
//! abort grace) and the per-call counters host imports charge.

use std::future::Future;
use std::pin::pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::Poll;
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;

use super::config::SandboxConfig;
use crate::contract::engine::CallOptions;
use crate::contract::failure::{FailureKind, Operation};
use crate::contract::history::History;
use crate::contract::index::IndexBatch;
use crate::contract::services::{CallUsage, ServiceCall};
use crate::contract::state_batch::StateBatch;
use crate::contract::tools::EngineTool;
use crate::contract::types::{
    AfterTurnParams, AssembleParams, AssembleResult, BootstrapResult, CompactParams, CompactResult,
    EngineInfo, IngestBatchResult, IngestResult, MaintainReason, MaintainResult, MessageEntry,
    SessionRef, SubagentEndReason, SubagentSpawn,
};
use crate::services::sql::CallTransaction;

/// The fuel a guest burns between yields to the executor, where its call's
/// deadline is checked: about a millisecond of wasm on this class of machine
/// (a spinning guest is stopped 0.5–0.7 ms past its deadline), the
/// granularity of deadlines for code that never waits.
pub(crate) const FUEL_PER_YIELD: u64 = 5_000_000;

/// An engine export call with its arguments.
pub(crate) enum Request<'a> {
    Info,
    Bootstrap {
        session: &'a SessionRef,
        history: &'a History,
    },
    Ingest {
        session: &'a SessionRef,
        entry: &'a MessageEntry,
        is_heartbeat: bool,
    },
    IngestBatch {
        session: &'a SessionRef,
        entries: &'a [MessageEntry],
        is_heartbeat: bool,
    },
    Assemble {
        session: &'a SessionRef,
        history: &'a History,
        params: &'a AssembleParams,
    },
    Compact {
        session: &'a SessionRef,
        history: &'a History,
        params: &'a CompactParams,
    },
    AfterTurn {
        session: &'a SessionRef,
        history: &'a History,
        params: &'a AfterTurnParams,
    },
    Maintain {
        session: &'a SessionRef,
        history: &'a History,
        reason: MaintainReason,
        runtime_context: Option<&'a str>,
    },
    PrepareSubagentSpawn(&'a SubagentSpawn),
    RollbackSubagentSpawn(&'a str),
    OnSubagentEnded {
        child_session_key: &'a str,
        reason: SubagentEndReason,
    },
    Dispose,
    ListTools,
    CallTool {
        session: &'a SessionRef,
        name: &'a str,
        arguments_json: &'a str,
    },
}

impl Request<'_> {
    pub(crate) fn operation(&self) -> Operation {
        match self {
            Self::Info => Operation::Info,
            Self::Bootstrap { .. } => Operation::Bootstrap,
            Self::Ingest { .. } => Operation::Ingest,
            Self::IngestBatch { .. } => Operation::IngestBatch,
            Self::Assemble { .. } => Operation::Assemble,
            Self::Compact { .. } => Operation::Compact,
            Self::AfterTurn { .. } => Operation::AfterTurn,
            Self::Maintain { .. } => Operation::Maintain,
            Self::PrepareSubagentSpawn(_) => Operation::PrepareSubagentSpawn,
            Self::RollbackSubagentSpawn(_) => Operation::RollbackSubagentSpawn,
            Self::OnSubagentEnded { .. } => Operation::OnSubagentEnded,
            Self::Dispose => Operation::Dispose,
            Self::ListTools => Operation::ListTools,
            Self::CallTool { .. } => Operation::CallTool,
        }
    }

    pub(crate) fn session(&self) -> Option<&SessionRef> {
        match self {
            Self::Bootstrap { session, .. }
            | Self::Ingest { session, .. }
            | Self::IngestBatch { session, .. }
            | Self::Assemble { session, .. }
            | Self::Compact { session, .. }
            | Self::AfterTurn { session, .. }
            | Self::Maintain { session, .. }
            | Self::CallTool { session, .. } => Some(session),
            _ => None,
        }
    }

    /// The host-added runtime settings of the call, if it has any.
    pub(crate) fn runtime_settings(&self) -> Option<&str> {
        match self {
            Self::Assemble { params, .. } => params.runtime_settings.as_deref(),
            Self::Compact { params, .. } => params.runtime_settings.as_deref(),
            Self::AfterTurn { params, .. } => params.runtime_settings.as_deref(),
            _ => None,
        }
    }

    pub(crate) fn history(&self) -> Option<&History> {
        match self {
            Self::Bootstrap { history, .. }
            | Self::Assemble { history, .. }
            | Self::Compact { history, .. }
            | Self::AfterTurn { history, .. }
            | Self::Maintain { history, .. } => Some(history),
            _ => None,
        }
    }
}

/// An engine's answer, converted to host types.
pub(crate) enum Response {
    Info(EngineInfo),
    Bootstrap(BootstrapResult),
    Ingest(IngestResult),
    IngestBatch(IngestBatchResult),
    Assemble(AssembleResult),
    Compact(CompactResult),
    Maintain(MaintainResult),
    Spawn(Option<String>),
    Tools(Vec<EngineTool>),
    ToolResult(String),
    Done,
}

/// The deadline of the call in progress, shared by the host imports
/// (progress re-arms it) and the call's [`expiry`].
pub(crate) struct CallClock {
    origin: Instant,
    /// Deadline, nanoseconds after `origin`.
    deadline: AtomicU64,
    /// When the caller's abort stops the call, nanoseconds after `origin`
    /// (`u64::MAX`: not aborted).
    abort_deadline: AtomicU64,
    /// For compaction: one window, re-armed by progress up to `ceiling`.
    watchdog: Option<Watchdog>,
    /// How long before the deadline the engine is told to stop
    /// (`host.aborted()`), nanoseconds.
    notice: u64,
}

struct Watchdog {
    window: Duration,
    ceiling: u64,
}

/// The operation whose window, watchdog and fuel a call of `operation` runs
/// under: its own, except a `maintain` allowed to pay the engine's deferred
/// compaction ([`CallOptions::deferred_compaction`]), which compacts as
/// `after-turn` does and is budgeted as it is. Failures still name
/// `operation`.
pub(crate) fn budgeted_as(operation: Operation, options: &CallOptions) -> Operation {
    if operation == Operation::Maintain && options.deferred_compaction {
        Operation::AfterTurn
    } else {
        operation
    }
}

impl CallClock {
    /// The clock of one call of `operation` under `config`; a compaction's
    /// window is `window` when the caller's agent has its own.
    pub(crate) fn start(
        operation: Operation,
        config: &SandboxConfig,
        window: Option<Duration>,
    ) -> Self {
        let origin = Instant::now();
        let (timeout, watchdog) = if operation.may_compact() {
            let window = window.unwrap_or_else(|| config.compaction_window());
            let ceiling = window.saturating_mul(config.compaction_max_windows);
            (
                window,
                Some(Watchdog {
                    window,
                    ceiling: nanos(ceiling),
                }),
            )
        } else if operation == Operation::Dispose {
            (config.dispose_timeout(), None)
        } else {
            (config.call_timeout(), None)
        };
        Self {
            origin,
            deadline: AtomicU64::new(nanos(timeout)),
            abort_deadline: AtomicU64::new(u64::MAX),
            watchdog,
            notice: nanos(config.deadline_notice(timeout)),
        }
    }

    fn now(&self) -> u64 {
        nanos(self.origin.elapsed())
    }

    /// When the call's time runs out (ignoring abort).
    pub(crate) fn deadline(&self) -> Instant {
        self.origin + Duration::from_nanos(self.deadline.load(Ordering::Relaxed))
    }

    /// When the engine is told to stop (`host.aborted()` turns true): the
    /// deadline less the notice. Host services the engine waits on end by
    /// then, so it has the notice to answer in.
    pub(crate) fn notice_at(&self) -> Instant {
        self.deadline() - Duration::from_nanos(self.notice)
    }

    /// Whether the call is within its deadline notice: an engine that
    /// stops now and answers stopped in time.
    pub(crate) fn near_deadline(&self) -> bool {
        self.now().saturating_add(self.notice) >= self.deadline.load(Ordering::Relaxed)
    }

    /// Progress: the watchdog gets one more window, never past its ceiling.
    /// Outside compaction it does nothing.
    pub(crate) fn progress(&self) {
        if let Some(watchdog) = &self.watchdog {
            let rearmed = (self.now() + nanos(watchdog.window)).min(watchdog.ceiling);
            self.deadline.fetch_max(rearmed, Ordering::Relaxed);
        }
    }

    /// The caller aborted: the call gets `grace` to return by itself.
    pub(crate) fn abort(&self, grace: Duration) {
        let stop = self.now() + nanos(grace);
        self.abort_deadline.fetch_min(stop, Ordering::Relaxed);
    }

    /// Whether the call must stop now, and why.
    pub(crate) fn expired(&self) -> Option<FailureKind> {
        let now = self.now();
        if now >= self.abort_deadline.load(Ordering::Relaxed) {
            Some(FailureKind::Aborted)
        } else if now >= self.deadline.load(Ordering::Relaxed) {
            Some(FailureKind::Timeout)
        } else {
            None
        }
    }

    /// The earliest moment the call may have to stop.
    fn next_expiry(&self) -> Instant {
        let at = self
            .deadline
            .load(Ordering::Relaxed)
            .min(self.abort_deadline.load(Ordering::Relaxed));
        self.origin + Duration::from_nanos(at)
    }
}

fn nanos(duration: Duration) -> u64 {
    u64::try_from(duration.as_nanos()).unwrap_or(u64::MAX)
}

/// Resolves when the call must be abandoned, and why. Checked every time the
/// call's task is polled: a guest running wasm yields to the executor every
/// [`FUEL_PER_YIELD`] units of fuel, and a timer set to the earliest expiry
/// wakes a guest blocked in a host wait. Polled beside the call, which is
/// dropped when this resolves.
pub(crate) async fn expiry(
    clock: &CallClock,
    abort: &CancellationToken,
    grace: Duration,
) -> FailureKind {
    let mut timer = pin!(tokio::time::sleep_until(clock.next_expiry().into()));
    let mut cancelled = pin!(abort.cancelled());
    let mut abort_seen = false;
    std::future::poll_fn(|context| {
        if !abort_seen && cancelled.as_mut().poll(context).is_ready() {
            abort_seen = true;
            clock.abort(grace);
        }
        if let Some(kind) = clock.expired() {
            return Poll::Ready(kind);
        }
        // Progress or an abort may have moved the earliest expiry.
        let wake = tokio::time::Instant::from_std(clock.next_expiry());
        if timer.deadline() != wake {
            timer.as_mut().reset(wake);
        }
        if timer.as_mut().poll(context).is_ready() {
            // Fired a hair early: look at the clock again.
            context.waker().wake_by_ref();
        }
        Poll::Pending
    })
    .await
}

/// What the store knows about the call in progress.
pub(crate) struct CallState {
    pub(crate) operation: Operation,
    pub(crate) session: Option<SessionRef>,
    pub(crate) history: Option<History>,
    pub(crate) clock: Arc<CallClock>,
    pub(crate) abort: CancellationToken,
    /// The call's state writes, committed when it answers.
    pub(crate) state: StateBatch,
    /// The call's index writes, committed with its state writes.
    pub(crate) index: IndexBatch,
    /// The call's SQL transaction, committed after its state writes.
    pub(crate) sql: CallTransaction,
    /// What the call has used of its per-call budgets (completions).
    pub(crate) usage: CallUsage,
    /// The embedding host's id for the request the call serves.
    pub(crate) request_id: Option<String>,
    /// The embedding host's client the call serves.
    pub(crate) client: Option<u64>,
    /// Where the call's transcript reads stop (the current turn's first entry).
    pub(crate) transcript_fence: Option<String>,
    /// The lease the call's writes are fenced by (shared store).
    pub(crate) write_fence: Option<crate::contract::engine::WriteFence>,
    /// Bytes the guest passed to host imports so far.
    pub(crate) input_bytes: u64,
    pub(crate) log_records: u32,
    pub(crate) logs_dropped: u32,
    /// What the host failed at doing for the call, if it did
    /// ([`ServiceError::HostFault`](crate::contract::services::ServiceError::HostFault)).
    pub(crate) host_fault: Option<String>,
    /// What `host.runtime-settings` answers during this call.
    pub(crate) runtime_settings: Option<String>,
}

impl CallState {
    /// What host services know of this call of engine `engine_id`.
    pub(crate) fn service_call<'a>(&'a self, engine_id: &'a str) -> ServiceCall<'a> {
        ServiceCall {
            engine_id,
            session: self.session.as_ref(),
            history: self.history.as_ref(),
            deadline: self.clock.notice_at(),
            abort: &self.abort,
            state: &self.state,
            index: &self.index,
            usage: &self.usage,
            request_id: self.request_id.as_deref(),
            client: self.client,
            transcript_fence: self.transcript_fence.as_deref(),
            write_fence: self.write_fence.as_ref(),
        }
    }

    /// Whether the call left writes to commit.
    pub(crate) fn has_writes(&self) -> bool {
        !self.state.is_empty() || !self.index.is_empty() || self.sql.is_open()
    }

    /// The state while an instance is created (its start-up code runs under
    /// the plain call deadline).
    pub(crate) fn instantiation(config: &SandboxConfig) -> Self {
        Self::new(
            Operation::Load,
            None,
            None,
            Arc::new(CallClock::start(Operation::Load, config, None)),
            CancellationToken::new(),
        )
    }

    pub(crate) fn new(
        operation: Operation,
        session: Option<SessionRef>,
        history: Option<History>,
        clock: Arc<CallClock>,
        abort: CancellationToken,
    ) -> Self {
        Self {
            operation,
            session,
            history,
            clock,
            abort,
            state: StateBatch::default(),
            index: IndexBatch::default(),
            sql: CallTransaction::default(),
            usage: CallUsage::default(),
            request_id: None,
            client: None,
            transcript_fence: None,
            write_fence: None,
            input_bytes: 0,
            log_records: 0,
            logs_dropped: 0,
            host_fault: None,
            runtime_settings: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(call_ms: u64, window_s: u64, windows: u32) -> SandboxConfig {
        SandboxConfig {
            call_timeout_ms: call_ms,
            compaction_timeout_seconds: window_s,
            compaction_max_windows: windows,
            ..SandboxConfig::default()
        }
    }

    #[test]
    fn progress_rearms_compaction_up_to_the_ceiling() {
        let clock = CallClock::start(Operation::Compact, &config(10, 1, 3), None);
        let first = clock.deadline();
        std::thread::sleep(Duration::from_millis(5));
        clock.progress();
        assert!(clock.deadline() > first);
        for _ in 0..100 {
            clock.progress();
        }
        assert!(clock.deadline() <= clock.origin + Duration::from_secs(3));
    }

    #[test]
    fn after_turn_runs_under_the_compaction_watchdog() {
        let clock = CallClock::start(Operation::AfterTurn, &config(10, 1, 3), None);
        assert!(clock.deadline() >= clock.origin + Duration::from_millis(900));
        let fuel = config(10, 1, 3).fuel_for(Operation::AfterTurn);
        assert_eq!(fuel, SandboxConfig::default().fuel_per_compaction);
    }

    #[test]
    fn a_maintain_allowed_to_pay_deferred_compaction_is_budgeted_as_after_turn() {
        let plain = CallOptions::default();
        let deferred = CallOptions {
            deferred_compaction: true,
            ..CallOptions::default()
        };
        assert_eq!(
            budgeted_as(Operation::Maintain, &plain),
            Operation::Maintain
        );
        assert_eq!(
            budgeted_as(Operation::Assemble, &deferred),
            Operation::Assemble
        );
        let budget = budgeted_as(Operation::Maintain, &deferred);
        assert_eq!(budget, Operation::AfterTurn);
        let clock = CallClock::start(budget, &config(10, 1, 3), None);
        assert!(clock.deadline() >= clock.origin + Duration::from_millis(900));
        let plain_clock = CallClock::start(Operation::Maintain, &config(10, 1, 3), None);
        assert!(plain_clock.deadline() <= plain_clock.origin + Duration::from_millis(10));
    }

    #[test]
    fn progress_does_not_extend_ordinary_calls() {
        let clock = CallClock::start(Operation::Assemble, &config(50, 1, 3), None);
        let deadline = clock.deadline();
        clock.progress();
        assert_eq!(clock.deadline(), deadline);
    }

    #[test]
    fn an_agent_window_replaces_the_hosts_for_compaction_only() {
        let config = config(10_000, 180, 3);
        let clock = CallClock::start(Operation::Compact, &config, Some(Duration::from_secs(2)));
        assert!(clock.deadline() <= clock.origin + Duration::from_secs(2));
        let clock = CallClock::start(Operation::Assemble, &config, Some(Duration::from_secs(2)));
        assert_eq!(clock.deadline(), clock.origin + Duration::from_secs(10));
    }

    #[test]
    fn the_deadline_notice_comes_before_the_deadline() {
        // 1,000 ms of notice, but at most a quarter of a 400 ms call.
        let clock = CallClock::start(Operation::Assemble, &config(400, 1, 1), None);
        assert_eq!(
            clock.deadline() - clock.notice_at(),
            Duration::from_millis(100)
        );
        assert!(!clock.near_deadline());
        std::thread::sleep(Duration::from_millis(310));
        assert!(clock.near_deadline(), "within the notice");
    }

    #[test]
    fn expires_as_timeout_or_abort() {
        let clock = CallClock::start(Operation::Assemble, &config(1, 1, 1), None);
        assert_eq!(clock.expired(), None);
        std::thread::sleep(Duration::from_millis(2));
        assert_eq!(clock.expired(), Some(FailureKind::Timeout));

        let clock = CallClock::start(Operation::Assemble, &config(60_000, 1, 1), None);
        clock.abort(Duration::ZERO);
        assert_eq!(clock.expired(), Some(FailureKind::Aborted));
    }

    /// Nothing polls the call (a guest blocked in a host wait): the timer
    /// alone ends it once the deadline is past, not before.
    #[tokio::test]
    async fn expiry_ends_a_waiting_call_at_its_deadline() {
        let clock = CallClock::start(Operation::Assemble, &config(80, 1, 3), None);
        let kind = expiry(&clock, &CancellationToken::new(), Duration::from_secs(60)).await;
        assert_eq!(kind, FailureKind::Timeout);
        assert!(clock.origin.elapsed() >= Duration::from_millis(80));
    }

    /// Progress re-arms a compaction's window while its expiry is pending:
    /// the timer set for the first window is moved, not obeyed.
    #[tokio::test]
    async fn expiry_follows_progress_past_the_first_window() {
        let window = Duration::from_millis(150);
        let clock = CallClock::start(Operation::Compact, &config(10, 1, 10), Some(window));
        let last_progress = std::cell::Cell::new(Duration::ZERO);
        let progressing = async {
            for _ in 0..3 {
                tokio::time::sleep(Duration::from_millis(100)).await;
                clock.progress();
                last_progress.set(clock.origin.elapsed());
            }
        };
        let never = CancellationToken::new();
        let (kind, ()) = tokio::join!(expiry(&clock, &never, Duration::from_secs(60)), progressing);
        assert_eq!(kind, FailureKind::Timeout);
        assert!(
            clock.origin.elapsed() >= last_progress.get() + window,
            "expired {:?} after start, the last progress at {:?}",
            clock.origin.elapsed(),
            last_progress.get()
        );
    }

    /// The caller's abort gives the call its grace, then ends it as aborted
    /// (long before its deadline).
    #[tokio::test]
    async fn an_abort_ends_the_call_after_its_grace() {
        let clock = CallClock::start(Operation::Assemble, &config(60_000, 1, 3), None);
        let abort = CancellationToken::new();
        let grace = Duration::from_millis(50);
        let aborting = async {
            tokio::time::sleep(Duration::from_millis(20)).await;
            abort.cancel();
            clock.origin.elapsed()
        };
        let (kind, aborted_at) = tokio::join!(expiry(&clock, &abort, grace), aborting);
        assert_eq!(kind, FailureKind::Aborted);
        assert!(clock.origin.elapsed() >= aborted_at + grace);
        assert!(clock.origin.elapsed() < Duration::from_secs(30));
    }
}
