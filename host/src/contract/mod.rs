//! The contract in Rust: the host-side face of `wit/`, with no wasm in it.
//!
//! Everything an engine and a host agree on lives here: the message and
//! answer types ([`types`]), how a call fails ([`failure`]), the history an
//! engine call reads ([`history`]) and its packed bulk encoding
//! ([`packed`]), token estimates ([`tokens`]), the rules
//! an answer must keep ([`validate`]), the [`ContextEngine`] trait every
//! engine implements (native or sandboxed), and the [`HostServices`] an
//! engine may call back into — among them model completions
//! ([`completion`]) and a searchable index ([`index`]) — and the tools an
//! engine may offer the model ([`tools`]); [`text`] has the text helpers
//! every layer shares. The sandbox turns these into and out of the
//! generated WIT bindings; nothing here knows about wasmtime.

pub mod completion;
pub mod engine;
pub mod failure;
#[cfg(feature = "guest-view")]
pub mod guest_view;
pub mod history;
pub mod index;
pub mod packed;
pub mod services;
pub mod state_batch;
pub mod text;
pub mod tokens;
pub mod tools;
pub mod types;
pub mod validate;

pub use self::engine::{CallOptions, ContextEngine, EngineResult};
pub use self::failure::{EngineFailure, FailureKind, Operation};
pub use self::history::History;
pub use self::services::{HostServices, MemoryServices, NoServices};
