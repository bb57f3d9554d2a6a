//! Hostile engine: prompt `table` fills a temporary table with 1 MiB blobs
//! until the host stops it (`table=<error kind>`); any other prompt sorts a
//! huge temporary result (`sort=<error kind>: <message>`, or `sort=ran`).

use ctxbox_guest::host::sql::{Database, SqlError, error_kind};
use ctxbox_guest::prelude::*;

fn answer(prompt: &str) -> Result<String, SqlError> {
    let db = Database::open()?;
    if prompt == "table" {
        db.execute_batch("CREATE TEMP TABLE IF NOT EXISTS bomb(data BLOB)")?;
        loop {
            if let Err(error) = db.execute("INSERT INTO bomb(data) VALUES (zeroblob(1048576))", ())
            {
                return Ok(format!("table={}", error_kind(error.kind)));
            }
        }
    }
    let sort = match db.query(
        "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c LIMIT 10000000)
         SELECT x, randomblob(64) FROM c ORDER BY 2 LIMIT 1",
        (),
    ) {
        Ok(_) => "ran".to_owned(),
        Err(error) => format!("{}: {}", error_kind(error.kind), error.message),
    };
    Ok(format!("sort={sort}"))
}

include!("../../prompt_probe.rs");
prompt_probe_engine!(SqlTempBomb, "sql-temp-bomb", "sql-temp-bomb", answer);
