//! Replaying a whole recorded conversation through a runner, turn by turn:
//! what `ctxbox run` does, and what the fixture tests check.

use serde::Serialize;
use tokio_util::sync::CancellationToken;

use super::{Session, TurnReport, TurnRunner};
use crate::contract::failure::FailureKind;
use crate::contract::tokens;
use crate::engines::guard::{GuardAction, GuardEvent};
use crate::provider::{Replay, ReplayScript};

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
    /// Calls the guard served with legacy instead of the selected engine:
    /// after a failure, or because no instance slot was free.
    pub fallbacks: usize,
    /// Distinct engines quarantined during the run (an overloaded engine is
    /// not quarantined).
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
        self.count(&turn.guard_events);
        self.turns.push(turn);
    }

    /// Guard decisions made after the last turn's report was taken (by its
    /// background maintenance): they belong to that turn.
    fn add_late_events(&mut self, events: Vec<GuardEvent>) {
        self.count(&events);
        if let Some(last) = self.turns.last_mut() {
            last.guard_events.extend(events);
        }
    }

    fn count(&mut self, events: &[GuardEvent]) {
        for event in events {
            if matches!(
                event.action,
                GuardAction::FellBack | GuardAction::Overloaded
            ) {
                self.fallbacks += 1;
            }
            let quarantined = matches!(event.action, GuardAction::FellBack | GuardAction::Reported)
                && event.classification != FailureKind::Overloaded;
            if quarantined && !self.quarantined.contains(&event.engine_id) {
                self.quarantined.push(event.engine_id.clone());
            }
        }
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
        // The last turn's background maintenance is part of the run.
        session.wait_for_maintenance().await;
        report.add_late_events(self.engine.take_events());
        report.original_tokens = session
            .transcript()
            .active_branch()
            .iter()
            .map(|entry| tokens::estimate_message(&entry.message))
            .sum();
        report.final_context_tokens = session.history().total_tokens();
        Ok(report)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::contract::failure::Operation;

    fn event(action: GuardAction, classification: FailureKind) -> GuardEvent {
        GuardEvent {
            engine_id: "busy".into(),
            owner: "plugin:test".into(),
            session_id: None,
            operation: Operation::Assemble,
            action,
            classification,
            reason: "why".into(),
        }
    }

    #[test]
    fn calls_legacy_served_count_as_fallbacks_but_overload_quarantines_nothing() {
        let mut report = RunReport::default();
        report.add(TurnReport {
            guard_events: vec![
                event(GuardAction::Overloaded, FailureKind::Overloaded),
                event(GuardAction::Reported, FailureKind::Overloaded),
                event(GuardAction::Aborted, FailureKind::Aborted),
            ],
            ..TurnReport::default()
        });
        assert_eq!(report.fallbacks, 1, "the overloaded call legacy served");
        assert!(report.quarantined.is_empty(), "{:?}", report.quarantined);

        report.add(TurnReport {
            guard_events: vec![event(GuardAction::FellBack, FailureKind::Timeout)],
            ..TurnReport::default()
        });
        report.add_late_events(vec![event(
            GuardAction::Overloaded,
            FailureKind::Overloaded,
        )]);
        assert_eq!(report.fallbacks, 3);
        assert_eq!(report.quarantined, vec!["busy".to_owned()]);
        assert_eq!(
            report.turns[1].guard_events.len(),
            2,
            "late events join the last turn"
        );
    }
}
