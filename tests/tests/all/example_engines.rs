//! The `lossless` and `delegating` example engines, run in the sandbox against
//! host services kept in memory: their wasm builds behave like the native
//! logic their unit tests cover, and keep nothing that matters in instance
//! memory.

use std::collections::HashSet;
use std::sync::Arc;

use ctxbox_host::contract::engine::{CallOptions, ContextEngine};
use ctxbox_host::contract::history::History;
use ctxbox_host::contract::services::MemoryServices;
use ctxbox_host::contract::types::{
    AgentMessage, AssembleParams, AssembleResult, AssembledItem, CompactParams, CompactResult,
    MessageEntry, SessionRef,
};
use ctxbox_host::sandbox::{Sandbox, SandboxConfig, WasmEngine};
use ctxbox_tests::guests;

/// What the delegated native compaction answers in these tests.
fn native_compaction() -> CompactResult {
    CompactResult {
        ok: true,
        compacted: true,
        summary: Some("native summary".into()),
        first_kept_entry_id: Some("e20".into()),
        tokens_before: 5_000,
        tokens_after: Some(1_000),
        ..CompactResult::default()
    }
}

fn services() -> Arc<MemoryServices> {
    Arc::new(MemoryServices::with_compaction(native_compaction()))
}

async fn start(wasm: &str, services: Arc<MemoryServices>) -> anyhow::Result<WasmEngine> {
    let sandbox = Sandbox::new(SandboxConfig::default())?;
    let component = sandbox.load_file(wasm.as_ref())?;
    Ok(sandbox.instantiate(&component, services).await?)
}

/// `turns` turns of question, tool call, result (about 400 characters) and
/// answer, with ids `e0`, `e1`, ….
fn conversation(turns: usize) -> Vec<MessageEntry> {
    let mut messages = Vec::new();
    for turn in 0..turns {
        let call_id = format!("call-{turn}");
        messages.push(AgentMessage::user_text(format!(
            "question {turn}: {}",
            "please look ".repeat(10)
        )));
        messages.push(AgentMessage::tool_call(
            &call_id,
            "read_file",
            format!(r#"{{"path":"src/{turn}.rs"}}"#),
        ));
        messages.push(AgentMessage::tool_result(
            &call_id,
            "read_file",
            format!("output {turn}: {}", "data ".repeat(80)),
        ));
        messages.push(AgentMessage::assistant_text(format!("answer {turn}")));
    }
    messages
        .into_iter()
        .enumerate()
        .map(|(index, message)| MessageEntry {
            id: format!("e{index}"),
            parent_id: index.checked_sub(1).map(|parent| format!("e{parent}")),
            timestamp_ms: index as i64,
            message,
        })
        .collect()
}

/// Every tool result in `messages` follows its call, and every call is answered.
fn assert_paired(messages: &[AgentMessage]) {
    let mut open: HashSet<&str> = HashSet::new();
    for message in messages {
        open.extend(message.tool_call_ids());
        if let AgentMessage::ToolResult { tool_call_id, .. } = message {
            assert!(
                open.remove(tool_call_id.as_str()),
                "result {tool_call_id} without its call"
            );
        }
    }
    assert!(open.is_empty(), "calls without results: {open:?}");
}

fn budget(token_budget: u64) -> AssembleParams {
    AssembleParams {
        token_budget: Some(token_budget),
        ..AssembleParams::default()
    }
}

fn inserts(result: &AssembleResult) -> usize {
    result
        .items
        .iter()
        .filter(|item| matches!(item, AssembledItem::Insert(_)))
        .count()
}

#[tokio::test]
async fn lossless_summarizes_through_the_host_and_keeps_its_state_there() -> anyhow::Result<()> {
    let services = services();
    let engine = start(guests::LOSSLESS, services.clone()).await?;
    assert_eq!(engine.info().id, "lossless");
    assert!(engine.info().owns_compaction);

    let call = CallOptions::default();
    let session = SessionRef::new("s1", "/sessions/s1.jsonl");
    let entries = conversation(30);
    let history = History::new(entries.clone());

    let bootstrap = engine
        .bootstrap(&call, &session, &History::new(entries[..40].to_vec()))
        .await?;
    assert_eq!(bootstrap.imported_messages, Some(40));
    let batch = engine
        .ingest_batch(&call, &session, &entries[40..], false)
        .await?;
    assert_eq!(batch.ingested_count, 80);
    assert!(
        engine
            .ingest(&call, &session, &entries[119], false)
            .await?
            .ingested
    );

    let result = engine
        .compact(
            &call,
            &session,
            &history,
            &CompactParams {
                force: true,
                ..CompactParams::default()
            },
        )
        .await?;
    assert!(result.ok && result.compacted, "{result:?}");
    assert_eq!(result.first_kept_entry_id, None);
    assert!(
        result
            .tokens_after
            .is_some_and(|after| after < result.tokens_before)
    );
    // 120 - 32 = 88 messages: 11 leaves, two condensations of four, each
    // written by the host's model.
    assert_eq!(services.completions(), 13);
    assert_eq!(
        services.summaries(),
        0,
        "the model answered: no summarizer asked"
    );

    let assembled = engine
        .assemble(&call, &session, &history, &budget(4_000))
        .await?;
    assert!(assembled.estimated_tokens <= 4_000);
    assert!(
        inserts(&assembled) > 0,
        "summaries stand in for old history"
    );
    let prompt = history.materialize(&assembled.items);
    assert_paired(&prompt);
    assert_eq!(prompt.last(), entries.last().map(|entry| &entry.message));

    // A fresh instance knows everything the old one did: it is all in the store.
    engine.close_session(&session.session_id).await;
    let again = engine
        .assemble(&call, &session, &history, &budget(4_000))
        .await?;
    assert_eq!(again, assembled);
    assert_eq!(services.state_owners(), ["lossless"]);
    Ok(())
}

#[tokio::test]
async fn delegating_elides_stale_output_and_hands_compaction_to_the_host() -> anyhow::Result<()> {
    let services = services();
    let engine = start(guests::DELEGATING, services.clone()).await?;
    assert!(!engine.info().owns_compaction);

    let call = CallOptions::default();
    let session = SessionRef::new("s1", "/sessions/s1.jsonl");
    let history = History::new(conversation(8));

    let assembled = engine
        .assemble(&call, &session, &history, &budget(100_000))
        .await?;
    assert_eq!(
        inserts(&assembled),
        5,
        "the results of the five older turns"
    );
    assert!(assembled.system_prompt_addition.is_some());
    assert!(assembled.estimated_tokens < history.total_tokens());
    let prompt = history.materialize(&assembled.items);
    assert_eq!(prompt.len(), history.len());
    assert_paired(&prompt);

    let result = engine
        .compact(&call, &session, &history, &CompactParams::default())
        .await?;
    assert_eq!(result, native_compaction());
    assert_eq!(services.delegated(), 1);
    Ok(())
}
