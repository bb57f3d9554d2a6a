//! `compact`: a truthful result; progress reported while a slow compaction
//! runs; an abort honoured in the middle of one; and the edge cases (zero
//! and huge budgets, CJK text, an empty history, a session never seen).
//! Every compaction runs under the check's watchdog window, and the slow
//! ones at its pace ([`CheckClock`](super::clock::CheckClock)).

use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;

use super::judge::{self, Finding};
use super::{Checker, cases, entries_to_messages, failure_text};
use crate::contract::engine::{CallOptions, ContextEngine, EngineResult};
use crate::contract::failure::{EngineFailure, FailureKind, Operation};
use crate::contract::history::History;
use crate::contract::tokens;
use crate::contract::types::{
    AgentMessage, CompactParams, CompactResult, CompactionTarget, SessionRef,
};
use crate::contract::validate;
use crate::sandbox::WasmEngine;

/// When the abort comes, after the aborted compaction starts.
const ABORT_AFTER: Duration = Duration::from_millis(50);
/// Turns of the session the progress and abort checks compact, and how
/// much longer than usual its tool results are: enough for several paced
/// summaries, so the compaction outlasts one watchdog window.
const SLOW_TURNS: usize = 24;
const SLOW_SCALE: usize = 6;

/// What every compaction answer must be.
const TRUTHFUL: &str = "a truthful answer, not an error (a failing compact gets an engine quarantined): first-kept-entry-id names an entry of the history, tokens-after <= tokens-before, compacted only with ok and tokens-after";

/// A compaction to try: where, with what, and whether the engine is told of
/// the session first.
struct Case<'a> {
    name: &'a str,
    messages: Vec<AgentMessage>,
    bootstrap: bool,
    params: CompactParams,
}

/// A session ready for a compaction check.
struct Prepared {
    session: SessionRef,
    history: History,
    _transcript: crate::transcript::Transcript,
}

impl Checker {
    pub(super) async fn compaction(&mut self, engine: &WasmEngine) {
        let forced = |budget| CompactParams {
            token_budget: budget,
            force: true,
            compaction_target: CompactionTarget::Budget,
            ..CompactParams::default()
        };
        let third = |messages: &[AgentMessage]| {
            Some(messages.iter().map(tokens::estimate_message).sum::<u64>() / 3)
        };

        let main = super::messages(40);
        let main_budget = third(&main);
        self.compact_case(
            engine,
            Case {
                name: "compact",
                messages: main,
                bootstrap: true,
                params: forced(main_budget),
            },
        )
        .await;

        let slow = entries_to_messages(cases::bulky_conversation(SLOW_TURNS, SLOW_SCALE));
        let slow_budget = third(&slow);
        self.progress_case(engine, slow.clone(), forced(slow_budget))
            .await;
        self.abort_case(engine, slow, forced(slow_budget)).await;

        let unforced = |budget| CompactParams {
            force: false,
            ..forced(Some(budget))
        };
        let chinese = entries_to_messages(cases::chinese_conversation(30));
        let chinese_budget = third(&chinese);
        for case in [
            Case {
                name: "compact: zero budget",
                messages: super::messages(12),
                bootstrap: true,
                params: unforced(0),
            },
            Case {
                name: "compact: huge budget",
                messages: super::messages(12),
                bootstrap: true,
                params: unforced(10_000_000),
            },
            Case {
                name: "compact: CJK text",
                messages: chinese,
                bootstrap: true,
                params: forced(chinese_budget),
            },
            Case {
                name: "compact: empty history",
                messages: Vec::new(),
                bootstrap: true,
                params: forced(Some(1_000)),
            },
            Case {
                name: "compact: a session it has never seen",
                messages: super::messages(12),
                bootstrap: false,
                params: forced(Some(1_000)),
            },
        ] {
            self.compact_case(engine, case).await;
        }
    }

    /// A fresh session holding `messages`, bootstrapped if asked (as a host
    /// does on first sight). The caller closes it when done.
    async fn prepare(
        &mut self,
        engine: &WasmEngine,
        name: &str,
        messages: Vec<AgentMessage>,
        bootstrap: bool,
    ) -> Result<Prepared, String> {
        let file = name.replace([' ', ':'], "-");
        let (session, history, transcript) = self.session(&file, messages)?;
        if bootstrap {
            let bootstrapped = self
                .timed(
                    &format!("{name} (its bootstrap)"),
                    Operation::Bootstrap,
                    engine.bootstrap(&CallOptions::default(), &session, &history),
                )
                .await;
            if let Err(failure) = bootstrapped {
                engine.close_session(&session.session_id).await;
                return Err(format!(
                    "bootstrapping the session first failed: {}",
                    failure_text(failure)
                ));
            }
        }
        Ok(Prepared {
            session,
            history,
            _transcript: transcript,
        })
    }

    async fn compact_case(&mut self, engine: &WasmEngine, case: Case<'_>) {
        let Case {
            name,
            messages,
            bootstrap,
            params,
        } = case;
        let prepared = match self.prepare(engine, name, messages, bootstrap).await {
            Ok(prepared) => prepared,
            Err(error) => return self.record(name, TRUTHFUL, Finding::fail(error)),
        };
        let call = self.compacting();
        let answer = self
            .timed(
                name,
                Operation::Compact,
                engine.compact(&call, &prepared.session, &prepared.history, &params),
            )
            .await;
        let finding = match &answer {
            Ok(result) => {
                self.note_answer(result);
                match rules(&prepared.history, result) {
                    Ok(()) => Finding::pass(judge::describe_compaction(result)),
                    Err(violation) => Finding::fail(violation),
                }
            }
            Err(failure) => Finding::fail(self.compaction_failure(failure.clone())),
        };
        self.record(name, TRUTHFUL, finding);
        engine.close_session(&prepared.session.session_id).await;
    }

    /// A failed compaction (or `after-turn`) in words; one stopped by the
    /// watchdog, or by itself as its window ran out, says how the watchdog
    /// works.
    pub(super) fn compaction_failure(&self, failure: EngineFailure) -> String {
        let watchdog = matches!(
            failure.kind,
            FailureKind::Timeout | FailureKind::StoppedAtDeadline
        );
        let text = failure_text(failure);
        if !watchdog {
            return text;
        }
        format!(
            "{text}: a compaction gets one watchdog window ({}) and another with each progress report",
            self.clock.window_words()
        )
    }

    /// A compaction whose every summary takes the check's pace: it must
    /// report progress (itself, or through the host's delegated compaction)
    /// often enough that the watchdog never sees a whole window without it.
    async fn progress_case(
        &mut self,
        engine: &WasmEngine,
        messages: Vec<AgentMessage>,
        params: CompactParams,
    ) {
        const NAME: &str = "compact: progress";
        let clock = self.clock.clone();
        let expected = format!(
            "progress reported at least once per watchdog window ({}) while a slow compaction runs (each summary takes {} ms here)",
            clock.window_words(),
            clock.pace.as_millis()
        );
        let prepared = match self.prepare(engine, NAME, messages, true).await {
            Ok(prepared) => prepared,
            Err(error) => return self.record(NAME, &expected, Finding::fail(error)),
        };
        self.services.take_progress();
        self.pace.set(clock.pace);
        let call = self.compacting();
        let started = Instant::now();
        let answer = self
            .timed(
                NAME,
                Operation::Compact,
                engine.compact(&call, &prepared.session, &prepared.history, &params),
            )
            .await;
        let ended = Instant::now();
        self.pace.set(Duration::ZERO);
        let reports = self.services.take_progress();
        let finding = match &answer {
            Ok(result) => match rules(&prepared.history, result) {
                Ok(()) => judge::progress(&answer, started, &reports, ended, &clock),
                Err(violation) => {
                    Finding::fail(format!("the answer breaks the rules: {violation}"))
                }
            },
            Err(_) => judge::progress(&answer, started, &reports, ended, &clock),
        };
        self.record(NAME, &expected, finding);
        engine.close_session(&prepared.session.session_id).await;
    }

    /// A slow compaction (every summary takes the check's pace) that the
    /// caller aborts [`ABORT_AFTER`] in: the engine must return by itself,
    /// soon.
    async fn abort_case(
        &mut self,
        engine: &WasmEngine,
        messages: Vec<AgentMessage>,
        params: CompactParams,
    ) {
        const NAME: &str = "compact: abort";
        let grace = self.sandbox.config().abort_grace();
        let expected = format!(
            "returns by itself within {} ms of the caller's abort (ok: false, compacted: false, or an error saying it was aborted), before the host has to interrupt it",
            grace.as_millis()
        );
        let prepared = match self.prepare(engine, NAME, messages, true).await {
            Ok(prepared) => prepared,
            Err(error) => return self.record(NAME, &expected, Finding::fail(error)),
        };
        // The instance exists before the clock starts: the abort must land
        // in the compaction, not in instantiation.
        if let Err(failure) = engine.prewarm(&prepared.session.session_id).await {
            self.record(NAME, &expected, Finding::fail(failure_text(failure)));
            return engine.close_session(&prepared.session.session_id).await;
        }
        self.pace.set(self.clock.pace);
        let abort = CancellationToken::new();
        let trigger = abort.clone();
        let timer = tokio::spawn(async move {
            tokio::time::sleep(ABORT_AFTER).await;
            let at = Instant::now();
            trigger.cancel();
            at
        });
        let call = CallOptions {
            abort: abort.clone(),
            ..self.compacting()
        };
        let started = Instant::now();
        let answer: EngineResult<CompactResult> = self
            .timed(
                NAME,
                Operation::Compact,
                engine.compact(&call, &prepared.session, &prepared.history, &params),
            )
            .await;
        let ended = Instant::now();
        self.pace.set(Duration::ZERO);
        let since_abort = if abort.is_cancelled() {
            timer
                .await
                .ok()
                .map(|at| ended.saturating_duration_since(at))
        } else {
            timer.abort();
            None
        };
        let answer_rules = match &answer {
            Ok(result) => rules(&prepared.history, result),
            Err(_) => Ok(()),
        };
        let finding = judge::abort(
            &answer,
            answer_rules,
            since_abort,
            ended.saturating_duration_since(started),
            grace,
        );
        self.record(NAME, &expected, finding);
        engine.close_session(&prepared.session.session_id).await;
    }
}

/// The contract's rules for a compaction answer (ARCHITECTURE.md §5), and `ok` and
/// `compacted` agreeing with the rest of it.
fn rules(history: &History, result: &CompactResult) -> Result<(), String> {
    validate::check_compact(history, result).map_err(|violation| violation.to_string())?;
    if result.compacted && !result.ok {
        return Err("compacted: true with ok: false".to_owned());
    }
    if result.compacted && result.tokens_after.is_none() {
        return Err("compacted: true without tokens-after".to_owned());
    }
    Ok(())
}
