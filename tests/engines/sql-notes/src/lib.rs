//! Test engine for the SQL power: keeps notes in its own database, with an
//! FTS5 index over them. `assemble` keeps the history and adds a note
//! answering its prompt:
//!
//! - `add <text>`: stores a note; `added=<id>`;
//! - `search <query>`: an FTS5 match; `found=<text>|<text>…` (best first);
//! - `count` (or any other prompt, or none): `count=<notes>`;
//! - `tx`: `BEGIN` … `ROLLBACK` then `BEGIN` … `COMMIT` of its own, then a
//!   `SAVEPOINT` rolled back; `tx=<rolled>,<kept>,<saved>` (rows of each);
//! - `prepared <n>`: inserts `n` notes through one prepared statement;
//!   `prepared=<notes>`;
//! - `add-then-fail <text>`: stores a note, then fails the call;
//! - `named <name> <text>`: stores a note in database `<name>`;
//!   `named=<notes there>`.

use ctxbox_guest::host::sql::{Database, SqlError, Value};
use ctxbox_guest::prelude::*;
use ctxbox_guest::sql_params;

const SCHEMA: &str = "CREATE TABLE IF NOT EXISTS notes(id INTEGER PRIMARY KEY, text TEXT NOT NULL);
CREATE VIRTUAL TABLE IF NOT EXISTS notes_fts USING fts5(text, content='notes', content_rowid='id');
CREATE TRIGGER IF NOT EXISTS notes_ai AFTER INSERT ON notes BEGIN
  INSERT INTO notes_fts(rowid, text) VALUES (new.id, new.text);
END;";

fn open(name: Option<&str>) -> Result<Database, SqlError> {
    let db = match name {
        Some(name) => Database::open_named(name)?,
        None => Database::open()?,
    };
    db.execute_batch(SCHEMA)?;
    Ok(db)
}

fn count(db: &Database, filter: &str) -> Result<i64, SqlError> {
    db.query_row(
        "SELECT count(*) FROM notes WHERE text LIKE ?",
        sql_params![filter],
    )?
    .map_or(Ok(0), |row| row.get::<i64>(0))
}

fn answer(prompt: &str) -> Result<String, EngineError> {
    let (verb, rest) = prompt.split_once(' ').unwrap_or((prompt, ""));
    match verb {
        "add" => {
            let db = open(None)?;
            let changes = db.execute("INSERT INTO notes(text) VALUES (?)", sql_params![rest])?;
            Ok(format!("added={}", changes.last_insert_rowid))
        }
        "add-then-fail" => {
            let db = open(None)?;
            db.execute("INSERT INTO notes(text) VALUES (?)", sql_params![rest])?;
            Err(EngineError::internal(
                "failing after the insert, on purpose",
            ))
        }
        "search" => {
            let db = open(None)?;
            let rows = db.query(
                "SELECT n.text FROM notes_fts JOIN notes n ON n.id = notes_fts.rowid
                 WHERE notes_fts MATCH :query ORDER BY rank",
                [(":query", Value::from(rest))],
            )?;
            let texts: Vec<String> = rows
                .iter()
                .map(|row| row.get::<String>("text"))
                .collect::<Result<_, _>>()?;
            Ok(format!("found={}", texts.join("|")))
        }
        "tx" => {
            let db = open(None)?;
            db.execute_batch("BEGIN; INSERT INTO notes(text) VALUES ('tx-rolled'); ROLLBACK;")?;
            db.execute("BEGIN IMMEDIATE", ())?;
            db.execute("INSERT INTO notes(text) VALUES ('tx-kept')", ())?;
            db.execute("COMMIT", ())?;
            db.execute("SAVEPOINT s1", ())?;
            db.execute("INSERT INTO notes(text) VALUES ('tx-saved')", ())?;
            db.execute("ROLLBACK TO s1", ())?;
            db.execute("RELEASE s1", ())?;
            let nested = db.execute_batch("BEGIN; BEGIN;");
            db.execute("ROLLBACK", ())?;
            let nested = match nested {
                Ok(()) => "nested-begin-allowed".to_owned(),
                Err(error) => error.message,
            };
            Ok(format!(
                "tx={},{},{};{nested}",
                count(&db, "tx-rolled")?,
                count(&db, "tx-kept")?,
                count(&db, "tx-saved")?
            ))
        }
        "prepared" => {
            let db = open(None)?;
            let n: i64 = rest.parse().unwrap_or(1);
            let insert = db.prepare("INSERT INTO notes(text) VALUES (?)")?;
            for i in 0..n {
                insert.execute(sql_params![format!("prepared {i}")])?;
            }
            Ok(format!("prepared={}", count(&db, "prepared %")?))
        }
        "named" => {
            let (name, text) = rest.split_once(' ').unwrap_or((rest, ""));
            let db = open(Some(name))?;
            db.execute("INSERT INTO notes(text) VALUES (?)", sql_params![text])?;
            Ok(format!("named={}", count(&db, "%")?))
        }
        _ => Ok(format!("count={}", count(&open(None)?, "%")?)),
    }
}

include!("../../prompt_probe.rs");
prompt_probe_engine!(SqlNotes, "sql-notes", "SQL notes", answer);
