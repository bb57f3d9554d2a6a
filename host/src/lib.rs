//! # ctxbox-host
//!
//! Runs context engines, the plugins that decide what a long-running AI
//! agent's model sees, as sandboxed WebAssembly components, with a native
//! `legacy` engine to fall back on.

pub mod bundled;
pub mod chat_api;
pub mod check;
pub mod compaction;
pub mod config;
pub mod engine;
pub mod engine_host;
pub mod error;
pub mod guard;
#[cfg(feature = "guest-view")]
pub mod guest_view;
pub mod history;
pub mod legacy;
pub mod native_services;
pub mod openclaw_store;
pub mod provider;
pub mod quarantine;
pub mod registry;
pub mod runner;
pub mod runtime;
pub mod sandbox;
pub mod scaffold;
pub mod serve;
pub mod services;
pub mod state_store;
pub mod summarize;
pub mod tokens;
pub mod transcript;
pub mod types;
pub mod validate;
