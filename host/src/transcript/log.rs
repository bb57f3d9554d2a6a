//! Where transcript lines are kept: the [`TranscriptLogs`] trait, with the
//! session files in the file system as the embedded implementation
//! ([`Files`]) and PostgreSQL as the shared one (`postgres.rs`). A
//! [`Transcript`](super::Transcript) holds the parsed entries and builds the
//! context itself; a backend only stores and returns whole lines, in order.

use std::fmt::Debug;
use std::path::{Path, PathBuf};

use super::error::TranscriptError;
use super::file::{FsyncPolicy, TornTail, TranscriptFile};

/// How a transcript is opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// For appending: locked against other writers, a torn last line moved
    /// aside. Falls back to [`Access::ReadOnly`] when the backend does not
    /// allow writes.
    ReadWrite,
    /// For reading only: no lock, nothing stored changes, a torn last line
    /// is ignored (another process may be writing it right now).
    ReadOnly,
}

/// What opening a transcript found.
pub struct Opened {
    /// The open log, for appends.
    pub log: Box<dyn TranscriptLog>,
    /// How it was asked to be opened.
    pub access: Access,
    /// The complete lines, each ending in `\n` (or, for a header alone
    /// without its newline, just that).
    pub contents: Vec<u8>,
    /// A last line cut short by a crash (files only).
    pub torn_tail: Option<TornTail>,
}

/// A store of transcripts, each named by a path.
pub trait TranscriptLogs: Send + Sync + Debug {
    /// The name `path` is stored under (for files, the canonical path), or
    /// [`TranscriptError::NotFound`].
    fn resolve(&self, path: &Path) -> Result<PathBuf, TranscriptError>;

    /// Opens the transcript `name` (as [`Self::resolve`] answered it) and
    /// reads all of it.
    fn open(&self, name: &Path, access: Access) -> Result<Opened, TranscriptError>;

    /// Stores a new transcript `path` holding `contents` (whole lines),
    /// atomically: afterwards it holds all of them or does not exist.
    /// [`TranscriptError::AlreadyExists`] if it exists.
    fn create(&self, path: &Path, contents: &[u8]) -> Result<(), TranscriptError>;

    /// The first line of transcript `path`, if there is one and it is
    /// readable.
    fn header_line(&self, path: &Path) -> Option<String>;

    /// Deletes transcript `path` and every line of it;
    /// [`TranscriptError::NotFound`] if there is none.
    fn remove(&self, path: &Path) -> Result<(), TranscriptError>;
}

/// One open transcript's appends.
pub trait TranscriptLog: Send + Debug {
    /// Whether appends are possible.
    fn is_writable(&self) -> bool;

    /// Numbers that change when the transcript is replaced by another of the
    /// same name (for delta cursors).
    fn identity(&self) -> Option<(u64, u64)>;

    /// Appends whole lines (each ending in `\n`) after the last, all or
    /// nothing, durable per `policy` when this returns.
    fn append(&mut self, lines: &[u8], policy: FsyncPolicy) -> Result<(), TranscriptError>;

    /// Makes appends written with [`FsyncPolicy::Never`] durable.
    fn sync(&mut self) -> Result<(), TranscriptError>;
}

/// Session files in the file system (the embedded store).
#[derive(Debug, Clone, Copy, Default)]
pub struct Files;

impl TranscriptLogs for Files {
    fn resolve(&self, path: &Path) -> Result<PathBuf, TranscriptError> {
        path.canonicalize().map_err(|error| {
            if error.kind() == std::io::ErrorKind::NotFound {
                TranscriptError::NotFound {
                    path: path.to_owned(),
                }
            } else {
                TranscriptError::io(path, "resolve", error)
            }
        })
    }

    fn open(&self, name: &Path, access: Access) -> Result<Opened, TranscriptError> {
        TranscriptFile::open(name, access)
    }

    fn create(&self, path: &Path, contents: &[u8]) -> Result<(), TranscriptError> {
        TranscriptFile::create(path, contents)
    }

    fn header_line(&self, path: &Path) -> Option<String> {
        use std::io::BufRead;
        let file = std::fs::File::open(path).ok()?;
        let mut first = String::new();
        std::io::BufReader::new(file).read_line(&mut first).ok()?;
        Some(first)
    }

    fn remove(&self, path: &Path) -> Result<(), TranscriptError> {
        std::fs::remove_file(path).map_err(|error| {
            if error.kind() == std::io::ErrorKind::NotFound {
                TranscriptError::NotFound {
                    path: path.to_owned(),
                }
            } else {
                TranscriptError::io(path, "remove", error)
            }
        })
    }
}
