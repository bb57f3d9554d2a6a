//! Typed errors: how an engine call failed, and why a component would not load.

use std::fmt;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

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
}

impl Operation {
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
        }
    }
}

impl fmt::Display for Operation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How an engine call failed (DESIGN §6).
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
    /// The engine answered with an `engine-error`.
    EngineError,
    /// Any other trap (bad memory access, division by zero, …).
    Trap,
    /// The component could not be loaded or instantiated, or its `info` was
    /// unusable.
    Load,
    /// The host had no free instance slot (every instance busy). Not the
    /// engine's fault: never quarantines.
    Overloaded,
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
            Self::EngineError => "engine-error",
            Self::Trap => "trap",
            Self::Load => "load",
            Self::Overloaded => "overloaded",
        }
    }
}

impl fmt::Display for FailureKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A failed engine call: which engine, which operation, how, and what the
/// guest last wrote to stderr.
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
        message: impl Into<String>,
    ) -> Self {
        Self {
            engine_id: engine_id.into(),
            operation,
            kind,
            message: message.into(),
            stderr_tail: String::new(),
        }
    }
}

/// Why a component was refused at load.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The file could not be read.
    #[error("cannot read engine `{}`: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The bytes are not WebAssembly at all.
    #[error("`{name}` is not a WebAssembly file (no `\\0asm` header)")]
    NotWasm {
        /// File name or label.
        name: String,
    },
    /// A core module where a component is needed.
    #[error(
        "`{name}` is a core WebAssembly module, not a component: build it for `wasm32-wasip2` (or wrap it with `wasm-tools component new`)"
    )]
    CoreModule {
        /// File name or label.
        name: String,
    },
    /// The component does not validate or compile.
    #[error("`{name}` is not a valid component: {reason}")]
    Invalid {
        /// File name or label.
        name: String,
        /// The compiler's explanation.
        reason: String,
    },
    /// The component implements another version of the contract.
    #[error(
        "`{name}` implements `{found}`, but this host supports `{supported}`: rebuild it against ctxbox-guest {supported_version}"
    )]
    UnsupportedVersion {
        /// File name or label.
        name: String,
        /// The interface the component exports.
        found: String,
        /// The interface this host supports.
        supported: String,
        /// The supported package version.
        supported_version: String,
    },
    /// The component does not export the engine interface at all.
    #[error("`{name}` does not export `{expected}`: it is not a ctxbox context engine")]
    NotAnEngine {
        /// File name or label.
        name: String,
        /// The interface expected.
        expected: String,
    },
    /// The component imports something the sandbox does not grant.
    #[error(
        "`{name}` imports what ctxbox engines may not use: {}",
        list_refused(refused)
    )]
    DisallowedImport {
        /// File name or label.
        name: String,
        /// Every refused import, with why.
        refused: Vec<RefusedImport>,
    },
    /// The component's imports or exports do not match the contract.
    #[error("`{name}` does not match the ctxbox:engine contract: {reason}")]
    Link {
        /// File name or label.
        name: String,
        /// Wasmtime's explanation.
        reason: String,
    },
    /// The compilation cache could not be used.
    #[error("compiled-engine cache at `{}`: {reason}", path.display())]
    Cache {
        /// The cache file or directory.
        path: PathBuf,
        /// What went wrong.
        reason: String,
    },
}

/// An import the sandbox does not grant, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RefusedImport {
    /// The interface, e.g. `wasi:sockets/tcp@0.2.6`.
    pub import: String,
    /// Why it is refused.
    pub why: &'static str,
}

fn list_refused(refused: &[RefusedImport]) -> String {
    refused
        .iter()
        .map(|refused| format!("`{}` ({})", refused.import, refused.why))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Why the sandbox itself could not be set up (configuration errors).
#[derive(Debug, thiserror::Error)]
#[error("cannot set up the wasm sandbox: {0}")]
pub struct SandboxError(pub String);
