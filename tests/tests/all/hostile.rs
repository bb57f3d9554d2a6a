//! The hostile engine zoo behind the guard (ARCHITECTURE.md §11): each misbehaviour
//! ends in its classification, a durable quarantine record, the call served by
//! `legacy`, and no effect on another agent's engine on the same host.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use ctxbox_host::contract::engine::{CallOptions, ContextEngine};
use ctxbox_host::contract::failure::{FailureKind, Operation};
use ctxbox_host::contract::history::History;
use ctxbox_host::contract::types::{
    AssembleParams, AssembleResult, AssembledItem, CompactParams, CompactResult,
};
use ctxbox_host::engines::guard::{GuardAction, GuardPolicy, GuardedEngine};
use ctxbox_host::engines::selection::Engines;
use ctxbox_host::sandbox::SandboxConfig;
use ctxbox_tests::{conversation, guests, session, zoo_host};
use tokio_util::sync::CancellationToken;

/// Generous bound on how long a stopped engine may take to be stopped on a
/// shared machine (precise latencies are benched, not tested).
const SLACK: Duration = Duration::from_secs(2);

fn keep_all(history: &History) -> Vec<AssembledItem> {
    vec![AssembledItem::Keep {
        start: 0,
        end: history.len() as u32,
    }]
}

fn budget(tokens: u64) -> AssembleParams {
    AssembleParams {
        token_budget: Some(tokens),
        ..AssembleParams::default()
    }
}

/// Another agent's engine (keep-recent, session `bystander`), loaded and
/// warmed so it is ready to serve at once.
async fn bystander_engine(host: &Engines) -> Arc<GuardedEngine> {
    let engine = host.select(Some("keep-recent")).await;
    bystander_turn(&engine).await;
    engine
}

/// One bystander call, checked.
async fn bystander_turn(engine: &GuardedEngine) {
    let history = History::new(conversation(10));
    let result = engine
        .assemble(
            &CallOptions::default(),
            &session("bystander"),
            &history,
            &budget(400),
        )
        .await
        .expect("the bystander is served");
    assert!(
        engine.serving_selected(),
        "the bystander's engine is untouched"
    );
    // Exactly what keep-recent's native build plans for the same input.
    let expected = keep_recent::plan(&history, Some(400));
    let Some(ctxbox_guest::AssembledItem::Keep(tail)) = expected.items.last() else {
        panic!("keep-recent keeps a tail");
    };
    assert_eq!(
        result.items.last(),
        Some(&AssembledItem::Keep {
            start: tail.start,
            end: tail.end
        })
    );
}

/// Keeps the bystander busy until `stop` (at least one call); returns how
/// many calls it got answered.
async fn bystander(engine: Arc<GuardedEngine>, stop: CancellationToken) -> usize {
    let mut answers = 0;
    loop {
        bystander_turn(&engine).await;
        answers += 1;
        if stop.is_cancelled() {
            return answers;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Runs `work` while another agent's session on the same host is served,
/// and checks that it was.
async fn while_bystander_served<T>(host: &Engines, work: impl Future<Output = T>) -> T {
    let stop = CancellationToken::new();
    let watcher = tokio::spawn(bystander(bystander_engine(host).await, stop.clone()));
    let answer = work.await;
    stop.cancel();
    let served = watcher.await.expect("bystander task");
    assert!(served > 0, "the bystander was served meanwhile");
    answer
}

/// Runs `call` on engine `id` while a bystander agent is served, then checks
/// the one guard event, the quarantine record and that legacy serves now.
async fn expect_quarantine<T>(
    host: Arc<Engines>,
    id: &str,
    operation: Operation,
    classification: FailureKind,
    call: impl AsyncFnOnce(Arc<GuardedEngine>) -> T,
) -> T {
    let engine = host.select(Some(id)).await;
    assert!(engine.serving_selected(), "{id} loads and serves at first");

    let answer = while_bystander_served(&host, call(engine.clone())).await;

    let events = engine.take_events();
    assert_eq!(events.len(), 1, "{events:?}");
    let event = &events[0];
    assert_eq!(event.engine_id, id);
    assert_eq!(event.owner, "plugin:zoo");
    assert_eq!(event.operation, operation);
    assert_eq!(event.classification, classification, "{}", event.reason);

    let record = host.quarantine().get(id).expect("quarantined");
    assert_eq!(record.classification, classification.as_str());
    assert_eq!(record.operation, operation.as_str());
    assert_eq!(record.owner, "plugin:zoo");
    assert!(!engine.serving_selected());
    assert_eq!(engine.serving_id(), "legacy");
    assert_eq!(
        engine.info().id,
        "legacy",
        "while quarantined, info is legacy's"
    );
    answer
}

/// Runs a failing `assemble` on `id`: the answer must be legacy's, and the
/// next call goes to legacy without touching the engine.
async fn expect_assemble_fallback(
    config: SandboxConfig,
    id: &str,
    classification: FailureKind,
    params: AssembleParams,
) -> ctxbox_host::engines::quarantine::QuarantineRecord {
    let (_dir, host) = zoo_host(config, GuardPolicy::default());
    let history = History::new(conversation(3));
    let result: AssembleResult = expect_quarantine(
        host.clone(),
        id,
        Operation::Assemble,
        classification,
        async |engine| {
            engine
                .assemble(
                    &CallOptions::default(),
                    &session("victim"),
                    &history,
                    &params,
                )
                .await
                .expect("the turn goes on with legacy")
        },
    )
    .await;
    assert_eq!(
        result.items,
        keep_all(&history),
        "legacy passes the history through"
    );

    let engine = host.select(Some(id)).await;
    let started = Instant::now();
    let again = engine
        .assemble(
            &CallOptions::default(),
            &session("victim"),
            &history,
            &params,
        )
        .await
        .expect("legacy serves");
    assert_eq!(again.items, keep_all(&history));
    assert!(
        engine.take_events().is_empty(),
        "a quarantined engine is not called again"
    );
    assert!(started.elapsed() < SLACK);
    host.quarantine().get(id).expect("record")
}

fn quick(config: SandboxConfig) -> SandboxConfig {
    SandboxConfig {
        call_timeout_ms: 500,
        ..config
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_endless_assemble_times_out() {
    let config = SandboxConfig {
        fuel_per_call: u64::MAX / 4,
        ..quick(SandboxConfig::default())
    };
    expect_assemble_fallback(
        config,
        "spin",
        FailureKind::Timeout,
        AssembleParams::default(),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fuel_bomb_runs_out_of_fuel() {
    let config = SandboxConfig {
        fuel_per_call: 50_000_000,
        ..SandboxConfig::default()
    };
    expect_assemble_fallback(
        config,
        "fuel-bomb",
        FailureKind::OutOfFuel,
        AssembleParams::default(),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_memory_bomb_hits_its_budget() {
    let config = SandboxConfig {
        memory_limit_mib: 16,
        ..SandboxConfig::default()
    };
    expect_assemble_fallback(
        config,
        "memory-bomb",
        FailureKind::Memory,
        AssembleParams::default(),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stack_overflow_is_caught() {
    expect_assemble_fallback(
        SandboxConfig::default(),
        "deep-recursion",
        FailureKind::StackOverflow,
        AssembleParams::default(),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panic_is_recorded_with_its_message() {
    let params = AssembleParams {
        prompt: Some("panic".into()),
        ..AssembleParams::default()
    };
    let record = expect_assemble_fallback(
        SandboxConfig::default(),
        "panicker",
        FailureKind::Panic,
        params,
    )
    .await;
    assert!(record.stderr_tail.contains("engine exploded"), "{record:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_huge_answer_is_invalid_output() {
    let record = expect_assemble_fallback(
        SandboxConfig::default(),
        "huge-answer",
        FailureKind::InvalidOutput,
        AssembleParams::default(),
    )
    .await;
    assert!(record.reason.contains("byte limit"), "{}", record.reason);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_repeating_the_history_is_invalid_output() {
    // A small answer describing a prompt a hundred thousand histories long:
    // refused before the host builds any of it.
    let record = expect_assemble_fallback(
        SandboxConfig::default(),
        "amplifier",
        FailureKind::InvalidOutput,
        AssembleParams::default(),
    )
    .await;
    assert!(
        record.reason.contains("must not overlap"),
        "{}",
        record.reason
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_huge_payload_to_the_host_is_a_host_limit() {
    let config = SandboxConfig {
        max_input_kib_per_call: 8 * 1024,
        ..SandboxConfig::default()
    };
    let record = expect_assemble_fallback(
        config,
        "host-flood",
        FailureKind::HostLimit,
        AssembleParams::default(),
    )
    .await;
    assert!(record.reason.contains("passed"), "{}", record.reason);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leaking_resource_handles_is_a_host_limit() {
    let config = SandboxConfig {
        max_handles: 200,
        ..SandboxConfig::default()
    };
    let record = expect_assemble_fallback(
        config,
        "handle-leak",
        FailureKind::HostLimit,
        AssembleParams::default(),
    )
    .await;
    assert!(record.reason.contains("maxHandles"), "{}", record.reason);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_log_flood_is_cut_off_without_stalling_the_host() {
    let record = expect_assemble_fallback(
        SandboxConfig::default(),
        "log-flood",
        FailureKind::HostLimit,
        AssembleParams::default(),
    )
    .await;
    assert!(record.reason.contains("log records"), "{}", record.reason);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_prompt_that_splits_a_tool_pair_is_invalid_output() {
    let record = expect_assemble_fallback(
        SandboxConfig::default(),
        "pair-breaker",
        FailureKind::InvalidOutput,
        AssembleParams::default(),
    )
    .await;
    assert!(record.reason.contains("call-0"), "{}", record.reason);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sleep_in_a_wasi_poll_is_bounded_by_the_host() {
    // The guest asks to sleep for an hour: finishing at all proves the bound.
    let started = Instant::now();
    expect_assemble_fallback(
        quick(SandboxConfig::default()),
        "sleeper",
        FailureKind::Timeout,
        AssembleParams::default(),
    )
    .await;
    assert!(started.elapsed() < Duration::from_secs(60));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_engine_failing_on_its_fifth_call_serves_four_then_falls_back() {
    let (_dir, host) = zoo_host(SandboxConfig::default(), GuardPolicy::default());
    let history = History::new(conversation(2));
    let engine = host.select(Some("flaky")).await;
    for call in 1..=4 {
        engine
            .assemble(
                &CallOptions::default(),
                &session("s"),
                &history,
                &AssembleParams::default(),
            )
            .await
            .unwrap_or_else(|failure| panic!("call {call}: {failure}"));
        assert!(
            engine.take_events().is_empty(),
            "call {call} needed no guard"
        );
    }
    let result = expect_quarantine(
        host.clone(),
        "flaky",
        Operation::Assemble,
        FailureKind::Panic,
        async |engine| {
            engine
                .assemble(
                    &CallOptions::default(),
                    &session("s"),
                    &history,
                    &AssembleParams::default(),
                )
                .await
                .expect("legacy answers the fifth call")
        },
    )
    .await;
    assert_eq!(result.items, keep_all(&history));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_info_with_an_empty_id_or_name_falls_back_at_selection() {
    let (_dir, host) = zoo_host(SandboxConfig::default(), GuardPolicy::default());
    let history = History::new(conversation(1));
    for (id, problem) in [("nameless", "empty id"), ("blank-name", "empty name")] {
        let engine = while_bystander_served(&host, host.select(Some(id))).await;
        assert!(!engine.serving_selected(), "{id}");
        assert_eq!(engine.info().id, "legacy");
        let record = host.quarantine().get(id).expect("quarantined at selection");
        assert_eq!(record.operation, "info");
        assert_eq!(record.classification, "invalid-output");
        assert!(record.reason.contains(problem), "{id}: {}", record.reason);
        let result = engine
            .assemble(
                &CallOptions::default(),
                &session("s"),
                &history,
                &AssembleParams::default(),
            )
            .await
            .expect("legacy");
        assert_eq!(result.items, keep_all(&history));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unregistered_or_unloadable_engine_falls_back_at_selection() {
    let (_dir, host) = zoo_host(SandboxConfig::default(), GuardPolicy::default());
    let engine = host.select(Some("no-such-engine")).await;
    assert_eq!(engine.serving_id(), "legacy");
    let record = host
        .quarantine()
        .get("no-such-engine")
        .expect("quarantined");
    assert!(
        record.reason.contains("not registered"),
        "{}",
        record.reason
    );

    for (id, fragment) in [
        ("wrong-version", "0.2.0"),
        ("phone-home", "wasi:sockets"),
        ("fs-reader", "wasi:filesystem"),
    ] {
        let engine = host.select(Some(id)).await;
        assert_eq!(engine.serving_id(), "legacy", "{id}");
        let record = host.quarantine().get(id).expect("quarantined");
        assert_eq!(record.operation, "load");
        assert!(record.reason.contains(fragment), "{id}: {}", record.reason);
    }
    // Legacy itself, selected on purpose, is no fallback and quarantines nothing.
    for slot in [None, Some(""), Some("legacy")] {
        let engine = host.select(slot).await;
        assert_eq!(engine.serving_id(), "legacy");
    }
    assert!(host.quarantine().get("legacy").is_none());
}

/// A compaction session: a real transcript copied from the fixtures.
fn compaction_history(
    dir: &std::path::Path,
) -> (ctxbox_host::contract::types::SessionRef, History) {
    let path = dir.join("session.jsonl");
    std::fs::copy(
        ctxbox_tests::fixture("qwen35-feishu-delivery-mirror-branching-zh.jsonl"),
        &path,
    )
    .expect("copy fixture");
    let store = ctxbox_host::transcript::TranscriptStore::new(Default::default());
    let transcript = store.open(&path).expect("open fixture");
    (transcript.session_ref(), transcript.history())
}

fn force() -> CompactParams {
    CompactParams {
        force: true,
        token_budget: Some(8_000),
        ..CompactParams::default()
    }
}

async fn expect_compact_reported(
    config: SandboxConfig,
    id: &str,
    classification: FailureKind,
    params: CompactParams,
    abort: CancellationToken,
) -> Duration {
    let (dir, host) = zoo_host(config, GuardPolicy::default());
    let (session, history) = compaction_history(dir.path());
    let call = CallOptions::with_abort(abort);
    let (result, took) = expect_quarantine(
        host.clone(),
        id,
        Operation::Compact,
        classification,
        async |engine| {
            let started = Instant::now();
            let result = engine
                .compact(&call, &session, &history, &params)
                .await
                .expect("compact reports instead of failing");
            (result, started.elapsed())
        },
    )
    .await;
    assert!(!result.ok && !result.compacted, "{result:?}");
    let reason = result.reason.as_deref().unwrap_or_default();
    assert!(
        reason.contains(classification.as_str()),
        "the engine's failure, not a generic reason: {reason}"
    );
    // The next compaction is legacy's native one, and says so.
    let engine = host.select(Some(id)).await;
    let next = engine
        .compact(&CallOptions::default(), &session, &history, &force())
        .await
        .expect("legacy compacts");
    assert!(next.ok && next.compacted, "{next:?}");
    assert_legacy_compacted_for(&engine, id, &next);
    took
}

/// `result` is legacy's compaction in place of quarantined engine `id`,
/// reported in its reason and as one guard event.
fn assert_legacy_compacted_for(engine: &GuardedEngine, id: &str, result: &CompactResult) {
    let reason = result.reason.as_deref().unwrap_or_default();
    assert!(
        reason.starts_with(&format!(
            "compacted by legacy: engine `{id}` is quarantined"
        )),
        "{reason}"
    );
    let events = engine.take_events();
    let last = events.last().expect("an event");
    assert_eq!(last.action, GuardAction::FellBack, "{events:?}");
    assert_eq!(last.operation, Operation::Compact);
}

/// The reference's compaction-selection rule: an engine's failed compaction
/// is reported with its own error, not replayed through legacy, and (when
/// the engine refused rather than broke) the next compaction asks it again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_compaction_reports_the_engines_reason_and_asks_the_engine_again() {
    let (dir, host) = zoo_host(SandboxConfig::default(), GuardPolicy::default());
    let (session, history) = compaction_history(dir.path());
    let engine = host.select(Some("compact-refuser")).await;
    let call = CallOptions::default();
    let refused = engine
        .compact(&call, &session, &history, &force())
        .await
        .expect("reported, not failed");
    assert!(!refused.ok && !refused.compacted, "{refused:?}");
    let reason = refused.reason.as_deref().unwrap_or_default();
    assert!(
        reason.contains("partially mutated frontier (compaction 1)"),
        "{reason}"
    );
    let events = engine.take_events();
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(events[0].action, GuardAction::Reported);
    assert_eq!(events[0].classification, FailureKind::EngineError);
    assert!(host.quarantine().get("compact-refuser").is_none());

    let next = engine
        .compact(&call, &session, &history, &force())
        .await
        .expect("compact");
    assert_eq!(
        next.reason.as_deref(),
        Some("nothing to do (compaction 2)"),
        "the engine again, not legacy"
    );
    assert_eq!(engine.calls_served_by_legacy(), 0);
    assert!(engine.serving_selected());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_compaction_that_breaks_quarantines_and_legacy_compacts_after_saying_so() {
    let (dir, host) = zoo_host(SandboxConfig::default(), GuardPolicy::default());
    let (session, history) = compaction_history(dir.path());
    let engine = host.select(Some("compact-refuser")).await;
    let panic = CompactParams {
        custom_instructions: Some("panic".into()),
        ..force()
    };
    let broken = engine
        .compact(&CallOptions::default(), &session, &history, &panic)
        .await
        .expect("reported, not failed");
    assert!(!broken.ok, "{broken:?}");
    assert!(
        broken
            .reason
            .as_deref()
            .is_some_and(|reason| reason.contains("(panic)")),
        "{broken:?}"
    );
    assert_eq!(engine.take_events()[0].action, GuardAction::Reported);
    assert!(host.quarantine().get("compact-refuser").is_some());
    let next = engine
        .compact(&CallOptions::default(), &session, &history, &force())
        .await
        .expect("legacy compacts");
    assert!(next.ok && next.compacted, "{next:?}");
    assert_legacy_compacted_for(&engine, "compact-refuser", &next);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_progress_spammer_is_stopped_at_the_ceiling() {
    let config = SandboxConfig {
        compaction_timeout_seconds: 1,
        compaction_max_windows: 2,
        fuel_per_compaction: u64::MAX / 4,
        ..SandboxConfig::default()
    };
    let elapsed = expect_compact_reported(
        config,
        "progress-spammer",
        FailureKind::Timeout,
        force(),
        CancellationToken::new(),
    )
    .await;
    assert!(
        elapsed >= Duration::from_secs(2),
        "re-armed until the ceiling: {elapsed:?}"
    );
    assert!(elapsed < Duration::from_secs(2) + 2 * SLACK, "{elapsed:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lying_compaction_is_invalid_output() {
    expect_compact_reported(
        SandboxConfig::default(),
        "liar",
        FailureKind::InvalidOutput,
        force(),
        CancellationToken::new(),
    )
    .await;
    let grow = CompactParams {
        custom_instructions: Some("grow".into()),
        ..force()
    };
    let (dir, host) = zoo_host(SandboxConfig::default(), GuardPolicy::default());
    let (session, history) = compaction_history(dir.path());
    let engine = host.select(Some("liar")).await;
    let result = while_bystander_served(
        &host,
        engine.compact(&CallOptions::default(), &session, &history, &grow),
    )
    .await
    .expect("reported");
    assert!(!result.ok);
    let record = host.quarantine().get("liar").expect("quarantined");
    assert!(record.reason.contains("tokens-after"), "{}", record.reason);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_dispose_has_its_own_deadline_and_counts_against_the_engine() {
    let config = SandboxConfig {
        recycle_after_calls: 1,
        ..SandboxConfig::default()
    };
    let dispose_deadline = config.dispose_timeout();
    let (_dir, host) = zoo_host(config, GuardPolicy::default());
    let engine = host.select(Some("slow-disposer")).await;
    let history = History::new(conversation(3));
    let (call, victim, params) = (
        CallOptions::default(),
        session("victim"),
        AssembleParams::default(),
    );
    let assemble = || engine.assemble(&call, &victim, &history, &params);

    // Answered; the used-up instance is recycled, and its dispose stopped at
    // the dispose deadline, not the call deadline.
    let started = Instant::now();
    let first = assemble().await.expect("served");
    assert_eq!(first.items, keep_all(&history));
    assert!(engine.serving_selected());
    let took = started.elapsed();
    assert!(took >= dispose_deadline, "dispose ran: {took:?}");
    assert!(took < dispose_deadline + SLACK, "{took:?}");

    // The engine's next call reports the failed dispose: quarantined, and
    // legacy answers.
    let second = assemble().await.expect("legacy serves");
    assert_eq!(second.items, keep_all(&history));
    let record = host.quarantine().get("slow-disposer").expect("quarantined");
    assert_eq!(record.operation, "dispose");
    assert_eq!(record.classification, FailureKind::Timeout.as_str());
    assert!(!engine.serving_selected());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_no_compaction_could_fit_is_a_failure_of_the_engine() {
    let record = expect_assemble_fallback(
        SandboxConfig::default(),
        "inflater",
        FailureKind::InvalidOutput,
        budget(16_000),
    )
    .await;
    assert!(
        record.reason.contains("over the whole budget of 16000"),
        "{}",
        record.reason
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_engine_calling_exit_is_reported_as_such() {
    let record = expect_assemble_fallback(
        SandboxConfig::default(),
        "exiter",
        FailureKind::Panic,
        AssembleParams::default(),
    )
    .await;
    // WASI 0.2's `exit` carries success or failure, not the code itself.
    assert_eq!(
        record.reason,
        "the engine called exit (with a failure status: 1) instead of returning an answer"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compaction_details_that_are_not_json_are_invalid_output() {
    for (instructions, expected) in [
        ("bad-json", "details is not usable JSON"),
        ("deep-json", "nested 200 deep"),
    ] {
        let (dir, host) = zoo_host(SandboxConfig::default(), GuardPolicy::default());
        let (session, history) = compaction_history(dir.path());
        let engine = host.select(Some("liar")).await;
        let params = CompactParams {
            custom_instructions: Some(instructions.into()),
            ..force()
        };
        let result = engine
            .compact(&CallOptions::default(), &session, &history, &params)
            .await
            .expect("reported, not thrown");
        assert!(!result.ok, "{instructions}: refused");
        let record = host.quarantine().get("liar").expect("quarantined");
        assert_eq!(record.classification, FailureKind::InvalidOutput.as_str());
        assert!(record.reason.contains(expected), "{}", record.reason);
    }
}

/// A forced compaction whose caller aborts `after` it starts; answers its
/// outcome and how long it took.
async fn compact_aborted_after(
    engine: &GuardedEngine,
    session: &ctxbox_host::contract::types::SessionRef,
    history: &History,
    after: Duration,
) -> (
    ctxbox_host::contract::engine::EngineResult<ctxbox_host::contract::types::CompactResult>,
    Duration,
) {
    let abort = CancellationToken::new();
    let trigger = abort.clone();
    tokio::spawn(async move {
        tokio::time::sleep(after).await;
        trigger.cancel();
    });
    let started = Instant::now();
    let outcome = engine
        .compact(&CallOptions::with_abort(abort), session, history, &force())
        .await;
    (outcome, started.elapsed())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_compaction_ignoring_abort_is_interrupted_and_not_quarantined() {
    let (dir, host) = zoo_host(
        SandboxConfig {
            fuel_per_compaction: u64::MAX / 4,
            abort_grace_ms: 100,
            ..SandboxConfig::default()
        },
        GuardPolicy::default(),
    );
    let (session, history) = compaction_history(dir.path());
    let engine = host.select(Some("abort-ignorer")).await;
    let (failure, took) = while_bystander_served(
        &host,
        compact_aborted_after(&engine, &session, &history, Duration::from_millis(200)),
    )
    .await;
    let failure = failure.expect_err("the caller's abort is reported to the caller");
    assert_eq!(failure.kind, FailureKind::Aborted);
    assert!(took < Duration::from_millis(300) + SLACK, "{took:?}");
    let events = engine.take_events();
    assert_eq!(events.len(), 1);
    assert_eq!(events[0].action, GuardAction::Aborted);
    assert!(
        host.quarantine().get("abort-ignorer").is_none(),
        "a caller abort never quarantines"
    );
    assert!(engine.serving_selected());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_compaction_answered_after_the_abort_is_rejected_with_it_and_not_quarantined() {
    // A grace far longer than the test: only the engine returning by itself
    // can end the call in time.
    let (dir, host) = zoo_host(
        SandboxConfig {
            fuel_per_compaction: u64::MAX / 4,
            abort_grace_ms: 600_000,
            ..SandboxConfig::default()
        },
        GuardPolicy::default(),
    );
    let (session, history) = compaction_history(dir.path());
    let engine = host.select(Some("abort-heeder")).await;
    let (result, _) = while_bystander_served(
        &host,
        compact_aborted_after(&engine, &session, &history, Duration::from_millis(200)),
    )
    .await;
    // The engine returned by itself, but after the abort: its answer is
    // not passed through (the reference rejects with the abort's reason).
    let failure = result.expect_err("rejected with the abort");
    assert_eq!(failure.kind, FailureKind::Aborted);
    assert!(failure.message.contains("not used"), "{failure:?}");
    let events = engine.take_events();
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(events[0].action, GuardAction::Aborted);
    assert!(host.quarantine().get("abort-heeder").is_none());
    assert!(engine.serving_selected());
}

/// `deadline-heeder` selected on a zoo host whose calls last `timeout_ms`
/// (fuel unbounded, so only the deadline stops it), with a session to call
/// it on.
async fn deadline_heeder_with(
    timeout_ms: u64,
) -> (
    tempfile::TempDir,
    Arc<Engines>,
    ctxbox_host::contract::types::SessionRef,
    History,
    Arc<GuardedEngine>,
) {
    let (dir, host) = zoo_host(
        SandboxConfig {
            call_timeout_ms: timeout_ms,
            fuel_per_call: u64::MAX / 4,
            fuel_per_compaction: u64::MAX / 4,
            ..SandboxConfig::default()
        },
        GuardPolicy::default(),
    );
    let (session, history) = compaction_history(dir.path());
    let engine = host.select(Some("deadline-heeder")).await;
    (dir, host, session, history, engine)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_engine_that_stops_at_its_deadline_notice_is_forgiven_once_in_a_row() {
    // 4 s calls: `aborted()` turns true 1 s before the deadline, with no
    // caller abort at all.
    let (_dir, host, session, history, engine) = deadline_heeder_with(4_000).await;

    // It stops with an error: legacy serves this call, nothing quarantined.
    let started = Instant::now();
    let prompt = engine
        .assemble(
            &CallOptions::default(),
            &session,
            &history,
            &AssembleParams::default(),
        )
        .await
        .expect("legacy answers the call the engine stopped");
    let took = started.elapsed();
    assert_eq!(
        prompt.estimated_tokens,
        history.total_tokens(),
        "legacy's answer"
    );
    assert!(
        took >= Duration::from_millis(2_900),
        "told only near the deadline: {took:?}"
    );
    let events = engine.take_events();
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(events[0].action, GuardAction::Stopped);
    assert_eq!(events[0].classification, FailureKind::StoppedAtDeadline);
    assert!(host.quarantine().get("deadline-heeder").is_none());
    assert!(engine.serving_selected(), "it serves the next call");

    // It stops with an answer, in the agent's own 4 s compaction window (the
    // host's is 180 s): the answer is the engine's, and no event at all.
    let call = CallOptions::default().compacting_within(Some(Duration::from_secs(4)));
    let result = engine
        .compact(&call, &session, &history, &force())
        .await
        .expect("the engine answered in time");
    assert!(!result.ok && !result.compacted, "{result:?}");
    assert!(
        result
            .reason
            .as_deref()
            .is_some_and(|reason| reason.starts_with("stopped at the deadline notice")),
        "{result:?}"
    );
    assert!(engine.take_events().is_empty());
    assert!(host.quarantine().get("deadline-heeder").is_none());

    // The answer ended the row: the next stop is forgiven too, and the
    // call's `servedBy` names legacy, which answered it.
    let call = CallOptions::default();
    engine
        .assemble(&call, &session, &history, &AssembleParams::default())
        .await
        .expect("legacy answers");
    assert_eq!(engine.served_by(&call), "legacy");
    assert_eq!(engine.take_events()[0].action, GuardAction::Stopped);
    assert!(host.quarantine().get("deadline-heeder").is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_engine_that_stops_at_its_deadline_notice_call_after_call_is_quarantined() {
    // The staller: every `assemble` waits for the deadline notice (`aborted()`
    // 0.5 s before a 2 s deadline), then fails. Each call costs the caller a
    // full deadline; the second in a row is held against it like a timeout.
    let (_dir, host, session, history, engine) = deadline_heeder_with(2_000).await;
    let stall = async || {
        let call = CallOptions::default();
        engine
            .assemble(&call, &session, &history, &AssembleParams::default())
            .await
            .expect("legacy answers the call the engine stopped");
        engine.served_by(&call)
    };

    assert_eq!(stall().await, "legacy", "servedBy names who answered");
    let first = engine.take_events();
    assert_eq!(first.len(), 1, "{first:?}");
    assert_eq!(
        first[0].action,
        GuardAction::Stopped,
        "the first is forgiven"
    );
    assert!(host.quarantine().get("deadline-heeder").is_none());

    assert_eq!(stall().await, "legacy");
    let second = engine.take_events();
    assert_eq!(second.len(), 1, "{second:?}");
    assert_eq!(second[0].action, GuardAction::FellBack);
    assert_eq!(second[0].classification, FailureKind::StoppedAtDeadline);
    let record = host
        .quarantine()
        .get("deadline-heeder")
        .expect("quarantined: `ctxbox health` lists it");
    assert_eq!(record.classification, "stopped-at-deadline");
    assert!(
        record
            .reason
            .contains("2 calls in a row stopped at the deadline notice"),
        "{record:?}"
    );
    assert!(!engine.serving_selected(), "legacy serves from now on");

    // Quarantined, it is not called: legacy answers with no decision to make.
    assert_eq!(stall().await, "legacy");
    assert!(engine.take_events().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn strict_mode_fails_when_the_engine_cannot_be_resolved() {
    let (_dir, host) = zoo_host(SandboxConfig::default(), GuardPolicy { strict: true });
    host.registry()
        .plugin("zoo")
        .register(
            "garbage",
            ctxbox_host::engines::registry::EngineFactory::WasmBytes {
                label: "garbage.wasm".into(),
                bytes: Arc::from(&b"not a component"[..]),
            },
            ctxbox_host::engines::registry::RegisterOptions::default(),
        )
        .expect("registers");
    let history = History::new(conversation(1));
    for (id, fragment) in [
        ("no-such-engine", "not registered"),
        ("garbage", "not a WebAssembly"),
    ] {
        let engine = host.select(Some(id)).await;
        for call in 0..2 {
            let failure = engine
                .assemble(
                    &CallOptions::default(),
                    &session("s"),
                    &history,
                    &AssembleParams::default(),
                )
                .await
                .expect_err("strict mode fails instead of falling back");
            assert_eq!(failure.kind, FailureKind::Load, "{id}");
            assert!(
                failure.message.contains("strict mode"),
                "{id} #{call}: {failure}"
            );
            assert!(
                failure.message.contains(fragment),
                "{id} #{call}: {failure}"
            );
        }
        let events = engine.take_events();
        assert_eq!(events.len(), 1, "{id}: {events:?}");
        assert_eq!(events[0].action, GuardAction::Reported);
        assert!(host.quarantine().get(id).is_some(), "{id} quarantined");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_subagent_preparation_is_reported_and_later_ones_go_to_legacy() {
    use ctxbox_host::contract::types::{ContextMode, SubagentSpawn};
    let (_dir, host) = zoo_host(SandboxConfig::default(), GuardPolicy::default());
    let spawn = SubagentSpawn {
        parent_session_key: "agent:main".into(),
        child_session_key: "agent:main:sub".into(),
        context_mode: ContextMode::Isolated,
        ttl_ms: None,
    };
    let failure = expect_quarantine(
        host.clone(),
        "panicker",
        Operation::PrepareSubagentSpawn,
        FailureKind::Panic,
        async |engine| {
            engine
                .prepare_subagent_spawn(&CallOptions::default(), &spawn)
                .await
                .expect_err("reported to the caller, not retried")
        },
    )
    .await;
    assert_eq!(failure.kind, FailureKind::Panic);
    assert!(
        failure
            .stderr_tail
            .contains("cannot prepare agent:main:sub")
    );

    let engine = host.select(Some("panicker")).await;
    let later = engine
        .prepare_subagent_spawn(&CallOptions::default(), &spawn)
        .await
        .expect("legacy prepares");
    assert_eq!(later, None);
    assert!(engine.take_events().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn strict_mode_fails_the_call_instead_of_falling_back() {
    let (_dir, host) = zoo_host(SandboxConfig::default(), GuardPolicy { strict: true });
    let history = History::new(conversation(2));
    let params = AssembleParams {
        prompt: Some("panic".into()),
        ..AssembleParams::default()
    };
    let engine = host.select(Some("panicker")).await;
    let failure = engine
        .assemble(&CallOptions::default(), &session("s"), &history, &params)
        .await
        .expect_err("strict");
    assert_eq!(failure.kind, FailureKind::Panic);
    let later = engine
        .assemble(
            &CallOptions::default(),
            &session("s"),
            &history,
            &AssembleParams::default(),
        )
        .await
        .expect_err("still strict while quarantined");
    assert!(later.message.contains("strict mode"), "{}", later.message);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quarantine_survives_a_restart_and_reregistration_clears_it() {
    let dir = tempfile::tempdir().expect("temp dir");
    {
        let host =
            ctxbox_tests::zoo_host_in(dir.path(), SandboxConfig::default(), GuardPolicy::default());
        let engine = host.select(Some("panicker")).await;
        let params = AssembleParams {
            prompt: Some("panic".into()),
            ..AssembleParams::default()
        };
        engine
            .assemble(
                &CallOptions::default(),
                &session("s"),
                &History::new(conversation(1)),
                &params,
            )
            .await
            .expect("legacy");
    }
    // The restarted host registers the same build again: still quarantined.
    let host =
        ctxbox_tests::zoo_host_in(dir.path(), SandboxConfig::default(), GuardPolicy::default());
    let record = host
        .quarantine()
        .get("panicker")
        .expect("survived the restart");
    assert_eq!(record.classification, "panic");
    let engine = host.select(Some("panicker")).await;
    assert_eq!(
        engine.serving_id(),
        "legacy",
        "quarantined engines are not loaded again"
    );

    host.registry()
        .plugin("zoo")
        .register(
            "panicker",
            ctxbox_host::engines::registry::EngineFactory::WasmFile(guests::PANICKER.into()),
            ctxbox_host::engines::registry::RegisterOptions {
                allow_same_owner_refresh: true,
                ..ctxbox_host::engines::registry::RegisterOptions::default()
            },
        )
        .expect("re-register");
    assert!(
        host.quarantine().get("panicker").is_none(),
        "an explicit refresh clears it"
    );
    assert!(host.select(Some("panicker")).await.serving_selected());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn host_params_reach_only_engines_that_accept_them() {
    let (_dir, host) = zoo_host(SandboxConfig::default(), GuardPolicy::default());
    // param-echo accepts only the session key, and echoes what it received.
    let engine = host.select(Some("param-echo")).await;
    let session = ctxbox_host::contract::types::SessionRef {
        session_key: Some("agent:main:feishu".into()),
        ..session("s")
    };
    let params = AssembleParams {
        prompt: Some("secret prompt".into()),
        ..AssembleParams::default()
    };
    let history = History::new(conversation(1));
    let result = engine
        .assemble(&CallOptions::default(), &session, &history, &params)
        .await
        .expect("assemble");
    assert_eq!(
        result.system_prompt_addition.as_deref(),
        Some("key=Some(\"agent:main:feishu\") prompt=None")
    );
    let maintained = engine
        .maintain(
            &CallOptions::default(),
            &session,
            &history,
            ctxbox_host::contract::types::MaintainReason::Turn,
            Some(r#"{"channel":"feishu"}"#),
        )
        .await
        .expect("maintain");
    assert_eq!(maintained.reason.as_deref(), Some("runtime-context=None"));
    assert!(engine.take_events().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runtime_settings_reach_a_wasm_engine_through_its_import() {
    let (_dir, host) = zoo_host(SandboxConfig::default(), GuardPolicy::default());
    let engine = host.select(Some("settings-echo")).await;
    let history = History::new(conversation(1));
    let settings = r#"{"schemaVersion":1}"#;
    let params = AssembleParams {
        runtime_settings: Some(settings.into()),
        ..AssembleParams::default()
    };
    let result = engine
        .assemble(&CallOptions::default(), &session("s"), &history, &params)
        .await
        .expect("assemble");
    assert_eq!(
        result.system_prompt_addition.as_deref(),
        Some(r#"settings=Some("{\"schemaVersion\":1}")"#)
    );
    let compact = CompactParams {
        runtime_settings: Some(settings.into()),
        runtime_context: Some(r#"{"trigger":"manual"}"#.into()),
        ..CompactParams::default()
    };
    let result = engine
        .compact(&CallOptions::default(), &session("s"), &history, &compact)
        .await
        .expect("compact");
    let reason = result.reason.expect("echo");
    assert!(
        reason.starts_with(r#"settings=Some("{\"schemaVersion\":1}") params.settings=Some("#),
        "{reason}"
    );
    assert!(reason.contains("trigger"), "{reason}");
    // Outside the calls that carry settings, the import answers none.
    let result = engine
        .assemble(
            &CallOptions::default(),
            &session("s"),
            &history,
            &AssembleParams::default(),
        )
        .await
        .expect("assemble");
    assert_eq!(
        result.system_prompt_addition.as_deref(),
        Some("settings=None")
    );
    assert!(engine.take_events().is_empty());
}

/// The text of the note an engine added last to its prompt.
fn last_note(result: &AssembleResult) -> String {
    use ctxbox_host::contract::types::{AgentMessage, ContentBlock};
    match result.items.last() {
        Some(AssembledItem::Insert(AgentMessage::Custom { content, .. })) => {
            match content.first() {
                Some(ContentBlock::Text { text }) => text.clone(),
                other => panic!("the note holds {other:?}"),
            }
        }
        other => panic!("no note last: {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_engine_declaring_another_id_cannot_reach_its_state() {
    let (_dir, host) = zoo_host(SandboxConfig::default(), GuardPolicy::default());
    let history = History::new(conversation(1));
    let prompt = |prompt: &str| AssembleParams {
        prompt: Some(prompt.into()),
        ..AssembleParams::default()
    };
    // The real services-probe stores keys in its state.
    let probe = host.select(Some("services-probe")).await;
    let report = last_note(
        &probe
            .assemble(
                &CallOptions::default(),
                &session("s"),
                &history,
                &prompt("state"),
            )
            .await
            .expect("the probe runs"),
    );
    assert!(report.starts_with("get=1"), "{report}");

    // state-spy, registered as `state-spy`, declares `services-probe` in its
    // info: its store is its own, scoped by the id it was registered under.
    let spy = host.select(Some("state-spy")).await;
    assert!(spy.serving_selected());
    let call = async |params: AssembleParams| {
        last_note(
            &spy.assemble(&CallOptions::default(), &session("s"), &history, &params)
                .await
                .expect("the spy answers"),
        )
    };
    assert_eq!(
        call(prompt("read")).await,
        "keys=",
        "sees no one else's keys"
    );
    assert_eq!(
        call(prompt("write")).await,
        "keys=spy/mark",
        "its own store works"
    );

    assert!(spy.take_events().is_empty() && probe.take_events().is_empty());
}

/// Checks the one tracing event of a guard decision.
fn assert_one_guard_event(
    capture: &ctxbox_tests::traces::Capture,
    expected: [(&str, &str); 5],
    reason_part: &str,
) -> ctxbox_tests::traces::Captured {
    let warnings: Vec<_> = capture
        .events()
        .into_iter()
        .filter(|event| {
            event.target.starts_with("ctxbox_host") && event.level <= tracing::Level::WARN
        })
        .collect();
    assert_eq!(warnings.len(), 1, "one event per decision: {warnings:#?}");
    let event = &warnings[0];
    assert_eq!(event.message, "engine call guarded", "{event:?}");
    for (field, value) in expected {
        assert_eq!(event.field(field), value, "{field} in {event:?}");
    }
    assert!(event.field("reason").contains(reason_part), "{event:?}");
    event.clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_guard_decision_is_one_tracing_event_with_all_its_fields() {
    let (_dir, host) = zoo_host(SandboxConfig::default(), GuardPolicy::default());
    let history = History::new(conversation(1));
    let panic = AssembleParams {
        prompt: Some("panic".into()),
        ..AssembleParams::default()
    };

    // A failing call: quarantine and fallback are one decision, one event.
    let engine = host.select(Some("panicker")).await;
    let capture = ctxbox_tests::traces::Capture::default();
    capture
        .run(engine.assemble(
            &CallOptions::default(),
            &session("traced"),
            &history,
            &panic,
        ))
        .await
        .expect("legacy answers");
    let event = assert_one_guard_event(
        &capture,
        [
            ("engine", "panicker"),
            ("owner", "plugin:zoo"),
            ("session", "traced"),
            ("operation", "assemble"),
            ("classification", "panic"),
        ],
        "panicked",
    );
    assert_eq!(event.field("action"), "fell-back");

    // A failed resolution: one error line when it is resolved (naming no
    // session: there is none yet), then one guard event, with the first
    // call's session.
    let capture = ctxbox_tests::traces::Capture::default();
    let engine = capture.run(host.select(Some("no-such-engine"))).await;
    let resolved = capture.events();
    assert_eq!(resolved.len(), 1, "{resolved:?}");
    assert_eq!(resolved[0].level, tracing::Level::ERROR, "{resolved:?}");
    assert_eq!(resolved[0].field("engine"), "no-such-engine");
    let capture = ctxbox_tests::traces::Capture::default();
    for call in ["first", "second"] {
        capture
            .run(engine.assemble(
                &CallOptions::default(),
                &session(call),
                &history,
                &AssembleParams::default(),
            ))
            .await
            .expect("legacy answers");
    }
    assert_one_guard_event(
        &capture,
        [
            ("engine", "no-such-engine"),
            ("owner", "plugin:unregistered"),
            ("session", "first"),
            ("operation", "load"),
            ("classification", "load"),
        ],
        "not registered",
    );
    let events = engine.take_events();
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(events[0].action, GuardAction::FellBack);
    assert_eq!(events[0].session_id.as_deref(), Some("first"));
}

/// A zoo host whose quarantine reads the time from the returned clock
/// (ms, starting at 1,000,000) and backs off for a minute.
fn zoo_host_on_a_clock() -> (
    tempfile::TempDir,
    Arc<Engines>,
    Arc<std::sync::atomic::AtomicI64>,
) {
    let dir = tempfile::tempdir().expect("temp dir");
    let now = Arc::new(std::sync::atomic::AtomicI64::new(1_000_000));
    let clock = now.clone();
    let quarantine = ctxbox_host::engines::quarantine::QuarantineStore::open(
        &dir.path().join("quarantine.sqlite3"),
        Some(Duration::from_secs(60)),
    )
    .expect("quarantine store")
    .with_clock(Arc::new(move || clock.load(Ordering::Relaxed)));
    let host = ctxbox_tests::zoo_host_with(
        dir.path(),
        SandboxConfig::default(),
        GuardPolicy::default(),
        quarantine,
    );
    (dir, host, now)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_quarantined_engine_is_tried_again_after_its_back_off() {
    let (_dir, host, now) = zoo_host_on_a_clock();
    let history = History::new(conversation(2));
    let assemble = async |engine: &GuardedEngine| {
        engine
            .assemble(
                &CallOptions::default(),
                &session("s"),
                &history,
                &AssembleParams::default(),
            )
            .await
            .expect("always answered")
    };

    // flaky panics on the fifth call of an instance.
    let engine = host.select(Some("flaky")).await;
    for _ in 0..5 {
        assemble(&engine).await;
    }
    let events = engine.take_events();
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(events[0].action, GuardAction::FellBack);
    let record = host.quarantine().get("flaky").expect("quarantined");
    assert_eq!(record.retry_at_ms, Some(1_000_000 + 60_000));

    // Within the back-off: legacy serves, the engine is not called.
    now.fetch_add(59_000, Ordering::Relaxed);
    let engine = host.select(Some("flaky")).await;
    assert_eq!(engine.serving_id(), "legacy");
    assemble(&engine).await;
    assert!(engine.take_events().is_empty());

    // After it: tried again. Its record clears only after three good
    // answers over at least its last back-off (a minute).
    now.fetch_add(2_000, Ordering::Relaxed);
    let engine = host.select(Some("flaky")).await;
    assert!(engine.serving_selected(), "the retry is due");
    assemble(&engine).await;
    assemble(&engine).await;
    assert!(engine.take_events().is_empty(), "on probation");
    assert!(host.quarantine().get("flaky").is_some(), "not cleared yet");
    now.fetch_add(60_000, Ordering::Relaxed);
    assemble(&engine).await;
    let events = engine.take_events();
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(events[0].action, GuardAction::Recovered);
    assert!(
        events[0]
            .reason
            .contains("answered 3 calls in a row over 60 s"),
        "{events:?}"
    );
    assert!(host.quarantine().get("flaky").is_none(), "cleared");
    assert_eq!(engine.serving_id(), "flaky");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_engine_that_answers_its_retry_then_fails_keeps_doubling_its_back_off() {
    // Issue 35.7: `flaky` answers four calls of an instance and panics on
    // the fifth, again and again. Answering its retries must not clear its
    // record: each failure soon after a retry doubles the back-off.
    let (_dir, host, now) = zoo_host_on_a_clock();
    let history = History::new(conversation(2));
    let mut delays = Vec::new();
    for round in 1..=4u32 {
        let engine = host.select(Some("flaky")).await;
        assert!(engine.serving_selected(), "round {round}: its retry is due");
        for _ in 0..5 {
            engine
                .assemble(
                    &CallOptions::default(),
                    &session("s"),
                    &history,
                    &AssembleParams::default(),
                )
                .await
                .expect("always answered");
        }
        let record = host.quarantine().get("flaky").expect("quarantined");
        assert_eq!(record.failures, round, "counted, never reset");
        let at = now.load(Ordering::Relaxed);
        let delay = record.retry_at_ms.expect("retried later") - at;
        delays.push(delay);
        now.store(at + delay + 1, Ordering::Relaxed);
    }
    assert_eq!(delays, [60_000, 120_000, 240_000, 480_000]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resolving_one_engine_does_not_hold_up_selecting_another() {
    use std::sync::Mutex;
    use std::sync::mpsc;
    let (_dir, host) = zoo_host(SandboxConfig::default(), GuardPolicy::default());
    // A native engine whose factory takes as long as the test wants.
    let (started_tx, started_rx) = tokio::sync::oneshot::channel::<()>();
    let (release_tx, release_rx) = mpsc::channel::<()>();
    let started = Mutex::new(Some(started_tx));
    let release = Mutex::new(release_rx);
    let made: Arc<dyn ContextEngine> =
        Arc::new(ctxbox_tests::engine(host.sandbox(), guests::KEEP_RECENT).await);
    host.registry()
        .plugin("zoo")
        .register(
            "slow-to-make",
            ctxbox_host::engines::registry::EngineFactory::Native(Arc::new(move |_: &_| {
                if let Some(started) = started.lock().expect("lock").take() {
                    let _ = started.send(());
                }
                let _ = release
                    .lock()
                    .expect("lock")
                    .recv_timeout(Duration::from_secs(120));
                made.clone()
            })),
            ctxbox_host::engines::registry::RegisterOptions::default(),
        )
        .expect("registers");

    let slow = tokio::spawn({
        let host = host.clone();
        async move { host.select(Some("slow-to-make")).await }
    });
    started_rx.await.expect("the slow resolution started");
    let other = tokio::time::timeout(Duration::from_secs(60), host.select(Some("keep-recent")))
        .await
        .expect("selecting another engine is not blocked by a resolution in progress");
    assert!(other.serving_selected());
    release_tx.send(()).expect("release");
    assert!(slow.await.expect("task").serving_selected());
}
