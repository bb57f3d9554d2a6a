//! The guest SDK's default methods, observed from the host: an engine that
//! implements only `ingest` still receives every message of a turn, through
//! the default `ingest-batch` and `after-turn` (the reference ingests a
//! turn's answers for engines without `afterTurn`).

use std::sync::Arc;

use ctxbox_host::contract::engine::{CallOptions, ContextEngine};
use ctxbox_host::contract::history::History;
use ctxbox_host::contract::types::AfterTurnParams;
use ctxbox_host::services::compaction::{CompactionConfig, Compactor};
use ctxbox_host::services::native::NativeServices;
use ctxbox_host::services::state::{EngineState, StateConfig, StateStore};
use ctxbox_host::services::summarize::ExtractiveSummarizer;
use ctxbox_host::transcript::{TranscriptConfig, TranscriptStore};
use ctxbox_tests::{conversation, engine_with, guests, sandbox, session};

fn recorded(state: &StateStore) -> Vec<String> {
    state
        .scan("ingest-recorder", "ingested/", None, 1_000)
        .expect("scan")
        .into_iter()
        .map(|(key, _)| key["ingested/".len()..].to_owned())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_turn_and_ingest_batch_default_to_ingesting_each_new_message() {
    let dir = tempfile::tempdir().expect("temp dir");
    let state = Arc::new(StateStore::open_in(dir.path(), &StateConfig::default()).expect("state"));
    let transcripts = TranscriptStore::new(TranscriptConfig::default());
    let compactor = Arc::new(Compactor::new(
        transcripts,
        Arc::new(ExtractiveSummarizer),
        CompactionConfig::default(),
    ));
    let services = NativeServices::new(compactor, state.clone());
    let engine = engine_with(&sandbox(), guests::INGEST_RECORDER, Arc::new(services)).await;
    let call = CallOptions::default();
    let session = session("turns");
    let entries = conversation(3);

    // The first turn's messages arrive as a batch.
    let batch = engine
        .ingest_batch(&call, &session, &entries[..4], false)
        .await
        .expect("ingest-batch");
    assert_eq!(batch.ingested_count, 4);
    assert_eq!(recorded(&state), ["e0", "e1", "e2", "e3"]);

    // The next turn is over: its messages (8..12) follow the 8 before it;
    // the default after-turn ingests exactly those.
    let history = History::new(entries.clone());
    engine
        .after_turn(
            &call,
            &session,
            &history,
            &AfterTurnParams {
                pre_prompt_message_count: 8,
                ..AfterTurnParams::default()
            },
        )
        .await
        .expect("after-turn");
    let ids: Vec<String> = entries.iter().map(|entry| entry.id.clone()).collect();
    let mut expected: Vec<String> = ids[..4].iter().chain(&ids[8..]).cloned().collect();
    expected.sort();
    assert_eq!(recorded(&state), expected);
}
