//! `lossless`: keeps every message, and shows old history as a hierarchy of
//! summaries (in the spirit of lossless-claw).
//!
//! * **Ingest.** Every message the engine is given (`ingest`, `ingest-batch`,
//!   the history at `bootstrap`, the turn's new messages at `after-turn`) is
//!   stored in the host's `state-*` store, once per transcript id, in the
//!   order received. Nothing is ever deleted.
//! * **Summaries.** Outside the fresh tail (the newest 32 messages), messages
//!   are summarized in chunks of 8 by the host's summarizer (leaf summaries);
//!   whenever 4 summaries of one level accumulate they are condensed into one
//!   of the next level. The summaries form a DAG: each node records the
//!   messages (leaf) or nodes (above) it covers, so every message stays
//!   reachable from the summaries that stand in for it.
//! * **Assemble.** The prompt is the highest-level summaries (the roots of
//!   the DAG, as inserted messages) followed by the history they do not cover
//!   (kept verbatim, as ranges of the host's history): the newest stretch of
//!   that which fits the budget, always including the fresh tail, never
//!   separating a tool call from its results. When it leaves earlier
//!   messages out with no summary standing in for them, the prompt opens with
//!   a one-line note saying how many, that they are stored, and which tools
//!   (by the names the model sees them under) find and read them.
//! * **Compaction.** The engine owns it (`owns-compaction`): `compact` and
//!   `after-turn` (once the context passes 75% of the budget) write the
//!   summaries, reporting progress after each and stopping cleanly when the
//!   caller aborts. Every step is persisted as it completes, so a compaction
//!   cut short loses nothing and the next one continues.
//!
//! * **Summaries by the agent's model.** Summaries are asked of the host's
//!   model (`host.complete`: OpenClaw's own model through the sidecar, the
//!   configured provider in `ctxbox run`), falling back to the host's
//!   summarizer when the host has none.
//! * **Recall.** Every stored message is indexed in the host's searchable
//!   memory (`host.index-put`, session scope, document `m<number>`) — in
//!   order, as much as the host takes in one call, the rest in the calls
//!   after it — and the
//!   model gets two tools: `grep` (every message containing the given words,
//!   summarized or not, with snippets) and `expand` (messages read back in
//!   full by number, as summaries name them).
//!
//! The instance keeps nothing in memory between calls: everything lives in
//! the store.
//!
//! # State layout
//!
//! Keys are per session, under `s/<session>/`, where `<session>` is the
//! session id with `%` and `/` percent-encoded (`%25`, `%2F`), so no session's
//! keys fall under another's prefix. Sequence numbers and node ids are 16
//! lowercase hex digits, so keys sort in order. Values use the SDK's
//! [`codec`](ctxbox_guest::codec) (varints, length-prefixed strings; no
//! serde, to keep the guest small and quick to build); messages, the meta and
//! nodes are led by a format byte (1), index values are a bare varint.
//!
//! | key | value |
//! |---|---|
//! | `s/<session>/meta` | messages stored (the next sequence number); messages summarized (a prefix); the transcript id of the last summarized message; the next node id; the roots (node id, level, tokens), oldest first |
//! | `s/<session>/m/<seq>` | message `seq` (0-based, in the order received): the whole `message-entry`, [`encode_entry`](ctxbox_guest::codec::encode_entry) |
//! | `s/<session>/e/<entry id>` | the sequence number of the message with this transcript id (percent-encoded like the session); makes ingestion idempotent |
//! | `s/<session>/ix` | how many messages are indexed for recall (a prefix), a bare varint; missing in sessions stored before it was kept, which indexed each message as they stored it |
//! | `s/<session>/n/<node>` | summary node: level (0 = leaf), what it covers (message sequence numbers for a leaf, node ids above), first and last message covered, the summary, its tokens in the prompt |
//!
//! Writes are ordered so that a call cut short never loses an acknowledged
//! message or leaves a dangling reference: messages before the meta that
//! counts them, nodes before the meta that makes them roots.
//!
//! # Limits
//!
//! A message the host never hands the engine is not stored; if the summaries
//! come to cover its place in the history, it is left out of the prompt.
//! `bootstrap` stores the whole history in one call, so a history larger than
//! the host's per-call input allowance (64 MiB by default) fails it. The
//! tunables ([`Config`]) are fixed at their defaults in the wasm build.
//!
//! # Native use
//!
//! [`Lossless`] is the engine's logic over two small ports, a [`Store`] and
//! the host [`Services`] compaction needs. The wasm export
//! ([`LosslessEngine`]) wires them to the host; tests and benches run the same
//! logic natively with a [`MemoryStore`] and their own services.

#![warn(missing_docs)]

mod assemble;
mod compaction;
mod config;
mod coverage;
mod guest;
mod layout;
mod ports;
mod recall;
mod records;
mod render;
mod session;

#[cfg(test)]
mod tests;

use ctxbox_guest::prelude::*;
use ctxbox_guest::{
    AfterTurnParams, BootstrapResult, CompactParams, CompactResult, CompactionTarget,
    IngestBatchResult, IngestResult,
};

pub use config::Config;
pub use guest::{HostRecall, HostServices, HostStore, SUMMARY_SYSTEM_PROMPT};
pub use ports::{Indexed, MemoryRecall, MemoryStore, Recall, Services, Store};
pub use render::SUMMARY_MESSAGE_TYPE;

use compaction::{Compaction, Goal};
use session::Session;

/// The engine's id.
pub const ID: &str = "lossless";

/// Entries read from the history at a time while bootstrapping.
const BOOTSTRAP_PAGE: u32 = 256;

/// Who the engine is: it owns compaction and needs no host-added parameter.
pub fn info() -> EngineInfo {
    let mut info = EngineInfo::new(ID, "Lossless")
        .with_version(env!("CARGO_PKG_VERSION"))
        .owning_compaction();
    info.accepted_host_params = Some(Vec::new());
    info
}

/// The engine's logic, over a [`Store`] and host [`Services`].
#[derive(Debug, Clone, Default)]
pub struct Lossless<S, V> {
    config: Config,
    store: S,
    services: V,
}

impl<S: Store, V: Services> Lossless<S, V> {
    /// An engine with `config`, keeping its data in `store`.
    pub fn new(config: Config, store: S, services: V) -> Self {
        Self {
            config,
            store,
            services,
        }
    }

    /// The tunables.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// The store.
    pub fn store(&self) -> &S {
        &self.store
    }

    /// Stores every entry of `history` not stored yet; answers how many were.
    pub fn bootstrap(
        &self,
        session: &SessionRef,
        history: &impl HistoryView,
    ) -> Result<BootstrapResult, EngineError> {
        let data = Session::open(&self.store, &session.session_id);
        let len = history.len();
        let mut imported = 0;
        let mut next = 0;
        while next < len {
            let page = history.range(next..len.min(next.saturating_add(BOOTSTRAP_PAGE)));
            if page.is_empty() {
                break;
            }
            next += page.len() as u32;
            imported += self.store_and_index(&data, &session.session_id, page)?;
        }
        Ok(BootstrapResult {
            bootstrapped: true,
            imported_messages: Some(imported),
            reason: None,
        })
    }

    /// Stores the entries not stored yet (by transcript id), in order;
    /// answers how many were new.
    pub fn ingest(
        &self,
        session: &SessionRef,
        entries: Vec<MessageEntry>,
    ) -> Result<u32, EngineError> {
        let data = Session::open(&self.store, &session.session_id);
        self.store_and_index(&data, &session.session_id, entries)
    }

    /// Stores the entries of `data`'s session not stored yet and indexes
    /// what the host takes of the session's unindexed messages; answers how
    /// many were new.
    fn store_and_index(
        &self,
        data: &Session<'_, S>,
        session_id: &str,
        entries: Vec<MessageEntry>,
    ) -> Result<u32, EngineError> {
        let appended = data.append(entries)?;
        recall::index(self.services.recall(), data, session_id, &appended)?;
        Ok(appended.len() as u32)
    }

    /// The tools the engine offers the model: `grep` and `expand`.
    pub fn tools(&self) -> Vec<ToolDefinition> {
        recall::tools()
    }

    /// Answers the model's call to tool `name` in `session`.
    pub fn call_tool(
        &self,
        session: &SessionRef,
        name: &str,
        arguments: &str,
    ) -> Result<String, EngineError> {
        let data = Session::open(&self.store, &session.session_id);
        recall::call(
            self.services.recall(),
            &data,
            &session.session_id,
            name,
            arguments,
        )
    }

    /// The prompt for `history` within `token_budget` (see the crate docs);
    /// `available_tools` are the tools the model is offered, where the
    /// engine's own are found under the names the model sees.
    pub fn assemble(
        &self,
        session: &SessionRef,
        history: &impl HistoryView,
        token_budget: Option<u64>,
        available_tools: &[String],
    ) -> Result<AssembleResult, EngineError> {
        let data = Session::open(&self.store, &session.session_id);
        let estimate = |message: &AgentMessage| {
            self.services.estimate_tokens(&[MessageEntry {
                id: String::new(),
                parent_id: None,
                timestamp_ms: 0,
                message: message.clone(),
            }])
        };
        let tools = recall::ToolNames::among(available_tools);
        assemble::plan(
            &data,
            &self.config,
            history,
            token_budget,
            &tools,
            &estimate,
        )
    }

    /// Summarizes towards `params`' target: the budget or the threshold
    /// share of it; everything outside the fresh tail when forced or when no
    /// budget is given.
    pub fn compact(
        &self,
        session: &SessionRef,
        history: &impl HistoryView,
        params: &CompactParams,
    ) -> Result<CompactResult, EngineError> {
        let goal = match params.token_budget {
            Some(budget) if !params.force => Goal::Within(match params.compaction_target {
                CompactionTarget::Budget => budget,
                CompactionTarget::Threshold => self.config.threshold_tokens(budget),
            }),
            _ => Goal::Everything,
        };
        let outcome = self
            .compaction(&session.session_id, params.custom_instructions.as_deref())
            .run(history, goal)?;
        Ok(outcome.into_result())
    }

    /// Stores the turn's new messages, then, when a budget is given,
    /// compacts down to the threshold share of it. Answers the compaction's
    /// result (`compacted: false` when the context was within the threshold).
    pub fn after_turn(
        &self,
        session: &SessionRef,
        history: &impl HistoryView,
        params: &AfterTurnParams,
    ) -> Result<Option<CompactResult>, EngineError> {
        self.ingest(
            session,
            history.range(params.pre_prompt_message_count..history.len()),
        )?;
        let Some(budget) = params.token_budget else {
            return Ok(None);
        };
        let goal = Goal::Within(self.config.threshold_tokens(budget));
        let outcome = self
            .compaction(&session.session_id, None)
            .run(history, goal)?;
        Ok(Some(outcome.into_result()))
    }

    fn compaction<'a>(
        &'a self,
        session_id: &str,
        custom_instructions: Option<&'a str>,
    ) -> Compaction<'a, S, V> {
        Compaction {
            session: Session::open(&self.store, session_id),
            services: &self.services,
            config: &self.config,
            custom_instructions,
        }
    }
}

/// The exported engine: [`Lossless`] over the host's store and services.
#[derive(Debug, Default)]
pub struct LosslessEngine(Lossless<HostStore, HostServices>);

impl Engine for LosslessEngine {
    fn info(&self) -> EngineInfo {
        info()
    }

    fn tools(&self) -> Vec<ToolDefinition> {
        self.0.tools()
    }

    fn call_tool(
        &mut self,
        session: &SessionRef,
        name: &str,
        arguments: &str,
    ) -> Result<String, EngineError> {
        self.0.call_tool(session, name, arguments)
    }

    fn bootstrap(
        &mut self,
        session: &SessionRef,
        history: &History,
    ) -> Result<BootstrapResult, EngineError> {
        self.0.bootstrap(session, history)
    }

    fn ingest(
        &mut self,
        session: &SessionRef,
        entry: MessageEntry,
        _is_heartbeat: bool,
    ) -> Result<IngestResult, EngineError> {
        // Stored now or before: either way the store has it.
        self.0.ingest(session, vec![entry])?;
        Ok(IngestResult { ingested: true })
    }

    fn ingest_batch(
        &mut self,
        session: &SessionRef,
        entries: Vec<MessageEntry>,
        _is_heartbeat: bool,
    ) -> Result<IngestBatchResult, EngineError> {
        let ingested_count = entries.len() as u32;
        self.0.ingest(session, entries)?;
        Ok(IngestBatchResult { ingested_count })
    }

    fn assemble(
        &mut self,
        session: &SessionRef,
        history: &History,
        params: AssembleParams,
    ) -> Result<AssembleResult, EngineError> {
        self.0.assemble(
            session,
            history,
            params.token_budget,
            &params.available_tools,
        )
    }

    fn compact(
        &mut self,
        session: &SessionRef,
        history: &History,
        params: CompactParams,
    ) -> Result<CompactResult, EngineError> {
        self.0.compact(session, history, &params)
    }

    fn after_turn(
        &mut self,
        session: &SessionRef,
        history: &History,
        params: AfterTurnParams,
    ) -> Result<(), EngineError> {
        if let Some(result) = self.0.after_turn(session, history, &params)?
            && !result.ok
        {
            // The turn is done; the next compaction retries.
            ctxbox_guest::warn!(
                "proactive compaction failed: {}",
                result.reason.unwrap_or_default()
            );
        }
        Ok(())
    }
}

ctxbox_guest::export_engine!(LosslessEngine);
