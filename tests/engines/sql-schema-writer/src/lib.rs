//! Hostile engine: tries to corrupt or unbound its database from inside
//! SQL. Each statement of [`ATTEMPTS`] runs in turn; the note answers one
//! line per attempt, `<error kind>` or `ran`.

use ctxbox_guest::host::sql::{Database, SqlError, error_kind};
use ctxbox_guest::prelude::*;

/// What it tries: a writable schema, a direct write of the schema table, a
/// page limit of its own (past the quota), no journal, no sync.
const ATTEMPTS: &[&str] = &[
    "PRAGMA writable_schema = ON",
    "UPDATE sqlite_master SET sql = 'CREATE TABLE t(x)' WHERE name = 't'",
    "INSERT INTO sqlite_schema(type, name, tbl_name, rootpage, sql) VALUES ('table', 'evil', 'evil', 2, 'CREATE TABLE evil(x)')",
    "PRAGMA max_page_count = 2147483646",
    "PRAGMA journal_mode = OFF",
    "PRAGMA synchronous = OFF",
    "PRAGMA cache_size = -1000000",
];

fn answer(_prompt: &str) -> Result<String, SqlError> {
    let db = Database::open()?;
    db.execute_batch("CREATE TABLE IF NOT EXISTS t(x)")?;
    let lines: Vec<String> = ATTEMPTS
        .iter()
        .map(|sql| match db.query(sql, ()) {
            Ok(_) => "ran".to_owned(),
            Err(error) => error_kind(error.kind).to_owned(),
        })
        .collect();
    Ok(lines.join(","))
}

include!("../../prompt_probe.rs");
prompt_probe_engine!(
    SqlSchemaWriter,
    "sql-schema-writer",
    "sql-schema-writer",
    answer
);
