//! Host bindings generated from `wit/` (the `context-engine` world).
//!
//! Bindgen names the world's types after the world (`ContextEngine`,
//! `ContextEnginePre`); they are renamed here to [`EngineWorld`] and
//! [`EngineWorldPre`] so that no file shows two `ContextEngine`s: that name
//! is the host's trait ([`crate::contract::ContextEngine`]).

mod generated {
    wasmtime::component::bindgen!({
        path: "../wit",
        world: "context-engine",
        imports: {
            "ctxbox:engine/host.delegate-compaction": async | trappable,
            "ctxbox:engine/host.summarize": async | trappable,
            "ctxbox:engine/host.read-transcript-delta": async | trappable,
            "ctxbox:engine/host.state-get": async | trappable,
            "ctxbox:engine/host.state-set": async | trappable,
            "ctxbox:engine/host.state-delete": async | trappable,
            "ctxbox:engine/host.state-scan": async | trappable,
            default: trappable,
        },
        exports: { default: async },
        with: {
            "ctxbox:engine/history.history": crate::sandbox::history_resource::HistoryHandle,
        },
    });
}

pub(super) use self::generated::ContextEngine as EngineWorld;
pub(super) use self::generated::ContextEnginePre as EngineWorldPre;
pub(super) use self::generated::{ctxbox, exports};
