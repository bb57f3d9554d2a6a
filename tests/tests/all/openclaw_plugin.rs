//! An OpenClaw plugin, built unmodified into a ctxbox engine (issue 37):
//! lossless-claw 1.0.0-beta.4 from the test subjects, built with
//! `ctxbox-ts-build --openclaw-plugin`, replays a real session in the
//! sandbox with no call served by `legacy`, keeps the conversation in its
//! own SQL database, and answers its recall tool from that database.
//!
//! The session is the claude fixture at 16k: one turn of 47 model calls,
//! which lossless-claw assembles within the budget itself. The fixtures on
//! which it compacts, and so summarizes through the host's completions,
//! still end on a call out of fuel (docs/COMPAT.md); that assertion comes
//! back with them.
//!
//! Without the TypeScript SDK's tools or the subjects folder the test passes
//! after saying why, unless `CTXBOX_REQUIRE_TS_ENGINE` is set (CI sets it).

use ctxbox_host::contract::engine::{CallOptions, ContextEngine};
use ctxbox_host::contract::types::SessionRef;
use ctxbox_host::services::sql::database_path;
use ctxbox_tests::typescript;

use super::ts_engine::{replay_report, runtime_with};

/// The id the plugin's manifest gives it.
const ID: &str = "lossless-claw";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lossless_claw_replays_a_session_without_fallback_and_recalls_it_from_sql() {
    let Some(component) = typescript::or_skip("lossless-claw", typescript::lossless_claw()) else {
        return;
    };
    let dir = tempfile::tempdir().expect("temp dir");
    let runtime = runtime_with(&component, ID, dir.path());
    let out = dir.path().join("run.jsonl");
    // No turn fails and no call falls back to `legacy` (asserted there).
    let (session_id, report) = replay_report(
        &runtime,
        ID,
        "claude-opus46-bedrock-subagent-webdev-en.jsonl",
        16_384,
        &out,
    )
    .await;
    assert_eq!(report.model_calls, 47, "the whole turn was replayed");
    assert!(
        report.largest_prompt_tokens <= 16_384,
        "its prompts fit the window: {}",
        report.largest_prompt_tokens
    );

    // Its database (`lcm.db` under its state folder) holds the conversation.
    let file = database_path(dir.path(), ID, Some("lcm")).expect("its path");
    let db = rusqlite::Connection::open(&file)
        .unwrap_or_else(|error| panic!("{}: {error}", file.display()));
    let count = |sql: &str| -> i64 {
        db.query_row(sql, [], |row| row.get(0))
            .unwrap_or_else(|error| panic!("{sql}: {error}"))
    };
    assert!(
        count("SELECT count(*) FROM messages") > 0,
        "messages stored"
    );

    // `lcm_grep`, one of the recall tools it registers, finds a word of the
    // conversation in that database.
    let engine = runtime.select(Some(ID)).await;
    let session = SessionRef {
        session_id,
        session_key: None,
        session_file: out.display().to_string(),
    };
    let tools = engine
        .tools(&CallOptions::default())
        .await
        .expect("lists its tools");
    let names: Vec<&str> = tools.iter().map(|tool| tool.name.as_str()).collect();
    for name in ["lcm_grep", "lcm_describe", "lcm_expand", "lcm_expand_query"] {
        assert!(names.contains(&name), "{name} offered: {names:?}");
    }
    let word: String = db
        .query_row(
            "SELECT content FROM messages ORDER BY rowid LIMIT 1",
            [],
            |row| row.get::<_, String>(0),
        )
        .expect("a stored message")
        .split(|c: char| !c.is_alphanumeric())
        .find(|word| (5..=16).contains(&word.chars().count()))
        .expect("a word of 5 to 16 letters")
        .to_owned();
    let answer = engine
        .call_tool(
            &CallOptions::default(),
            &session,
            "lcm_grep",
            &serde_json::json!({ "pattern": word, "mode": "regex" }).to_string(),
        )
        .await
        .unwrap_or_else(|error| panic!("lcm_grep answers: {error:?}"));
    assert!(
        answer.contains(&word),
        "lcm_grep for `{word}` finds it: {answer}"
    );
}
