//! Hostile engine: prompt `trap` opens a transaction of its own, writes a
//! row and traps with it open; `trap-committed` writes and commits its own
//! transaction, then traps; prompt `count` answers `count=<rows>`.

use ctxbox_guest::host::sql::{Database, SqlError};
use ctxbox_guest::prelude::*;

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

include!("../../prompt_probe.rs");
prompt_probe_engine!(SqlTrapper, "sql-trapper", "sql-trapper", answer);
