//! The turn runner (ARCHITECTURE.md §8): what an embedding host calls for each user
//! message. It drives the selected (guarded) engine around the model calls
//! of a turn and keeps the session's transcript.
//!
//! One turn: bootstrap on first sight (and `maintain(bootstrap)`) → append
//! the user's message → for each model call: the pre-prompt check
//! (estimate × 1.2 against the window minus the reserve; skipped for engines
//! that own compaction), which compacts, truncates tool results in prompts,
//! or both → `assemble` → the provider → on a context overflow (an error, or
//! an answer that stopped with one) or a timeout on a nearly full prompt,
//! recovery (`overflow.rs`: `compact(force, budget)` at most three times
//! before the model answers again, every attempt counting, then truncating
//! oversized tool results once if there are any; at most two compactions a
//! turn for timeouts) →
//! append the answer, run its tools, repeat while the model calls tools →
//! `after-turn` (which is also how the engine hears of the turn's new
//! messages; see [`TurnRunner::run_turn`]) and `maintain(turn)` in the
//! foreground or in the background (awaited before the session's next engine
//! call).

mod compaction_hooks;
mod engine_tools;
pub mod load;
mod overflow;
mod preflight;
mod pressure;
mod prompt;
mod report;
mod runtime_settings;
mod script;
mod session;
mod subagent;
mod tool_results;

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

pub use self::compaction_hooks::{CompactionFinished, CompactionHooks, CompactionStarting};
pub use self::preflight::{PrePromptCheck, Route};
pub use self::pressure::PromptPressure;
pub use self::report::{
    COMPACTION_FAILURE_HINT, CompactionPass, PromptSent, TurnError, TurnReport,
};
use self::runtime_settings::{
    CompactionTrigger, MaintainContext, after_turn_context, compaction_context, session_target,
    with_session_target,
};
pub use self::script::{FailedTurn, RunReport};
pub use self::session::Session;
pub use self::subagent::{
    PARENT_FORK_MAX_TOKENS, SpawnOutcome, Subagent, SubagentPlan, SubagentRequest, SubagentStart,
    subagent_session_key,
};
use crate::contract::engine::{CallOptions, ContextEngine};
use crate::contract::history::History;
use crate::contract::text::clip;
use crate::contract::types::{
    AfterTurnParams, AgentMessage, CompactParams, CompactResult, CompactionTarget, MaintainReason,
    MessageEntry, TurnMaintenanceMode,
};
use crate::contract::validate::Violation;
use crate::engines::guard::GuardedEngine;
use crate::provider::{
    ModelRequest, Provider, ProviderError, ToolDefinition, ToolExecutor, runs_its_tool_calls,
};
use crate::services::compaction::effective_reserve;
use crate::services::completions::{CompletionTotals, Completions};
use crate::transcript::{Transcript, TranscriptError, TranscriptStore};

/// Most model calls one turn may make (a tool loop that never ends is cut).
const MAX_MODEL_CALLS_PER_TURN: u32 = 64;

/// How a runner talks to its model.
#[derive(Debug, Clone)]
pub struct RunnerConfig {
    /// The model's context window, tokens.
    pub window: u64,
    /// Tokens kept free for the answer (`agents.defaults.compaction.reserveTokens`);
    /// raised to 20,000 and capped at a quarter of the window, as the
    /// reference does ([`effective_reserve`]).
    pub reserve_tokens: u64,
    /// Whether the runner compacts proactively before a prompt
    /// (`agents.defaults.compaction.enabled`).
    pub proactive_compaction: bool,
    /// The host's system prompt.
    pub system_prompt: String,
    /// The model to name in requests.
    pub model: Option<String>,
    /// Tools the model may call.
    pub tools: Vec<String>,
    /// The agent's compaction window (`compaction.timeoutSeconds`) for the
    /// engine's `compact` and `after-turn`; `None`: the host's.
    pub compaction_window: Option<Duration>,
    /// The agent the runner works for, as engines are told.
    pub agent: AgentIdentity,
}

/// Who a runner works for: the session target's `agentId` and the
/// `workspaceDir` and `agentDir` of `maintain`'s runtime context.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AgentIdentity {
    /// The agent's id (`agents.list[].id`).
    pub id: Option<String>,
    /// Its workspace.
    pub workspace_dir: Option<std::path::PathBuf>,
    /// Its directory.
    pub agent_dir: Option<std::path::PathBuf>,
}

impl RunnerConfig {
    /// Tokens reserved for the answer in this window.
    pub fn reserve(&self) -> u64 {
        effective_reserve(self.window, self.reserve_tokens)
    }

    /// Tokens the prompt may take: the window minus the reserve.
    pub fn prompt_budget(&self) -> u64 {
        self.window - self.reserve()
    }
}

/// Runs turns for sessions with one engine, one provider and one tool
/// executor.
pub struct TurnRunner {
    engine: Arc<GuardedEngine>,
    provider: Arc<dyn Provider>,
    tools: Arc<dyn ToolExecutor>,
    /// The tools' definitions, asked of the executor once.
    tool_definitions: Vec<ToolDefinition>,
    /// What the definitions add to every prompt, weighted as JSON.
    tool_definition_tokens: u64,
    transcripts: TranscriptStore,
    config: RunnerConfig,
    /// Told of every compaction, if the host listens.
    compaction_hooks: Option<Arc<dyn CompactionHooks>>,
    /// Engines' model completions, whose totals each turn's report takes
    /// its engine's share of, if the host keeps them.
    completions: Option<Arc<Completions>>,
}

impl TurnRunner {
    /// A runner. The model is told of the tools `tools` defines
    /// ([`ToolExecutor::definitions`]).
    pub fn new(
        engine: Arc<GuardedEngine>,
        provider: Arc<dyn Provider>,
        tools: Arc<dyn ToolExecutor>,
        transcripts: TranscriptStore,
        config: RunnerConfig,
    ) -> Self {
        let tool_definitions = tools.definitions();
        let tool_definition_tokens = tool_definitions
            .iter()
            .map(|definition| {
                crate::contract::tokens::pressure_json(
                    &serde_json::json!({
                        "name": definition.name,
                        "description": definition.description,
                        "parameters": definition.parameters,
                    })
                    .to_string(),
                )
            })
            .sum();
        Self {
            engine,
            provider,
            tool_definitions,
            tool_definition_tokens,
            tools,
            transcripts,
            config,
            compaction_hooks: None,
            completions: None,
        }
    }

    /// This runner, telling `hooks` of every compaction it runs.
    pub fn with_compaction_hooks(mut self, hooks: Arc<dyn CompactionHooks>) -> Self {
        self.compaction_hooks = Some(hooks);
        self
    }

    /// This runner, reporting in each turn's report the model completions
    /// the engine had of `completions` during the turn
    /// ([`TurnReport::completions`]).
    pub fn with_completion_totals(mut self, completions: Arc<Completions>) -> Self {
        self.completions = Some(completions);
        self
    }

    /// The selected engine's completion totals so far, if the host keeps
    /// them.
    fn completion_totals(&self) -> Option<CompletionTotals> {
        let completions = self.completions.as_ref()?;
        Some(completions.totals_of(self.engine.selected_id()))
    }

    /// The session's context as the model would count it, by the weighted
    /// estimate calibrated to the model's reports (without the pre-prompt
    /// check's safety factor): the system prompt, the tool definitions and
    /// the context's messages.
    fn context_estimate(&self, session: &Session) -> u64 {
        let history = session.history();
        let weighted = pressure::weighted(
            &self.config.system_prompt,
            history.entries().iter().map(|entry| &entry.message),
            self.tool_definition_tokens,
        );
        session.calibration.apply(weighted)
    }

    /// The engine behind the guard.
    pub fn engine(&self) -> &Arc<GuardedEngine> {
        &self.engine
    }

    /// The configuration.
    pub fn config(&self) -> &RunnerConfig {
        &self.config
    }

    /// Options for the engine calls of one turn the caller may `abort`.
    fn call_options(&self, abort: &CancellationToken) -> CallOptions {
        CallOptions::with_abort(abort.clone()).compacting_within(self.config.compaction_window)
    }

    /// Runs one turn: `inputs` (extension messages, then the user's message)
    /// arrive, the model answers until it stops calling tools.
    ///
    /// The inputs are in the history `assemble` is given; the engine hears
    /// of the turn's new messages (the inputs, the model's answers and tool
    /// results: `history[pre-prompt-message-count..]`) through `after-turn`
    /// once the turn is done, and they are not ingested as well. That is the
    /// reference's rule — it ingests a turn's new messages after the turn,
    /// and only when an engine has no `afterTurn` — and every engine of this
    /// contract exports `after-turn` (an engine keeping its own copy of the
    /// conversation stores them there, as `lossless` does).
    ///
    /// A turn that fails before the model answered anything is rolled back:
    /// its inputs leave the active branch (they stay in the file), so
    /// neither the next prompt nor the engine's next history holds a message
    /// nobody answered; the engine never heard of it, since a failed turn
    /// does not reach `after-turn`.
    pub async fn run_turn(
        &self,
        session: &mut Session,
        inputs: Vec<AgentMessage>,
        abort: &CancellationToken,
    ) -> Result<TurnReport, TurnError> {
        let mut progress = TurnProgress::new(session.turns_run());
        let leaf_before = session.transcript().leaf_id();
        if let Err(error) = self
            .run_turn_into(session, inputs, abort, &mut progress)
            .await
        {
            self.roll_back_unanswered(session, leaf_before.as_deref(), &progress, &error);
            return Err(error);
        }
        Ok(progress.report)
    }

    /// After a failed turn that appended nothing past its inputs: takes the
    /// inputs off the active branch, so the next prompt (and the engine's
    /// next history) does not hold a message the model never answered. The
    /// reference does the same to an orphaned trailing user message. A turn
    /// the model answered at least once keeps what it appended.
    fn roll_back_unanswered(
        &self,
        session: &mut Session,
        leaf_before: Option<&str>,
        progress: &TurnProgress,
        error: &TurnError,
    ) {
        if progress.inputs.is_empty() || !progress.answers.is_empty() {
            return;
        }
        let ids: Vec<String> = progress
            .inputs
            .iter()
            .map(|entry| entry.id.clone())
            .collect();
        match session.roll_back(leaf_before, &ids, &error.to_string()) {
            Ok(()) => tracing::info!(
                session = session.session_ref().session_id,
                entries = ids.len(),
                reason = %error,
                "failed turn rolled back"
            ),
            Err(rollback) => tracing::error!(
                session = session.session_ref().session_id,
                %rollback,
                "cannot roll back a failed turn; its messages stay on the branch"
            ),
        }
    }

    /// [`Self::run_turn`], keeping in `progress` what the turn did and
    /// appended, so a failed turn still tells.
    pub(super) async fn run_turn_into(
        &self,
        session: &mut Session,
        inputs: Vec<AgentMessage>,
        abort: &CancellationToken,
        progress: &mut TurnProgress,
    ) -> Result<(), TurnError> {
        let completions_before = self.completion_totals();
        let mut outcome = self.turn(session, inputs, abort, progress).await;
        session.end_turn();
        // Nothing the turn appended is acknowledged before it is durable.
        if let Err(error) = session.commit()
            && outcome.is_ok()
        {
            outcome = Err(error.into());
        }
        let report = &mut progress.report;
        report.messages_appended = progress.inputs.len() + progress.answers.len();
        report.served_by = self.engine.serving_id().to_owned();
        report.guard_events.extend(self.engine.take_events());
        if let (Some(before), Some(now)) = (completions_before, self.completion_totals()) {
            report.completions = now.since(before);
        }
        outcome
    }

    async fn turn(
        &self,
        session: &mut Session,
        inputs: Vec<AgentMessage>,
        abort: &CancellationToken,
        progress: &mut TurnProgress,
    ) -> Result<(), TurnError> {
        let call = self.call_options(abort);
        // The last turn's background maintenance ends before the engine hears
        // of this one.
        session.wait_for_maintenance().await;
        self.bootstrap_once(session, &call).await?;
        session.progress.new_turn();

        progress.inputs = session.append(&inputs)?;
        session.commit()?;
        session.begin_turn(&progress.inputs);

        // Recovery attempts are drawn on across the turn's model calls.
        let mut recovery = overflow::Recovery::default();
        let tools = self.turn_tools(&call).await;
        loop {
            self.append_arrived(session, progress)?;
            if progress.report.model_calls >= MAX_MODEL_CALLS_PER_TURN {
                return Err(TurnError::TooManyModelCalls(MAX_MODEL_CALLS_PER_TURN));
            }
            let answer = match self
                .model_call(session, &call, &tools, &mut recovery, &mut progress.report)
                .await
            {
                Ok(answer) => answer,
                // A recording that has no (more) answers for this turn: the
                // conversation ended there (an unanswered message, or a last
                // tool call never answered).
                Err(TurnError::Provider(ProviderError::Exhausted)) => break,
                Err(error) => return Err(error),
            };
            progress
                .answers
                .extend(session.append(std::slice::from_ref(&answer.message))?);
            // An answer that stopped with an overflow error is kept (and left
            // out of prompts, as every failed answer is); then the prompt is
            // made to fit and the model asked again. With nothing left to
            // try, that failed answer is the model's last word, as the
            // reference surfaces it.
            if let Some(refusal) = answer.refusal {
                match self
                    .recover_overflow(session, &call, &mut progress.report, &mut recovery, refusal)
                    .await
                {
                    Ok(()) => continue,
                    Err(TurnError::ContextOverflow { .. }) => {}
                    Err(error) => return Err(error),
                }
            }
            // An answer that stopped on a compaction's own overflow is kept
            // too; the turn ends as a compaction failure unless truncating
            // tool traffic can help.
            if let Some(failure) = answer.compaction_failure {
                self.recover_compaction_failure(session, &mut progress.report, failure)?;
                continue;
            }
            let reply = answer.message;
            // The calls of an answer that failed or was aborted are not run.
            let calls_tools = runs_its_tool_calls(&reply) && reply.tool_call_ids().next().is_some();
            if calls_tools {
                let results = self
                    .run_tool_calls(session, &call, &tools, &reply, &mut progress.report, abort)
                    .await;
                progress.answers.extend(session.append(&results)?);
            }
            if !calls_tools && !self.provider.continues_turn() {
                break;
            }
        }
        self.append_arrived(session, progress)?;

        self.finish_turn(session, &call, &progress.inputs, &progress.answers)
            .await?;
        session.turn_done();
        Ok(())
    }

    /// Appends what arrived while the turn ran ([`Provider::arrived`]).
    fn append_arrived(
        &self,
        session: &mut Session,
        progress: &mut TurnProgress,
    ) -> Result<(), TurnError> {
        let arrived = self.provider.arrived();
        self.append_recorded(session, &arrived, progress)?;
        Ok(())
    }

    /// Appends `messages` as they are, no model call made for them, and
    /// counts them (and the tool results among them whose call is nowhere).
    pub(super) fn append_recorded(
        &self,
        session: &mut Session,
        messages: &[AgentMessage],
        progress: &mut TurnProgress,
    ) -> Result<(), TranscriptError> {
        let orphans = messages
            .iter()
            .filter(|message| match message {
                AgentMessage::ToolResult { tool_call_id, .. } => !session.knows_call(tool_call_id),
                _ => false,
            })
            .count();
        progress.answers.extend(session.append(messages)?);
        progress.report.recorded_entries += messages.len();
        progress.report.orphan_tool_results += orphans;
        Ok(())
    }

    async fn bootstrap_once(
        &self,
        session: &mut Session,
        call: &CallOptions,
    ) -> Result<(), TurnError> {
        if session.bootstrapped() {
            return Ok(());
        }
        let history = session.history();
        self.engine
            .bootstrap(call, session.session_ref(), &history)
            .await?;
        let context = self.maintain_context(
            session,
            &MaintainContext {
                reason: MaintainReason::Bootstrap,
                trigger: None,
                previous_session_id: None,
                background: false,
            },
        );
        self.engine
            .maintain(
                call,
                session.session_ref(),
                &history,
                MaintainReason::Bootstrap,
                Some(&context),
            )
            .await?;
        session.mark_bootstrapped();
        Ok(())
    }

    /// One model call with everything before it: the pre-prompt check,
    /// `assemble`, and overflow recovery (drawing on the turn's `recovery`).
    async fn model_call(
        &self,
        session: &mut Session,
        call: &CallOptions,
        tools: &engine_tools::TurnTools,
        recovery: &mut overflow::Recovery,
        report: &mut TurnReport,
    ) -> Result<overflow::Answer, TurnError> {
        self.pre_prompt_check(session, call, report, recovery)
            .await?;
        loop {
            let prompt = self.assemble_prompt(session, call).await?;
            if self.close_pending_pass(session, report, prompt.weighted_tokens) {
                // The engine was blamed for its compaction: legacy assembles.
                continue;
            }
            let request = ModelRequest {
                system_prompt: &prompt.system_prompt,
                messages: &prompt.messages,
                model: self.config.model.as_deref(),
                tools: &tools.names,
                tool_definitions: &tools.definitions,
            };
            match self.provider.complete(request, &call.abort).await {
                Ok(reply) => {
                    report.model_calls += 1;
                    if let Some(usage) = &reply.usage {
                        session.calibration.learn(prompt.weighted_tokens, usage);
                    }
                    session.last_call_usage = reply.usage;
                    recovery.answered(&reply.message);
                    let refusal = overflow::Refusal::in_answer(
                        &reply.message,
                        prompt.weighted_tokens,
                        &prompt.messages,
                        self.config.window,
                    );
                    report.note_prompt(prompt.estimated_tokens, refusal.is_some());
                    let compaction_failure = overflow::CompactionFailure::in_answer(
                        &reply.message,
                        &prompt.messages,
                        self.config.window,
                    );
                    return Ok(overflow::Answer {
                        message: reply.message,
                        refusal,
                        compaction_failure,
                    });
                }
                Err(ProviderError::ContextOverflow { prompt_tokens, .. }) => {
                    report.note_refused_prompt(prompt.estimated_tokens);
                    let refusal = overflow::Refusal::new(
                        prompt_tokens,
                        prompt.weighted_tokens,
                        &prompt.messages,
                        self.config.window,
                    );
                    self.recover_overflow(session, call, report, recovery, refusal)
                        .await?;
                }
                Err(error)
                    if error.is_timeout()
                        && self
                            .recover_timeout(
                                session,
                                call,
                                report,
                                recovery,
                                prompt.estimated_tokens,
                                prompt.weighted_tokens,
                            )
                            .await? => {}
                Err(error) => {
                    match overflow::CompactionFailure::of(
                        &error.to_string(),
                        &prompt.messages,
                        self.config.window,
                    ) {
                        Some(failure) => {
                            self.recover_compaction_failure(session, report, failure)?
                        }
                        None => return Err(TurnError::Provider(error)),
                    }
                }
            }
        }
    }

    /// Runs a compaction and follows what it did to the transcript.
    async fn compact_session(
        &self,
        session: &mut Session,
        call: &CallOptions,
        params: &CompactParams,
        report: &mut TurnReport,
    ) -> Result<CompactResult, TurnError> {
        session.commit()?;
        let history = session.history();
        let transcript = session.transcript().clone();
        let leaf_before = transcript.leaf_id();
        let owns_compaction = self.engine.info().owns_compaction;
        let trigger = params
            .runtime_context
            .as_deref()
            .and_then(|text| serde_json::from_str::<serde_json::Value>(text).ok())
            .and_then(|context| Some(context.get("trigger")?.as_str()?.to_owned()));
        let before_id = session.session_ref().session_id.clone();
        if let Some(hooks) = &self.compaction_hooks {
            hooks.before_compaction(&CompactionStarting {
                session: session.session_ref().clone(),
                message_count: history.len(),
                token_count: session.context_tokens(),
                trigger: trigger.clone(),
            });
        }
        let target = session_target(self.config.agent.id.as_deref(), session);
        let params = &CompactParams {
            runtime_context: Some(with_session_target(params.runtime_context.clone(), &target)),
            ..params.clone()
        };
        let result = self
            .engine
            .compact_checked(call, session.session_ref(), &history, params, |result| {
                performed_rotation(&transcript, result)?;
                if result.compacted
                    && !owns_compaction
                    && transcript.successor().is_none()
                    && transcript.leaf_id() == leaf_before
                {
                    return Err(Violation::NothingCompacted);
                }
                Ok(())
            })
            .await?;
        // A rotation the host performed during the call (a delegated
        // compaction) is followed whatever the engine answered afterwards,
        // or the session would append to the file that refuses appends.
        session.reload(&self.transcripts)?;
        let rotated_from = Some(before_id).filter(|id| *id != session.session_ref().session_id);
        if result.compacted {
            report.compactions += 1;
            session.projection = None;
            let history = session.history();
            let context = self.maintain_context(
                session,
                &MaintainContext {
                    reason: MaintainReason::Compaction,
                    trigger: trigger.as_deref(),
                    previous_session_id: rotated_from.as_deref(),
                    background: false,
                },
            );
            self.engine
                .maintain(
                    call,
                    session.session_ref(),
                    &history,
                    MaintainReason::Compaction,
                    Some(&context),
                )
                .await?;
        }
        if result.ok
            && let Some(hooks) = &self.compaction_hooks
        {
            hooks.after_compaction(&CompactionFinished {
                session: session.session_ref().clone(),
                previous_session_id: rotated_from,
                compacted: result.compacted,
                message_count: session.history().len(),
                token_count: session.context_tokens(),
                trigger,
            });
        }
        Ok(result)
    }

    /// A manual compaction (`/compact`), with optional instructions.
    pub async fn compact_now(
        &self,
        session: &mut Session,
        custom_instructions: Option<String>,
        abort: &CancellationToken,
    ) -> Result<CompactResult, TurnError> {
        let trigger = CompactionTrigger::Manual;
        let params = CompactParams {
            token_budget: Some(self.config.window),
            force: true,
            compaction_target: CompactionTarget::Threshold,
            custom_instructions,
            runtime_settings: Some(self.compaction_settings(trigger)),
            runtime_context: Some(compaction_context(
                trigger,
                None,
                None,
                session.last_call_usage.as_ref(),
            )),
            ..CompactParams::default()
        };
        let mut report = TurnReport::new(session.turns_run());
        session.wait_for_maintenance().await;
        let call = self.call_options(abort);
        // A manual pass is never stopped by the progress guard, and one that
        // frees the context counts as effective (an engine's own
        // compaction is not measured: its prompt is not assembled here).
        if self.engine.info().owns_compaction {
            return self
                .compact_session(session, &call, &params, &mut report)
                .await;
        }
        self.measured_compaction(
            session,
            &call,
            &params,
            &mut report,
            trigger,
            overflow::Measured::Context,
        )
        .await
    }

    /// The turn's closing calls: `after-turn`, then `maintain(turn)` in the
    /// foreground or, if the engine asks, in the background (awaited before
    /// the session's next engine call).
    async fn finish_turn(
        &self,
        session: &mut Session,
        call: &CallOptions,
        inputs: &[MessageEntry],
        answers: &[MessageEntry],
    ) -> Result<(), TurnError> {
        session.commit()?;
        let history = session.history();
        let params = AfterTurnParams {
            pre_prompt_message_count: pre_prompt_count(&history, inputs, answers) as u32,
            token_budget: Some(self.config.prompt_budget()),
            is_heartbeat: false,
            runtime_context: Some(with_session_target(
                after_turn_context(answers),
                &session_target(self.config.agent.id.as_deref(), session),
            )),
            runtime_settings: Some(self.runtime_settings(None)),
        };
        self.engine
            .after_turn(call, session.session_ref(), &history, &params)
            .await?;
        // The engine may have compacted on its own in after-turn.
        session.reload(&self.transcripts)?;

        let history = session.history();
        let session_ref = session.session_ref().clone();
        let background =
            self.engine.info().turn_maintenance_mode == Some(TurnMaintenanceMode::Background);
        let context = self.maintain_context(
            session,
            &MaintainContext {
                reason: MaintainReason::Turn,
                trigger: None,
                previous_session_id: None,
                background,
            },
        );
        match self.engine.info().turn_maintenance_mode {
            Some(TurnMaintenanceMode::Background) => {
                let engine = self.engine.clone();
                let call = CallOptions {
                    deferred_compaction: true,
                    ..call.clone()
                };
                session.maintenance = Some(tokio::spawn(async move {
                    if let Err(failure) = engine
                        .maintain(
                            &call,
                            &session_ref,
                            &history,
                            MaintainReason::Turn,
                            Some(&context),
                        )
                        .await
                    {
                        tracing::warn!(reason = %failure, "background maintenance failed");
                    }
                }));
            }
            _ => {
                self.engine
                    .maintain(
                        call,
                        &session_ref,
                        &history,
                        MaintainReason::Turn,
                        Some(&context),
                    )
                    .await?;
            }
        }
        Ok(())
    }
}

/// What a turn has done so far: its report, and the entries it appended.
pub(super) struct TurnProgress {
    pub(super) report: TurnReport,
    /// The inputs as appended.
    pub(super) inputs: Vec<MessageEntry>,
    /// Everything appended after them: answers, results, what arrived.
    pub(super) answers: Vec<MessageEntry>,
}

impl TurnProgress {
    pub(super) fn new(index: usize) -> Self {
        Self {
            report: TurnReport::new(index),
            inputs: Vec::new(),
            answers: Vec::new(),
        }
    }

    /// Tokens of everything appended so far, by the host's estimate.
    pub(super) fn appended_tokens(&self) -> u64 {
        self.inputs
            .iter()
            .chain(&self.answers)
            .map(|entry| crate::contract::tokens::estimate_message(&entry.message))
            .sum()
    }
}

/// Whether the rotation a `compact` answer reports is the one the host
/// performed on `transcript` during the call (its own record of it), if it
/// reports one: an engine may pass on the rotation of a compaction it
/// delegated, never name a file of its choosing.
fn performed_rotation(transcript: &Transcript, result: &CompactResult) -> Result<(), Violation> {
    match &result.rotated_session {
        Some(claimed) if transcript.successor().as_ref() != Some(claimed) => Err(
            Violation::UnperformedRotation(clip(&claimed.session_file, MAX_CLAIMED_PATH_CHARS)),
        ),
        _ => Ok(()),
    }
}

/// The most characters of an engine-claimed path a violation repeats.
const MAX_CLAIMED_PATH_CHARS: usize = 256;

/// Entries of `history` before the turn's new messages (`inputs`, then
/// `answers`). They are the context's tail, but a compaction during the turn
/// may have moved them, or cut the oldest of them out, so they are counted
/// in the context as it is now.
fn pre_prompt_count(history: &History, inputs: &[MessageEntry], answers: &[MessageEntry]) -> usize {
    let new: HashSet<&str> = inputs
        .iter()
        .chain(answers)
        .map(|entry| entry.id.as_str())
        .collect();
    let entries = history.entries();
    let tail = entries
        .iter()
        .rev()
        .take_while(|entry| new.contains(entry.id.as_str()))
        .count();
    entries.len() - tail
}
