//! Recovering when a prompt does not fit or the model gives up on it
//! (ARCHITECTURE.md §8), as the reference's runner does
//! (`run/overflow-context-recovery`, `run/timeout-context-recovery`):
//!
//! - **Overflow** — the provider refused the prompt, or answered with an
//!   assistant message that stopped with an overflow error: compact
//!   (`force`, aimed at the prompt budget) at most three times before the
//!   model answers again. Every attempt counts, whether it compacted,
//!   compacted nothing or failed; a pre-prompt compaction counts too. When no compaction is left or the
//!   last one changed nothing, one pass truncating tool traffic in prompts
//!   follows, but only if the prompt holds oversized tool results
//!   ([`Reducible`]); otherwise the overflow ends the turn as a
//!   `context_overflow`, whatever the last compaction answered (a failed
//!   one's reason is the overflow's why), as the reference ends it.
//! - **Compaction failure** — the model call failed with a compaction's own
//!   overflow ("summarization failed: request_too_large",
//!   [`overflow::is_compaction_failure`]): no compaction is tried (it is
//!   what failed); tool traffic is truncated once if that can help, else
//!   the turn ends as a `compaction_failure`.
//! - **Timeout** — the model did not answer in time on a prompt filling more
//!   than 65% of the window: compact and ask again, at most twice a turn;
//!   a smaller prompt, a compaction that changes nothing or a third timeout
//!   ends the turn with the timeout.
//! - **Pre-prompt** — the estimate is over the budget: compact, truncate, or
//!   both, as [`PrePromptCheck::decide`] decides.
//!
//! Every compaction asked for here is measured by the runner itself, before
//! and after (the context, or for an engine that owns compaction the prompt
//! it assembles next), and recorded in the session's progress guard
//! ([`ProgressGuard`]): two low-yield passes in a row stop automatic
//! compaction until the next turn, and the turn report says why. An
//! owner's compaction is held against it only when its answer contradicts
//! the measurement ([`Claim`]); one that honestly freed little is a
//! low-yield pass like any other.

use super::preflight::{self, PrePromptCheck};
use super::report::CompactionPass;
use super::runtime_settings::{Attempt, CompactionTrigger, compaction_context};
use super::tool_results::Reducible;
use super::{Session, TurnError, TurnReport, TurnRunner};
use crate::contract::engine::{CallOptions, ContextEngine};
use crate::contract::failure::Operation;
use crate::contract::types::{
    AgentMessage, CompactParams, CompactResult, CompactionTarget, StopReason,
};
use crate::provider::overflow;
#[cfg(doc)]
use crate::services::compaction::ProgressGuard;
use crate::services::compaction::{Claim, MeasuredPrompt};

/// Overflow compactions (pre-prompt ones included) one turn may make.
const MAX_OVERFLOW_COMPACTIONS: u32 = 3;
/// Timeout compactions one turn may make.
const MAX_TIMEOUT_COMPACTIONS: u32 = 2;
/// Share of the window a timed-out prompt must exceed to be compacted.
const TIMEOUT_COMPACTION_SHARE: f64 = 0.65;

/// What a turn has used of its recovery. Overflow attempts start afresh
/// once the model answers (the reference resets them on a successful model
/// response): three in a row without an answer end the turn. Timeout
/// attempts are the turn's.
#[derive(Debug, Default)]
pub(super) struct Recovery {
    overflow_compactions: u32,
    timeout_compactions: u32,
}

impl Recovery {
    /// The overflow attempt a compaction about to run is.
    fn overflow_attempt(&self) -> Attempt {
        Attempt {
            number: self.overflow_compactions,
            of: MAX_OVERFLOW_COMPACTIONS,
        }
    }

    /// Notes the model's `answer`: one that stopped normally or to call
    /// tools gives overflow recovery its attempts back.
    pub(super) fn answered(&mut self, answer: &AgentMessage) {
        if let AgentMessage::Assistant { stop_reason, .. } = answer
            && matches!(stop_reason, StopReason::Stop | StopReason::ToolUse)
        {
            self.overflow_compactions = 0;
        }
    }

    /// Takes an overflow compaction attempt, if one is left.
    fn take_overflow_attempt(&mut self) -> bool {
        let left = self.overflow_compactions < MAX_OVERFLOW_COMPACTIONS;
        self.overflow_compactions += u32::from(left);
        left
    }
}

/// A model's answer to one call.
pub(super) struct Answer {
    /// The assistant message.
    pub(super) message: AgentMessage,
    /// The overflow it reports, when it stopped with one.
    pub(super) refusal: Option<Refusal>,
    /// The compaction failure it reports, when it stopped with one.
    pub(super) compaction_failure: Option<CompactionFailure>,
}

/// A model call that failed with a compaction's own overflow ("summarization
/// failed: request_too_large"): the reference's `isCompactionFailureError`.
#[derive(Debug, Clone)]
pub(super) struct CompactionFailure {
    /// The error, as the model call gave it.
    reason: String,
    /// Whether the prompt held oversized tool results (that truncation could
    /// cut).
    oversized_tool_results: bool,
}

impl CompactionFailure {
    /// `error`, the failure of `prompt` sent to a `window`-token model, when
    /// it is a compaction failure.
    pub(super) fn of(error: &str, prompt: &[AgentMessage], window: u64) -> Option<Self> {
        overflow::is_compaction_failure(error).then(|| Self {
            reason: error.to_owned(),
            oversized_tool_results: Reducible::in_messages(prompt, window).any(),
        })
    }

    /// The compaction failure `answer` reports, if it stopped with one.
    pub(super) fn in_answer(
        answer: &AgentMessage,
        prompt: &[AgentMessage],
        window: u64,
    ) -> Option<Self> {
        Self::of(
            overflow::compaction_failure_reported_by(answer)?,
            prompt,
            window,
        )
    }
}

/// A prompt the model refused as too large.
#[derive(Debug, Clone, Copy)]
pub(super) struct Refusal {
    /// Its size as the model counted it.
    prompt_tokens: u64,
    /// Its weighted estimate (uncalibrated), to measure a compaction by an
    /// engine that owns compaction against.
    weighted_tokens: u64,
    /// Whether it held oversized tool results (that truncation could cut).
    oversized_tool_results: bool,
}

impl Refusal {
    /// A refusal of `prompt` (`prompt_tokens` tokens by the model's count,
    /// `weighted_tokens` by the weighted estimate) by a `window`-token model.
    pub(super) fn new(
        prompt_tokens: u64,
        weighted_tokens: u64,
        prompt: &[AgentMessage],
        window: u64,
    ) -> Self {
        Self {
            prompt_tokens,
            weighted_tokens,
            oversized_tool_results: Reducible::in_messages(prompt, window).any(),
        }
    }

    /// The refusal `answer` reports: an assistant message that stopped with
    /// an overflow error. The prompt's size is what the error states, else
    /// one more than the window (as the reference assumes).
    pub(super) fn in_answer(
        answer: &AgentMessage,
        weighted_tokens: u64,
        prompt: &[AgentMessage],
        window: u64,
    ) -> Option<Self> {
        let error = overflow::reported_by(answer)?;
        let prompt_tokens = overflow::stated(error)
            .prompt_tokens
            .unwrap_or(window.saturating_add(1));
        Some(Self::new(prompt_tokens, weighted_tokens, prompt, window))
    }
}

/// A compaction by an engine that owns compaction, waiting for the next
/// prompt to be measured against.
#[derive(Debug, Clone)]
pub(crate) struct PendingPass {
    trigger: CompactionTrigger,
    tokens_before: u64,
    reason: Option<String>,
    /// What the engine's answer said of its context.
    claim: Claim,
}

/// What the runner measures a compaction on.
#[derive(Debug, Clone, Copy)]
pub(super) enum Measured {
    /// The session's context (engines that do not own compaction).
    Context,
    /// The prompt the engine assembled, weighted (engines that own it).
    Prompt(u64),
}

impl TurnRunner {
    /// Makes room after the model refused a prompt; an error when nothing is
    /// left to try.
    pub(super) async fn recover_overflow(
        &self,
        session: &mut Session,
        call: &CallOptions,
        report: &mut TurnReport,
        recovery: &mut Recovery,
        refusal: Refusal,
    ) -> Result<(), TurnError> {
        let Refusal {
            prompt_tokens,
            weighted_tokens,
            oversized_tool_results,
        } = refusal;
        report.overflow_retries += 1;
        let why;
        if recovery.take_overflow_attempt() {
            let engine_was_serving = self.engine.serving_selected();
            let result = self
                .recovery_compaction(
                    session,
                    call,
                    report,
                    CompactionTrigger::Overflow,
                    Some(prompt_tokens),
                    recovery.overflow_attempt(),
                    Measured::Prompt(weighted_tokens),
                )
                .await?;
            // A compaction that broke the contract quarantined the engine:
            // its failure, not the turn's. `legacy` serves from here, so
            // the model is asked again with legacy's prompt (and a refusal
            // of that is recovered from legacy's way).
            if !result.ok && engine_was_serving && !self.engine.serving_selected() {
                return Ok(());
            }
            // A compaction that failed is one that did not help: the
            // overflow goes on, and ends the turn as an overflow (the
            // reference's `context_overflow`), its reason the why.
            if result.compacted {
                return Ok(());
            }
            why = result.reason;
        } else {
            why = Some(format!(
                "{MAX_OVERFLOW_COMPACTIONS} compactions since the model last answered"
            ));
        }
        if oversized_tool_results && !session.truncate_tool_traffic {
            truncate_tool_traffic(session, report);
            return Ok(());
        }
        Err(TurnError::ContextOverflow {
            prompt_tokens,
            window: self.config.window,
            why,
        })
    }

    /// After the model call failed with a compaction's own overflow:
    /// truncates tool traffic in prompts once when the prompt held oversized
    /// tool results, else the turn ends as a compaction failure. No
    /// compaction is asked for: compacting is what failed.
    pub(super) fn recover_compaction_failure(
        &self,
        session: &mut Session,
        report: &mut TurnReport,
        failure: CompactionFailure,
    ) -> Result<(), TurnError> {
        if failure.oversized_tool_results && !session.truncate_tool_traffic {
            truncate_tool_traffic(session, report);
            return Ok(());
        }
        Err(TurnError::CompactionFailed {
            reason: failure.reason,
        })
    }

    /// After the model timed out on a prompt of `prompt_tokens` tokens
    /// (`weighted_tokens` by the weighted estimate): whether a compaction
    /// made room to ask again.
    pub(super) async fn recover_timeout(
        &self,
        session: &mut Session,
        call: &CallOptions,
        report: &mut TurnReport,
        recovery: &mut Recovery,
        prompt_tokens: u64,
        weighted_tokens: u64,
    ) -> Result<bool, TurnError> {
        let nearly_full =
            prompt_tokens as f64 > self.config.window as f64 * TIMEOUT_COMPACTION_SHARE;
        if !nearly_full || recovery.timeout_compactions >= MAX_TIMEOUT_COMPACTIONS {
            return Ok(false);
        }
        recovery.timeout_compactions += 1;
        let attempt = Attempt {
            number: recovery.timeout_compactions,
            of: MAX_TIMEOUT_COMPACTIONS,
        };
        let result = self
            .recovery_compaction(
                session,
                call,
                report,
                CompactionTrigger::TimeoutRecovery,
                None,
                attempt,
                Measured::Prompt(weighted_tokens),
            )
            .await?;
        Ok(result.compacted)
    }

    /// The pre-prompt check (engines that do not own compaction): when the
    /// context's estimate × 1.2 is over the prompt budget, compact, truncate
    /// tool traffic in prompts, or both, as [`PrePromptCheck::decide`] decides. A
    /// prompt still over is sent all the same: the provider's answer decides,
    /// and overflow recovery follows a refusal.
    pub(super) async fn pre_prompt_check(
        &self,
        session: &mut Session,
        call: &CallOptions,
        report: &mut TurnReport,
        recovery: &mut Recovery,
    ) -> Result<(), TurnError> {
        let caller_pressure = session.caller_pressure.take();
        if !self.config.proactive_compaction || self.engine.info().owns_compaction {
            return Ok(());
        }
        let (estimate, source) = match caller_pressure {
            Some(pressure) => (pressure.tokens, pressure.source_name()),
            None => (
                preflight::estimate(self.context_estimate(session)),
                session.calibration.source().to_owned(),
            ),
        };
        let reducible = if session.truncate_tool_traffic {
            0
        } else {
            let history = session.history();
            Reducible::in_messages(
                history.entries().iter().map(|entry| &entry.message),
                self.config.window,
            )
            .chars()
        };
        let check =
            PrePromptCheck::decide(estimate, source, self.config.prompt_budget(), reducible);
        let route = check.route;
        report.pre_prompt_checks.push(check);
        if route.compacts() && recovery.take_overflow_attempt() {
            self.recovery_compaction(
                session,
                call,
                report,
                CompactionTrigger::Budget,
                Some(estimate),
                recovery.overflow_attempt(),
                Measured::Context,
            )
            .await?;
        }
        if route.truncates() {
            truncate_tool_traffic(session, report);
        }
        Ok(())
    }

    /// A compaction to make room: forced, aimed at the prompt budget, its
    /// runtime context naming the `trigger` and the `attempt`; measured on
    /// `measured` and recorded in the progress guard. While the guard is
    /// stopped nothing is asked of the engine: the answer is "not
    /// compacted" with the guard's reason, which the turn report keeps.
    #[allow(clippy::too_many_arguments)]
    async fn recovery_compaction(
        &self,
        session: &mut Session,
        call: &CallOptions,
        report: &mut TurnReport,
        trigger: CompactionTrigger,
        current_token_count: Option<u64>,
        attempt: Attempt,
        measured: Measured,
    ) -> Result<CompactResult, TurnError> {
        let measured = if self.engine.info().owns_compaction {
            measured
        } else {
            Measured::Context
        };
        let tokens_before = self.measure(session, measured);
        session.progress.lift_if_grown(tokens_before);
        if let Some(stop) = session.progress.stopped() {
            let reason = stop.to_string();
            report
                .compaction_stopped
                .get_or_insert_with(|| reason.clone());
            return Ok(CompactResult {
                ok: true,
                compacted: false,
                reason: Some(reason),
                ..CompactResult::default()
            });
        }
        let params = CompactParams {
            token_budget: Some(self.config.prompt_budget()),
            force: true,
            current_token_count,
            compaction_target: CompactionTarget::Budget,
            runtime_settings: Some(self.compaction_settings(trigger)),
            runtime_context: Some(compaction_context(
                trigger,
                current_token_count,
                Some(attempt),
                session.last_call_usage.as_ref(),
            )),
            ..CompactParams::default()
        };
        self.measured_compaction(session, call, &params, report, trigger, measured)
            .await
    }

    /// Runs a compaction measured on `measured`, before and after, and
    /// records it: at once for the context, at the next prompt for an
    /// engine's own prompt ([`Self::close_pending_pass`]).
    pub(super) async fn measured_compaction(
        &self,
        session: &mut Session,
        call: &CallOptions,
        params: &CompactParams,
        report: &mut TurnReport,
        trigger: CompactionTrigger,
        measured: Measured,
    ) -> Result<CompactResult, TurnError> {
        let tokens_before = self.measure(session, measured);
        let result = self.compact_session(session, call, params, report).await?;
        let reason = result.reason.clone();
        let claim = Claim {
            tokens_before: result.tokens_before,
            tokens_after: result.tokens_after,
        };
        match measured {
            // A failed compaction is the engine guard's business, not a pass.
            _ if !result.ok => {}
            Measured::Prompt(_) if result.compacted => {
                session.pending_pass = Some(PendingPass {
                    trigger,
                    tokens_before,
                    reason,
                    claim,
                });
            }
            _ => {
                let tokens_after = if result.compacted {
                    self.context_estimate(session)
                } else {
                    tokens_before
                };
                self.record_pass(
                    session,
                    report,
                    PendingPass {
                        trigger,
                        tokens_before,
                        reason,
                        claim,
                    },
                    tokens_after,
                    result.compacted,
                );
            }
        }
        Ok(result)
    }

    /// Measures a pending engine compaction against the prompt just
    /// assembled (`weighted_tokens`, weighted). An owner's compaction shows
    /// in its next prompt. One whose answer that prompt contradicts (it
    /// claims far more freed than was, or a shrink where the prompt grew)
    /// is held against the engine (quarantine; `legacy` serves from now
    /// on), and the answer is whether it was, so the caller assembles
    /// again. Any other is a pass for the progress guard, however little it
    /// freed: the newest turn may fill the budget on its own, and the
    /// overflow path goes on from there (truncating tool traffic, or ending
    /// the turn as an overflow).
    pub(super) fn close_pending_pass(
        &self,
        session: &mut Session,
        report: &mut TurnReport,
        weighted_tokens: u64,
    ) -> bool {
        let Some(pending) = session.pending_pass.take() else {
            return false;
        };
        let tokens_after = session.calibration.apply(weighted_tokens);
        let measured = MeasuredPrompt {
            before: pending.tokens_before,
            after: tokens_after,
        };
        if let Some(contradiction) = pending.claim.contradicted_by(measured)
            && self.engine.blame(
                Operation::Compact,
                session.session_ref(),
                &contradiction.to_string(),
            )
        {
            return true;
        }
        self.record_pass(session, report, pending, tokens_after, true);
        false
    }

    /// The size of what `measured` names, as the model would count it.
    fn measure(&self, session: &Session, measured: Measured) -> u64 {
        match measured {
            Measured::Context => self.context_estimate(session),
            Measured::Prompt(weighted) => session.calibration.apply(weighted),
        }
    }

    /// Records a pass in the guard and the report; says so when it stops
    /// the guard.
    fn record_pass(
        &self,
        session: &mut Session,
        report: &mut TurnReport,
        pass: PendingPass,
        tokens_after: u64,
        compacted: bool,
    ) {
        let was_stopped = session.progress.stopped().is_some();
        let budget = self.config.prompt_budget();
        let outcome = session
            .progress
            .record(pass.tokens_before, tokens_after, budget);
        report.compaction_passes.push(CompactionPass {
            trigger: pass.trigger.as_str().to_owned(),
            trigger_tokens: preflight::trigger_tokens(budget),
            tokens_before: pass.tokens_before,
            tokens_after,
            compacted,
            outcome,
            reason: pass.reason,
            after_model_calls: report.model_calls,
        });
        if let (false, Some(stop)) = (was_stopped, session.progress.stopped()) {
            tracing::info!(
                session = session.session_ref().session_id,
                %stop,
                "compaction-progress guard stopped automatic compaction until the next turn"
            );
            report.compaction_stopped = Some(stop.to_string());
        }
    }
}

/// Cuts tool traffic in the session's prompts from now on.
fn truncate_tool_traffic(session: &mut Session, report: &mut TurnReport) {
    session.truncate_tool_traffic = true;
    report.truncated_tool_traffic = true;
}
