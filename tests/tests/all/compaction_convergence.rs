//! Compaction that converges (issue 23): one compaction frees room for many
//! turns, and passes that free little are stopped by the progress guard,
//! which says why — in the turn report and in the turn's error.
//!
//! The guard's rules are the reference's `compaction-progress.test.ts`
//! (unit tests in `host::services::compaction::progress`); here the runner
//! applies them to native compactions and to engines' own, measured by the
//! runner itself, and the real fixtures are replayed to check the figures
//! the issue asks for.

use ctxbox_host::contract::types::CompactResult;
use ctxbox_host::provider::ReplayScript;
use ctxbox_host::runner::{CompactionPass, RunReport, TurnError};
use ctxbox_host::runtime::Runtime;
use ctxbox_host::runtime::config::Config;
use ctxbox_host::services::compaction::{PassYield, effective_reserve};
use ctxbox_tests::{FIXTURE_SESSIONS, fixture};
use tokio_util::sync::CancellationToken;

use crate::runner::{Spy, answer, compacted, harness, overflow, scripted};

/// Every compaction in `report` freed at least a third of the prompt
/// budget, or the progress guard stopped in that turn and said why.
pub(crate) fn assert_each_compaction_frees_a_third(report: &RunReport, window: u64, label: &str) {
    let budget = window - effective_reserve(window, 16_384);
    let turns = report
        .turns
        .iter()
        .chain(report.failed_turns.iter().map(|failed| &failed.done));
    for turn in turns {
        for pass in turn.compaction_passes.iter().filter(|pass| pass.compacted) {
            let stopped = turn
                .compaction_stopped
                .as_deref()
                .is_some_and(|why| why.starts_with("compaction stopped: "));
            assert!(
                pass.freed() * 3 >= budget || stopped,
                "{label}: turn {} compacted {} -> {} ({} freed, under a third of the {budget}-token budget) and the guard did not stop: {pass:?}",
                turn.index + 1,
                pass.tokens_before,
                pass.tokens_after,
                pass.freed()
            );
        }
    }
}

async fn replay(runtime: &Runtime, name: &str, window: u64, dir: &std::path::Path) -> RunReport {
    let recording = runtime
        .transcripts()
        .open_read_only(&fixture(name))
        .expect("fixture opens");
    let script = ReplayScript::from_messages(
        recording
            .active_branch()
            .into_iter()
            .map(|entry| entry.message),
    );
    let engine = runtime.select(Some("legacy")).await;
    runtime
        .replay(
            &script,
            engine,
            window,
            &dir.join(format!("{name}-{window}.jsonl")),
            &CancellationToken::new(),
            &mut |_, _| {},
        )
        .await
        .expect("replayed")
}

fn runtime(dir: &std::path::Path) -> Runtime {
    Runtime::new(Config {
        data_dir: Some(dir.join("data")),
        ..Config::default()
    })
    .expect("runtime")
}

/// The bar: half of the 141 and 160 compactions the two largest
/// fixtures took at 16k before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_largest_fixtures_compact_at_most_half_as_often_at_16k() {
    let dir = tempfile::tempdir().expect("temp dir");
    let runtime = runtime(dir.path());
    for (name, at_most) in [(FIXTURE_SESSIONS[1], 70), (FIXTURE_SESSIONS[2], 80)] {
        let report = replay(&runtime, name, 16_384, dir.path()).await;
        assert!(
            report.compactions <= at_most,
            "{name}: {} compactions in {} model calls, more than {at_most}",
            report.compactions,
            report.model_calls
        );
        assert!(
            report.compactions > 0,
            "{name}: the window is small enough to compact"
        );
        assert_each_compaction_frees_a_third(&report, 16_384, name);
    }
}

// --- the guard around engine compactions -------------------------------------

fn outcomes(passes: &[CompactionPass]) -> Vec<PassYield> {
    passes.iter().map(|pass| pass.outcome).collect()
}

#[tokio::test]
async fn a_compaction_that_frees_nothing_stops_the_guard_and_the_turn_says_why() {
    // The engine claims to compact and changes nothing: the runner measures
    // the context itself, so the pass freed nothing, under a third of the
    // budget, and the guard stops at once: the next overflow is not
    // compacted again, and the turn ends saying why and what to do.
    let spy = Spy::new(false, vec![compacted(), compacted(), compacted()]);
    let provider = scripted(vec![overflow(), overflow(), overflow(), answer()]);
    let mut session = harness(spy.clone(), provider, false);
    let error = session.turn("hi").await.expect_err("nothing frees room");
    assert_eq!(
        spy.compactions.lock().expect("lock").len(),
        1,
        "stopped after one"
    );
    assert_eq!(error.kind(), "context_overflow");
    let text = error.to_string();
    assert!(
        text.contains("compaction stopped: the last pass freed 0 tokens"),
        "{text}"
    );
    assert!(text.contains("/new"), "says what to do: {text}");
}

#[tokio::test]
async fn an_engine_that_owns_compaction_is_measured_on_its_next_prompt() {
    // An owner's compaction is measured against the prompt it assembles
    // next: a claim that changed nothing stops the guard.
    let spy = Spy::new(true, vec![compacted(), compacted(), compacted()]);
    let provider = scripted(vec![overflow(), overflow(), overflow(), answer()]);
    let mut session = harness(spy.clone(), provider, false);
    let error = session.turn("hi").await.expect_err("nothing frees room");
    assert_eq!(spy.compactions.lock().expect("lock").len(), 1);
    assert!(error.to_string().contains("compaction stopped"), "{error}");
}

#[tokio::test]
async fn a_new_turn_gets_one_more_pass() {
    let spy = Spy::new(false, vec![compacted(), compacted(), compacted()]);
    let provider = scripted(vec![overflow(), overflow(), overflow(), overflow()]);
    let mut session = harness(spy.clone(), provider, false);
    session.turn("hi").await.expect_err("stopped");
    let error = session.turn("again").await.expect_err("stopped again");
    assert_eq!(
        spy.compactions.lock().expect("lock").len(),
        2,
        "one pass in the new turn"
    );
    assert!(error.to_string().contains("compaction stopped"), "{error}");
}

#[tokio::test]
async fn native_compaction_that_frees_room_is_an_effective_pass() {
    let spy = Spy::new(false, Vec::new());
    let provider = scripted(vec![overflow(), answer()]);
    let mut session = harness(spy.clone(), provider, false);
    spy.compact_natively(session.store());
    for turn in 0..30 {
        session
            .append_turn(&format!("question {turn} {}", "words ".repeat(200)))
            .expect("append");
    }
    let report = session.turn("hi").await.expect("compacted and answered");
    assert_eq!(outcomes(&report.compaction_passes), [PassYield::Effective]);
    assert!(report.compaction_stopped.is_none());
    let pass = &report.compaction_passes[0];
    assert_eq!(pass.trigger, "overflow");
    assert!(pass.compacted);
    let budget = session.runner.config().prompt_budget();
    assert!(pass.freed() * 3 >= budget, "{pass:?}");
}

#[tokio::test]
async fn a_compaction_that_failed_ends_the_turn_as_a_context_overflow_with_its_reason() {
    let spy = Spy::new(
        false,
        vec![CompactResult::failed("the summarizer is unreachable")],
    );
    let provider = scripted(vec![overflow(), answer()]);
    let mut session = harness(spy, provider, false);
    let error = session.turn("hi").await.expect_err("cannot recover");
    assert!(
        matches!(error, TurnError::ContextOverflow { .. }),
        "{error}"
    );
    assert_eq!(error.kind(), "context_overflow");
    assert_eq!(error.liveness(), Some("blocked"));
    let text = error.to_string();
    assert!(text.contains("the summarizer is unreachable"), "{text}");
    assert!(text.contains("/reset") && text.contains("/new"), "{text}");
}
