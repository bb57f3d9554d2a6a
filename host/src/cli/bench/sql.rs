//! The SQL power (`wit/sql.wit`): the same statements through the sandbox
//! (the `sql-bench` probe, one engine call per batch, each statement a host
//! call and a transaction per call) and on rusqlite in-process (the same
//! pragmas, a transaction per batch): single inserts (a call, or a
//! transaction, each), inserts batched in one call, point selects, FTS5
//! matches; each per row and as a ratio, prepared statements against text
//! sent each time, and bytes on disk per row.

#[path = "../../../../tests/engines/sql-bench/src/statements.rs"]
mod statements;

use std::sync::Arc;
use std::time::{Duration, Instant};

use ctxbox_host::contract::engine::{CallOptions, ContextEngine};
use ctxbox_host::contract::history::History;
use ctxbox_host::contract::services::NoServices;
use ctxbox_host::contract::types::{AssembleParams, SessionRef};
use ctxbox_host::engines::bundled;
use ctxbox_host::sandbox::{Sandbox, SandboxConfig, SqlAccess, WasmEngine};
use ctxbox_host::services::sql::{SqlConfig, SqlService, database_path};
use ctxbox_host::services::state::{StateConfig, StateStore};
use rusqlite::{Connection, params};

use self::statements::{INSERT, MATCH, SCHEMA, SELECT, row_text, word};
use super::measure::human;
use super::{Options, Row};

/// Rows per batch (one engine call, one in-process transaction).
const BATCH: i64 = 1_000;
/// FTS5 matches per call.
const MATCHES: i64 = 100;

/// The engine's side: the probe in a sandbox serving SQL from `dir`.
struct Sandboxed {
    engine: WasmEngine,
    session: SessionRef,
    history: History,
}

impl Sandboxed {
    async fn open(dir: &std::path::Path) -> anyhow::Result<Self> {
        let bytes = bundled::probe("sql-bench")
            .ok_or_else(|| anyhow::anyhow!("the sql-bench probe is not bundled"))?;
        let state = Arc::new(StateStore::open_in(
            dir,
            &StateConfig {
                quota_bytes: 1 << 40,
                max_keys: u64::MAX,
            },
        )?);
        let sql = SqlService::open_in(dir, SqlConfig::default(), state)
            .map_err(|error| anyhow::anyhow!(error))?;
        let sandbox =
            Sandbox::new(SandboxConfig::default())?.with_sql(SqlAccess::Served(Arc::new(sql)));
        let component = sandbox.load_bytes("sql-bench", bytes)?;
        let engine = sandbox
            .instantiate(&component, Arc::new(NoServices))
            .await?;
        Ok(Self {
            engine,
            session: SessionRef::new("bench", "bench.jsonl"),
            history: History::new(Vec::new()),
        })
    }

    /// One call running `verb` on rows `from..from+count`; its time.
    async fn call(&self, verb: &str, from: i64, count: i64) -> anyhow::Result<Duration> {
        let params = AssembleParams {
            prompt: Some(format!("{verb} {from} {count}")),
            ..AssembleParams::default()
        };
        let started = Instant::now();
        let answer = self
            .engine
            .assemble(
                &CallOptions::default(),
                &self.session,
                &self.history,
                &params,
            )
            .await?;
        let took = started.elapsed();
        anyhow::ensure!(answer.items.len() == 2, "the probe did not answer `{verb}`");
        Ok(took)
    }
}

/// The in-process side: the same statements on a connection of the
/// host's settings.
fn in_process(path: &std::path::Path) -> anyhow::Result<Connection> {
    let connection = Connection::open(path)?;
    connection.execute_batch(
        "PRAGMA journal_mode = WAL; PRAGMA synchronous = FULL; PRAGMA cache_size = -2048;
         PRAGMA foreign_keys = ON;",
    )?;
    connection.execute_batch(SCHEMA)?;
    Ok(connection)
}

/// Runs `work` on rows `from..from+count` in one transaction; its time.
fn batch(
    connection: &Connection,
    from: i64,
    count: i64,
    work: impl Fn(&Connection, i64) -> rusqlite::Result<()>,
) -> anyhow::Result<Duration> {
    let started = Instant::now();
    connection.execute_batch("BEGIN IMMEDIATE")?;
    for id in from..from + count {
        work(connection, id)?;
    }
    connection.execute_batch("COMMIT")?;
    Ok(started.elapsed())
}

fn insert(connection: &Connection, id: i64) -> rusqlite::Result<()> {
    connection
        .prepare_cached(INSERT)?
        .execute(params![id, row_text(id)])
        .map(|_| ())
}

fn select(connection: &Connection, id: i64) -> rusqlite::Result<()> {
    connection
        .prepare_cached(SELECT)?
        .query_row(params![id], |row| row.get::<_, String>(0))
        .map(|_| ())
}

fn matches(connection: &Connection, id: i64) -> rusqlite::Result<()> {
    let mut statement = connection.prepare_cached(MATCH)?;
    let mut rows = statement.query(params![word(id)])?;
    while rows.next()?.is_some() {}
    Ok(())
}

/// The median of `samples`, per unit of `per`.
fn per(samples: &mut [Duration], per: i64) -> Duration {
    samples.sort_unstable();
    samples.get(samples.len() / 2).copied().unwrap_or_default() / per.max(1) as u32
}

/// Bytes the database at `path` takes once its log is checkpointed.
fn settled_bytes(path: &std::path::Path) -> anyhow::Result<u64> {
    Connection::open(path)?.execute_batch("PRAGMA wal_checkpoint(TRUNCATE);")?;
    Ok(std::fs::metadata(path)?.len())
}

fn ratio_row(what: &str, sandboxed: Duration, native: Duration, target: Option<f64>) -> Row {
    let ratio = sandboxed.as_secs_f64() / native.as_secs_f64().max(1e-12);
    Row {
        what: format!("sql {what}"),
        figure: format!(
            "{} through the sandbox, {} in-process per row ({ratio:.1}×)",
            human(sandboxed),
            human(native)
        ),
        target: target.map_or_else(|| "report".to_owned(), |most| format!("≤ {most}×")),
        met: target.map(|most| ratio <= most),
    }
}

/// The `sql` rows.
pub async fn rows(options: &Options, rows: &mut Vec<Row>) -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let sandboxed = Sandboxed::open(&dir.path().join("data")).await?;
    let native_path = dir.path().join("native.sqlite3");
    let native = in_process(&native_path)?;
    sandboxed.call("setup", 0, 0).await?;
    let batches = options.runs(20) as i64;
    let singles = options.runs(100) as i64;

    // Inserts batched in one call / one transaction.
    let (mut wasm, mut own) = (Vec::new(), Vec::new());
    let (mut wasm_prepared, mut own_prepared) = (Vec::new(), Vec::new());
    for round in 0..batches {
        let from = round * 2 * BATCH;
        wasm.push(sandboxed.call("insert", from, BATCH).await?);
        own.push(batch(&native, from, BATCH, insert)?);
        let from = from + BATCH;
        wasm_prepared.push(sandboxed.call("insert-prepared", from, BATCH).await?);
        own_prepared.push(batch(&native, from, BATCH, insert)?);
    }
    let inserts = per(&mut wasm, BATCH);
    rows.push(ratio_row(
        &format!("insert, {BATCH} per call"),
        inserts,
        per(&mut own, BATCH),
        Some(2.0),
    ));
    let prepared_inserts = per(&mut wasm_prepared, BATCH);

    // Single inserts: a call (a transaction, a sync) each.
    let base = 2 * batches * BATCH;
    let (mut wasm_single, mut own_single) = (Vec::new(), Vec::new());
    for id in base..base + singles {
        wasm_single.push(sandboxed.call("insert", id, 1).await?);
        own_single.push(batch(&native, id + singles, 1, insert)?);
    }
    rows.push(ratio_row(
        "insert, one per call (its own transaction)",
        per(&mut wasm_single, 1),
        per(&mut own_single, 1),
        None,
    ));

    // Point selects and FTS5 matches.
    let rows_stored = base + 2 * singles;
    let (mut wasm_select, mut own_select, mut wasm_select_prepared) =
        (Vec::new(), Vec::new(), Vec::new());
    let (mut wasm_match, mut own_match) = (Vec::new(), Vec::new());
    for round in 0..batches {
        let from = (round * BATCH) % (base - BATCH).max(1);
        wasm_select.push(sandboxed.call("select", from, BATCH).await?);
        own_select.push(batch(&native, from, BATCH, select)?);
        wasm_select_prepared.push(sandboxed.call("select-prepared", from, BATCH).await?);
        wasm_match.push(sandboxed.call("match", round, MATCHES).await?);
        own_match.push(batch(&native, round, MATCHES, matches)?);
    }
    let selects = per(&mut wasm_select, BATCH);
    rows.push(ratio_row(
        &format!("point select, {BATCH} per call"),
        selects,
        per(&mut own_select, BATCH),
        Some(2.0),
    ));
    rows.push(ratio_row(
        &format!("FTS5 match (10 best), {MATCHES} per call"),
        per(&mut wasm_match, MATCHES),
        per(&mut own_match, MATCHES),
        None,
    ));
    let prepared_selects = per(&mut wasm_select_prepared, BATCH);
    rows.push(Row {
        what: "sql prepared statement (`statement` resource) against the text each time".into(),
        figure: format!(
            "insert {} vs {} per row; point select {} vs {} per row",
            human(prepared_inserts),
            human(inserts),
            human(prepared_selects),
            human(selects)
        ),
        target: "report".into(),
        met: None,
    });

    // Bytes on disk per row (the rows and their FTS5 index).
    drop(native);
    drop(sandboxed);
    let wasm_path = database_path(&dir.path().join("data"), "sql-bench", None)
        .map_err(|error| anyhow::anyhow!(error))?;
    let (wasm_bytes, own_bytes) = (settled_bytes(&wasm_path)?, settled_bytes(&native_path)?);
    rows.push(Row {
        what: "sql bytes on disk per row (~100 bytes of text, FTS5-indexed)".into(),
        figure: format!(
            "{} through the sandbox, {} in-process ({rows_stored} rows)",
            wasm_bytes / rows_stored.max(1) as u64,
            own_bytes / rows_stored.max(1) as u64
        ),
        target: "report".into(),
        met: None,
    });
    Ok(())
}
