//! # ctxbox-host
//!
//! Runs context engines — the plugins that decide what a long-running AI
//! agent's model sees each turn — as sandboxed WebAssembly components, with
//! the native `legacy` engine to fall back on when one traps, hangs or lies.
//!
//! A host is a [`Runtime`] built from a [`Config`]. [`Runtime::select`]
//! gives the configured engine behind the guard ([`GuardedEngine`]), and a
//! [`TurnRunner`] drives it for each user message with a [`Provider`] (the
//! model) and a [`ToolExecutor`] (the tools):
//!
//! ```
//! # #[tokio::main(flavor = "multi_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use std::sync::Arc;
//! use ctxbox_host::{
//!     AgentMessage, Config, FixedToolResults, NewSession, Runtime, ScriptedProvider, Session,
//! };
//! use tokio_util::sync::CancellationToken;
//!
//! let data = tempfile::tempdir()?;
//! let config = Config {
//!     data_dir: Some(data.path().to_owned()),
//!     ..Config::default()
//! };
//! let runtime = Runtime::new(config)?;
//! let engine = runtime.select(None).await; // `legacy`: no slot configured
//!
//! let model = Arc::new(ScriptedProvider::texts(["Hello! How can I help?"]));
//! let tools = Arc::new(FixedToolResults::new("ok"));
//! let runner = runtime.runner(engine, model.clone(), tools, 16_384, Vec::new());
//!
//! let file = data.path().join("session.jsonl");
//! let transcript = runtime.transcripts().create(&file, NewSession::default())?;
//! let mut session = Session::new(transcript, None);
//! let turn = runner
//!     .run_turn(&mut session, vec![AgentMessage::user_text("Hi")], &CancellationToken::new())
//!     .await?;
//!
//! assert_eq!(turn.model_calls, 1);
//! assert_eq!(model.prompts()[0], vec![AgentMessage::user_text("Hi")]);
//! assert_eq!(session.history().len(), 2); // the question and the answer, on disk
//! # Ok(()) }
//! ```
//!
//! The crate is layered; each folder uses only the ones listed before it:
//!
//! | module | what lives there |
//! |---|---|
//! | [`contract`] | the Rust face of `wit/`: types, failures, history, tokens, answer rules, the [`ContextEngine`] and [`HostServices`] traits |
//! | [`transcript`] | OpenClaw/pi JSONL session files |
//! | [`provider`] | the model side of a turn: replay, `openai-compatible`, the chat client |
//! | [`services`] | the real host services: state store, native compaction, summarizers |
//! | [`sandbox`] | wasm components under fuel, deadline and memory limits |
//! | [`engines`] | registry, guard, quarantine, `legacy`, bundled engines, selection |
//! | [`runner`] | the turn runner: prompt, model calls, overflow recovery |
//! | [`runtime`] | a whole host from `ctxbox.toml` |
//! | [`check`], [`scaffold`] | for engine authors: the conformance checker, `ctxbox new` |
//! | [`serve`] | `ctxbox serve`: the sidecar agent runtimes (the OpenClaw plugin) call, its metrics |
//! | [`compare`] | `ctxbox compare`: one conversation replayed through several engines and windows, its HTML report |
//!
//! `docs/ARCHITECTURE.md` in the repository describes the layers, the data
//! flow of a turn and the sandbox policy.

#![warn(missing_docs)]

pub mod check;
pub mod compare;
pub mod contract;
pub mod engines;
pub mod provider;
pub mod runner;
pub mod runtime;
pub mod sandbox;
pub mod scaffold;
pub mod serve;
pub mod services;
pub mod store;
pub mod transcript;

pub use crate::contract::types::{
    AgentMessage, AssembleParams, AssembleResult, CompactParams, CompactResult, ContentBlock,
    EngineInfo, MessageEntry, SessionRef, StopReason, Usage,
};
pub use crate::contract::{
    CallOptions, ContextEngine, EngineFailure, EngineResult, FailureKind, History, HostServices,
    MemoryServices, NoServices, Operation,
};
pub use crate::engines::{Engines, GuardedEngine};
pub use crate::provider::{
    FixedToolResults, ModelReply, ModelRequest, Provider, ProviderError, Replay, ReplayScript,
    ScriptedProvider, ToolDefinition, ToolExecutor,
};
pub use crate::runner::{RunReport, RunnerConfig, Session, TurnError, TurnReport, TurnRunner};
pub use crate::runtime::{Config, Runtime, RuntimeError};
pub use crate::sandbox::{LoadError, Sandbox, SandboxConfig, SandboxError, WasmEngine};
pub use crate::transcript::{NewSession, Transcript, TranscriptError, TranscriptStore};
