//! Why a transcript operation failed. Every error names the file, and the line
//! when one is at fault.

use std::io;
use std::path::PathBuf;

/// A line of a transcript that could not be read as an entry (or, in
/// [`OpenReport::misshapen_entries`](super::OpenReport::misshapen_entries),
/// could not be read as the entry it says it is).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, serde::Serialize)]
#[error("`{}` line {line}: {reason}", path.display())]
pub struct CorruptLine {
    /// The transcript file.
    pub path: PathBuf,
    /// 1-based line number.
    pub line: usize,
    /// What is wrong with it.
    pub reason: String,
}

/// A transcript operation failed.
#[derive(Debug, thiserror::Error)]
pub enum TranscriptError {
    /// The file system refused.
    #[error("cannot {action} `{}`: {source}", path.display())]
    Io {
        /// The file involved.
        path: PathBuf,
        /// What was being done, e.g. "append to".
        action: &'static str,
        /// The I/O error.
        #[source]
        source: io::Error,
    },
    /// There is no transcript at this path.
    #[error("transcript `{}` does not exist", path.display())]
    NotFound {
        /// The path.
        path: PathBuf,
    },
    /// A new transcript was to be created where a file already exists.
    #[error("transcript `{}` already exists", path.display())]
    AlreadyExists {
        /// The path.
        path: PathBuf,
    },
    /// The session header (line 1) is unusable, so nothing else can be trusted.
    #[error("not a session transcript: {0}")]
    BadHeader(#[source] CorruptLine),
    /// The header declares a format version this store does not read.
    #[error("`{}` is session format version {found}; ctxbox reads version {supported}", path.display())]
    UnsupportedVersion {
        /// The file.
        path: PathBuf,
        /// The version found (1 when absent, as in the reference).
        found: u64,
        /// The version supported.
        supported: u64,
    },
    /// Another process holds the transcript open for writing.
    #[error("transcript `{}` is open for writing in another process", path.display())]
    Locked {
        /// The file.
        path: PathBuf,
    },
    /// The file could only be opened read-only.
    #[error("transcript `{}` is read-only", path.display())]
    ReadOnly {
        /// The file.
        path: PathBuf,
    },
    /// A message cannot be stored as given.
    #[error("cannot append to `{}`: {reason}", path.display())]
    InvalidAppend {
        /// The file.
        path: PathBuf,
        /// Why.
        reason: String,
    },
    /// An earlier write failed half-way and could not be undone; the handle
    /// refuses further writes until the transcript is reopened (which sets the
    /// partial line aside).
    #[error("transcript `{}` had a write that could not be undone; reopen it", path.display())]
    Poisoned {
        /// The file.
        path: PathBuf,
    },
    /// The transcript was rotated by a compaction: the session continues in
    /// `successor`, and appends go there.
    #[error("transcript `{}` was rotated into `{}`; append to that file instead", path.display(), successor.display())]
    Rotated {
        /// The old file.
        path: PathBuf,
        /// The file the session continues in.
        successor: PathBuf,
    },
    /// The shared store failed.
    #[error("transcript `{}`: {source}", path.display())]
    Store {
        /// The transcript.
        path: PathBuf,
        /// What the store said.
        #[source]
        source: crate::store::StoreError,
    },
    /// Another host appended to the transcript since this one read it: its
    /// appends would not follow the last entry, so they are refused.
    #[error("transcript `{}` was appended to by another host since it was opened; reopen it (is the session leased?)", path.display())]
    Conflict {
        /// The transcript.
        path: PathBuf,
    },
    /// An entry id that the transcript does not hold.
    #[error("transcript `{}` has no entry `{id}`", path.display())]
    UnknownEntry {
        /// The file.
        path: PathBuf,
        /// The id asked for.
        id: String,
    },
}

impl TranscriptError {
    /// An I/O error while doing `action` on `path`.
    pub(crate) fn io(path: impl Into<PathBuf>, action: &'static str, source: io::Error) -> Self {
        Self::Io {
            path: path.into(),
            action,
            source,
        }
    }
}
