//! # ctxbox-guest: write a ctxbox context engine
//!
//! A context engine decides what an AI agent's model sees each turn: it
//! *assembles* the prompt from the session's history within a token budget and
//! *compacts* old history when the session outgrows the window. ctxbox runs
//! engines as sandboxed WebAssembly components; this crate is everything an
//! engine author needs.
//!
//! Implement [`Engine`] (only [`Engine::info`] and [`Engine::assemble`] are
//! required; every other method has the reference behaviour as its default),
//! export it with [`export_engine!`], and build for `wasm32-wasip2`:
//!
//! ```
//! use ctxbox_guest::prelude::*;
//!
//! /// Sends the whole history every turn.
//! #[derive(Default)]
//! struct PassThrough;
//!
//! impl Engine for PassThrough {
//!     fn info(&self) -> EngineInfo {
//!         EngineInfo::new("pass-through", "Pass-through")
//!     }
//!
//!     fn assemble(
//!         &mut self,
//!         _session: &SessionRef,
//!         history: &History,
//!         _params: AssembleParams,
//!     ) -> Result<AssembleResult, EngineError> {
//!         Ok(AssembleResult::keep_all(history))
//!     }
//! }
//!
//! ctxbox_guest::export_engine!(PassThrough);
//! # fn main() {}
//! ```
//!
//! ```text
//! cargo build --release --target wasm32-wasip2
//! ctxbox check target/wasm32-wasip2/release/pass_through.wasm
//! ```
//!
//! The engine value lives in the instance's memory, which is a cache: the host
//! may drop an instance between any two calls (after a failure, after many
//! calls, when idle) and create a fresh one with [`Default::default`]. Keep
//! whatever must survive in the host's key-value store ([`host::state`]).
//!
//! Everything in [`host`] talks to the ctxbox host and works only inside a
//! call made by the host on `wasm32`; on other targets (unit tests, native
//! benches) those functions panic. Engine logic that should also run natively
//! can be written against [`HistoryView`] instead of [`History`], and tested
//! with the in-memory history and prompt checks of [`testing`]. Engines that
//! keep messages or records of their own in the state store can encode them
//! with [`codec`].

#![warn(missing_docs)]

pub mod codec;
mod engine;
mod glue;
mod history;
pub mod host;
pub mod packed;
pub mod testing;
mod types;

pub use engine::Engine;
pub use history::{History, HistoryView};
pub use packed::EntryView;
pub use types::*;

/// The usual imports for writing an engine: `use ctxbox_guest::prelude::*;`
/// brings the trait, the history, the host functions and every type an
/// [`Engine`] method takes or returns.
pub mod prelude {
    pub use crate::host;
    pub use crate::{
        AfterTurnParams, AgentMessage, AssembleParams, AssembleResult, AssembledItem,
        BootstrapResult, CompactParams, CompactResult, ContentBlock, Engine, EngineError,
        EngineErrorKind, EngineInfo, EntryView, History, HistoryView, HostParam, IngestBatchResult,
        IngestResult, LogLevel, MaintainReason, MaintainResult, MessageEntry, MessageKind,
        SessionRef, SubagentEndReason, SubagentSpawn, ToolDefinition, ToolPairing,
    };
}

/// Implementation details used by [`export_engine!`]; not part of the API.
#[doc(hidden)]
pub mod __private {
    pub use crate::glue::{EngineSlot, Glue};

    /// Bindings generated from the `ctxbox:engine` WIT package.
    pub mod bindings {
        wit_bindgen::generate!({
            path: "../wit",
            world: "context-engine-with-tools",
            pub_export_macro: true,
            export_macro_name: "__export_context_engine_with_tools",
            default_bindings_module: "ctxbox_guest::__private::bindings",
            // Engines' native tests compare messages and answers.
            additional_derives: [PartialEq],
        });
    }
}

/// Exports a type implementing [`Engine`] as the component's `ctxbox:engine`
/// implementation. Use it once per engine crate, at the crate root.
///
/// The engine is created with [`Default::default`] on the first call an
/// instance receives. On targets other than `wasm32` this expands to nothing,
/// so the same crate can also be built natively (for tests and benches).
#[macro_export]
macro_rules! export_engine {
    ($engine:ty) => {
        #[cfg(target_arch = "wasm32")]
        const _: () = {
            struct __CtxboxSlot;

            impl $crate::__private::EngineSlot for __CtxboxSlot {
                type Engine = $engine;

                fn with<R>(f: impl FnOnce(&mut $engine) -> R) -> R {
                    ::std::thread_local! {
                        static SLOT: ::std::cell::RefCell<::std::option::Option<$engine>> =
                            const { ::std::cell::RefCell::new(::std::option::Option::None) };
                    }
                    SLOT.with(|slot| {
                        let mut slot = slot.borrow_mut();
                        f(slot.get_or_insert_with(::std::default::Default::default))
                    })
                }
            }

            type __CtxboxGlue = $crate::__private::Glue<__CtxboxSlot>;
            $crate::__private::bindings::__export_context_engine_with_tools!(__CtxboxGlue with_types_in $crate::__private::bindings);
        };
    };
}
