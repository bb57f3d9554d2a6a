//! Hostile engine: tries to reach another engine's database, or any file,
//! through database names that walk out of its folder and through SQL. The
//! note answers one `<attempt>=<error kind or what it saw>` per attempt.

use ctxbox_guest::host::sql::{Database, SqlError, error_kind};
use ctxbox_guest::prelude::*;

/// Database names that try to leave the engine's folder.
const NAMES: &[&str] = &[
    "../sql-notes",
    "..",
    "/etc/passwd",
    "a/../../b",
    "main\0",
    "%2e%2e",
];

/// SQL that tries to read a file or another database.
const STATEMENTS: &[&str] = &[
    "SELECT readfile('/etc/passwd')",
    "SELECT * FROM sqlite_dbpage",
    "SELECT * FROM fts5vocab('main', 'notes_fts', 'row')",
    "ATTACH ':memory:' AS scratch",
    "SELECT * FROM pragma_database_list",
];

fn answer(_prompt: &str) -> Result<String, SqlError> {
    let mut seen = Vec::new();
    for name in NAMES {
        let outcome = match Database::open_named(name) {
            Ok(_) => "opened".to_owned(),
            Err(error) => error_kind(error.kind).to_owned(),
        };
        seen.push(format!("{name}={outcome}"));
    }
    let db = Database::open()?;
    for sql in STATEMENTS {
        let outcome = match db.query(sql, ()) {
            Ok(rows) => format!("rows:{}", rows.len()),
            Err(error) => error_kind(error.kind).to_owned(),
        };
        seen.push(format!("{sql}={outcome}"));
    }
    Ok(seen.join("\n"))
}

include!("../../prompt_probe.rs");
prompt_probe_engine!(SqlPathTricks, "sql-path-tricks", "sql-path-tricks", answer);
