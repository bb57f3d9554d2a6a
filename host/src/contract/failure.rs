//! How an engine call failed: the operation, the classification, the message.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::contract::text::{
    MAX_ENGINE_TEXT_BYTES, MAX_STDERR_TAIL_BYTES, untrusted_line, untrusted_tail,
};

/// An engine operation (an export of the contract, or loading it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Operation {
    /// Loading and instantiating the component.
    Load,
    /// `info`.
    Info,
    /// `bootstrap`.
    Bootstrap,
    /// `ingest`.
    Ingest,
    /// `ingest-batch`.
    IngestBatch,
    /// `assemble`.
    Assemble,
    /// `compact`.
    Compact,
    /// `after-turn`.
    AfterTurn,
    /// `maintain`.
    Maintain,
    /// `prepare-subagent-spawn`.
    PrepareSubagentSpawn,
    /// `rollback-subagent-spawn`.
    RollbackSubagentSpawn,
    /// `on-subagent-ended`.
    OnSubagentEnded,
    /// `dispose`.
    Dispose,
    /// `list-tools` (`wit/tools.wit`).
    ListTools,
    /// `call-tool` (`wit/tools.wit`).
    CallTool,
}

impl Operation {
    /// Whether the operation may compact (`compact`, and `after-turn`, where
    /// an engine that owns compaction compacts proactively): it runs under
    /// the compaction watchdog and fuel budget.
    pub fn may_compact(self) -> bool {
        matches!(self, Self::Compact | Self::AfterTurn)
    }

    /// The contract's (kebab-case) name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Load => "load",
            Self::Info => "info",
            Self::Bootstrap => "bootstrap",
            Self::Ingest => "ingest",
            Self::IngestBatch => "ingest-batch",
            Self::Assemble => "assemble",
            Self::Compact => "compact",
            Self::AfterTurn => "after-turn",
            Self::Maintain => "maintain",
            Self::PrepareSubagentSpawn => "prepare-subagent-spawn",
            Self::RollbackSubagentSpawn => "rollback-subagent-spawn",
            Self::OnSubagentEnded => "on-subagent-ended",
            Self::Dispose => "dispose",
            Self::ListTools => "list-tools",
            Self::CallTool => "call-tool",
        }
    }
}

impl fmt::Display for Operation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How an engine call failed (ARCHITECTURE.md §5).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FailureKind {
    /// The call used up its fuel (CPU) budget.
    OutOfFuel,
    /// The call ran past its wall-clock deadline.
    Timeout,
    /// The instance grew past its memory budget.
    Memory,
    /// The guest exhausted its wasm stack.
    StackOverflow,
    /// The guest panicked (or otherwise aborted).
    Panic,
    /// The guest broke a host limit (bytes passed in, log records, handles).
    HostLimit,
    /// The answer broke the contract's rules.
    InvalidOutput,
    /// The caller cancelled the call.
    Aborted,
    /// The engine answered an error within its deadline notice (after
    /// `host.aborted()` turned true because the call's time was nearly up):
    /// it stopped in time, as asked. Forgiven once in a row; a second stop
    /// in a row quarantines like a timeout.
    StoppedAtDeadline,
    /// The engine answered with an `engine-error`.
    EngineError,
    /// Any other trap (bad memory access, division by zero, …).
    Trap,
    /// The component could not be loaded or instantiated, or its `info` was
    /// unusable.
    Load,
    /// The host could not admit the engine now: no free instance slot
    /// (every instance busy). Not the engine's fault: never quarantines; the
    /// caller retries.
    Overloaded,
    /// Another host took the session's lease over before the call's writes
    /// were committed, so they were refused. Not the engine's fault: never
    /// quarantines; the caller retries.
    LeaseLost,
    /// The host failed doing the engine's work (its own database, disk or
    /// descriptors) and the call failed with it, or loading the engine met
    /// such a fault or found it needs a capability this host lacks. Not the
    /// engine's fault: never quarantines; `legacy` serves the call.
    HostFault,
}

impl FailureKind {
    /// The kebab-case name used in records and logs.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::OutOfFuel => "out-of-fuel",
            Self::Timeout => "timeout",
            Self::Memory => "memory",
            Self::StackOverflow => "stack-overflow",
            Self::Panic => "panic",
            Self::HostLimit => "host-limit",
            Self::InvalidOutput => "invalid-output",
            Self::Aborted => "aborted",
            Self::StoppedAtDeadline => "stopped-at-deadline",
            Self::EngineError => "engine-error",
            Self::Trap => "trap",
            Self::Load => "load",
            Self::Overloaded => "overloaded",
            Self::LeaseLost => "lease-lost",
            Self::HostFault => "host-fault",
        }
    }
}

impl fmt::Display for FailureKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A failed engine call: which engine, which operation, how, and what the
/// guest last wrote to stderr. `message` and `stderr_tail` may carry text the
/// engine wrote: the constructors make it safe to show and cap its size
/// ([`crate::contract::text`]); code that fills the fields itself calls
/// [`EngineFailure::sanitized`] before keeping or printing it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, Serialize, Deserialize)]
#[error("engine `{engine_id}` failed in {operation}: {kind}: {message}")]
pub struct EngineFailure {
    /// The engine's id.
    pub engine_id: String,
    /// The operation that failed.
    pub operation: Operation,
    /// The classification.
    pub kind: FailureKind,
    /// What happened, in words.
    pub message: String,
    /// The tail of the guest's stderr (empty for native engines).
    pub stderr_tail: String,
}

impl EngineFailure {
    /// A failure without guest output.
    pub fn new(
        engine_id: impl Into<String>,
        operation: Operation,
        kind: FailureKind,
        message: impl AsRef<str>,
    ) -> Self {
        Self {
            engine_id: untrusted_line(&engine_id.into(), MAX_ENGINE_TEXT_BYTES),
            operation,
            kind,
            message: untrusted_line(message.as_ref(), MAX_ENGINE_TEXT_BYTES),
            stderr_tail: String::new(),
        }
    }

    /// The failure with the guest's stderr `tail` (its newest bytes kept).
    pub fn with_stderr_tail(self, tail: &str) -> Self {
        Self {
            stderr_tail: untrusted_tail(tail, MAX_STDERR_TAIL_BYTES),
            ..self
        }
    }

    /// The failure with every text field made safe to show and capped.
    pub fn sanitized(self) -> Self {
        Self {
            engine_id: untrusted_line(&self.engine_id, MAX_ENGINE_TEXT_BYTES),
            message: untrusted_line(&self.message, MAX_ENGINE_TEXT_BYTES),
            stderr_tail: untrusted_tail(&self.stderr_tail, MAX_STDERR_TAIL_BYTES),
            ..self
        }
    }
}
