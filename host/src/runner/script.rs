//! Replaying a whole recorded conversation through a runner, turn by turn:
//! what `ctxbox run` does, and what the fixture tests check.

use serde::Serialize;
use tokio_util::sync::CancellationToken;

use super::{Session, TurnProgress, TurnReport, TurnRunner};
use crate::contract::failure::FailureKind;
use crate::contract::tokens;
use crate::engines::guard::{GuardAction, GuardEvent};
use crate::provider::{Replay, ReplayScript, ScriptTurn};

/// A replayed conversation, summed up. Prompt figures are what the engine
/// assembled and the model accepted; transcript figures are what the written
/// session holds.
#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RunReport {
    /// Every turn that completed, in order.
    pub turns: Vec<TurnReport>,
    /// Turns that failed, with why and what they did before.
    pub failed_turns: Vec<FailedTurn>,
    /// Model calls made (failed turns' included).
    pub model_calls: u32,
    /// The largest prompt the model accepted.
    pub largest_prompt_tokens: u64,
    /// The last prompt the model accepted: the context the engine assembled
    /// at the end.
    pub last_prompt_tokens: u64,
    /// Compactions that compacted.
    pub compactions: u32,
    /// Calls the model made to the engine's tools.
    pub engine_tool_calls: u32,
    /// Model completions the engine asked the host for during the run
    /// (`host.complete`, and `host.summarize` through the host's model).
    pub completions: crate::services::completions::CompletionTotals,
    /// Engine calls `legacy` served in place of the selected engine: after a
    /// failure, while it was quarantined, or because no instance slot was
    /// free.
    pub fallbacks: u64,
    /// Distinct engines quarantined during the run (an overloaded engine is
    /// not quarantined).
    pub quarantined: Vec<String>,
    /// Recorded entries written as they were, without a model call.
    pub recorded_entries: usize,
    /// Tool results written whose call is nowhere before them (kept in the
    /// transcript, out of every prompt).
    pub orphan_tool_results: usize,
    /// Messages on the written session's branch (compactions aside): the
    /// conversation as replayed.
    pub transcript_messages: usize,
    /// Tokens of those messages.
    pub transcript_tokens: u64,
    /// Tokens of the written session's active context at the end (after
    /// the compactions in the transcript).
    pub transcript_context_tokens: u64,
}

impl RunReport {
    /// Share of the conversation's tokens the last prompt held (0..=1): what
    /// the engine kept of it for the model, whoever compacted.
    pub fn share_kept(&self) -> f64 {
        if self.transcript_tokens == 0 {
            1.0
        } else {
            self.last_prompt_tokens as f64 / self.transcript_tokens as f64
        }
    }

    fn sum(&mut self, turn: &TurnReport) {
        self.model_calls += turn.model_calls;
        self.largest_prompt_tokens = self.largest_prompt_tokens.max(turn.largest_prompt_tokens);
        if turn.model_calls > 0 {
            self.last_prompt_tokens = turn.last_prompt_tokens;
        }
        self.compactions += turn.compactions;
        self.engine_tool_calls += turn.engine_tool_calls;
        self.recorded_entries += turn.recorded_entries;
        self.orphan_tool_results += turn.orphan_tool_results;
        self.count(&turn.guard_events);
    }

    fn add(&mut self, turn: TurnReport) {
        self.sum(&turn);
        self.turns.push(turn);
    }

    fn add_failed(&mut self, index: usize, error: &super::TurnError, done: TurnReport) {
        self.sum(&done);
        self.failed_turns.push(FailedTurn {
            index,
            kind: error.kind().to_owned(),
            liveness: error.liveness().map(str::to_owned),
            error: error.to_string(),
            done,
        });
    }

    /// What each compaction that compacted freed, in order.
    pub fn tokens_freed(&self) -> Vec<u64> {
        self.compaction_passes()
            .into_iter()
            .filter(|(_, pass)| pass.compacted)
            .map(|(_, pass)| pass.freed())
            .collect()
    }

    /// Every compaction the runner asked for, in order, with its turn's
    /// number (failed turns' included).
    pub fn compaction_passes(&self) -> Vec<(usize, &super::CompactionPass)> {
        let mut passes: Vec<(usize, &super::CompactionPass)> = self
            .turns
            .iter()
            .chain(self.failed_turns.iter().map(|failed| &failed.done))
            .flat_map(|turn| turn.compaction_passes.iter().map(|pass| (turn.index, pass)))
            .collect();
        passes.sort_by_key(|(turn, _)| *turn);
        passes
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
    /// The kind of failure ([`TurnError::kind`](super::TurnError::kind)):
    /// `context_overflow`, `compaction_failure`, `provider_error`, …
    pub kind: String,
    /// `blocked` when the session cannot go on as it is
    /// ([`TurnError::liveness`](super::TurnError::liveness)).
    pub liveness: Option<String>,
    /// Why, in words, and what to do about it.
    pub error: String,
    /// What it did before it failed (its recording's rest is written as it
    /// was, counted in `recorded_entries`).
    pub done: TurnReport,
}

impl TurnRunner {
    /// Replays `script` into `session`: its preamble is appended as it is,
    /// then each turn's inputs are run with `replay` answering from the
    /// recording. A failed turn is recorded, the rest of its recording is
    /// written as it was (the engine hears of it in `after-turn`, as of any
    /// turn), and the replay goes on. `on_turn` hears of each turn as it
    /// ends.
    pub async fn run_script(
        &self,
        session: &mut Session,
        replay: &Replay,
        script: &ReplayScript,
        abort: &CancellationToken,
        on_turn: &mut (dyn FnMut(usize, Option<&TurnReport>) + Send),
    ) -> Result<RunReport, crate::transcript::TranscriptError> {
        let mut report = RunReport::default();
        let served_by_legacy = self.engine.calls_served_by_legacy();
        // The preamble is written as it was, no model call made for it.
        let mut preamble = TurnProgress::new(0);
        self.append_recorded(session, &script.preamble, &mut preamble)?;
        report.recorded_entries += preamble.report.recorded_entries;
        report.orphan_tool_results += preamble.report.orphan_tool_results;
        let mut conversation_tokens = preamble.appended_tokens();
        for (index, turn) in script.turns.iter().enumerate() {
            if abort.is_cancelled() {
                break;
            }
            replay.begin_turn(turn);
            let mut progress = TurnProgress::new(session.turns_run());
            let outcome = self
                .run_turn_into(session, turn.inputs.clone(), abort, &mut progress)
                .await;
            if outcome.is_err() {
                self.write_rest_of_failed_turn(session, replay, turn, abort, &mut progress)
                    .await?;
            }
            conversation_tokens += progress.appended_tokens();
            progress.report.conversation_tokens = conversation_tokens;
            match outcome {
                Ok(()) => {
                    on_turn(index, Some(&progress.report));
                    report.add(progress.report);
                }
                Err(error) => {
                    on_turn(index, None);
                    report.add_failed(index, &error, progress.report);
                }
            }
        }
        session.commit()?;
        // The last turn's background maintenance is part of the run.
        session.wait_for_maintenance().await;
        report.add_late_events(self.engine.take_events());
        report.fallbacks = self.engine.calls_served_by_legacy() - served_by_legacy;
        let branch = session.transcript().active_branch();
        report.transcript_messages = branch.len();
        report.transcript_tokens = branch
            .iter()
            .map(|entry| tokens::estimate_message(&entry.message))
            .sum();
        report.transcript_context_tokens = session.history().total_tokens();
        Ok(report)
    }

    /// After a turn failed: writes what its recording still held (its inputs
    /// too, if the turn failed before them) as it was, then lets the engine
    /// hear of the turn as of any other (`after-turn`, `maintain`); a failure
    /// there is logged, the turn is already failed.
    async fn write_rest_of_failed_turn(
        &self,
        session: &mut Session,
        replay: &Replay,
        turn: &ScriptTurn,
        abort: &CancellationToken,
        progress: &mut TurnProgress,
    ) -> Result<(), crate::transcript::TranscriptError> {
        if progress.inputs.is_empty() && !turn.inputs.is_empty() {
            progress.inputs = session.append(&turn.inputs)?;
            progress.report.recorded_entries += progress.inputs.len();
        }
        let rest = replay.take_rest();
        self.append_recorded(session, &rest, progress)?;
        progress.report.messages_appended = progress.inputs.len() + progress.answers.len();
        let call = self.call_options(abort);
        if let Err(error) = self
            .finish_turn(session, &call, &progress.inputs, &progress.answers)
            .await
        {
            tracing::warn!(%error, "the engine was not told of a failed turn");
        }
        session.turn_done();
        progress
            .report
            .guard_events
            .extend(self.engine.take_events());
        Ok(())
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
    fn overload_quarantines_nothing_and_late_events_join_the_last_turn() {
        let mut report = RunReport::default();
        report.add(TurnReport {
            guard_events: vec![
                event(GuardAction::Overloaded, FailureKind::Overloaded),
                event(GuardAction::Reported, FailureKind::Overloaded),
                event(GuardAction::Aborted, FailureKind::Aborted),
            ],
            ..TurnReport::default()
        });
        assert!(report.quarantined.is_empty(), "{:?}", report.quarantined);

        report.add(TurnReport {
            guard_events: vec![event(GuardAction::FellBack, FailureKind::Timeout)],
            ..TurnReport::default()
        });
        report.add_late_events(vec![event(
            GuardAction::Overloaded,
            FailureKind::Overloaded,
        )]);
        assert_eq!(report.quarantined, vec!["busy".to_owned()]);
        assert_eq!(
            report.turns[1].guard_events.len(),
            2,
            "late events join the last turn"
        );
    }

    #[test]
    fn a_failed_turns_figures_count() {
        let mut report = RunReport::default();
        report.add(TurnReport {
            model_calls: 2,
            largest_prompt_tokens: 900,
            last_prompt_tokens: 800,
            ..TurnReport::default()
        });
        report.add_failed(
            1,
            &super::super::TurnError::TooManyModelCalls(3),
            TurnReport {
                model_calls: 3,
                largest_prompt_tokens: 1_200,
                last_prompt_tokens: 1_100,
                compactions: 1,
                recorded_entries: 40,
                ..TurnReport::default()
            },
        );
        assert_eq!(report.model_calls, 5);
        assert_eq!(report.largest_prompt_tokens, 1_200);
        assert_eq!(report.last_prompt_tokens, 1_100);
        assert_eq!(report.compactions, 1);
        assert_eq!(report.recorded_entries, 40);
        assert_eq!(report.failed_turns[0].done.model_calls, 3);
        assert_eq!(report.failed_turns[0].kind, "tool_loop");
    }
}
