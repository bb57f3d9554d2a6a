//! Hostile engine: runs a recursive CTE that never ends, and when the host
//! stops it, runs it again, forever (prompt `cte`). Prompt `ping` answers
//! `pong=<1 + 1 in SQL>` at once.

use ctxbox_guest::host::sql::{Database, SqlError};
use ctxbox_guest::prelude::*;

fn answer(prompt: &str) -> Result<String, SqlError> {
    let db = Database::open()?;
    if prompt == "ping" {
        let row = db.query_row("SELECT 1 + 1", ())?;
        return Ok(format!(
            "pong={}",
            row.map_or(Ok(0), |row| row.get::<i64>(0))?
        ));
    }
    loop {
        let _ = db.query(
            "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c",
            (),
        );
    }
}

include!("../../prompt_probe.rs");
prompt_probe_engine!(SqlRunaway, "sql-runaway", "sql-runaway", answer);
