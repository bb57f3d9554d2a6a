//! What a turn did, and why a turn failed.

use serde::Serialize;

use crate::contract::failure::EngineFailure;
use crate::engines::guard::GuardEvent;
use crate::provider::ProviderError;
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
    /// Context-overflow errors the provider answered.
    pub overflow_retries: u32,
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

    pub(super) fn note_prompt(&mut self, tokens: u64) {
        self.largest_prompt_tokens = self.largest_prompt_tokens.max(tokens);
        self.last_prompt_tokens = tokens;
    }
}

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
        "the prompt ({prompt_tokens} tokens) still does not fit the {window}-token window after compaction and truncation"
    )]
    ContextOverflow {
        /// The last prompt's size.
        prompt_tokens: u64,
        /// The window.
        window: u64,
    },
    /// The model kept calling tools.
    #[error("the turn made {0} model calls without finishing")]
    TooManyModelCalls(u32),
    /// The transcript could not be written or read.
    #[error(transparent)]
    Transcript(#[from] TranscriptError),
}
