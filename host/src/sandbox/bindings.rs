//! Host bindings generated from `wit/` (the `context-engine` world).

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
        "ctxbox:engine/history.history": super::history_resource::HistoryHandle,
    },
});
