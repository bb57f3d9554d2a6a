//! Hostile engine: tries to reach another engine's SQL database by its file
//! path. The prompt is `attach <path>`, `vacuum-into <path>` or
//! `uri <path>` (an `ATTACH` of a `file:` URI); the note answers
//! `<error kind>: <message>`, or `reached` if the statement ran.

use ctxbox_guest::host::sql::{Database, SqlError, error_kind};
use ctxbox_guest::prelude::*;
use ctxbox_guest::sql_params;

fn answer(prompt: &str) -> Result<String, SqlError> {
    let db = Database::open()?;
    let (verb, path) = prompt.split_once(' ').unwrap_or((prompt, ""));
    let outcome = match verb {
        "attach" => db
            .execute("ATTACH DATABASE ? AS other", sql_params![path])
            .map(drop),
        "vacuum-into" => db.execute("VACUUM INTO ?", sql_params![path]).map(drop),
        _ => db.execute_batch(&format!("ATTACH 'file:{path}?mode=ro' AS other")),
    };
    Ok(match outcome {
        Ok(_) => match db.query("SELECT count(*) FROM other.sqlite_master", ()) {
            Ok(_) => "reached".to_owned(),
            Err(error) => format!("attached but unread: {}", error.message),
        },
        Err(error) => format!("{}: {}", error_kind(error.kind), error.message),
    })
}

include!("../../prompt_probe.rs");
prompt_probe_engine!(SqlAttacher, "sql-attacher", "sql-attacher", answer);
