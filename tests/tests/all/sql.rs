//! The SQL power (`wit/sql.wit`) through the guard: an engine stores,
//! queries and full-text searches its own database across host restarts,
//! its writes are atomic with its calls, and hostile engines (each its own
//! `tests/engines/sql-*`) are contained: refused, stopped at their limits or
//! deadline, quarantined where they fail, with nothing stored lost and
//! other engines served meanwhile.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ctxbox_host::contract::engine::{CallOptions, ContextEngine};
use ctxbox_host::contract::failure::FailureKind;
use ctxbox_host::contract::history::History;
use ctxbox_host::contract::types::{AgentMessage, AssembleParams, AssembledItem, ContentBlock};
use ctxbox_host::engines::guard::{GuardPolicy, GuardedEngine};
use ctxbox_host::engines::quarantine::QuarantineStore;
use ctxbox_host::engines::selection::Engines;
use ctxbox_host::sandbox::SandboxConfig;
use ctxbox_host::services::sql::database_path;
use ctxbox_host::services::state::StateConfig;
use ctxbox_tests::{conversation, session, zoo_host_in, zoo_host_storing};
use tokio_util::sync::CancellationToken;

/// A host on `dir` holding each engine to `quota_bytes`.
fn host_with_quota(dir: &Path, config: SandboxConfig, quota_bytes: u64) -> Arc<Engines> {
    let quarantine =
        QuarantineStore::open(&dir.join("quarantine.sqlite3"), None).expect("quarantine store");
    zoo_host_storing(
        dir,
        config,
        GuardPolicy::default(),
        quarantine,
        &StateConfig {
            quota_bytes,
            ..StateConfig::default()
        },
    )
}

/// What `engine`'s `assemble` with `prompt` (session `session_id`) notes,
/// or `None` when another engine (legacy) answered in its place.
async fn ask(engine: &GuardedEngine, session_id: &str, prompt: &str) -> Option<String> {
    let history = History::new(conversation(2));
    let params = AssembleParams {
        prompt: Some(prompt.to_owned()),
        ..AssembleParams::default()
    };
    let result = engine
        .assemble(
            &CallOptions::default(),
            &session(session_id),
            &history,
            &params,
        )
        .await
        .expect("the guard always answers");
    match result.items.last() {
        Some(AssembledItem::Insert(AgentMessage::Custom { content, .. })) => {
            match content.first() {
                Some(ContentBlock::Text { text }) => Some(text.clone()),
                _ => None,
            }
        }
        _ => None,
    }
}

/// [`ask`], which the engine itself must answer.
async fn answer(engine: &GuardedEngine, prompt: &str) -> String {
    let note = ask(engine, "s1", prompt).await;
    let events = engine.take_events();
    note.unwrap_or_else(|| panic!("`{prompt}` was not answered by the engine: {events:?}"))
}

/// The rows of `table` in `engine`'s main database under `dir`, read
/// straight from its file (0 when the table does not exist), and whether a
/// writer could take the database at once (nothing left holding it).
fn stored_rows(dir: &Path, engine: &str, table: &str) -> (i64, bool) {
    let path = database_path(dir, engine, None).expect("main database path");
    let connection = rusqlite::Connection::open(path).expect("open the engine's file");
    let rows = connection
        .query_row(&format!("SELECT count(*) FROM {table}"), [], |row| {
            row.get(0)
        })
        .unwrap_or(0);
    connection.busy_timeout(Duration::ZERO).expect("no wait");
    let free = connection
        .execute_batch("BEGIN IMMEDIATE; ROLLBACK;")
        .is_ok();
    (rows, free)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_engine_stores_queries_and_searches_its_database_across_restarts() {
    let dir = tempfile::tempdir().expect("temp dir");
    {
        let host = zoo_host_in(dir.path(), SandboxConfig::default(), GuardPolicy::default());
        let notes = host.select(Some("sql-notes")).await;
        assert_eq!(
            answer(&notes, "add deploy the blue release").await,
            "added=1"
        );
        assert_eq!(
            answer(&notes, "add rollback plan for green").await,
            "added=2"
        );
        assert_eq!(
            answer(&notes, "search blue").await,
            "found=deploy the blue release"
        );
        assert_eq!(
            answer(&notes, "tx").await,
            "tx=0,1,0;cannot start a transaction within a transaction",
            "BEGIN/ROLLBACK, BEGIN/COMMIT and savepoints work as in SQLite"
        );
        assert_eq!(answer(&notes, "prepared 3").await, "prepared=3");
        assert_eq!(answer(&notes, "named agent-7 kept apart").await, "named=1");
        assert_eq!(answer(&notes, "count").await, "count=6");
    }
    // A new host on the same data directory.
    let host = zoo_host_in(dir.path(), SandboxConfig::default(), GuardPolicy::default());
    let notes = host.select(Some("sql-notes")).await;
    assert_eq!(answer(&notes, "count").await, "count=6");
    assert_eq!(
        answer(&notes, "search rollback OR blue")
            .await
            .matches('|')
            .count(),
        1
    );
    assert_eq!(answer(&notes, "named agent-7 again").await, "named=2");
    assert!(host.quarantine().get("sql-notes").is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_call_leaves_none_of_its_sql_writes() {
    let dir = tempfile::tempdir().expect("temp dir");
    let host = zoo_host_in(dir.path(), SandboxConfig::default(), GuardPolicy::default());
    let notes = host.select(Some("sql-notes")).await;
    assert_eq!(answer(&notes, "add kept").await, "added=1");
    assert_eq!(
        ask(&notes, "s1", "add-then-fail lost").await,
        None,
        "legacy answered"
    );
    let events = notes.take_events();
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(events[0].classification, FailureKind::EngineError);
    let (rows, free) = stored_rows(dir.path(), "sql-notes", "notes");
    assert_eq!(rows, 1, "only the answered call's note is stored");
    assert!(free, "the failed call's transaction was rolled back");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_trap_inside_an_open_transaction_persists_nothing() {
    let dir = tempfile::tempdir().expect("temp dir");
    let host = zoo_host_in(dir.path(), SandboxConfig::default(), GuardPolicy::default());
    let trapper = host.select(Some("sql-trapper")).await;
    assert_eq!(answer(&trapper, "count").await, "count=0");
    assert_eq!(ask(&trapper, "s1", "trap").await, None, "legacy answered");
    let events = trapper.take_events();
    assert_eq!(events[0].classification, FailureKind::Panic, "{events:?}");
    let (rows, free) = stored_rows(dir.path(), "sql-trapper", "t");
    assert_eq!(rows, 0, "nothing of the trapped call is stored");
    assert!(free, "no transaction is left holding the database");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_commit_of_its_own_is_undone_by_a_trap_later_in_the_call() {
    let dir = tempfile::tempdir().expect("temp dir");
    let host = zoo_host_in(dir.path(), SandboxConfig::default(), GuardPolicy::default());
    let trapper = host.select(Some("sql-trapper")).await;
    assert_eq!(ask(&trapper, "s1", "trap-committed").await, None);
    let (rows, free) = stored_rows(dir.path(), "sql-trapper", "t");
    assert_eq!(rows, 0, "the engine's COMMIT is durable only with its call");
    assert!(free);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn attaching_another_engines_database_is_refused() {
    let dir = tempfile::tempdir().expect("temp dir");
    let host = zoo_host_in(dir.path(), SandboxConfig::default(), GuardPolicy::default());
    let notes = host.select(Some("sql-notes")).await;
    answer(&notes, "add a secret of sql-notes").await;
    let victim = database_path(dir.path(), "sql-notes", None).expect("path");
    let victim = victim.display();
    let attacher = host.select(Some("sql-attacher")).await;
    for prompt in [
        format!("attach {victim}"),
        format!("uri {victim}"),
        format!("vacuum-into {}", dir.path().join("copy.sqlite3").display()),
    ] {
        let note = answer(&attacher, &prompt).await;
        assert!(note.starts_with("refused: "), "{prompt}: {note}");
    }
    assert!(!dir.path().join("copy.sqlite3").exists());
    assert!(
        host.quarantine().get("sql-attacher").is_none(),
        "a refusal is an answer"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn loading_an_extension_is_refused() {
    let dir = tempfile::tempdir().expect("temp dir");
    let host = zoo_host_in(dir.path(), SandboxConfig::default(), GuardPolicy::default());
    let loader = host.select(Some("sql-extension-loader")).await;
    let note = answer(&loader, "load").await;
    assert!(note.starts_with("refused: load_extension"), "{note}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_schema_table_and_the_hosts_pragmas_stay_out_of_reach() {
    let dir = tempfile::tempdir().expect("temp dir");
    let host = zoo_host_in(dir.path(), SandboxConfig::default(), GuardPolicy::default());
    let writer = host.select(Some("sql-schema-writer")).await;
    let note = answer(&writer, "write").await;
    let outcomes: Vec<&str> = note.split(',').collect();
    assert_eq!(outcomes.len(), 7, "{note}");
    assert!(!outcomes.contains(&"ran"), "{note}");
    assert_eq!(outcomes[0], "refused", "writable_schema: {note}");
    assert_eq!(outcomes[3], "refused", "max_page_count: {note}");
    let path = database_path(dir.path(), "sql-schema-writer", None).expect("path");
    let connection = rusqlite::Connection::open(path).expect("open");
    let check: String = connection
        .query_row("PRAGMA integrity_check", [], |row| row.get(0))
        .expect("integrity check");
    assert_eq!(check, "ok");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn names_and_sql_that_reach_for_other_files_are_refused() {
    let dir = tempfile::tempdir().expect("temp dir");
    let host = zoo_host_in(dir.path(), SandboxConfig::default(), GuardPolicy::default());
    let notes = host.select(Some("sql-notes")).await;
    answer(&notes, "add a secret of sql-notes").await;
    let tricks = host.select(Some("sql-path-tricks")).await;
    let note = answer(&tricks, "reach").await;
    let lines: Vec<&str> = note.lines().collect();
    for name in ["../sql-notes", "..", "/etc/passwd", "a/../../b", "%2e%2e"] {
        assert!(
            lines.contains(&format!("{name}=limit").as_str()),
            "{name}: {note}"
        );
    }
    assert!(
        lines.iter().all(|line| !line.ends_with("=opened")),
        "{note}"
    );
    assert!(
        lines.contains(&"ATTACH ':memory:' AS scratch=refused"),
        "{note}"
    );
    assert!(
        lines.contains(&"SELECT readfile('/etc/passwd')=sqlite"),
        "no file functions: {note}"
    );
    assert!(
        lines.contains(&"SELECT * FROM pragma_database_list=rows:2")
            || lines.contains(&"SELECT * FROM pragma_database_list=refused"),
        "main and temp only: {note}"
    );
    // Nothing of the engine's reached another engine's folder or the data
    // directory's top.
    let notes_dir = database_path(dir.path(), "sql-notes", None).expect("path");
    let files: Vec<_> = std::fs::read_dir(notes_dir.parent().expect("folder"))
        .expect("list")
        .map(|entry| entry.expect("entry").file_name())
        .collect();
    assert!(
        files
            .iter()
            .all(|name| name.to_string_lossy().starts_with("main.sqlite3")),
        "{files:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_blob_flood_stops_at_the_quota_and_loses_nothing() {
    let dir = tempfile::tempdir().expect("temp dir");
    let quota = 2 * 1024 * 1024;
    let host = host_with_quota(dir.path(), SandboxConfig::default(), quota);
    let flood = host.select(Some("sql-blob-flood")).await;
    assert_eq!(answer(&flood, "keep").await, "kept=1");
    assert_eq!(answer(&flood, "state").await, "state=ok");
    let note = answer(&flood, "flood").await;
    let (stored, undone) = note
        .strip_prefix("stopped=quota-exceeded after=")
        .and_then(|rest| rest.split_once(" undone="))
        .unwrap_or_else(|| panic!("{note}"));
    let stored: u64 = stored.parse().expect("a count");
    assert!(
        stored >= 1 && stored * 256 * 1024 <= quota - 1024 * 1024,
        "the state's MiB counts: {note}"
    );
    // SQLite rolls a transaction back when it runs out of pages: the flood's
    // own rows went with it, the engine was told so, and the row stored
    // before stays.
    assert_eq!(undone, "true", "{note}");
    assert_eq!(answer(&flood, "count").await, "count=1");
    assert_eq!(
        answer(&flood, "keep").await,
        "kept=2",
        "the engine writes on"
    );
    assert_eq!(
        answer(&flood, "state-again").await,
        "state=quota-exceeded",
        "state and SQL share one quota"
    );
    let path = database_path(dir.path(), "sql-blob-flood", None).expect("path");
    let size = std::fs::metadata(&path).expect("the database").len();
    assert!(size <= quota, "{size} bytes on disk, quota {quota}");
    assert!(host.quarantine().get("sql-blob-flood").is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_temp_table_bomb_hits_its_caps() {
    let dir = tempfile::tempdir().expect("temp dir");
    let host = zoo_host_in(dir.path(), SandboxConfig::default(), GuardPolicy::default());
    let bomb = host.select(Some("sql-temp-bomb")).await;
    assert_eq!(
        answer(&bomb, "table").await,
        "table=limit",
        "temporary tables are capped"
    );
    let note = answer(&bomb, "sort").await;
    let sort = note
        .strip_prefix("sort=")
        .and_then(|rest| rest.split(':').next())
        .unwrap_or_else(|| panic!("{note}"));
    assert!(
        ["limit", "aborted", "ran"].contains(&sort),
        "a huge sort is stopped or bounded: {note}"
    );
    assert!(host.quarantine().get("sql-temp-bomb").is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_runaway_query_is_stopped_at_the_deadline_while_other_engines_sql_answers() {
    let dir = tempfile::tempdir().expect("temp dir");
    let config = SandboxConfig {
        call_timeout_ms: 1_000,
        fuel_per_call: u64::MAX / 4,
        ..SandboxConfig::default()
    };
    let host = zoo_host_in(dir.path(), config, GuardPolicy::default());
    let runaway = host.select(Some("sql-runaway")).await;
    assert_eq!(answer(&runaway, "ping").await, "pong=2");
    let notes = host.select(Some("sql-notes")).await;
    answer(&notes, "add bystander").await;

    let stop = CancellationToken::new();
    let bystander = {
        let (notes, stop) = (notes.clone(), stop.clone());
        tokio::spawn(async move {
            let mut answered = 0;
            while !stop.is_cancelled() {
                assert_eq!(answer(&notes, "count").await, "count=1");
                answered += 1;
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            answered
        })
    };
    let started = Instant::now();
    assert_eq!(ask(&runaway, "s1", "cte").await, None, "legacy answered");
    let took = started.elapsed();
    stop.cancel();
    let answered = bystander.await.expect("bystander task");
    assert!(
        answered > 0,
        "the other engine's SQL was answered meanwhile"
    );
    assert!(
        took < Duration::from_secs(5),
        "stopped near its deadline: {took:?}"
    );
    let events = runaway.take_events();
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(
        events[0].classification,
        FailureKind::Timeout,
        "{}",
        events[0].reason
    );
    assert!(host.quarantine().get("sql-runaway").is_some());
    assert!(notes.serving_selected());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_sessions_of_one_engine_write_at_once_without_losing_a_row() {
    let dir = tempfile::tempdir().expect("temp dir");
    let host = zoo_host_in(dir.path(), SandboxConfig::default(), GuardPolicy::default());
    let notes = host.select(Some("sql-notes")).await;
    answer(&notes, "count").await;
    let writers: Vec<_> = (0..2)
        .map(|writer| {
            let notes = notes.clone();
            tokio::spawn(async move {
                for note in 0..10 {
                    let session = format!("writer-{writer}");
                    let prompt = format!("add writer {writer} note {note}");
                    let added = ask(&notes, &session, &prompt).await;
                    assert!(
                        added
                            .as_deref()
                            .is_some_and(|added| added.starts_with("added=")),
                        "{prompt}: {added:?}"
                    );
                }
            })
        })
        .collect();
    for writer in writers {
        writer.await.expect("writer task");
    }
    assert_eq!(answer(&notes, "count").await, "count=20");
    assert!(notes.serving_selected());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_host_without_sql_databases_loads_sql_engines_and_answers_open_with_why() {
    use ctxbox_host::contract::services::NoServices;
    use ctxbox_host::runtime::SQL_ON_SHARED_STORE;
    use ctxbox_host::sandbox::SqlAccess;
    let sandbox = ctxbox_tests::sandbox_with(SandboxConfig::default())
        .with_sql(SqlAccess::Refused(SQL_ON_SHARED_STORE.into()));
    // TypeScript and Python engines import `sql` whether they use it or
    // not, so the import alone must not keep an engine out.
    let component = sandbox
        .load_file(Path::new(ctxbox_tests::guests::SQL_NOTES))
        .expect("an engine importing sql loads");
    assert!(component.imports_sql());
    let engine = sandbox
        .instantiate(&component, Arc::new(NoServices))
        .await
        .expect("instantiates");
    let params = AssembleParams {
        prompt: Some("count".to_owned()),
        ..AssembleParams::default()
    };
    let failure = engine
        .assemble(
            &CallOptions::default(),
            &session("s1"),
            &History::new(conversation(2)),
            &params,
        )
        .await
        .expect_err("opening a database fails");
    let message = failure.message;
    assert!(message.contains("sql unavailable"), "{message}");
    assert!(message.contains("kind = \"postgres\""), "{message}");
}
