//! Transcripts in the shared PostgreSQL database ([`PostgresLogs`]): one row
//! per transcript in `ctxbox_transcripts`, one row per line in
//! `ctxbox_transcript_lines` numbered from 0 (the header). An append inserts
//! its lines with the numbers that follow the last one this handle knows, in
//! one transaction: all or none, acknowledged once committed, and refused
//! with [`TranscriptError::Conflict`] if another host appended meanwhile, so
//! appends are never interleaved or reordered. There are no torn lines.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::error::TranscriptError;
use super::file::FsyncPolicy;
use super::log::{Access, Opened, TranscriptLog, TranscriptLogs};
use crate::store::{Postgres, StoreError};

/// SQLSTATE `unique_violation`.
const UNIQUE_VIOLATION: &str = "23505";

/// Transcripts in PostgreSQL, named by their path.
#[derive(Debug, Clone)]
pub struct PostgresLogs {
    postgres: Arc<Postgres>,
}

impl PostgresLogs {
    /// Transcripts in `postgres`.
    pub fn new(postgres: Arc<Postgres>) -> Self {
        Self { postgres }
    }
}

/// An open transcript's appends.
#[derive(Debug)]
struct PostgresLog {
    postgres: Arc<Postgres>,
    name: PathBuf,
    id: i64,
    next_seq: i64,
    writable: bool,
}

fn store_error(path: &Path) -> impl FnOnce(StoreError) -> TranscriptError + '_ {
    move |source| TranscriptError::Store {
        path: path.to_owned(),
        source,
    }
}

/// The name a path is stored under: absolute, `.` and `..` resolved
/// lexically (the file need not exist on this machine).
fn name_of(path: &Path) -> PathBuf {
    std::path::absolute(path).unwrap_or_else(|_| path.to_owned())
}

/// Whole lines, without their `\n`.
fn lines_of(contents: &[u8]) -> Result<Vec<String>, String> {
    let text = std::str::from_utf8(contents).map_err(|error| format!("not UTF-8: {error}"))?;
    let text = text.strip_suffix('\n').unwrap_or(text);
    if text.contains('\0') {
        return Err("a line holds a NUL character, which PostgreSQL text cannot store".to_owned());
    }
    Ok(text.split('\n').map(str::to_owned).collect())
}

impl TranscriptLogs for PostgresLogs {
    fn resolve(&self, path: &Path) -> Result<PathBuf, TranscriptError> {
        let name = name_of(path);
        let text = name.to_string_lossy().into_owned();
        let postgres = self.postgres.clone();
        let found: Option<i64> = self
            .postgres
            .run(move |client| async move {
                client
                    .query_opt(
                        "SELECT id FROM ctxbox_transcripts WHERE name = $1",
                        &[&text],
                    )
                    .await
                    .map(|row| row.map(|row| row.get(0)))
                    .map_err(|error| postgres.query_error("look up a transcript", &error))
            })
            .map_err(store_error(path))?;
        match found {
            Some(_) => Ok(name),
            None => Err(TranscriptError::NotFound {
                path: path.to_owned(),
            }),
        }
    }

    fn open(&self, name: &Path, access: Access) -> Result<Opened, TranscriptError> {
        let text = name.to_string_lossy().into_owned();
        let postgres = self.postgres.clone();
        let read: Option<(i64, Vec<String>)> = self
            .postgres
            .run(move |client| async move {
                let fail = |error| postgres.query_error("read a transcript", &error);
                let Some(row) = client
                    .query_opt("SELECT id FROM ctxbox_transcripts WHERE name = $1", &[&text])
                    .await
                    .map_err(fail)?
                else {
                    return Ok(None);
                };
                let id: i64 = row.get(0);
                let lines = client
                    .query(
                        "SELECT line FROM ctxbox_transcript_lines WHERE transcript = $1 ORDER BY seq",
                        &[&id],
                    )
                    .await
                    .map_err(|error| postgres.query_error("read a transcript", &error))?
                    .iter()
                    .map(|row| row.get::<_, String>(0))
                    .collect();
                Ok(Some((id, lines)))
            })
            .map_err(store_error(name))?;
        let Some((id, lines)) = read else {
            return Err(TranscriptError::NotFound {
                path: name.to_owned(),
            });
        };
        let mut contents = Vec::with_capacity(lines.iter().map(|line| line.len() + 1).sum());
        for line in &lines {
            contents.extend_from_slice(line.as_bytes());
            contents.push(b'\n');
        }
        Ok(Opened {
            log: Box::new(PostgresLog {
                postgres: self.postgres.clone(),
                name: name.to_owned(),
                id,
                next_seq: lines.len() as i64,
                writable: access == Access::ReadWrite,
            }),
            access,
            contents,
            torn_tail: None,
        })
    }

    fn create(&self, path: &Path, contents: &[u8]) -> Result<(), TranscriptError> {
        let lines = lines_of(contents).map_err(|reason| TranscriptError::InvalidAppend {
            path: path.to_owned(),
            reason,
        })?;
        let text = name_of(path).to_string_lossy().into_owned();
        let postgres = self.postgres.clone();
        let created: bool = self
            .postgres
            .run(move |mut client| async move {
                let fail = |error| postgres.query_error("create a transcript", &error);
                let transaction = client.transaction().await.map_err(fail)?;
                let Some(row) = transaction
                    .query_opt(
                        "INSERT INTO ctxbox_transcripts (name, created_at_ms)
                         VALUES ($1, (extract(epoch FROM now()) * 1000)::bigint)
                         ON CONFLICT (name) DO NOTHING RETURNING id",
                        &[&text],
                    )
                    .await
                    .map_err(|error| postgres.query_error("create a transcript", &error))?
                else {
                    return Ok(false);
                };
                let id: i64 = row.get(0);
                insert_lines(&transaction, id, 0, &lines)
                    .await
                    .map_err(|error| postgres.query_error("create a transcript", &error))?;
                transaction
                    .commit()
                    .await
                    .map_err(|error| postgres.query_error("create a transcript", &error))?;
                Ok(true)
            })
            .map_err(store_error(path))?;
        if created {
            Ok(())
        } else {
            Err(TranscriptError::AlreadyExists {
                path: path.to_owned(),
            })
        }
    }

    fn header_line(&self, path: &Path) -> Option<String> {
        let text = name_of(path).to_string_lossy().into_owned();
        let postgres = self.postgres.clone();
        self.postgres
            .run(move |client| async move {
                client
                    .query_opt(
                        "SELECT line FROM ctxbox_transcript_lines
                         WHERE seq = 0 AND transcript = (SELECT id FROM ctxbox_transcripts WHERE name = $1)",
                        &[&text],
                    )
                    .await
                    .map(|row| row.map(|row| row.get::<_, String>(0)))
                    .map_err(|error| postgres.query_error("read a transcript header", &error))
            })
            .ok()
            .flatten()
    }

    fn remove(&self, path: &Path) -> Result<(), TranscriptError> {
        let text = name_of(path).to_string_lossy().into_owned();
        let postgres = self.postgres.clone();
        let removed: bool = self
            .postgres
            .run(move |mut client| async move {
                let fail = |error| postgres.query_error("remove a transcript", &error);
                let transaction = client.transaction().await.map_err(fail)?;
                let Some(row) = transaction
                    .query_opt(
                        "SELECT id FROM ctxbox_transcripts WHERE name = $1 FOR UPDATE",
                        &[&text],
                    )
                    .await
                    .map_err(|error| postgres.query_error("remove a transcript", &error))?
                else {
                    return Ok(false);
                };
                let id: i64 = row.get(0);
                for statement in [
                    "DELETE FROM ctxbox_transcript_lines WHERE transcript = $1",
                    "DELETE FROM ctxbox_transcripts WHERE id = $1",
                ] {
                    transaction
                        .execute(statement, &[&id])
                        .await
                        .map_err(|error| postgres.query_error("remove a transcript", &error))?;
                }
                transaction
                    .commit()
                    .await
                    .map_err(|error| postgres.query_error("remove a transcript", &error))?;
                Ok(true)
            })
            .map_err(store_error(path))?;
        if removed {
            Ok(())
        } else {
            Err(TranscriptError::NotFound {
                path: path.to_owned(),
            })
        }
    }
}

impl TranscriptLog for PostgresLog {
    fn is_writable(&self) -> bool {
        self.writable
    }

    fn identity(&self) -> Option<(u64, u64)> {
        // A transcript replaced under the same name gets a new id.
        Some((0, self.id as u64))
    }

    fn append(&mut self, lines: &[u8], policy: FsyncPolicy) -> Result<(), TranscriptError> {
        if !self.writable {
            return Err(TranscriptError::ReadOnly {
                path: self.name.clone(),
            });
        }
        let lines = lines_of(lines).map_err(|reason| TranscriptError::InvalidAppend {
            path: self.name.clone(),
            reason,
        })?;
        let count = lines.len() as i64;
        let (postgres, id, first) = (self.postgres.clone(), self.id, self.next_seq);
        let appended: Result<bool, StoreError> = self.postgres.run(move |mut client| async move {
            let fail = |error| postgres.query_error("append to a transcript", &error);
            let transaction = client.transaction().await.map_err(fail)?;
            if policy == FsyncPolicy::Never {
                // Survives a crash of this host, not of the database server.
                transaction
                    .batch_execute("SET LOCAL synchronous_commit = off")
                    .await
                    .map_err(|error| postgres.query_error("append to a transcript", &error))?;
            }
            match insert_lines(&transaction, id, first, &lines).await {
                Err(error) if error.code().map(|code| code.code()) == Some(UNIQUE_VIOLATION) => {
                    return Ok(false);
                }
                other => {
                    other
                        .map_err(|error| postgres.query_error("append to a transcript", &error))?;
                }
            }
            transaction
                .commit()
                .await
                .map_err(|error| postgres.query_error("append to a transcript", &error))?;
            Ok(true)
        });
        match appended {
            Ok(true) => {
                self.next_seq += count;
                Ok(())
            }
            Ok(false) => Err(TranscriptError::Conflict {
                path: self.name.clone(),
            }),
            Err(source) => Err(TranscriptError::Store {
                path: self.name.clone(),
                source,
            }),
        }
    }

    fn sync(&mut self) -> Result<(), TranscriptError> {
        // Every append committed already (asynchronously only under
        // `fsync = "never"`, which makes no promise past a crash).
        Ok(())
    }
}

async fn insert_lines(
    client: &impl deadpool_postgres::GenericClient,
    id: i64,
    first: i64,
    lines: &[String],
) -> Result<u64, tokio_postgres::Error> {
    let seqs: Vec<i64> = (first..first + lines.len() as i64).collect();
    client
        .execute(
            "INSERT INTO ctxbox_transcript_lines (transcript, seq, line)
             SELECT $1, seq, line FROM unnest($2::bigint[], $3::text[]) AS appended (seq, line)",
            &[&id, &seqs, &lines],
        )
        .await
}
