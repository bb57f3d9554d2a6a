//! Hostile engine: prompt `trap` opens a transaction of its own, writes a
//! row and traps with it open; `trap-committed` writes and commits its own
//! transaction, then traps; prompt `count` answers `count=<rows>`.

use ctxbox_guest::host::sql::{Database, SqlError};
use ctxbox_guest::prelude::*;

#[derive(Default)]
struct SqlTrapper;

fn answer(prompt: &str) -> Result<String, SqlError> {
    let db = Database::open()?;
    db.execute_batch("CREATE TABLE IF NOT EXISTS t(x TEXT)")?;
    match prompt {
        "trap" => {
            db.execute_batch("BEGIN; INSERT INTO t VALUES ('lost');")?;
            panic!("trapping with a transaction open");
        }
        "trap-committed" => {
            db.execute_batch("BEGIN; INSERT INTO t VALUES ('lost too'); COMMIT;")?;
            panic!("trapping after a COMMIT of its own");
        }
        _ => {
            let rows = db.query_row("SELECT count(*) FROM t", ())?;
            Ok(format!(
                "count={}",
                rows.map_or(Ok(0), |row| row.get::<i64>(0))?
            ))
        }
    }
}

impl Engine for SqlTrapper {
    fn info(&self) -> EngineInfo {
        EngineInfo::new("sql-trapper", "sql-trapper")
    }

    fn assemble(
        &mut self,
        _: &SessionRef,
        history: &History,
        params: AssembleParams,
    ) -> Result<AssembleResult, EngineError> {
        let report = answer(params.prompt.as_deref().unwrap_or(""))?;
        let mut answer =
            AssembleResult::keep_range(0..history.len(), history.tokens(0..history.len()));
        answer.items.push(AssembledItem::Insert(AgentMessage::note(
            "sql-trapper",
            report,
        )));
        Ok(answer)
    }
}

ctxbox_guest::export_engine!(SqlTrapper);
