//! Bench probe for `ctxbox bench --only sql`: runs the bench's statements
//! (the host's `cli/bench/sql.rs` runs the same ones on rusqlite
//! in-process). `assemble`'s prompt is `<verb> <from> <count>` and its note
//! `ok=<count>`:
//!
//! - `setup`: the table, its FTS5 index and the trigger that fills it;
//! - `insert` / `insert-prepared`: rows `from..from+count`, one statement
//!   each, as text or through one prepared statement;
//! - `select` / `select-prepared`: point selects of those rows;
//! - `match`: FTS5 matches of the word `from` selects (see `word`).

use ctxbox_guest::host::sql::{Database, SqlError};
use ctxbox_guest::prelude::*;
use ctxbox_guest::sql_params;
mod statements;

use statements::{INSERT, MATCH, SCHEMA, SELECT, row_text, word};

#[derive(Default)]
struct SqlBench;

fn run(verb: &str, from: i64, count: i64) -> Result<i64, SqlError> {
    let db = Database::open()?;
    let ids = from..from + count;
    match verb {
        "setup" => db.execute_batch(SCHEMA)?,
        "insert" => {
            for id in ids {
                db.execute(INSERT, sql_params![id, row_text(id)])?;
            }
        }
        "insert-prepared" => {
            let insert = db.prepare(INSERT)?;
            for id in ids {
                insert.execute(sql_params![id, row_text(id)])?;
            }
        }
        "select" => {
            for id in ids {
                db.query(SELECT, sql_params![id])?;
            }
        }
        "select-prepared" => {
            let select = db.prepare(SELECT)?;
            for id in ids {
                select.query(sql_params![id])?;
            }
        }
        _ => {
            for id in ids {
                db.query(MATCH, sql_params![word(id)])?;
            }
        }
    }
    Ok(count)
}

impl Engine for SqlBench {
    fn info(&self) -> EngineInfo {
        EngineInfo::new("sql-bench", "SQL bench probe")
    }

    fn assemble(
        &mut self,
        _: &SessionRef,
        history: &History,
        params: AssembleParams,
    ) -> Result<AssembleResult, EngineError> {
        let prompt = params.prompt.unwrap_or_default();
        let mut words = prompt.split(' ');
        let verb = words.next().unwrap_or("");
        let mut number = || words.next().and_then(|word| word.parse().ok()).unwrap_or(0);
        let (from, count) = (number(), number());
        let ran = run(verb, from, count)?;
        Ok(AssembleResult::keep_all(history)
            .with_appended(AgentMessage::note("sql-bench", format!("ok={ran}"))))
    }
}

ctxbox_guest::export_engine!(SqlBench);
