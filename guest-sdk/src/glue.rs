//! Connects an [`Engine`] to the generated export bindings.

use std::marker::PhantomData;

use crate::__private::bindings::ctxbox::engine::history::History as RawHistory;
use crate::__private::bindings::exports::ctxbox::engine::engine::{
    AfterTurnParams, AssembleParams, AssembleResult, BootstrapResult, Guest, IngestBatchResult,
    IngestResult, MaintainReason, MaintainResult, SubagentEndReason, SubagentSpawn,
};
use crate::__private::bindings::exports::ctxbox::engine::tools::Guest as ToolsGuest;
use crate::history::History;
use crate::{
    CompactParams, CompactResult, Engine, EngineError, EngineInfo, MessageEntry, SessionRef,
    ToolDefinition,
};

/// Where an exported engine's single instance lives; implemented by
/// [`export_engine!`](crate::export_engine).
pub trait EngineSlot: 'static {
    /// The engine type.
    type Engine: Engine;

    /// Runs `f` on the instance's engine, creating it on first use.
    fn with<R>(f: impl FnOnce(&mut Self::Engine) -> R) -> R;
}

/// The type the generated `export!` macro sees.
pub struct Glue<S>(PhantomData<S>);

impl<S: EngineSlot> Guest for Glue<S> {
    fn info() -> Result<EngineInfo, EngineError> {
        Ok(S::with(|engine| engine.info()))
    }

    fn bootstrap(
        session: SessionRef,
        history: &RawHistory,
    ) -> Result<BootstrapResult, EngineError> {
        let history = History::new(history);
        S::with(|engine| engine.bootstrap(&session, &history))
    }

    fn ingest(
        session: SessionRef,
        entry: MessageEntry,
        is_heartbeat: bool,
    ) -> Result<IngestResult, EngineError> {
        S::with(|engine| engine.ingest(&session, entry, is_heartbeat))
    }

    fn ingest_batch(
        session: SessionRef,
        entries: Vec<MessageEntry>,
        is_heartbeat: bool,
    ) -> Result<IngestBatchResult, EngineError> {
        S::with(|engine| engine.ingest_batch(&session, entries, is_heartbeat))
    }

    fn assemble(
        session: SessionRef,
        history: &RawHistory,
        params: AssembleParams,
    ) -> Result<AssembleResult, EngineError> {
        let history = History::new(history);
        S::with(|engine| engine.assemble(&session, &history, params))
    }

    fn compact(
        session: SessionRef,
        history: &RawHistory,
        params: CompactParams,
    ) -> Result<CompactResult, EngineError> {
        let history = History::new(history);
        S::with(|engine| engine.compact(&session, &history, params))
    }

    fn after_turn(
        session: SessionRef,
        history: &RawHistory,
        params: AfterTurnParams,
    ) -> Result<(), EngineError> {
        let history = History::new(history);
        S::with(|engine| engine.after_turn(&session, &history, params))
    }

    fn maintain(
        session: SessionRef,
        history: &RawHistory,
        reason: MaintainReason,
        runtime_context: Option<String>,
    ) -> Result<MaintainResult, EngineError> {
        let history = History::new(history);
        S::with(|engine| engine.maintain(&session, &history, reason, runtime_context))
    }

    fn prepare_subagent_spawn(spawn: SubagentSpawn) -> Result<Option<String>, EngineError> {
        S::with(|engine| engine.prepare_subagent_spawn(spawn))
    }

    fn rollback_subagent_spawn(preparation_id: String) -> Result<(), EngineError> {
        S::with(|engine| engine.rollback_subagent_spawn(preparation_id))
    }

    fn on_subagent_ended(
        child_session_key: String,
        reason: SubagentEndReason,
    ) -> Result<(), EngineError> {
        S::with(|engine| engine.on_subagent_ended(child_session_key, reason))
    }

    fn dispose() -> Result<(), EngineError> {
        S::with(|engine| engine.dispose())
    }
}

impl<S: EngineSlot> ToolsGuest for Glue<S> {
    fn list_tools() -> Vec<ToolDefinition> {
        S::with(|engine| engine.tools())
    }

    fn call_tool(
        session: SessionRef,
        name: String,
        arguments: String,
    ) -> Result<String, EngineError> {
        S::with(|engine| engine.call_tool(&session, &name, &arguments))
    }
}
