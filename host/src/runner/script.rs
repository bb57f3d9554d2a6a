//! Replaying a whole recorded conversation through a runner, turn by turn:
//! what `ctxbox run` does, and what the fixture tests check.

use serde::Serialize;
use tokio_util::sync::CancellationToken;

use super::{Session, TurnReport, TurnRunner};
use crate::guard::GuardAction;
use crate::provider::{Replay, ReplayScript};
use crate::tokens;

/// A replayed conversation, summed up.
#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RunReport {
    /// Every turn that completed, in order.
    pub turns: Vec<TurnReport>,
    /// Turns that failed, with why.
    pub failed_turns: Vec<FailedTurn>,
    /// Model calls made.
    pub model_calls: u32,
    /// The largest prompt sent.
    pub largest_prompt_tokens: u64,
    /// Compactions that compacted.
    pub compactions: u32,
    /// Calls the guard served with legacy after a failure.
    pub fallbacks: usize,
    /// Distinct engines quarantined during the run.
    pub quarantined: Vec<String>,
    /// Tokens of every message the conversation produced.
    pub original_tokens: u64,
    /// Tokens of the session's active context at the end.
    pub final_context_tokens: u64,
}

impl RunReport {
    /// Share of the conversation's tokens the final context keeps (0..=1).
    pub fn share_kept(&self) -> f64 {
        if self.original_tokens == 0 {
            1.0
        } else {
            self.final_context_tokens as f64 / self.original_tokens as f64
        }
    }

    fn add(&mut self, turn: TurnReport) {
        self.model_calls += turn.model_calls;
        self.largest_prompt_tokens = self.largest_prompt_tokens.max(turn.largest_prompt_tokens);
        self.compactions += turn.compactions;
        for event in &turn.guard_events {
            if event.action == GuardAction::FellBack {
                self.fallbacks += 1;
            }
            if matches!(event.action, GuardAction::FellBack | GuardAction::Reported)
                && !self.quarantined.contains(&event.engine_id)
            {
                self.quarantined.push(event.engine_id.clone());
            }
        }
        self.turns.push(turn);
    }
}

/// A turn that did not complete.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FailedTurn {
    /// The turn's number.
    pub index: usize,
    /// Why, in words.
    pub error: String,
}

impl TurnRunner {
    /// Replays `script` into `session`: its preamble is appended as it is,
    /// then each turn's inputs are run with `replay` answering from the
    /// recording. A failed turn is recorded and the replay goes on.
    /// `on_turn` hears of each turn as it ends.
    pub async fn run_script(
        &self,
        session: &mut Session,
        replay: &Replay,
        script: &ReplayScript,
        abort: &CancellationToken,
        on_turn: &mut dyn FnMut(usize, Option<&TurnReport>),
    ) -> Result<RunReport, crate::transcript::TranscriptError> {
        let mut report = RunReport::default();
        session.append(&script.preamble)?;
        for (index, turn) in script.turns.iter().enumerate() {
            if abort.is_cancelled() {
                break;
            }
            replay.begin_turn(turn);
            match self.run_turn(session, turn.inputs.clone(), abort).await {
                Ok(turn_report) => {
                    on_turn(index, Some(&turn_report));
                    report.add(turn_report);
                }
                Err(error) => {
                    on_turn(index, None);
                    report.failed_turns.push(FailedTurn {
                        index,
                        error: error.to_string(),
                    });
                }
            }
        }
        report.original_tokens = session
            .transcript()
            .branch()
            .iter()
            .map(|entry| tokens::estimate_message(&entry.message))
            .sum();
        report.final_context_tokens = session.history().total_tokens();
        Ok(report)
    }
}
