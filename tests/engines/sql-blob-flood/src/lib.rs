//! Hostile engine: inserts 256 KiB blobs until the host refuses one (prompt
//! `flood`), answering `stopped=<error kind> after=<blobs> undone=<whether
//! the error says the call's earlier statements were undone>`; prompt `count`
//! answers `count=<blobs stored>`; prompt `keep` stores one small row and
//! answers `kept=<rows>`; prompts `state` and `state-again` store 1 MiB in
//! its key-value store (which shares the quota), answering `state=ok` or
//! `state=<error kind>`.

use ctxbox_guest::host::sql::{Database, SqlError, error_kind};
use ctxbox_guest::prelude::*;

fn answer(prompt: &str) -> Result<String, SqlError> {
    let db = Database::open()?;
    db.execute_batch("CREATE TABLE IF NOT EXISTS blobs(id INTEGER PRIMARY KEY, data BLOB)")?;
    match prompt {
        "state" | "state-again" => Ok(match host::state::set(prompt, &vec![0; 1 << 20]) {
            Ok(()) => "state=ok".to_owned(),
            Err(error) => format!("state={}", ctxbox_guest::host_error_kind(error.kind)),
        }),
        "flood" => {
            let mut stored = 0;
            loop {
                match db.execute("INSERT INTO blobs(data) VALUES (zeroblob(262144))", ()) {
                    Ok(_) => stored += 1,
                    Err(error) => {
                        let undone = error.message.contains("undone");
                        return Ok(format!(
                            "stopped={} after={stored} undone={undone}",
                            error_kind(error.kind)
                        ));
                    }
                }
            }
        }
        "keep" => {
            db.execute("INSERT INTO blobs(data) VALUES (x'00')", ())?;
            let rows = db.query_row("SELECT count(*) FROM blobs WHERE length(data) = 1", ())?;
            Ok(format!(
                "kept={}",
                rows.map_or(Ok(0), |row| row.get::<i64>(0))?
            ))
        }
        _ => {
            let rows = db.query_row("SELECT count(*) FROM blobs", ())?;
            Ok(format!(
                "count={}",
                rows.map_or(Ok(0), |row| row.get::<i64>(0))?
            ))
        }
    }
}

include!("../../prompt_probe.rs");
prompt_probe_engine!(SqlBlobFlood, "sql-blob-flood", "sql-blob-flood", answer);
