//! The keep-recent example engine, called through the host: every export, the
//! budget boundary, tool-pair safety, and agreement with its native build.

use ctxbox_host::contract::engine::{CallOptions, ContextEngine};
use ctxbox_host::contract::failure::{FailureKind, Operation};
use ctxbox_host::contract::history::{History, ToolPairing};
use ctxbox_host::contract::types::{
    AfterTurnParams, AgentMessage, AssembleParams, AssembleResult, AssembledItem, CompactParams,
    ContextMode, HostParam, MaintainReason, SubagentEndReason, SubagentSpawn,
};
use ctxbox_host::contract::validate;
use ctxbox_tests::{conversation, engine, entry, guests, sandbox, session};

fn budget(tokens: u64) -> AssembleParams {
    AssembleParams {
        token_budget: Some(tokens),
        ..AssembleParams::default()
    }
}

fn kept(result: &AssembleResult) -> Vec<(u32, u32)> {
    result
        .items
        .iter()
        .filter_map(|item| match item {
            AssembledItem::Keep { start, end } => Some((*start, *end)),
            AssembledItem::Insert(_) => None,
        })
        .collect()
}

/// The same plan from the native build, in host types.
fn native_plan(history: &History, token_budget: Option<u64>) -> Vec<(u32, u32)> {
    let plan = keep_recent::plan(history, token_budget);
    plan.items
        .iter()
        .filter_map(|item| match item {
            ctxbox_guest::AssembledItem::Keep(range) => Some((range.start, range.end)),
            ctxbox_guest::AssembledItem::Insert(_) => None,
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn info_declares_identity_and_no_host_params() {
    let sandbox = sandbox();
    let engine = engine(&sandbox, guests::KEEP_RECENT).await;
    let info = engine.info();
    assert_eq!(info.id, "keep-recent");
    assert_eq!(info.name, "Keep recent");
    assert!(!info.owns_compaction);
    assert_eq!(info.accepted_host_params, Some(vec![]));
    assert!(!info.accepts(HostParam::Prompt));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn assemble_keeps_everything_that_fits() {
    let sandbox = sandbox();
    let engine = engine(&sandbox, guests::KEEP_RECENT).await;
    let history = History::new(conversation(5));
    let call = CallOptions::default();
    for params in [AssembleParams::default(), budget(history.total_tokens())] {
        let result = engine
            .assemble(&call, &session("s1"), &history, &params)
            .await
            .expect("assemble");
        assert_eq!(kept(&result), vec![(0, 20)]);
        assert_eq!(result.estimated_tokens, history.total_tokens());
        assert!(
            result
                .items
                .iter()
                .all(|item| matches!(item, AssembledItem::Keep { .. }))
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn assemble_at_every_budget_fits_keeps_pairs_and_matches_native() {
    let sandbox = sandbox();
    let engine = engine(&sandbox, guests::KEEP_RECENT).await;
    let history = History::new(conversation(12));
    let total = history.total_tokens();
    let call = CallOptions::default();
    for budget_tokens in (0..=total + 50).step_by(7) {
        let result = engine
            .assemble(&call, &session("s1"), &history, &budget(budget_tokens))
            .await
            .expect("assemble");
        validate::check_assemble(&history, &result)
            .unwrap_or_else(|violation| panic!("budget {budget_tokens}: {violation}"));
        let ranges = kept(&result);
        assert_eq!(
            ranges,
            native_plan(&history, Some(budget_tokens)),
            "budget {budget_tokens}"
        );
        let (start, end) = *ranges.last().expect("always keeps the newest entry");
        assert_eq!(end as usize, history.len(), "keeps up to the newest entry");
        let kept_tokens = history.tokens(start as usize..end as usize);
        // Fits, unless only the newest entry (or pair) is left.
        assert!(
            kept_tokens <= budget_tokens || end - start <= 2,
            "budget {budget_tokens}: kept {kept_tokens} tokens in {start}..{end}"
        );
        // Maximal: one more entry before the start would not fit.
        if start > 0 && kept_tokens <= budget_tokens {
            let with_one_more = history.tokens(start as usize - 1..end as usize);
            let note = keep_recent::NOTE_TOKENS;
            // A result before the start cannot be added without its call.
            let result_before = matches!(
                history.tool_pairing(start as usize - 1),
                Some(ToolPairing::ToolResult { .. })
            );
            assert!(
                with_one_more + note > budget_tokens || result_before,
                "budget {budget_tokens}: {start}..{end} is not the longest fitting suffix"
            );
        }
        let omitted = start > 0;
        let has_note = result
            .items
            .iter()
            .any(|item| matches!(item, AssembledItem::Insert(_)));
        assert_eq!(
            has_note, omitted,
            "a note exactly when something was left out"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn assemble_never_opens_on_a_result_at_the_budget_boundary() {
    let sandbox = sandbox();
    let engine = engine(&sandbox, guests::KEEP_RECENT).await;
    let history = History::new(conversation(6));
    // A budget that ends exactly between a call (e13) and its result (e14).
    let result_start = 14;
    let boundary = history.tokens(result_start..history.len()) + keep_recent::NOTE_TOKENS;
    let result = engine
        .assemble(
            &CallOptions::default(),
            &session("s1"),
            &history,
            &budget(boundary),
        )
        .await
        .expect("assemble");
    let (start, _) = kept(&result)[0];
    assert!(
        !history.splits_pair(start as usize),
        "kept range starts inside a pair"
    );
    assert_eq!(
        start, 15,
        "the orphaned result is dropped, not its call added over budget"
    );
    validate::check_assemble(&history, &result).expect("pairs intact");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn assemble_pins_a_leading_compaction_summary_and_notes_the_gap() {
    let sandbox = sandbox();
    let engine = engine(&sandbox, guests::KEEP_RECENT).await;
    let mut entries = vec![entry(
        "summary",
        AgentMessage::CompactionSummary {
            summary: "Decisions: use port 8080.".into(),
            tokens_before: 50_000,
        },
    )];
    entries.extend(conversation(8));
    let history = History::new(entries);
    let tail = history.tokens(25..history.len());
    let params = budget(history.tokens(0..1) + keep_recent::NOTE_TOKENS + tail);
    let result = engine
        .assemble(&CallOptions::default(), &session("s1"), &history, &params)
        .await
        .expect("assemble");
    assert_eq!(kept(&result), vec![(0, 1), (25, 33)]);
    let AssembledItem::Insert(note) = &result.items[1] else {
        panic!(
            "expected the note between summary and tail: {:?}",
            result.items
        );
    };
    assert!(
        matches!(note, AgentMessage::Custom { custom_type, .. } if custom_type == "keep-recent"),
        "{note:?}"
    );
    validate::check_assemble(&history, &result).expect("valid");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn assemble_of_an_empty_history_keeps_nothing() {
    let sandbox = sandbox();
    let engine = engine(&sandbox, guests::KEEP_RECENT).await;
    let history = History::new(Vec::new());
    let result = engine
        .assemble(
            &CallOptions::default(),
            &session("s1"),
            &history,
            &budget(100),
        )
        .await
        .expect("assemble");
    assert_eq!(result.estimated_tokens, 0);
    assert!(kept(&result).iter().all(|(start, end)| start == end));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_other_exports_answer_with_the_reference_defaults() {
    let sandbox = sandbox();
    let engine = engine(&sandbox, guests::KEEP_RECENT).await;
    let history = History::new(conversation(3));
    let session = session("s1");
    let call = CallOptions::default();

    let bootstrap = engine
        .bootstrap(&call, &session, &history)
        .await
        .expect("bootstrap");
    assert!(!bootstrap.bootstrapped);

    let ingest = engine
        .ingest(&call, &session, &history.entries()[0], false)
        .await
        .expect("ingest");
    assert!(
        !ingest.ingested,
        "keep-recent relies on the host's transcript"
    );
    let batch = engine
        .ingest_batch(&call, &session, history.entries(), true)
        .await
        .expect("ingest-batch");
    assert_eq!(batch.ingested_count, 0);

    let after_turn = AfterTurnParams {
        pre_prompt_message_count: 8,
        token_budget: Some(1_000),
        ..AfterTurnParams::default()
    };
    engine
        .after_turn(&call, &session, &history, &after_turn)
        .await
        .expect("after-turn");

    let maintain = engine
        .maintain(&call, &session, &history, MaintainReason::Turn, Some("{}"))
        .await
        .expect("maintain");
    assert!(!maintain.changed);
    assert_eq!(maintain.rewritten_entries, 0);

    let spawn = SubagentSpawn {
        parent_session_key: "agent:main".into(),
        child_session_key: "agent:main:sub:1".into(),
        context_mode: ContextMode::Fork,
        ttl_ms: Some(60_000),
    };
    let preparation = engine
        .prepare_subagent_spawn(&call, &spawn)
        .await
        .expect("prepare");
    assert_eq!(preparation, None, "nothing to roll back");
    engine
        .rollback_subagent_spawn(&call, "prep-1")
        .await
        .expect("rollback");
    engine
        .on_subagent_ended(&call, "agent:main:sub:1", SubagentEndReason::Completed)
        .await
        .expect("on-subagent-ended");

    engine.close_session("s1").await;
    engine.dispose().await.expect("dispose");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compact_delegates_to_the_host_and_reports_a_missing_service() {
    let sandbox = sandbox();
    let engine = engine(&sandbox, guests::KEEP_RECENT).await;
    let history = History::new(conversation(3));
    let failure = engine
        .compact(
            &CallOptions::default(),
            &session("s1"),
            &history,
            &CompactParams::default(),
        )
        .await
        .expect_err("no compaction service in this host");
    assert_eq!(failure.kind, FailureKind::EngineError);
    assert_eq!(failure.operation, Operation::Compact);
    assert!(
        failure.message.contains("delegate-compaction"),
        "{}",
        failure.message
    );
    // The answer was an error, not a trap: the instance keeps serving.
    let result = engine
        .assemble(
            &CallOptions::default(),
            &session("s1"),
            &history,
            &AssembleParams::default(),
        )
        .await
        .expect("assemble after a reported error");
    assert_eq!(kept(&result), vec![(0, 12)]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_session_gets_its_own_instance_and_lent_histories_are_returned() {
    let sandbox = ctxbox_tests::sandbox_with(ctxbox_host::sandbox::SandboxConfig {
        max_handles: 8,
        ..Default::default()
    });
    let engine = engine(&sandbox, guests::KEEP_RECENT).await;
    let history = History::new(conversation(4));
    // Far more calls than handles: a handle leaked per call would exhaust them.
    for round in 0..40 {
        for id in ["a", "b", "c"] {
            engine
                .assemble(
                    &CallOptions::default(),
                    &session(id),
                    &history,
                    &budget(300),
                )
                .await
                .unwrap_or_else(|failure| panic!("round {round}, session {id}: {failure}"));
        }
    }
    assert_eq!(
        engine.live_instances().await,
        4,
        "three sessions plus the control instance"
    );
    engine.close_session("b").await;
    assert_eq!(engine.live_instances().await, 3);
}

/// keep-recent's kept ranges as it searched for them before the host's
/// `fitting-suffix` query: the first fitting start after a pinned summary
/// (scanned entry by entry here), moved past results whose call was cut.
fn searched_ranges(history: &History, budget: u64) -> Vec<(u32, u32)> {
    let len = history.len();
    if history.total_tokens() <= budget {
        return vec![(0, len as u32)];
    }
    let pinned = history.kind(0)
        == Some(ctxbox_host::contract::types::MessageKind::CompactionSummary)
        && history.tokens(0..1) <= budget / 2;
    let floor = usize::from(pinned);
    let available = budget.saturating_sub(keep_recent::NOTE_TOKENS + history.tokens(0..floor));
    let fitting = (floor..len)
        .find(|&start| history.tokens(start..len) <= available)
        .unwrap_or(if len > floor { len - 1 } else { floor });
    let cut_call = |index: usize| match history.tool_pairing(index) {
        Some(ToolPairing::ToolResult { call: Some(call) }) if (call as usize) < fitting => {
            Some(call as usize)
        }
        _ => None,
    };
    let start = (fitting..len)
        .find(|&index| cut_call(index).is_none())
        .unwrap_or_else(|| cut_call(fitting).unwrap_or(fitting));
    let mut ranges = Vec::new();
    if pinned {
        ranges.push((0, 1));
    }
    if start < len {
        ranges.push((start as u32, len as u32));
    }
    ranges
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_host_query_keeps_the_answers_of_the_search_on_every_fixture() {
    let sandbox = sandbox();
    let engine = engine(&sandbox, guests::KEEP_RECENT).await;
    let transcripts = ctxbox_host::transcript::TranscriptStore::new(Default::default());
    let call = CallOptions::default();
    for name in ctxbox_tests::FIXTURE_SESSIONS {
        let history = transcripts
            .open_read_only(&ctxbox_tests::fixture(name))
            .expect("fixture opens")
            .history();
        let total = history.total_tokens();
        let step = (total / 400).max(1) as usize;
        for (index, budget_tokens) in (0..=total + 100).step_by(step).enumerate() {
            let expected = searched_ranges(&history, budget_tokens);
            assert_eq!(
                native_plan(&history, Some(budget_tokens)),
                expected,
                "{name}, budget {budget_tokens}"
            );
            if index % 10 == 0 {
                let result = engine
                    .assemble(&call, &session(name), &history, &budget(budget_tokens))
                    .await
                    .expect("assemble");
                assert_eq!(
                    kept(&result),
                    expected,
                    "{name}, budget {budget_tokens} (wasm)"
                );
            }
        }
    }
}
