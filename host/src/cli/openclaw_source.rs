//! `ctxbox run` on OpenClaw's SQLite session store: lists its sessions, or
//! exports the one named by `--session` to a JSONL transcript in the data
//! directory for the replay (the store itself is only read).

use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use ctxbox_host::runtime::Runtime;
use ctxbox_host::transcript::openclaw;

/// What to replay.
pub enum Recording {
    /// A JSONL transcript (or, with `None`, the built-in sample).
    Transcript(Option<PathBuf>),
    /// The store's sessions were listed; nothing to replay.
    Listed,
}

/// Resolves `ctxbox run`'s input: a JSONL path as it is, an OpenClaw store
/// as its session `session` (listing the sessions when none is named).
pub fn resolve(
    runtime: &Runtime,
    path: Option<&Path>,
    session: Option<&str>,
) -> anyhow::Result<Recording> {
    let Some(path) = path.filter(|path| openclaw::is_sqlite(path)) else {
        if session.is_some() {
            bail!(
                "--session names a session of an OpenClaw SQLite store; the transcript given is not one"
            );
        }
        return Ok(Recording::Transcript(path.map(Path::to_owned)));
    };
    let Some(session) = session else {
        let sessions = openclaw::list_sessions(path)?;
        if sessions.is_empty() {
            println!("no sessions in {}", path.display());
        }
        for stored in &sessions {
            println!("{}  ({} events)", stored.id, stored.events);
        }
        eprintln!(
            "name one with --session ID to replay it ({} sessions)",
            sessions.len()
        );
        return Ok(Recording::Listed);
    };
    let dir = runtime.data_dir().join("openclaw-sessions");
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create `{}`", dir.display()))?;
    let file_name: String = session
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    let output = dir.join(format!("{file_name}.jsonl"));
    openclaw::export_session(path, session, &output)?;
    Ok(Recording::Transcript(Some(output)))
}
