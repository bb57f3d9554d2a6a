//! `assemble` with valid and edge-case input: no, huge, zero, tiny and half
//! budgets, budgets ending inside tool pairs, an empty history, one message,
//! CJK text, a session never seen; and its token estimate.

use super::judge::{self, Finding};
use super::report::Outcome;
use super::{Checker, cases, failure_text};
use crate::contract::engine::{CallOptions, ContextEngine};
use crate::contract::failure::Operation;
use crate::contract::history::History;
use crate::contract::tokens;
use crate::contract::types::{
    AgentMessage, AssembleParams, AssembleResult, AssembledItem, MessageKind, SessionRef,
};
use crate::contract::validate;
use crate::sandbox::WasmEngine;

/// A budget a caller may pass that even a minimal answer (one short note)
/// may not fit: under [`validate::MIN_ANSWER_BUDGET_TOKENS`].
const TINY_BUDGET: u64 = 20;

/// What every `assemble` check expects.
const VALID_PROMPT: &str = "a valid prompt: keep ranges within the history, tool calls with their results, within the budget (over it only for an engine the host compacts for: a warning)";

impl Checker {
    pub(super) async fn assemble_cases(
        &mut self,
        engine: &WasmEngine,
        session: &SessionRef,
        history: &History,
    ) {
        let total = history.total_tokens();
        for (name, budget) in [
            ("assemble: no budget", None),
            ("assemble: huge budget", Some(10_000_000)),
            ("assemble: zero budget", Some(0)),
            ("assemble: half the history", Some(total / 2)),
        ] {
            self.assemble_case(engine, name, session, history, budget)
                .await;
        }

        // Budgets ending between every call and its result.
        let straddling: Vec<u64> = (1..history.len())
            .filter(|&position| history.splits_pair(position))
            .map(|position| history.tokens(position..history.len()) + 32)
            .collect();
        let name = "assemble: tool pairs straddling the budget";
        let mut failures = Vec::new();
        let mut over = Vec::new();
        for &budget in &straddling {
            let finding = self
                .assemble_answer(engine, name, session, history, Some(budget))
                .await;
            match finding.outcome {
                Outcome::Fail => failures.push(format!("budget {budget}: {}", finding.text)),
                Outcome::Warn => over.push(budget.to_string()),
                Outcome::Pass => {}
            }
        }
        let count = straddling.len();
        let finding = if !failures.is_empty() {
            Finding::fail(failures.join("; "))
        } else if !over.is_empty() {
            Finding::warn(format!(
                "{} of {count} prompts over their budget (budgets {}): {}",
                over.len(),
                over.join(", "),
                judge::OVER_BUDGET_ALLOWED
            ))
        } else {
            Finding::pass(format!(
                "{count} budgets ending inside tool pairs, all valid and within budget"
            ))
        };
        self.record(
            name,
            "no tool call separated from its result, and the prompt within budget",
            finding,
        );

        let empty = History::new(Vec::new());
        self.assemble_case(
            engine,
            "assemble: empty history",
            session,
            &empty,
            Some(1_000),
        )
        .await;
        let one = History::new(vec![cases::entry("only", AgentMessage::user_text("hello"))]);
        self.assemble_case(engine, "assemble: one message", session, &one, Some(1_000))
            .await;
        let chinese = History::new(cases::chinese_conversation(30));
        let chinese_budget = chinese.total_tokens() / 3;
        self.assemble_case(
            engine,
            "assemble: CJK text",
            session,
            &chinese,
            Some(chinese_budget),
        )
        .await;
        let stranger = SessionRef::new("never-seen", "/check/never-seen.jsonl");
        self.assemble_case(
            engine,
            "assemble: a session it has never seen",
            &stranger,
            history,
            Some(total / 2),
        )
        .await;
        engine.close_session(&stranger.session_id).await;
        // A session of its own, so the probe is the first call of a fresh
        // instance and moves no other case's place in the sequence.
        let tiny = SessionRef::new("tiny-budget", "/check/tiny-budget.jsonl");
        self.assemble_case(
            engine,
            "assemble: tiny budget",
            &tiny,
            history,
            Some(TINY_BUDGET),
        )
        .await;
        engine.close_session(&tiny.session_id).await;

        let name = "assemble: estimated-tokens";
        let estimate = self
            .timed(
                name,
                Operation::Assemble,
                engine.assemble(
                    &CallOptions::default(),
                    session,
                    history,
                    &AssembleParams::default(),
                ),
            )
            .await;
        let estimate = match estimate {
            Ok(result) => {
                let actual = prompt_tokens(history, &result);
                if result.estimated_tokens * 2 + 64 >= actual {
                    Ok(format!(
                        "estimated {} for {actual}",
                        result.estimated_tokens
                    ))
                } else {
                    Err(format!(
                        "estimated {} tokens for a prompt the host counts at {actual}",
                        result.estimated_tokens
                    ))
                }
            }
            Err(failure) => Err(failure_text(failure)),
        };
        self.record(name, "not under half the host's count", estimate);
    }

    async fn assemble_case(
        &mut self,
        engine: &WasmEngine,
        name: &str,
        session: &SessionRef,
        history: &History,
        budget: Option<u64>,
    ) {
        let finding = self
            .assemble_answer(engine, name, session, history, budget)
            .await;
        self.record(name, VALID_PROMPT, finding);
    }

    /// Asks for a prompt and judges it: the contract's output rules, then
    /// the budget (see [`judge::budget`]).
    async fn assemble_answer(
        &mut self,
        engine: &WasmEngine,
        name: &str,
        session: &SessionRef,
        history: &History,
        budget: Option<u64>,
    ) -> Finding {
        let params = AssembleParams {
            token_budget: budget,
            available_tools: vec!["exec".into()],
            prompt: Some("Please check config file number 12.".into()),
            ..AssembleParams::default()
        };
        let answer = self
            .timed(
                name,
                Operation::Assemble,
                engine.assemble(&CallOptions::default(), session, history, &params),
            )
            .await;
        let result = match answer {
            Ok(result) => result,
            Err(failure) => return Finding::fail(failure_text(failure)),
        };
        self.note_answer(&result);
        if let Err(violation) = validate::check_assemble(history, &result) {
            return Finding::fail(violation.to_string());
        }
        // Everything the answer adds counts against the budget, as the
        // guard counts it; under a budget no minimal answer fits, the host
        // answers the call without the engine and blames nobody.
        if let Err(violation) = validate::check_additions_fit(&result, budget) {
            return if violation.is_callers_doing() {
                Finding::warn(format!(
                    "{violation}; under {} tokens that is the caller's budget, not the engine's failure: the host answers such a call the legacy way and quarantines nothing",
                    validate::MIN_ANSWER_BUDGET_TOKENS
                ))
            } else {
                Finding::fail(violation.to_string())
            };
        }
        let tokens = prompt_tokens(history, &result);
        let judged = judge::budget(
            tokens,
            budget,
            only_the_newest(history, &result),
            engine.info().owns_compaction,
        );
        let items = match result.items.len() {
            1 => "1 item".to_owned(),
            count => format!("{count} items"),
        };
        Finding {
            text: format!("{items}, {}", judged.text),
            ..judged
        }
    }
}

/// The host's count of the prompt an answer describes: its messages and its
/// system-prompt addition.
fn prompt_tokens(history: &History, result: &AssembleResult) -> u64 {
    let addition = result
        .system_prompt_addition
        .as_deref()
        .map_or(0, tokens::estimate_text);
    history
        .materialize(&result.items)
        .iter()
        .map(tokens::estimate_message)
        .sum::<u64>()
        + addition
}

/// Whether the answer keeps only the newest entry (or the newest tool pair)
/// plus at most one note: the least a prompt can hold. The newest user
/// message before those may be kept too, on its own: providers refuse a
/// conversation without a user turn, so an engine that re-seats it (as
/// lossless-claw's budget clamp does) still answers the least it can.
fn only_the_newest(history: &History, result: &AssembleResult) -> bool {
    let len = history.len() as u32;
    let tail_from = len.saturating_sub(2);
    let mut kept = 0u32;
    let mut inserted = 0;
    let mut user_turn: Option<u32> = None;
    for item in &result.items {
        match item {
            AssembledItem::Keep { start, end } if *start < tail_from => {
                let one_user_message = end.saturating_sub(*start) == 1
                    && history.kind(*start as usize) == Some(MessageKind::User);
                if !one_user_message || user_turn.is_some() {
                    return false;
                }
                user_turn = Some(*start);
            }
            AssembledItem::Keep { start, end } => kept += end.saturating_sub(*start),
            AssembledItem::Insert(_) => inserted += 1,
        }
    }
    let newest_user_turn = |at: u32| {
        (at + 1..tail_from).all(|index| history.kind(index as usize) != Some(MessageKind::User))
    };
    kept <= 2 && inserted <= 1 && user_turn.is_none_or(newest_user_turn)
}

#[cfg(test)]
mod tests {
    use super::only_the_newest;
    use crate::check::cases;
    use crate::contract::history::History;
    use crate::contract::types::{AgentMessage, AssembleResult, AssembledItem};

    /// An answer of keep ranges, with `notes` inserted notes.
    fn answer(ranges: &[(u32, u32)], notes: usize) -> AssembleResult {
        let mut items: Vec<AssembledItem> = (0..notes)
            .map(|_| AssembledItem::Insert(AgentMessage::user_text("note")))
            .collect();
        items.extend(
            ranges
                .iter()
                .map(|&(start, end)| AssembledItem::Keep { start, end }),
        );
        AssembleResult::of_items(items)
    }

    #[test]
    fn the_least_a_prompt_holds_is_the_newest_message_and_the_user_turn_before_it() {
        // Three turns of user, tool call, tool result, assistant: the newest
        // user message is entry 8.
        let history = History::new(cases::conversation(3));
        let minimal =
            |ranges: &[(u32, u32)], notes| only_the_newest(&history, &answer(ranges, notes));
        assert!(minimal(&[(11, 12)], 0));
        assert!(minimal(&[(10, 12)], 1));
        assert!(
            minimal(&[(8, 9), (11, 12)], 0),
            "the newest user turn re-seated"
        );
        assert!(minimal(&[(8, 9)], 0));
        assert!(!minimal(&[(4, 5), (11, 12)], 0), "an older user turn");
        assert!(
            !minimal(&[(9, 10), (11, 12)], 0),
            "a tool call is no user turn"
        );
        assert!(!minimal(&[(4, 5), (8, 9), (11, 12)], 0), "two user turns");
        assert!(
            !minimal(&[(8, 10), (11, 12)], 0),
            "more than the user message"
        );
        assert!(!minimal(&[(8, 12)], 0), "the whole last turn");
        assert!(!minimal(&[(11, 12)], 2), "two notes");
    }
}
