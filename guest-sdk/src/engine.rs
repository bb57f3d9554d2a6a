//! The trait an engine implements.

use crate::history::History;
use crate::host;
use crate::{
    AfterTurnParams, AssembleParams, AssembleResult, BootstrapResult, CompactParams, CompactResult,
    EngineError, EngineErrorKind, EngineInfo, IngestBatchResult, IngestResult, MaintainReason,
    MaintainResult, MessageEntry, SessionRef, SubagentEndReason, SubagentSpawn, ToolDefinition,
};

/// A context engine. Only [`info`](Engine::info) and
/// [`assemble`](Engine::assemble) are required; the defaults of every other
/// method mirror OpenClaw's reference behaviour.
///
/// Any `Err` returned, panic, trap or broken limit quarantines the engine and
/// hands the session to the host's built-in `legacy` engine, so return errors
/// only for real failures.
///
/// Write the engine's decisions as functions over [`HistoryView`]
/// (implemented by [`History`] in the sandbox): the same logic then runs
/// natively against [`MemoryHistory`](crate::testing::MemoryHistory) in unit
/// tests and benches.
///
/// ```
/// use ctxbox_guest::prelude::*;
/// use ctxbox_guest::testing::{MemoryHistory, conversation};
///
/// /// The last `n` entries, widened so no tool result loses its call.
/// fn last_entries(history: &impl HistoryView, n: u32) -> std::ops::Range<u32> {
///     let end = history.len();
///     let mut start = end.saturating_sub(n);
///     if let Some(pair) = history.split_pair(start) {
///         start = pair.start;
///     }
///     start..end
/// }
///
/// #[derive(Default)]
/// struct LastTen;
///
/// impl Engine for LastTen {
///     fn info(&self) -> EngineInfo {
///         EngineInfo::new("last-ten", "Last ten messages").with_version("1.0.0")
///     }
///
///     fn assemble(
///         &mut self,
///         _session: &SessionRef,
///         history: &History,
///         _params: AssembleParams,
///     ) -> Result<AssembleResult, EngineError> {
///         let keep = last_entries(history, 10);
///         Ok(AssembleResult::keep_range(keep.clone(), history.tokens(keep)))
///     }
/// }
///
/// // Natively, on a synthetic session of 5 turns of 4 entries (question,
/// // call, result, answer): the last 12 start on a question.
/// let history = MemoryHistory::new(conversation(5));
/// assert_eq!(last_entries(&history, 12), 8..20);
/// // The last 10 would start on a result without its call: widened.
/// assert_eq!(last_entries(&history, 10), 9..20);
/// ```
///
/// [`HistoryView`]: crate::HistoryView
pub trait Engine: Default + 'static {
    /// Who the engine is; called once per load.
    fn info(&self) -> EngineInfo;

    /// Builds the prompt for the next model call from `history`: ranges of
    /// the history kept verbatim ([`AssembledItem::Keep`]) and messages of the
    /// engine's own ([`AssembledItem::Insert`]), in prompt order. The host
    /// refuses ranges outside the history and prompts that separate a tool
    /// call from its result.
    ///
    /// [`AssembledItem::Keep`]: crate::AssembledItem::Keep
    /// [`AssembledItem::Insert`]: crate::AssembledItem::Insert
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
    ///
    /// The host bounds the call (a window re-armed by
    /// [`host::report_progress`], ten windows at most) and checks the answer:
    /// `first_kept_entry_id` must name an entry of the history and
    /// `tokens_after` may not exceed `tokens_before`.
    ///
    /// ```no_run
    /// # use ctxbox_guest::prelude::*;
    /// # #[derive(Default)] struct Mine;
    /// # impl Engine for Mine {
    /// #     fn info(&self) -> EngineInfo { EngineInfo::new("mine", "Mine") }
    /// #     fn assemble(&mut self, _: &SessionRef, h: &History, _: AssembleParams)
    /// #         -> Result<AssembleResult, EngineError> { Ok(AssembleResult::keep_range(0..h.len(), 0)) }
    /// fn compact(
    ///     &mut self,
    ///     _session: &SessionRef,
    ///     _history: &History,
    ///     params: CompactParams,
    /// ) -> Result<CompactResult, EngineError> {
    ///     ctxbox_guest::info!("compacting (force: {})", params.force);
    ///     // Custom instructions for the host's summarizer, the rest as usual.
    ///     let mut params = params;
    ///     params.custom_instructions.get_or_insert_with(|| "Keep every file path.".into());
    ///     Ok(host::delegate_compaction(&params)?)
    /// }
    /// # }
    /// ```
    fn compact(
        &mut self,
        _session: &SessionRef,
        _history: &History,
        params: CompactParams,
    ) -> Result<CompactResult, EngineError> {
        Ok(host::delegate_compaction(&params)?)
    }

    /// The turn is over; `history` holds its new messages from
    /// `params.pre_prompt_message_count` on. The host does not also ingest
    /// them. Default, as the reference does for engines without `afterTurn`:
    /// [`ingest_batch`](Engine::ingest_batch) the new messages.
    fn after_turn(
        &mut self,
        session: &SessionRef,
        history: &History,
        params: AfterTurnParams,
    ) -> Result<(), EngineError> {
        let new_messages = history.range(params.pre_prompt_message_count..history.len());
        if !new_messages.is_empty() {
            self.ingest_batch(session, new_messages, params.is_heartbeat)?;
        }
        Ok(())
    }

    /// Housekeeping. Default: nothing changed. `runtime_context` (JSON, when
    /// the engine accepts `HostParam::RuntimeContext`) holds the
    /// `sessionTarget` (`agentId`, `sessionId`, `sessionKey`, `storePath`),
    /// `workspaceDir`, `agentDir`, `cwd`, and after a compaction its `trigger`
    /// and, when it rotated the session, `previousSessionId`.
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

    /// Tools the engine offers the model (at most 16), the same for every
    /// session; the host asks once per instance. Default: none.
    ///
    /// ```
    /// use ctxbox_guest::ToolDefinition;
    ///
    /// let grep = ToolDefinition::new(
    ///     "grep",
    ///     "Search the whole conversation, including what compaction summarized away.",
    ///     r#"{"type":"object","properties":{"query":{"type":"string"}},"required":["query"]}"#,
    /// );
    /// assert_eq!(grep.name, "grep");
    /// ```
    fn tools(&self) -> Vec<ToolDefinition> {
        Vec::new()
    }

    /// Answers the model's call to one of [`tools`](Engine::tools):
    /// `arguments` is the JSON object the model wrote (check it). The
    /// answer is the tool result the model reads (at most 256 KiB); an
    /// error is shown to the model as the tool's failure, and does not
    /// quarantine the engine (a panic or a broken limit does). The history
    /// is not lent: read what a tool needs from [`host::state`],
    /// [`host::index`] or [`host::read_transcript_delta`]. Default: no such
    /// tool.
    fn call_tool(
        &mut self,
        _session: &SessionRef,
        name: &str,
        _arguments: &str,
    ) -> Result<String, EngineError> {
        Err(EngineError {
            kind: EngineErrorKind::Unsupported,
            message: format!("no tool `{name}`"),
        })
    }

    /// The instance is about to be dropped. Default: nothing.
    fn dispose(&mut self) -> Result<(), EngineError> {
        Ok(())
    }
}
