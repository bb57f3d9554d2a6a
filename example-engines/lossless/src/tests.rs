//! The engine's behaviour, run natively over an in-memory store and history.

use std::cell::{Cell, RefCell};
use std::ops::Range;

use ctxbox_guest::testing::{
    MemoryHistory, check_tool_pairing, conversation, entries, rough_tokens,
};
use ctxbox_guest::{AgentMessage, EngineErrorKind, HostError, HostErrorKind};

use super::*;
use crate::layout::Keys;
use crate::recall::ToolNames;
use crate::records::Meta;

/// Host services that summarize by counting, and abort or fail on demand.
#[derive(Default)]
struct FakeServices {
    summaries: Cell<u32>,
    progress_reports: Cell<u32>,
    /// `aborted()` turns true once this many summaries are written.
    abort_after: Option<u32>,
    /// Every `summarize` fails with this kind.
    failure: Option<HostErrorKind>,
    instructions: RefCell<Vec<String>>,
    recall: MemoryRecall,
}

impl Services for FakeServices {
    fn summarize(
        &self,
        text: &str,
        instructions: &str,
        max_tokens: u32,
    ) -> Result<String, HostError> {
        if let Some(kind) = self.failure {
            return Err(HostError {
                kind,
                message: "summarizer offline".into(),
            });
        }
        assert!(max_tokens > 0);
        self.instructions.borrow_mut().push(instructions.to_owned());
        self.summaries.set(self.summaries.get() + 1);
        Ok(format!(
            "summary {} of {} chars",
            self.summaries.get(),
            text.len()
        ))
    }

    fn estimate_tokens(&self, entries: &[MessageEntry]) -> u64 {
        entries
            .iter()
            .map(|entry| rough_tokens(&entry.message))
            .sum()
    }

    fn report_progress(&self) {
        self.progress_reports.set(self.progress_reports.get() + 1);
    }

    fn aborted(&self) -> bool {
        self.abort_after
            .is_some_and(|after| self.summaries.get() >= after)
    }

    fn recall(&self) -> &dyn Recall {
        &self.recall
    }
}

type TestEngine = Lossless<MemoryStore, FakeServices>;

fn engine() -> TestEngine {
    engine_with(Config::default(), FakeServices::default())
}

fn engine_with(config: Config, services: FakeServices) -> TestEngine {
    Lossless::new(config, MemoryStore::new(), services)
}

fn session(id: &str) -> SessionRef {
    SessionRef {
        session_id: id.into(),
        session_key: None,
        session_file: format!("/sessions/{id}.jsonl"),
    }
}

/// `n` text messages, alternately from the user and the assistant.
fn chat(n: usize) -> Vec<MessageEntry> {
    entries((0..n).map(|i| {
        let text = format!("message {i}: {}", "words ".repeat(20));
        if i % 2 == 0 {
            AgentMessage::user_text(text)
        } else {
            AgentMessage::assistant_text(text)
        }
    }))
}

fn ids(entries: &[MessageEntry]) -> Vec<String> {
    entries.iter().map(|entry| entry.id.clone()).collect()
}

fn meta(engine: &TestEngine, session_id: &str) -> Meta {
    Session::open(engine.store(), session_id).meta().unwrap()
}

fn root_levels(engine: &TestEngine, session_id: &str) -> Vec<u32> {
    meta(engine, session_id)
        .roots
        .iter()
        .map(|root| root.level)
        .collect()
}

/// The transcript ids of every stored message, in sequence order.
fn stored_ids(engine: &TestEngine, session_id: &str) -> Vec<String> {
    let data = Session::open(engine.store(), session_id);
    (0..data.meta().unwrap().next_seq)
        .map(|seq| data.message(seq).unwrap().id)
        .collect()
}

/// The message sequence numbers the summaries cover, in order, following
/// every root down to its leaves, and checking each node's level and span on
/// the way.
fn covered_by_summaries(engine: &TestEngine, session_id: &str) -> Vec<u64> {
    fn walk(data: &Session<'_, MemoryStore>, node: u64, level: u32, covered: &mut Vec<u64>) {
        let record = data.node(node).unwrap();
        assert_eq!(record.level, level, "node {node}");
        let first = covered.len();
        if level == 0 {
            covered.extend(&record.sources);
        } else {
            for &child in &record.sources {
                walk(data, child, level - 1, covered);
            }
        }
        assert_eq!(covered[first], record.first_seq, "node {node}");
        assert_eq!(covered.last(), Some(&record.last_seq), "node {node}");
    }
    let data = Session::open(engine.store(), session_id);
    let mut covered = Vec::new();
    for root in data.meta().unwrap().roots {
        walk(&data, root.node, root.level, &mut covered);
    }
    covered
}

fn compact_params(token_budget: Option<u64>, force: bool) -> CompactParams {
    CompactParams {
        token_budget,
        force,
        current_token_count: None,
        compaction_target: CompactionTarget::Budget,
        custom_instructions: None,
        runtime_settings: None,
        runtime_context: None,
    }
}

fn after_turn_params(pre_prompt_message_count: u32, token_budget: Option<u64>) -> AfterTurnParams {
    AfterTurnParams {
        pre_prompt_message_count,
        token_budget,
        is_heartbeat: false,
        runtime_context: None,
    }
}

fn kept_ranges(result: &AssembleResult) -> Vec<Range<u32>> {
    result
        .items
        .iter()
        .filter_map(|item| match item {
            AssembledItem::Keep(range) => Some(range.start..range.end),
            AssembledItem::Insert(_) => None,
        })
        .collect()
}

fn inserted_summaries(result: &AssembleResult) -> usize {
    result
        .items
        .iter()
        .filter(|item| {
            matches!(item, AssembledItem::Insert(AgentMessage::Custom(custom))
                if custom.custom_type == SUMMARY_MESSAGE_TYPE)
        })
        .count()
}

/// Checks the engine's central promise after any sequence of calls: every
/// message given to it is stored, in order, and reachable either through the
/// summaries (leaves covering exactly the summarized prefix) or verbatim in
/// the prompt, and the prompt is well formed.
fn assert_lossless(
    engine: &TestEngine,
    session_id: &str,
    given: &[String],
    history: &MemoryHistory,
) {
    let stored = stored_ids(engine, session_id);
    assert_eq!(stored, given, "every message is stored once, in order");

    let meta = meta(engine, session_id);
    let covered = covered_by_summaries(engine, session_id);
    assert_eq!(covered, (0..meta.summarized_end).collect::<Vec<_>>());
    let summarized = meta.summarized_end as usize;
    assert_eq!(
        meta.frontier_entry_id.as_deref(),
        summarized.checked_sub(1).map(|last| stored[last].as_str())
    );

    let prompt = engine
        .assemble(&session(session_id), history, None, &[])
        .unwrap();
    assert_eq!(inserted_summaries(&prompt), meta.roots.len());
    let verbatim: Vec<String> = kept_ranges(&prompt)
        .into_iter()
        .flat_map(|range| ids(&history.range(range)))
        .collect();
    assert_eq!(
        verbatim,
        stored[summarized..],
        "the unsummarized messages are shown verbatim"
    );
    check_tool_pairing(&prompt.materialize(history), history).unwrap();
}

#[test]
fn info_declares_owned_compaction() {
    let info = info();
    assert_eq!(info.id, ID);
    assert!(info.owns_compaction);
    assert_eq!(info.accepted_host_params, Some(Vec::new()));
}

#[test]
fn ingest_stores_each_message_once_in_order() {
    let engine = engine();
    let s = session("s1");
    let entries = chat(6);
    assert_eq!(engine.ingest(&s, entries[..2].to_vec()).unwrap(), 2);
    assert_eq!(
        engine.ingest(&s, vec![entries[1].clone()]).unwrap(),
        0,
        "already stored"
    );
    let mut batch = entries[1..].to_vec();
    batch.push(entries[3].clone());
    assert_eq!(
        engine.ingest(&s, batch).unwrap(),
        4,
        "new ones only, each once"
    );
    assert_eq!(stored_ids(&engine, "s1"), ids(&entries));
    let stored = Session::open(engine.store(), "s1").message(2).unwrap();
    assert_eq!(stored, entries[2], "stored whole");
}

#[test]
fn bootstrap_imports_the_existing_history_once() {
    let engine = engine();
    let s = session("s1");
    let entries = conversation(200);
    engine.ingest(&s, entries[..10].to_vec()).unwrap();
    let history = MemoryHistory::new(entries.clone());
    let result = engine.bootstrap(&s, &history).unwrap();
    assert!(result.bootstrapped);
    assert_eq!(result.imported_messages, Some(790));
    assert_eq!(
        engine.bootstrap(&s, &history).unwrap().imported_messages,
        Some(0)
    );
    assert_lossless(&engine, "s1", &ids(&entries), &history);
}

#[test]
fn sessions_are_kept_apart() {
    let engine = engine();
    let entries = chat(4);
    engine.ingest(&session("a"), entries[..1].to_vec()).unwrap();
    engine
        .ingest(&session("a/b"), entries[1..].to_vec())
        .unwrap();
    assert_eq!(stored_ids(&engine, "a"), ["e0"]);
    assert_eq!(stored_ids(&engine, "a/b"), ["e1", "e2", "e3"]);
}

#[test]
fn compaction_summarizes_chunks_outside_the_fresh_tail() {
    let engine = engine();
    let s = session("s1");
    let entries = chat(100);
    let history = MemoryHistory::new(entries.clone());
    engine.bootstrap(&s, &history).unwrap();

    let result = engine
        .compact(&s, &history, &compact_params(None, false))
        .unwrap();
    assert!(result.ok && result.compacted);
    assert_eq!(
        result.first_kept_entry_id, None,
        "the host's transcript stays whole"
    );
    assert!(
        result
            .tokens_after
            .is_some_and(|after| after < result.tokens_before)
    );

    // 100 - 32 = 68 messages lie outside the fresh tail: 8 whole chunks of 8,
    // condensed 4 at a time into two level-1 summaries.
    let meta = meta(&engine, "s1");
    assert_eq!(meta.summarized_end, 64);
    assert_eq!(root_levels(&engine, "s1"), [1, 1]);
    assert_eq!(engine.services.summaries.get(), 10);
    assert_eq!(
        engine.services.progress_reports.get(),
        10,
        "progress after every summary"
    );
    assert_lossless(&engine, "s1", &ids(&entries), &history);

    let again = engine
        .compact(&s, &history, &compact_params(None, false))
        .unwrap();
    assert!(
        again.ok && !again.compacted,
        "nothing left: {:?}",
        again.reason
    );
}

#[test]
fn condensation_follows_the_leaves_as_they_accumulate() {
    let engine = engine();
    let s = session("s1");
    let entries = chat(32 + 8 * 16);
    let mut levels_after_each_leaf = Vec::new();
    for leaves in 1..=16 {
        let given = &entries[..32 + 8 * leaves];
        let history = MemoryHistory::new(given.to_vec());
        engine.ingest(&s, given.to_vec()).unwrap();
        engine
            .compact(&s, &history, &compact_params(None, true))
            .unwrap();
        levels_after_each_leaf.push(root_levels(&engine, "s1"));
        assert_lossless(&engine, "s1", &ids(given), &history);
    }
    assert_eq!(levels_after_each_leaf[0], [0]);
    assert_eq!(levels_after_each_leaf[2], [0, 0, 0]);
    assert_eq!(
        levels_after_each_leaf[3],
        [1],
        "four leaves condense into one summary"
    );
    assert_eq!(levels_after_each_leaf[4], [1, 0]);
    assert_eq!(levels_after_each_leaf[14], [1, 1, 1, 0, 0, 0]);
    assert_eq!(
        levels_after_each_leaf[15],
        [2],
        "four level-1 summaries condense again"
    );
}

#[test]
fn a_long_session_never_loses_a_message() {
    let engine = engine();
    let s = session("long");
    let mut history_entries: Vec<MessageEntry> = Vec::new();
    let budget = 4_000;
    for turn in conversation(120).chunks(4) {
        let pre_prompt = history_entries.len() as u32;
        // The question is ingested before the turn; the rest arrives with
        // `after-turn`, which also sees the question again.
        engine.ingest(&s, vec![turn[0].clone()]).unwrap();
        history_entries.extend_from_slice(turn);
        let history = MemoryHistory::new(history_entries.clone());
        let result = engine
            .after_turn(&s, &history, &after_turn_params(pre_prompt, Some(budget)))
            .unwrap();
        assert!(result.is_some_and(|result| result.ok));
        assert_lossless(&engine, "long", &ids(&history_entries), &history);

        let prompt = engine.assemble(&s, &history, Some(budget), &[]).unwrap();
        assert!(prompt.estimated_tokens <= budget);
        check_tool_pairing(&prompt.materialize(&history), &history).unwrap();
    }
    let meta = meta(&engine, "long");
    assert!(
        meta.summarized_end >= 480 - 64,
        "old messages were summarized"
    );
    assert!(
        meta.roots.iter().any(|root| root.level >= 2),
        "{:?}",
        meta.roots
    );
}

#[test]
fn after_turn_compacts_only_over_the_threshold() {
    let engine = engine();
    let s = session("s1");
    let entries = conversation(30);
    let history = MemoryHistory::new(entries.clone());
    let total = history.tokens(0..history.len());

    let roomy = engine
        .after_turn(&s, &history, &after_turn_params(0, Some(total * 2)))
        .unwrap()
        .unwrap();
    assert!(roomy.ok && !roomy.compacted);
    assert_eq!(
        stored_ids(&engine, "s1"),
        ids(&entries),
        "the turn's messages are stored"
    );
    assert_eq!(engine.services.summaries.get(), 0);
    assert_eq!(
        engine
            .after_turn(&s, &history, &after_turn_params(0, None))
            .unwrap(),
        None,
        "no budget, no proactive compaction"
    );

    let tight = total / 2;
    let result = engine
        .after_turn(&s, &history, &after_turn_params(0, Some(tight)))
        .unwrap()
        .unwrap();
    assert!(result.compacted);
    let threshold = engine.config().threshold_tokens(tight);
    assert!(result.tokens_after.is_some_and(|after| after <= threshold));
    assert!(result.tokens_before > threshold);
}

#[test]
fn compaction_within_target_does_nothing_unless_forced() {
    let engine = engine();
    let s = session("s1");
    let history = MemoryHistory::new(chat(80));
    engine.bootstrap(&s, &history).unwrap();
    let total = history.tokens(0..history.len());

    let result = engine
        .compact(&s, &history, &compact_params(Some(total), false))
        .unwrap();
    assert!(result.ok && !result.compacted);
    assert_eq!(result.tokens_before, total);

    let forced = engine
        .compact(&s, &history, &compact_params(Some(total), true))
        .unwrap();
    assert!(forced.compacted);
    assert_eq!(meta(&engine, "s1").summarized_end, 48);
}

#[test]
fn the_threshold_target_aims_below_the_budget() {
    let engine = engine();
    let s = session("s1");
    let history = MemoryHistory::new(chat(200));
    engine.bootstrap(&s, &history).unwrap();
    let budget = history.tokens(0..history.len()) / 2;
    let mut params = compact_params(Some(budget), false);
    params.compaction_target = CompactionTarget::Threshold;
    let result = engine.compact(&s, &history, &params).unwrap();
    let threshold = engine.config().threshold_tokens(budget);
    assert!(result.tokens_after.is_some_and(|after| after <= threshold));
}

#[test]
fn custom_instructions_reach_the_summarizer() {
    let engine = engine();
    let s = session("s1");
    let history = MemoryHistory::new(chat(48));
    engine.bootstrap(&s, &history).unwrap();
    let mut params = compact_params(None, true);
    params.custom_instructions = Some("Keep every port number.".into());
    engine.compact(&s, &history, &params).unwrap();
    let instructions = engine.services.instructions.borrow();
    assert!(!instructions.is_empty());
    assert!(
        instructions
            .iter()
            .all(|text| text.ends_with("Keep every port number."))
    );
}

#[test]
fn leaf_chunks_take_their_tool_results_along() {
    // Question, call, result, answer: chunks of 6 would end before a result
    // every other time.
    let entries = conversation(40);
    let engine = engine_with(
        Config {
            leaf_chunk_messages: 6,
            ..Config::default()
        },
        FakeServices::default(),
    );
    let s = session("s1");
    let history = MemoryHistory::new(entries.clone());
    engine.bootstrap(&s, &history).unwrap();
    engine
        .compact(&s, &history, &compact_params(None, true))
        .unwrap();
    let data = Session::open(engine.store(), "s1");
    let mut leaf_sizes = Vec::new();
    for id in 0..data.meta().unwrap().next_node {
        let node = data.node(id).unwrap();
        if node.level == 0 {
            let after = data.message(node.last_seq + 1).unwrap();
            assert_ne!(after.message.kind(), MessageKind::ToolResult, "{node:?}");
            leaf_sizes.push(node.sources.len());
        }
    }
    assert!(
        leaf_sizes.contains(&7),
        "a chunk took a result along: {leaf_sizes:?}"
    );
    assert_lossless(&engine, "s1", &ids(&entries), &history);
}

#[test]
fn assemble_fits_the_budget_and_never_separates_a_tool_call_from_its_results() {
    for fresh_tail_messages in [29, 30, 31, 32] {
        let engine = engine_with(
            Config {
                fresh_tail_messages,
                ..Config::default()
            },
            FakeServices::default(),
        );
        let s = session("s1");
        let entries = conversation(60);
        let history = MemoryHistory::new(entries.clone());
        engine.bootstrap(&s, &history).unwrap();
        engine
            .compact(&s, &history, &compact_params(None, true))
            .unwrap();
        // Add unsummarized messages between the summaries and the fresh tail.
        let entries = conversation(75);
        let history = MemoryHistory::new(entries.clone());
        engine.ingest(&s, entries.clone()).unwrap();
        assert_lossless(&engine, "s1", &ids(&entries), &history);

        let len = history.len();
        let tail_tokens = history.tokens(len - fresh_tail_messages - 1..len);
        let everything = engine
            .assemble(&s, &history, None, &[])
            .unwrap()
            .estimated_tokens;
        // The note on what is left out takes its room first.
        for budget in (tail_tokens + note_tokens(&engine)..everything + 200).step_by(97) {
            let prompt = engine.assemble(&s, &history, Some(budget), &[]).unwrap();
            let context = format!("tail {fresh_tail_messages}, budget {budget}");
            assert!(prompt.estimated_tokens <= budget, "{context}");
            let messages = prompt.materialize(&history);
            check_tool_pairing(&messages, &history)
                .unwrap_or_else(|error| panic!("{context}: {error}"));
            let summary_tokens: u64 = prompt
                .items
                .iter()
                .filter_map(|item| match item {
                    AssembledItem::Insert(message) => Some(
                        engine
                            .services
                            .estimate_tokens(&ctxbox_guest::testing::entries([message.clone()])),
                    ),
                    AssembledItem::Keep(_) => None,
                })
                .sum();
            let kept_tokens: u64 = kept_ranges(&prompt)
                .into_iter()
                .map(|range| history.tokens(range))
                .sum();
            assert_eq!(
                prompt.estimated_tokens,
                summary_tokens + kept_tokens,
                "{context}"
            );

            let kept = kept_ranges(&prompt);
            assert_eq!(kept.len(), 1, "{context}");
            assert_eq!(kept[0].end, len, "{context}");
            assert!(
                kept[0].start <= len - fresh_tail_messages,
                "the fresh tail is whole: {context}"
            );
        }
        let roomy = engine
            .assemble(&s, &history, Some(everything), &[])
            .unwrap();
        assert_eq!(inserted_summaries(&roomy), meta(&engine, "s1").roots.len());
    }
}

#[test]
fn the_fresh_tail_is_kept_verbatim() {
    let engine = engine();
    let s = session("s1");
    let entries = conversation(40);
    let history = MemoryHistory::new(entries.clone());
    engine.bootstrap(&s, &history).unwrap();
    engine
        .compact(&s, &history, &compact_params(None, true))
        .unwrap();

    let len = history.len();
    let tail = len - 32..len;
    let budget = history.tokens(tail.clone()) + note_tokens(&engine);
    let prompt = engine.assemble(&s, &history, Some(budget), &[]).unwrap();
    let messages = prompt.materialize(&history);
    let tail_messages: Vec<AgentMessage> =
        history.range(tail).into_iter().map(|e| e.message).collect();
    assert_eq!(messages[messages.len() - 32..], tail_messages);
}

/// The most tokens an omission note can take.
fn note_tokens(engine: &TestEngine) -> u64 {
    let names = ToolNames::among(&[]);
    engine
        .services
        .estimate_tokens(&ctxbox_guest::testing::entries([render::omission_note(
            u64::MAX,
            &names,
        )]))
}

/// The texts of the omission notes a prompt inserts.
fn omission_notes(result: &AssembleResult) -> Vec<String> {
    result
        .items
        .iter()
        .filter_map(|item| match item {
            AssembledItem::Insert(AgentMessage::Custom(custom))
                if custom.custom_type == render::OMISSION_MESSAGE_TYPE =>
            {
                Some(AgentMessage::Custom(custom.clone()).text())
            }
            _ => None,
        })
        .collect()
}

#[test]
fn a_prompt_that_leaves_messages_out_unsummarized_says_so_first() {
    let engine = engine();
    let s = session("s1");
    let entries = chat(60);
    let history = MemoryHistory::new(entries.clone());
    engine.bootstrap(&s, &history).unwrap();
    let shown = vec![
        "read".to_owned(),
        "ctxbox_grep".to_owned(),
        "ctxbox_expand".to_owned(),
    ];

    // Nothing summarized yet, and room for only part of it.
    let budget = history.tokens(20..60) + note_tokens(&engine);
    let prompt = engine.assemble(&s, &history, Some(budget), &shown).unwrap();
    assert!(prompt.estimated_tokens <= budget);
    let kept = kept_ranges(&prompt);
    assert_eq!(kept.len(), 1);
    let notes = omission_notes(&prompt);
    assert_eq!(notes.len(), 1, "{:?}", prompt.items);
    assert!(
        matches!(&prompt.items[0], AssembledItem::Insert(_)),
        "the note opens the prompt"
    );
    let omitted = kept[0].start;
    assert!(omitted > 0);
    assert!(
        notes[0].contains(&format!("{omitted} earlier messages"))
            && notes[0].contains("`ctxbox_grep`")
            && notes[0].contains("`ctxbox_expand`"),
        "names the count and the tools as the model sees them: {}",
        notes[0]
    );
    // Without a runtime's prefix, the engine's own names.
    let bare = engine.assemble(&s, &history, Some(budget), &[]).unwrap();
    assert!(omission_notes(&bare)[0].contains("`grep`"));

    // Everything fits: no note.
    let roomy = engine.assemble(&s, &history, None, &shown).unwrap();
    assert!(omission_notes(&roomy).is_empty());

    // Summarized, with every summary shown: nothing is left out unsaid.
    engine
        .compact(&s, &history, &compact_params(None, true))
        .unwrap();
    let everything = engine.assemble(&s, &history, None, &shown).unwrap();
    assert!(inserted_summaries(&everything) > 0);
    assert!(omission_notes(&everything).is_empty());
    // Room for the fresh tail only: the summarized messages and those
    // between are left out, and the note counts them all.
    let len = history.len();
    let budget = history.tokens(len - 32..len) + note_tokens(&engine);
    let tight = engine.assemble(&s, &history, Some(budget), &shown).unwrap();
    assert_eq!(inserted_summaries(&tight), 0);
    let start = kept_ranges(&tight)[0].start;
    assert!(
        omission_notes(&tight)[0].contains(&format!("{start} earlier messages")),
        "{:?}",
        omission_notes(&tight)
    );
}

#[test]
fn an_oversized_fresh_tail_is_cut_to_its_newest_part_that_fits() {
    let engine = engine();
    let s = session("s1");
    let entries = conversation(20);
    let history = MemoryHistory::new(entries.clone());
    engine.bootstrap(&s, &history).unwrap();
    let len = history.len();
    let tail_tokens = history.tokens(len - 32..len);

    for budget in (0..tail_tokens).step_by(53) {
        let prompt = engine.assemble(&s, &history, Some(budget), &[]).unwrap();
        check_tool_pairing(&prompt.materialize(&history), &history).unwrap();
        let kept = kept_ranges(&prompt);
        assert_eq!(kept.len(), 1);
        assert_eq!(kept[0].end, len, "the newest messages are kept");
        assert_eq!(inserted_summaries(&prompt), 0);
        if prompt.estimated_tokens > budget {
            assert_eq!(
                kept[0].start,
                len - 1,
                "only the newest message, too big on its own"
            );
        }
    }
    // The newest entry is a tool result: over any budget, it comes with its call.
    let mut entries = entries;
    entries.truncate(entries.len() - 1);
    let history = MemoryHistory::new(entries);
    let prompt = engine.assemble(&s, &history, Some(0), &[]).unwrap();
    assert_eq!(kept_ranges(&prompt), vec![history.len() - 2..history.len()]);
}

#[test]
fn abort_stops_compaction_early_and_the_next_compaction_continues() {
    let entries = chat(32 + 8 * 16);
    let history = MemoryHistory::new(entries.clone());
    let s = session("s1");

    let uninterrupted = engine();
    uninterrupted.bootstrap(&s, &history).unwrap();
    uninterrupted
        .compact(&s, &history, &compact_params(None, true))
        .unwrap();

    let aborting = engine_with(
        Config::default(),
        FakeServices {
            abort_after: Some(3),
            ..FakeServices::default()
        },
    );
    aborting.bootstrap(&s, &history).unwrap();
    let result = aborting
        .compact(&s, &history, &compact_params(None, true))
        .unwrap();
    assert!(result.ok && result.compacted, "aborting is not a failure");
    assert!(result.reason.unwrap_or_default().contains("aborted"));
    assert_eq!(
        aborting.services.summaries.get(),
        3,
        "no summary after the abort"
    );
    assert_eq!(root_levels(&aborting, "s1"), [0, 0, 0]);
    assert_lossless(&aborting, "s1", &ids(&entries), &history);

    // Another instance over the same store picks up where it stopped.
    let resumed = Lossless::new(
        Config::default(),
        aborting.store().clone(),
        FakeServices::default(),
    );
    resumed
        .compact(&s, &history, &compact_params(None, true))
        .unwrap();
    assert_eq!(
        meta(&resumed, "s1").roots.len(),
        meta(&uninterrupted, "s1").roots.len()
    );
    assert_eq!(
        root_levels(&resumed, "s1"),
        root_levels(&uninterrupted, "s1")
    );
    assert_eq!(
        resumed.services.summaries.get() + 3,
        uninterrupted.services.summaries.get()
    );
}

#[test]
fn a_summarizer_abort_stops_cleanly_and_a_failure_is_reported() {
    let history = MemoryHistory::new(chat(80));
    let s = session("s1");
    for (kind, ok) in [
        (HostErrorKind::Aborted, true),
        (HostErrorKind::Failed, false),
        (HostErrorKind::Unavailable, false),
    ] {
        let engine = engine_with(
            Config::default(),
            FakeServices {
                failure: Some(kind),
                ..FakeServices::default()
            },
        );
        engine.bootstrap(&s, &history).unwrap();
        let result = engine
            .compact(&s, &history, &compact_params(None, true))
            .unwrap();
        assert_eq!(result.ok, ok, "{kind:?}");
        assert!(!result.compacted);
        assert_eq!(
            meta(&engine, "s1").summarized_end,
            0,
            "the store is as it was"
        );
        let after_turn = engine
            .after_turn(&s, &history, &after_turn_params(0, Some(100)))
            .unwrap();
        assert_eq!(
            after_turn.map(|result| result.ok),
            Some(ok),
            "after-turn never fails on it"
        );
    }
}

#[test]
fn a_limited_call_leaves_the_rest_to_the_next() {
    let engine = engine_with(
        Config {
            max_summaries_per_call: 2,
            ..Config::default()
        },
        FakeServices::default(),
    );
    let s = session("s1");
    let history = MemoryHistory::new(chat(100));
    engine.bootstrap(&s, &history).unwrap();
    let first = engine
        .compact(&s, &history, &compact_params(None, true))
        .unwrap();
    assert!(first.compacted && first.reason.unwrap_or_default().contains("continues"));
    assert_eq!(engine.services.summaries.get(), 2);
    while engine
        .compact(&s, &history, &compact_params(None, true))
        .unwrap()
        .compacted
    {}
    assert_eq!(meta(&engine, "s1").summarized_end, 64);
    assert_eq!(root_levels(&engine, "s1"), [1, 1]);
}

#[test]
fn a_history_without_the_summarized_messages_gets_no_summaries() {
    let engine = engine();
    let s = session("s1");
    let entries = chat(100);
    let history = MemoryHistory::new(entries.clone());
    engine.bootstrap(&s, &history).unwrap();
    engine
        .compact(&s, &history, &compact_params(None, true))
        .unwrap();

    // The host replaced its history (say, after a compaction of its own).
    let replaced = MemoryHistory::new(entries[70..].to_vec());
    let prompt = engine.assemble(&s, &replaced, None, &[]).unwrap();
    assert_eq!(inserted_summaries(&prompt), 0);
    assert_eq!(kept_ranges(&prompt), vec![0..30]);
}

#[test]
fn corrupt_state_is_an_error_not_a_panic() {
    let s = session("s1");
    let history = MemoryHistory::new(chat(100));
    let keys = Keys::new("s1");

    let engine = engine();
    engine.bootstrap(&s, &history).unwrap();
    engine
        .store()
        .set(&keys.message(3), b"\x01garbage")
        .unwrap();
    let error = engine
        .compact(&s, &history, &compact_params(None, true))
        .unwrap_err();
    assert_eq!(error.kind, EngineErrorKind::Internal);

    let engine = engine_with(Config::default(), FakeServices::default());
    engine.bootstrap(&s, &history).unwrap();
    engine
        .compact(&s, &history, &compact_params(None, true))
        .unwrap();
    let root = meta(&engine, "s1").roots[0].node;
    engine.store().set(&keys.node(root), &[1, 2, 3]).unwrap();
    assert!(engine.assemble(&s, &history, None, &[]).is_err());

    engine.store().set(&keys.meta(), b"not a record").unwrap();
    assert!(engine.ingest(&s, chat(1)).is_err());
    assert!(engine.assemble(&s, &history, None, &[]).is_err());
    assert!(
        engine
            .compact(&s, &history, &compact_params(None, true))
            .is_err()
    );
}

// --- recall: the index and the tools -----------------------------------------

fn session_with_history(engine: &TestEngine, turns: usize) -> SessionRef {
    let session = session("recall");
    let history = MemoryHistory::new(conversation(turns));
    engine.bootstrap(&session, &history).expect("bootstrap");
    session
}

#[test]
fn every_stored_message_is_indexed_once() {
    let engine = engine();
    let session = session_with_history(&engine, 5);
    let indexed = engine.services.recall.len();
    assert!(indexed > 0 && indexed <= 20, "{indexed}");
    // The same history again stores, and indexes, nothing new.
    engine
        .bootstrap(&session, &MemoryHistory::new(conversation(5)))
        .expect("bootstrap");
    assert_eq!(engine.services.recall.len(), indexed);
}

#[test]
fn a_history_larger_than_a_calls_index_cap_is_indexed_over_the_next_calls() {
    let engine = engine();
    let s = session("s1");
    let recall = &engine.services.recall;
    // The host takes 10 documents a call.
    recall.limit_calls(Some(10));
    let entries = chat(50);
    engine
        .bootstrap(&s, &MemoryHistory::new(entries[..25].to_vec()))
        .expect("a full index is no failure");
    assert_eq!(
        stored_ids(&engine, "s1").len(),
        25,
        "every message is stored"
    );
    assert_eq!(recall.len(), 10, "as many indexed as the call allowed");
    // Each later call that stores messages catches up, oldest first.
    // (the second call has the last 5 of the backlog and 2 new ones).
    for (end, indexed) in [(26, 20), (27, 27)] {
        recall.limit_calls(Some(10));
        engine.ingest(&s, entries[..end].to_vec()).expect("ingest");
        assert_eq!(recall.len(), indexed);
    }
    recall.limit_calls(None);
    engine.ingest(&s, entries.clone()).expect("ingest");
    assert_eq!(recall.len(), 50, "every message indexed in the end");
    let hits = engine
        .call_tool(&s, "grep", r#"{"query":"message 24:"}"#)
        .expect("grep");
    assert!(hits.contains("message 25"), "{hits}");
}

#[test]
fn grep_finds_messages_by_number_and_expand_reads_them_back() {
    let engine = engine();
    let session = session_with_history(&engine, 6);
    let names: Vec<String> = engine.tools().into_iter().map(|tool| tool.name).collect();
    assert_eq!(names, ["grep", "expand"]);
    let text = conversation(6)[4].message.text();
    let word: String = text.split_whitespace().last().expect("a word").to_owned();
    let found = engine
        .call_tool(&session, "grep", &format!(r#"{{"query":"{word}"}}"#))
        .expect("grep");
    assert!(found.contains("[message 5,"), "{found}");
    let read = engine
        .call_tool(&session, "expand", r#"{"from":5,"to":5}"#)
        .expect("expand");
    assert!(
        read.starts_with("[message 5,") && read.contains(&word),
        "{read}"
    );
}

#[test]
fn tools_refuse_bad_arguments_as_errors_not_panics() {
    let engine = engine();
    let session = session_with_history(&engine, 2);
    for (tool, arguments) in [
        ("grep", "not json"),
        ("grep", r#"{"query":"   "}"#),
        ("grep", r#"{"query":"x","extra":1}"#),
        ("expand", r#"{"from":0,"to":3}"#),
        ("expand", r#"{"from":3,"to":1}"#),
        ("expand", r#"{"from":1,"to":999}"#),
        ("nope", "{}"),
    ] {
        let error = engine
            .call_tool(&session, tool, arguments)
            .expect_err(arguments);
        assert!(!error.message.is_empty());
    }
}
