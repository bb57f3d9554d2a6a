//! A session as the turn runner keeps it: its transcript, whether the engine
//! has bootstrapped it, the prompt state that outlives a single call, and the
//! engine's background maintenance of the last turn.

use std::collections::HashSet;

use tokio::task::JoinHandle;

use super::overflow::PendingPass;
use super::pressure::{Calibration, PromptPressure};
use super::prompt::Projection;
use crate::contract::history::History;
use crate::contract::types::{AgentMessage, MessageEntry, SessionRef, Usage};
use crate::services::compaction::{self, ProgressGuard};
use crate::transcript::{Transcript, TranscriptError, TranscriptStore};

/// One conversation being run.
pub struct Session {
    transcript: Transcript,
    session_ref: SessionRef,
    bootstrapped: bool,
    turns: usize,
    /// A thread-bootstrap prompt the engine asked to reuse.
    pub(super) projection: Option<Projection>,
    /// Whether overflow recovery has switched on truncating oversized tool
    /// traffic in prompts.
    pub(super) truncate_tool_traffic: bool,
    /// The last turn's `maintain(turn)`, when the engine runs it in the
    /// background.
    pub(super) maintenance: Option<JoinHandle<()>>,
    /// Ids of every tool call on the session's branch, to tell a result
    /// without a call.
    calls: HashSet<String>,
    /// How the model counts, learnt from its reports.
    pub(super) calibration: Calibration,
    /// The caller's own count of the next prompt, weighed by the next
    /// pre-prompt check and then dropped.
    pub(super) caller_pressure: Option<PromptPressure>,
    /// The usage the last model call reported (a recovery compaction's
    /// `promptCache`).
    pub(super) last_call_usage: Option<Usage>,
    /// The compaction-progress guard.
    pub(super) progress: ProgressGuard,
    /// A compaction by an engine that owns compaction, measured when its
    /// next prompt is assembled.
    pub(super) pending_pass: Option<PendingPass>,
    /// The turn being run, from its inputs' append to its end.
    current_turn: Option<CurrentTurn>,
}

/// What the runner keeps of the turn in progress.
struct CurrentTurn {
    /// The id of its first entry: reads of the transcript while its prompt
    /// is built stop before it (the current-turn fence).
    first_entry: String,
    /// Its runtime-context carriers, which no history holds: each of the
    /// turn's prompts ends with them.
    carriers: Vec<AgentMessage>,
}

impl Session {
    /// A session over `transcript`, routed under `session_key` if the host
    /// has one.
    pub fn new(transcript: Transcript, session_key: Option<String>) -> Self {
        let session_ref = SessionRef {
            session_key,
            ..transcript.session_ref()
        };
        let calls = transcript
            .active_branch()
            .iter()
            .flat_map(|entry| entry.message.tool_call_ids().map(str::to_owned))
            .collect();
        Self {
            transcript,
            session_ref,
            calls,
            bootstrapped: false,
            turns: 0,
            projection: None,
            truncate_tool_traffic: false,
            maintenance: None,
            calibration: Calibration::default(),
            caller_pressure: None,
            last_call_usage: None,
            progress: ProgressGuard::default(),
            pending_pass: None,
            current_turn: None,
        }
    }

    /// Who the session is, as engines see it.
    pub fn session_ref(&self) -> &SessionRef {
        &self.session_ref
    }

    /// The transcript (the current one, after any rotation).
    pub fn transcript(&self) -> &Transcript {
        &self.transcript
    }

    /// The active context.
    pub fn history(&self) -> History {
        self.transcript.history()
    }

    /// Waits for the engine's background maintenance of the last turn, if
    /// it is still running. The runner does this before the session's next
    /// engine call and at the end of a replay; a host that drops a session
    /// should too, or that maintenance may be cut short at shutdown.
    pub async fn wait_for_maintenance(&mut self) {
        if let Some(task) = self.maintenance.take()
            && let Err(error) = task.await
        {
            tracing::warn!(%error, "background maintenance did not finish");
        }
    }

    /// Turns completed.
    pub fn turns_run(&self) -> usize {
        self.turns
    }

    /// The context's size as compaction counts it: the last valid reported
    /// usage plus estimates of what came after, never below the estimate.
    pub fn context_tokens(&self) -> u64 {
        compaction::context_tokens(&self.transcript.context(), None)
    }

    /// Hands in the caller's own count of the next prompt (its tokenizer, a
    /// rendered request): the next turn's first pre-prompt check weighs it
    /// instead of the host's estimate, and the turn report names its
    /// source. It counts one prompt, so it is used once; the checks before
    /// the turn's later model calls, after tool results were added,
    /// estimate again.
    pub fn set_prompt_pressure(&mut self, pressure: PromptPressure) {
        self.caller_pressure = Some(pressure);
    }

    pub(super) fn bootstrapped(&self) -> bool {
        self.bootstrapped
    }

    pub(super) fn mark_bootstrapped(&mut self) {
        self.bootstrapped = true;
    }

    pub(super) fn turn_done(&mut self) {
        self.turns += 1;
    }

    /// A turn begins with its `inputs`, just appended.
    pub(super) fn begin_turn(&mut self, inputs: &[MessageEntry]) {
        self.current_turn = inputs.first().map(|first| CurrentTurn {
            first_entry: first.id.clone(),
            carriers: inputs
                .iter()
                .filter(|entry| entry.message.is_runtime_context_carrier())
                .map(|entry| entry.message.clone())
                .collect(),
        });
    }

    /// The turn is over (answered, failed or rolled back).
    pub(super) fn end_turn(&mut self) {
        self.current_turn = None;
    }

    /// The current turn's first entry, while a turn runs.
    pub(super) fn turn_fence(&self) -> Option<String> {
        self.current_turn
            .as_ref()
            .map(|turn| turn.first_entry.clone())
    }

    /// The current turn's runtime-context carriers.
    pub(super) fn turn_carriers(&self) -> &[AgentMessage] {
        self.current_turn
            .as_ref()
            .map_or(&[], |turn| turn.carriers.as_slice())
    }

    pub(super) fn append(
        &mut self,
        messages: &[AgentMessage],
    ) -> Result<Vec<MessageEntry>, TranscriptError> {
        if messages.is_empty() {
            return Ok(Vec::new());
        }
        let appended = self.transcript.append_uncommitted(messages)?;
        self.calls.extend(
            messages
                .iter()
                .flat_map(|message| message.tool_call_ids().map(str::to_owned)),
        );
        Ok(appended)
    }

    /// Makes the session's appends durable: the runner appends a turn's
    /// messages uncommitted and commits them together before the engine is
    /// told of them (`ingest`, `after-turn`, a compaction) and before the
    /// turn returns, one sync each time instead of one per append.
    /// Takes the entries `ids` (everything after `leaf`) off the active
    /// branch ([`Transcript::roll_back_to`]); a prompt the engine asked to
    /// reuse may hold them, so it is dropped.
    pub(super) fn roll_back(
        &mut self,
        leaf: Option<&str>,
        ids: &[String],
        reason: &str,
    ) -> Result<(), TranscriptError> {
        self.transcript.roll_back_to(leaf, ids, reason)?;
        self.projection = None;
        Ok(())
    }

    pub(super) fn commit(&self) -> Result<(), TranscriptError> {
        self.transcript.commit()
    }

    /// Whether a tool call `id` is on the session's branch.
    pub(super) fn knows_call(&self, id: &str) -> bool {
        self.calls.contains(id)
    }

    /// Follows a rotation the host performed (the transcript's own record of
    /// one; an engine's answer never chooses the file) and forgets prompt
    /// state built from a context that is gone: the old file's, or one a
    /// compaction in place (e.g. the engine's own, in `after-turn`) rewrote.
    pub(super) fn reload(&mut self, store: &TranscriptStore) -> Result<(), TranscriptError> {
        if let Some(next) = self.transcript.successor() {
            self.transcript = store.open(std::path::Path::new(&next.session_file))?;
            self.session_ref = SessionRef {
                session_key: self.session_ref.session_key.take(),
                ..self.transcript.session_ref()
            };
            self.projection = None;
        }
        let history = self.history();
        if self
            .projection
            .as_ref()
            .is_some_and(|projection| !projection.extends_into(&history))
        {
            self.projection = None;
        }
        Ok(())
    }
}
