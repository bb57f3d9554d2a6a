//! The trait an engine implements.

use crate::history::History;
use crate::host;
use crate::{
    AfterTurnParams, AssembleParams, AssembleResult, BootstrapResult, CompactParams, CompactResult,
    EngineError, EngineInfo, IngestBatchResult, IngestResult, MaintainReason, MaintainResult,
    MessageEntry, SessionRef, SubagentEndReason, SubagentSpawn,
};

/// A context engine. Only [`info`](Engine::info) and
/// [`assemble`](Engine::assemble) are required; the defaults of every other
/// method mirror OpenClaw's reference behaviour.
///
/// Any `Err` returned, panic, trap or broken limit quarantines the engine and
/// hands the session to the host's built-in `legacy` engine, so return errors
/// only for real failures.
pub trait Engine: Default + 'static {
    /// Who the engine is; called once per load.
    fn info(&self) -> EngineInfo;

    /// Builds the prompt for the next model call from `history`.
    fn assemble(
        &mut self,
        session: &SessionRef,
        history: &History,
        params: AssembleParams,
    ) -> Result<AssembleResult, EngineError>;

    /// The first time the engine sees a session. Default: nothing to import.
    fn bootstrap(
        &mut self,
        _session: &SessionRef,
        _history: &History,
    ) -> Result<BootstrapResult, EngineError> {
        Ok(BootstrapResult {
            bootstrapped: false,
            imported_messages: None,
            reason: None,
        })
    }

    /// A message was appended. Default: not ingested (the host's transcript
    /// keeps it).
    fn ingest(
        &mut self,
        _session: &SessionRef,
        _entry: MessageEntry,
        _is_heartbeat: bool,
    ) -> Result<IngestResult, EngineError> {
        Ok(IngestResult { ingested: false })
    }

    /// Several messages were appended. Default: [`ingest`](Engine::ingest)
    /// each and count the ingested ones.
    fn ingest_batch(
        &mut self,
        session: &SessionRef,
        entries: Vec<MessageEntry>,
        is_heartbeat: bool,
    ) -> Result<IngestBatchResult, EngineError> {
        let mut ingested_count = 0;
        for entry in entries {
            if self.ingest(session, entry, is_heartbeat)?.ingested {
                ingested_count += 1;
            }
        }
        Ok(IngestBatchResult { ingested_count })
    }

    /// Makes the session's context smaller. Default: the host's native
    /// compaction ([`host::delegate_compaction`]).
    fn compact(
        &mut self,
        _session: &SessionRef,
        _history: &History,
        params: CompactParams,
    ) -> Result<CompactResult, EngineError> {
        Ok(host::delegate_compaction(&params)?)
    }

    /// The turn is over. Default: nothing.
    fn after_turn(
        &mut self,
        _session: &SessionRef,
        _history: &History,
        _params: AfterTurnParams,
    ) -> Result<(), EngineError> {
        Ok(())
    }

    /// Housekeeping. Default: nothing changed.
    fn maintain(
        &mut self,
        _session: &SessionRef,
        _history: &History,
        _reason: MaintainReason,
        _runtime_context: Option<String>,
    ) -> Result<MaintainResult, EngineError> {
        Ok(MaintainResult {
            changed: false,
            rewritten_entries: 0,
            reason: None,
        })
    }

    /// A subagent is about to be spawned. Default: nothing to undo (`None`).
    fn prepare_subagent_spawn(
        &mut self,
        _spawn: SubagentSpawn,
    ) -> Result<Option<String>, EngineError> {
        Ok(None)
    }

    /// Undoes the preparation `preparation_id` after a failed spawn. Default:
    /// nothing.
    fn rollback_subagent_spawn(&mut self, _preparation_id: String) -> Result<(), EngineError> {
        Ok(())
    }

    /// A subagent's session ended. Default: nothing.
    fn on_subagent_ended(
        &mut self,
        _child_session_key: String,
        _reason: SubagentEndReason,
    ) -> Result<(), EngineError> {
        Ok(())
    }

    /// The instance is about to be dropped. Default: nothing.
    fn dispose(&mut self) -> Result<(), EngineError> {
        Ok(())
    }
}
