//! Hostile engine: tries to load a native SQLite extension (the system's
//! own libsqlite3, which SQLite would run as code) with `load_extension`.
//! The note answers `<error kind>: <message>`, or `loaded`.

use ctxbox_guest::host::sql::{Database, SqlError, error_kind};
use ctxbox_guest::prelude::*;

fn answer(_prompt: &str) -> Result<String, SqlError> {
    let db = Database::open()?;
    let outcome = db.query(
        "SELECT load_extension('/usr/lib/x86_64-linux-gnu/libsqlite3.so.0', 'sqlite3_fts5_init')",
        (),
    );
    Ok(match outcome {
        Ok(_) => "loaded".to_owned(),
        Err(error) => format!("{}: {}", error_kind(error.kind), error.message),
    })
}

include!("../../prompt_probe.rs");
prompt_probe_engine!(
    SqlExtensionLoader,
    "sql-extension-loader",
    "sql-extension-loader",
    answer
);
