//! OpenClaw's own session store (2026.9 and later): transcripts live in
//! SQLite, `agents/<id>/agent/openclaw-agent.sqlite`, one row per event in
//! `transcript_events` (`session_id`, `seq`, the event's JSON in
//! `event_json` or zstd-compressed in `event_zstd`). The events are the
//! entries of the JSONL files under a version-4 header: the same `message`,
//! `compaction`, `custom_message`, … entries, plus `leaf` events that move the
//! active branch (their parent is the new leaf, so the transcript reader's
//! "path from the last entry" follows them).
//!
//! Read-only: the database is opened with `SQLITE_OPEN_READ_ONLY` and never
//! written. A session is exported as a JSONL transcript (header rewritten to
//! version 3) that [`TranscriptStore`](crate::transcript::TranscriptStore)
//! opens like any other.

use std::io::Write;
use std::path::{Path, PathBuf};

use rusqlite::{Connection, OpenFlags, params};
use serde_json::Value;

/// The OpenClaw session format version this module reads.
pub const OPENCLAW_SESSION_VERSION: u64 = 4;

/// Why the store could not be read.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// SQLite could not open or query the database.
    #[error("OpenClaw session store `{}`: {source}", path.display())]
    Sqlite {
        /// The database.
        path: PathBuf,
        /// SQLite's error.
        source: rusqlite::Error,
    },
    /// No events of that session.
    #[error("OpenClaw session store `{}` has no session `{session}`", path.display())]
    NoSession {
        /// The database.
        path: PathBuf,
        /// The session asked for.
        session: String,
    },
    /// An event could not be read.
    #[error("session `{session}` event {seq}: {reason}")]
    Event {
        /// The session.
        session: String,
        /// The event's sequence number.
        seq: i64,
        /// What is wrong with it.
        reason: String,
    },
    /// The exported transcript could not be written.
    #[error("cannot write `{}`: {source}", path.display())]
    Write {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
}

/// A session in the store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredSession {
    /// Its id.
    pub id: String,
    /// How many events it has.
    pub events: u64,
    /// When its first event was written (ms since the Unix epoch).
    pub created_at_ms: i64,
}

/// Whether `path` looks like an SQLite database (by its magic header).
pub fn is_sqlite(path: &Path) -> bool {
    let mut magic = [0u8; 16];
    std::fs::File::open(path)
        .and_then(|mut file| std::io::Read::read_exact(&mut file, &mut magic))
        .is_ok()
        && &magic == b"SQLite format 3\0"
}

fn open(path: &Path) -> Result<Connection, StoreError> {
    Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(|source| StoreError::Sqlite {
        path: path.to_owned(),
        source,
    })
}

/// Every session in the store at `path`, oldest first.
pub fn list_sessions(path: &Path) -> Result<Vec<StoredSession>, StoreError> {
    let fail = |source| StoreError::Sqlite {
        path: path.to_owned(),
        source,
    };
    let connection = open(path)?;
    let mut statement = connection
        .prepare(
            "SELECT session_id, COUNT(*), MIN(created_at) FROM transcript_events
             GROUP BY session_id ORDER BY MIN(created_at), session_id",
        )
        .map_err(fail)?;
    let rows = statement
        .query_map([], |row| {
            Ok(StoredSession {
                id: row.get(0)?,
                events: row.get::<_, i64>(1)?.max(0) as u64,
                created_at_ms: row.get::<_, Option<i64>>(2)?.unwrap_or(0),
            })
        })
        .map_err(fail)?;
    rows.collect::<Result<_, _>>().map_err(fail)
}

/// Writes session `session` of the store at `path` to `output` as a JSONL
/// transcript; answers how many events were written.
pub fn export_session(path: &Path, session: &str, output: &Path) -> Result<usize, StoreError> {
    let fail = |source| StoreError::Sqlite {
        path: path.to_owned(),
        source,
    };
    let connection = open(path)?;
    let mut statement = connection
        .prepare(
            "SELECT seq, event_json, event_zstd FROM transcript_events
             WHERE session_id = ?1 ORDER BY seq",
        )
        .map_err(fail)?;
    let rows = statement
        .query_map(params![session], |row| {
            Ok((
                row.get::<_, i64>(0)?,
                row.get::<_, Option<String>>(1)?,
                row.get::<_, Option<Vec<u8>>>(2)?,
            ))
        })
        .map_err(fail)?;
    let mut lines = Vec::new();
    for row in rows {
        let (seq, json, compressed) = row.map_err(fail)?;
        let event = |reason: String| StoreError::Event {
            session: session.to_owned(),
            seq,
            reason,
        };
        let text = match (json, compressed) {
            (Some(json), _) => json,
            (None, Some(bytes)) => {
                let raw = zstd::stream::decode_all(bytes.as_slice())
                    .map_err(|error| event(format!("`event_zstd` is not zstd: {error}")))?;
                String::from_utf8(raw)
                    .map_err(|_| event("`event_zstd` does not hold UTF-8 text".into()))?
            }
            (None, None) => return Err(event("neither `event_json` nor `event_zstd`".into())),
        };
        lines.push(if lines.is_empty() {
            header_as_v3(&text).map_err(event)?
        } else {
            text
        });
    }
    if lines.is_empty() {
        return Err(StoreError::NoSession {
            path: path.to_owned(),
            session: session.to_owned(),
        });
    }
    let write = |source| StoreError::Write {
        path: output.to_owned(),
        source,
    };
    let mut file = std::fs::File::create(output).map_err(write)?;
    for line in &lines {
        writeln!(file, "{}", line.trim_end()).map_err(write)?;
    }
    file.sync_all().map_err(write)?;
    Ok(lines.len())
}

/// The session header with its version set to the JSONL format's (the
/// entries below it are the same).
fn header_as_v3(text: &str) -> Result<String, String> {
    let mut header: Value =
        serde_json::from_str(text).map_err(|error| format!("the header is not JSON: {error}"))?;
    if header.get("type").and_then(Value::as_str) != Some("session") {
        return Err("the first event is not a `session` header".into());
    }
    let version = header.get("version").and_then(Value::as_u64).unwrap_or(1);
    if version > OPENCLAW_SESSION_VERSION {
        return Err(format!(
            "session format version {version}; this ctxbox reads up to {OPENCLAW_SESSION_VERSION}"
        ));
    }
    header["version"] = crate::transcript::SESSION_VERSION.into();
    Ok(header.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A store shaped like OpenClaw's, with one session holding a plain and
    /// a compressed event and an abandoned user message.
    fn store(dir: &Path) -> PathBuf {
        let path = dir.join("openclaw-agent.sqlite");
        let connection = Connection::open(&path).expect("create");
        connection
            .execute_batch(
                "CREATE TABLE transcript_events (session_id TEXT, seq INTEGER, event_json TEXT,
                   created_at INTEGER, event_zstd BLOB, event_utf8_bytes INTEGER, navigation_json TEXT);",
            )
            .expect("schema");
        let events = [
            r#"{"type":"session","version":4,"id":"s1","timestamp":"2026-12-01T14:21:53.227Z","cwd":"/w"}"#,
            r#"{"type":"message","id":"a","parentId":null,"timestamp":"2026-12-01T14:21:55.187Z","message":{"role":"user","content":"lost","timestamp":1}}"#,
            r#"{"type":"leaf","id":"l","parentId":null,"timestamp":"2026-12-01T14:24:00.538Z","targetId":null}"#,
            r#"{"type":"message","id":"b","parentId":null,"timestamp":"2026-12-01T14:24:02.061Z","message":{"role":"user","content":"hello","timestamp":2}}"#,
            r#"{"type":"message","id":"c","parentId":"b","timestamp":"2026-12-01T14:24:03.061Z","message":{"role":"assistant","content":[{"type":"text","text":"hi"}],"stopReason":"stop","timestamp":3}}"#,
        ];
        for (seq, event) in events.iter().enumerate() {
            let (json, zstd) = if seq == 4 {
                (
                    None,
                    Some(zstd::stream::encode_all(event.as_bytes(), 3).expect("zstd")),
                )
            } else {
                (Some(*event), None)
            };
            connection
                .execute(
                    "INSERT INTO transcript_events (session_id, seq, event_json, created_at, event_zstd)
                     VALUES ('s1', ?1, ?2, ?3, ?4)",
                    params![seq as i64, json, 1000 + seq as i64, zstd],
                )
                .expect("insert");
        }
        path
    }

    #[test]
    fn lists_and_exports_a_session_the_transcript_reader_opens() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = store(dir.path());
        assert!(is_sqlite(&path));
        assert_eq!(
            list_sessions(&path).expect("lists"),
            vec![StoredSession {
                id: "s1".into(),
                events: 5,
                created_at_ms: 1000
            }]
        );
        let output = dir.path().join("s1.jsonl");
        assert_eq!(export_session(&path, "s1", &output).expect("exports"), 5);
        let transcripts = crate::transcript::TranscriptStore::new(Default::default());
        let transcript = transcripts.open_read_only(&output).expect("opens");
        let texts: Vec<String> = transcript
            .active_branch()
            .iter()
            .filter_map(|entry| entry.message.content().first().cloned())
            .map(|block| format!("{block:?}"))
            .collect();
        assert_eq!(texts.len(), 2, "{texts:?}");
        assert!(
            texts[0].contains("hello") && texts[1].contains("hi"),
            "{texts:?}"
        );
        assert!(matches!(
            export_session(&path, "nope", &output),
            Err(StoreError::NoSession { .. })
        ));
        assert!(!is_sqlite(&output));
    }
}
