//! What a turn did, and why a turn failed.

use serde::Serialize;

use super::preflight::PrePromptCheck;
use crate::contract::failure::EngineFailure;
use crate::engines::guard::GuardEvent;
use crate::provider::ProviderError;
use crate::services::compaction::PassYield;
use crate::services::completions::CompletionTotals;
use crate::transcript::TranscriptError;

/// One turn, for the per-turn table.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TurnReport {
    /// The turn's number in its session (0-based).
    pub index: usize,
    /// Model calls answered.
    pub model_calls: u32,
    /// The largest prompt the model accepted, by the host's estimate.
    pub largest_prompt_tokens: u64,
    /// Compactions that compacted (proactive, overflow and by the engine's
    /// own after-turn are counted when the runner triggered them).
    pub compactions: u32,
    /// Every compaction the runner asked for, in order, with what it freed.
    pub compaction_passes: Vec<CompactionPass>,
    /// Why the compaction-progress guard stopped automatic compaction
    /// during the turn, if it did.
    pub compaction_stopped: Option<String>,
    /// Every pre-prompt check, in order (one before each model call, for
    /// engines that do not own compaction): route, count and its source,
    /// budget, tokens over.
    pub pre_prompt_checks: Vec<PrePromptCheck>,
    /// Context-overflow errors the provider answered.
    pub overflow_retries: u32,
    /// Calls the model made to the engine's tools.
    pub engine_tool_calls: u32,
    /// Of those, the ones answered with an error (the engine's, a failure,
    /// a quarantine).
    pub engine_tool_errors: u32,
    /// Model completions the engine had during the turn (`host.complete`,
    /// and `host.summarize` through the host's model), when the runner was
    /// given the host's totals (`TurnRunner::with_completion_totals`); an
    /// engine serving several sessions at once has its other sessions'
    /// share counted too.
    pub completions: CompletionTotals,
    /// Whether oversized tool traffic (results, arguments, thinking) was
    /// truncated in prompts.
    pub truncated_tool_traffic: bool,
    /// Messages appended to the transcript.
    pub messages_appended: usize,
    /// Of those, recorded entries written as they were, without a model
    /// call: extension messages, OpenClaw's copies of delivered messages,
    /// results of calls that were never run, and what a failed turn's
    /// recording still held.
    pub recorded_entries: usize,
    /// Tool results appended whose call is nowhere before them: kept in the
    /// transcript, left out of every prompt.
    pub orphan_tool_results: usize,
    /// The last prompt the model accepted, by the host's estimate.
    pub last_prompt_tokens: u64,
    /// Every prompt the model was sent, in order: what a chart of the
    /// session's prompts against the window draws.
    pub prompts: Vec<PromptSent>,
    /// Tokens of every message the replayed session held at the end of the
    /// turn, compactions aside: the conversation's size so far (set when a
    /// whole recording is replayed, [`TurnRunner::run_script`](super::TurnRunner::run_script)).
    pub conversation_tokens: u64,
    /// The engine serving at the end of the turn.
    pub served_by: String,
    /// The guard's decisions during the turn (fallbacks, quarantines).
    pub guard_events: Vec<GuardEvent>,
}

impl TurnReport {
    pub(super) fn new(index: usize) -> Self {
        Self {
            index,
            ..Self::default()
        }
    }

    /// A prompt the model answered (`overflow`: with an answer that stopped
    /// on a context overflow).
    pub(super) fn note_prompt(&mut self, tokens: u64, overflow: bool) {
        self.largest_prompt_tokens = self.largest_prompt_tokens.max(tokens);
        self.last_prompt_tokens = tokens;
        self.prompts.push(PromptSent {
            tokens,
            answered: true,
            overflow,
        });
    }

    /// A prompt the model refused with a context-overflow error.
    pub(super) fn note_refused_prompt(&mut self, tokens: u64) {
        self.prompts.push(PromptSent {
            tokens,
            answered: false,
            overflow: true,
        });
    }
}

/// One prompt sent to the model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PromptSent {
    /// Its size by the host's estimate.
    pub tokens: u64,
    /// Whether the model answered it (counted in `model_calls`); `false`:
    /// refused with a context-overflow error.
    pub answered: bool,
    /// Whether the model found it too large: refused, or answered with a
    /// stop on a context overflow.
    pub overflow: bool,
}

/// One compaction the runner asked for: what set it off, and the context's
/// size before and after it, both by the runner's own estimate (the
/// pre-prompt check's weighted estimate, calibrated to the model's reports,
/// without its safety factor) — never the engine's claim.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CompactionPass {
    /// `budget` (the pre-prompt check), `overflow`, `timeout_recovery` or
    /// `manual`.
    pub trigger: String,
    /// The size that sets off the pre-prompt check: the prompt budget
    /// divided by its safety factor.
    pub trigger_tokens: u64,
    /// The context (for an engine that owns compaction: its prompt) before.
    pub tokens_before: u64,
    /// The same after.
    pub tokens_after: u64,
    /// Whether the engine compacted.
    pub compacted: bool,
    /// What the pass gave, by the progress guard's rules.
    pub outcome: PassYield,
    /// The engine's reason, when it gave one.
    pub reason: Option<String>,
    /// Model calls of its turn answered before it: where it falls among the
    /// turn's prompts.
    pub after_model_calls: u32,
}

impl CompactionPass {
    /// Tokens it freed.
    pub fn freed(&self) -> u64 {
        self.tokens_before.saturating_sub(self.tokens_after)
    }
}

/// What a user can do after a compaction failed.
pub const COMPACTION_FAILURE_HINT: &str =
    "Try again, compact by hand (/compact), or start a fresh session (/new or /reset)";

/// Why a turn could not complete.
#[derive(Debug, thiserror::Error)]
pub enum TurnError {
    /// The engine failed and no fallback applied (strict mode, or the caller
    /// aborted).
    #[error(transparent)]
    Engine(#[from] EngineFailure),
    /// The provider failed.
    #[error("the model call failed: {0}")]
    Provider(ProviderError),
    /// Compaction and truncation could not make the prompt fit.
    #[error(
        "context overflow: the prompt ({prompt_tokens} tokens) still does not fit the {window}-token window after compaction and truncation{}. {}",
        why.as_deref().map(|why| format!(" ({why})")).unwrap_or_default(),
        TurnError::START_AFRESH
    )]
    ContextOverflow {
        /// The last prompt's size.
        prompt_tokens: u64,
        /// The window.
        window: u64,
        /// Why compaction could not help, when the runner knows.
        why: Option<String>,
    },
    /// Compacting failed: the summarizer's own request was too large, or
    /// the compaction broke (the reference's `compaction_failure`).
    #[error("compaction failed: {reason}. {COMPACTION_FAILURE_HINT}")]
    CompactionFailed {
        /// What the compaction said.
        reason: String,
    },
    /// The model kept calling tools.
    #[error("the turn made {0} model calls without finishing")]
    TooManyModelCalls(u32),
    /// The transcript could not be written or read.
    #[error(transparent)]
    Transcript(#[from] TranscriptError),
}

impl TurnError {
    /// What a user can do about a context that will not fit.
    pub const START_AFRESH: &'static str =
        "Start a fresh session (/new or /reset) or use a model with a larger context window";

    /// The kind of failure, as the reference classifies a turn's end:
    /// `context_overflow`, `compaction_failure`, `provider_error`,
    /// `engine_error`, `tool_loop` or `transcript_error`.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::ContextOverflow { .. } => "context_overflow",
            Self::CompactionFailed { .. } => "compaction_failure",
            Self::Provider(_) => "provider_error",
            Self::Engine(_) => "engine_error",
            Self::TooManyModelCalls(_) => "tool_loop",
            Self::Transcript(_) => "transcript_error",
        }
    }

    /// `blocked` when the session cannot go on as it is (the reference's
    /// `livenessState` when overflow recovery is exhausted: a context
    /// overflow or a compaction failure; its suggested action is
    /// `reset_or_new`, which the message's guidance names): the same prompt
    /// would fail again. `None` for failures a retry may get past.
    pub fn liveness(&self) -> Option<&'static str> {
        match self {
            Self::ContextOverflow { .. } | Self::CompactionFailed { .. } => Some("blocked"),
            _ => None,
        }
    }
}
