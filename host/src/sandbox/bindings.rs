//! Host bindings generated from `wit/` (the `context-engine-with-tools`
//! world: the `context-engine` world plus the optional `tools` export).
//!
//! A component must export `engine`; `tools` is optional (engines built
//! before it, and engines without tools, do not export it). So instead of
//! the world's own pre-instance type, which would demand both, the sandbox
//! pairs the two interfaces' export indices itself: [`EngineExportsPre`]
//! finds them once per component, [`EngineExports`] is one instance's.

use wasmtime::component::{Instance, InstancePre};
use wasmtime::{AsContextMut, Engine};

mod generated {
    wasmtime::component::bindgen!({
        path: "../wit",
        world: "context-engine-with-tools",
        imports: {
            "ctxbox:engine/host.delegate-compaction": async | trappable,
            "ctxbox:engine/host.summarize": async | trappable,
            "ctxbox:engine/host.read-transcript-delta": async | trappable,
            "ctxbox:engine/host.read-transcript-page": async | trappable,
            "ctxbox:engine/host.state-get": async | trappable,
            "ctxbox:engine/host.state-set": async | trappable,
            "ctxbox:engine/host.state-delete": async | trappable,
            "ctxbox:engine/host.state-scan": async | trappable,
            "ctxbox:engine/host.complete": async | trappable,
            "ctxbox:engine/host.index-put": async | trappable,
            "ctxbox:engine/host.index-delete": async | trappable,
            "ctxbox:engine/host.index-search": async | trappable,
            "ctxbox:engine/sql.[static]database.open": async | trappable,
            "ctxbox:engine/sql.[method]database.execute-batch": async | trappable,
            "ctxbox:engine/sql.[method]database.execute": async | trappable,
            "ctxbox:engine/sql.[method]database.query": async | trappable,
            "ctxbox:engine/sql.[method]database.prepare": async | trappable,
            "ctxbox:engine/sql.[method]statement.execute": async | trappable,
            "ctxbox:engine/sql.[method]statement.query": async | trappable,
            default: trappable,
        },
        exports: { default: async },
        with: {
            "ctxbox:engine/history.history": crate::sandbox::history_resource::HistoryHandle,
            "ctxbox:engine/sql.database": crate::sandbox::sql::DatabaseHandle,
            "ctxbox:engine/sql.statement": crate::sandbox::sql::StatementHandle,
        },
    });
}

pub(super) use self::generated::ContextEngineWithTools as ImportsWorld;
pub(super) use self::generated::{ctxbox, exports};

use self::generated::exports::ctxbox::engine::{engine as engine_export, tools as tools_export};

/// A component's exports, found before instantiation.
pub(crate) struct EngineExportsPre<T: 'static> {
    pre: InstancePre<T>,
    engine: engine_export::GuestIndices,
    tools: Option<tools_export::GuestIndices>,
}

impl<T: 'static> Clone for EngineExportsPre<T> {
    fn clone(&self) -> Self {
        Self {
            pre: self.pre.clone(),
            engine: self.engine.clone(),
            tools: self.tools.clone(),
        }
    }
}

impl<T: Send + 'static> EngineExportsPre<T> {
    /// The exports of `pre`'s component: `engine` (required) and `tools`
    /// (when the component exports it).
    pub(crate) fn new(pre: InstancePre<T>) -> wasmtime::Result<Self> {
        let engine = engine_export::GuestIndices::new(&pre)?;
        let tools = tools_export::GuestIndices::new(&pre).ok();
        Ok(Self { pre, engine, tools })
    }

    /// The wasmtime engine the component was compiled for.
    pub(crate) fn engine(&self) -> &Engine {
        self.pre.engine()
    }

    /// Whether the component exports `tools`.
    pub(crate) fn has_tools(&self) -> bool {
        self.tools.is_some()
    }

    /// Instantiates the component in `store`.
    pub(crate) async fn instantiate_async(
        &self,
        mut store: impl AsContextMut<Data = T>,
    ) -> wasmtime::Result<EngineExports> {
        let instance: Instance = self.pre.instantiate_async(&mut store).await?;
        let engine = self.engine.load(&mut store, &instance)?;
        let tools = self
            .tools
            .as_ref()
            .map(|tools| tools.load(&mut store, &instance))
            .transpose()?;
        Ok(EngineExports { engine, tools })
    }
}

/// One instance's exports.
pub(crate) struct EngineExports {
    engine: engine_export::Guest,
    tools: Option<tools_export::Guest>,
}

impl EngineExports {
    /// The `engine` interface.
    pub(crate) fn engine(&self) -> &engine_export::Guest {
        &self.engine
    }

    /// The `tools` interface, when the component exports it.
    pub(crate) fn tools(&self) -> Option<&tools_export::Guest> {
        self.tools.as_ref()
    }
}
