//! [`TranscriptStore`]: opens, creates and rotates transcripts, and makes sure
//! a file has at most one open handle in the process, so the turn runner and a
//! compaction always work on the same state.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError, Weak};

use super::TranscriptConfig;
use super::error::TranscriptError;
use super::handle::{Shared, Transcript};
use super::log::{Access, Files, TranscriptLogs};
use super::wire::SessionHeader;

/// What a new session file starts with.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NewSession {
    /// The session id; a new UUID when `None`.
    pub session_id: Option<String>,
    /// The agent's working directory.
    pub cwd: String,
    /// The transcript this session continues or was forked from.
    pub parent_session: Option<String>,
}

/// The registry of open transcripts (cheap to clone; clones share it).
#[derive(Clone)]
pub struct TranscriptStore {
    inner: Arc<Registry>,
}

struct Registry {
    config: TranscriptConfig,
    logs: Arc<dyn TranscriptLogs>,
    /// Canonical path → the live handle. Handles close when their last clone
    /// is dropped; the entry is then replaced on the next open.
    open: Mutex<HashMap<PathBuf, Weak<Shared>>>,
}

impl TranscriptStore {
    /// A store of session files whose transcripts follow `config`.
    pub fn new(config: TranscriptConfig) -> Self {
        Self::with_logs(config, Arc::new(Files))
    }

    /// A store keeping its transcripts in `logs` (e.g.
    /// [`PostgresLogs`](super::PostgresLogs)).
    pub fn with_logs(config: TranscriptConfig, logs: Arc<dyn TranscriptLogs>) -> Self {
        Self {
            inner: Arc::new(Registry {
                config,
                logs,
                open: Mutex::new(HashMap::new()),
            }),
        }
    }

    /// Where the transcripts are kept.
    pub fn logs(&self) -> &Arc<dyn TranscriptLogs> {
        &self.inner.logs
    }

    /// The configuration in force.
    pub fn config(&self) -> &TranscriptConfig {
        &self.inner.config
    }

    /// The handle of the existing transcript at `path` (the one already open
    /// in this process, if any).
    pub fn open(&self, path: &Path) -> Result<Transcript, TranscriptError> {
        let canonical = self.inner.logs.resolve(path)?;
        let mut open = self.registry();
        if let Some(live) = open.get(&canonical).and_then(Weak::upgrade) {
            return Ok(Transcript { shared: live });
        }
        let transcript = Transcript::load(
            canonical.clone(),
            self.inner.config.clone(),
            self.inner.logs.clone(),
            self.inner.logs.open(&canonical, Access::ReadWrite)?,
        )?;
        open.retain(|_, handle| handle.strong_count() > 0);
        open.insert(canonical, Arc::downgrade(&transcript.shared));
        Ok(transcript)
    }

    /// The transcript at `path` for reading only: the handle already open in
    /// this process if there is one, else a snapshot of the file that takes
    /// no lock and changes nothing on disk (a torn last line, perhaps an
    /// append another process is writing right now, is ignored and reported,
    /// not cut). What it found is in [`Transcript::open_report`], for the
    /// caller to surface; it is logged only at debug level. Appends to a
    /// snapshot fail with [`TranscriptError::ReadOnly`].
    pub fn open_read_only(&self, path: &Path) -> Result<Transcript, TranscriptError> {
        let canonical = self.inner.logs.resolve(path)?;
        if let Some(live) = self.registry().get(&canonical).and_then(Weak::upgrade) {
            return Ok(Transcript { shared: live });
        }
        Transcript::load(
            canonical.clone(),
            self.inner.config.clone(),
            self.inner.logs.clone(),
            self.inner.logs.open(&canonical, Access::ReadOnly)?,
        )
    }

    /// Creates a new transcript at `path` (written atomically, header only)
    /// and opens it. Fails if the file exists.
    pub fn create(&self, path: &Path, session: NewSession) -> Result<Transcript, TranscriptError> {
        let header = SessionHeader::new(
            session
                .session_id
                .unwrap_or_else(|| uuid::Uuid::new_v4().to_string()),
            session.cwd,
            session.parent_session,
        );
        let mut contents =
            serde_json::to_string(&header).map_err(|error| TranscriptError::InvalidAppend {
                path: path.to_owned(),
                reason: format!("the session header cannot be written: {error}"),
            })?;
        contents.push('\n');
        self.inner.logs.create(path, contents.as_bytes())?;
        self.open(path)
    }

    /// Opens the transcript at `path`, creating it first if there is none.
    pub fn open_or_create(
        &self,
        path: &Path,
        session: NewSession,
    ) -> Result<Transcript, TranscriptError> {
        match self.open(path) {
            Err(TranscriptError::NotFound { .. }) => match self.create(path, session) {
                // Someone else created it in between.
                Err(TranscriptError::AlreadyExists { .. }) => self.open(path),
                other => other,
            },
            other => other,
        }
    }

    /// Continues `transcript` in a new file next to it, starting from its
    /// active path's `first_kept_entry_id` (normally right after a
    /// compaction, whose entry is then the new file's last). The new file is
    /// written atomically before the old one records the rotation, so a crash
    /// leaves either the old transcript alone or both; no append to the old
    /// one can slip in between, and it refuses appends afterwards.
    pub fn rotate(
        &self,
        transcript: &Transcript,
        first_kept_entry_id: &str,
    ) -> Result<Transcript, TranscriptError> {
        let old_header = transcript.header();
        let session_id = uuid::Uuid::new_v4().to_string();
        let new_path = transcript
            .path()
            .with_file_name(format!("{session_id}.jsonl"));
        let header = SessionHeader::new(
            session_id,
            old_header.cwd,
            Some(transcript.path().to_string_lossy().into_owned()),
        );
        transcript.rotate_into(&new_path, &header, first_kept_entry_id, |path| {
            self.open(path)
        })
    }

    /// A new transcript for a subagent of `parent`, session `session_id`,
    /// next to the parent's file, its header naming the parent's file
    /// (`parentSession`). With `fork`, it starts with the parent's active
    /// branch up to its last completed answer; otherwise it is empty.
    pub fn create_child(
        &self,
        parent: &Transcript,
        session_id: &str,
        fork: bool,
    ) -> Result<Transcript, TranscriptError> {
        let path = parent.path().with_file_name(format!("{session_id}.jsonl"));
        let parent_session = Some(parent.path().to_string_lossy().into_owned());
        if !fork {
            return self.create(
                &path,
                NewSession {
                    session_id: Some(session_id.to_owned()),
                    cwd: parent.header().cwd,
                    parent_session,
                },
            );
        }
        let header = SessionHeader::new(session_id.to_owned(), parent.header().cwd, parent_session);
        parent.fork_into(&path, &header)?;
        self.open(&path)
    }

    /// Deletes `transcript` (a subagent's whose spawn failed) if it is still
    /// the session it was: a transcript replaced under the same name since
    /// (another session id in its header) is left alone and named in the
    /// error.
    pub fn discard(&self, transcript: Transcript) -> Result<(), TranscriptError> {
        let path = transcript.path().to_owned();
        let session_id = transcript.session_id();
        drop(transcript);
        let current = self
            .inner
            .logs
            .header_line(&path)
            .and_then(|line| serde_json::from_str::<SessionHeader>(&line).ok());
        if current
            .as_ref()
            .is_some_and(|header| header.id != session_id)
        {
            return Err(TranscriptError::InvalidAppend {
                path,
                reason: format!(
                    "not discarded: the transcript is no longer session `{session_id}`"
                ),
            });
        }
        self.registry().remove(&path);
        self.inner.logs.remove(&path)
    }

    fn registry(&self) -> std::sync::MutexGuard<'_, HashMap<PathBuf, Weak<Shared>>> {
        // The map is only ever updated by single inserts and retains.
        self.inner
            .open
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }
}

impl std::fmt::Debug for TranscriptStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TranscriptStore")
            .field("config", &self.inner.config)
            .finish_non_exhaustive()
    }
}
