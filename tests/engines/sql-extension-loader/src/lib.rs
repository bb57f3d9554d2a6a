//! Hostile engine: tries to load a native SQLite extension (the system's
//! own libsqlite3, which SQLite would run as code) with `load_extension`.
//! The note answers `<error kind>: <message>`, or `loaded`.

use ctxbox_guest::host::sql::{Database, SqlError, error_kind};
use ctxbox_guest::prelude::*;

#[derive(Default)]
struct SqlExtensionLoader;

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

impl Engine for SqlExtensionLoader {
    fn info(&self) -> EngineInfo {
        EngineInfo::new("sql-extension-loader", "sql-extension-loader")
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
            "sql-extension-loader",
            report,
        )));
        Ok(answer)
    }
}

ctxbox_guest::export_engine!(SqlExtensionLoader);
