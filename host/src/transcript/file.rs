//! The transcript file on disk: reading it whole, setting a torn last line
//! aside, durable appends, and atomic creation of new files.
//!
//! Every append is one `write` of whole lines; a crash can only leave a last
//! line without its newline, which the next open detects and moves to a side
//! file instead of merging it with the next append.

use std::fs::{self, File, OpenOptions, TryLockError};
use std::io::{self, ErrorKind, Read, Write};
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use serde::{Deserialize, Serialize};

use super::error::TranscriptError;
use super::log::{Access, Opened, TranscriptLog};
use super::wire::unix_millis;

/// When appends reach the disk.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FsyncPolicy {
    /// Every append is flushed to stable storage (`fdatasync`) before it is
    /// acknowledged: survives power loss.
    #[default]
    Always,
    /// Appends are left to the operating system's page cache: they survive a
    /// crash of the process, not of the machine.
    Never,
}

/// The last line of a file that lacked its newline when opened: the remains
/// of a write a crash cut short (or, for a read-only open, a line another
/// process is writing right now).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TornTail {
    /// The transcript file.
    pub path: PathBuf,
    /// Its 1-based line number.
    pub line: usize,
    /// Where in the file it started.
    pub offset: u64,
    /// How long it was.
    pub bytes: u64,
    /// The side file it was moved to (`None` when the transcript was opened
    /// read-only and the bytes stayed where they were, ignored).
    pub saved_to: Option<PathBuf>,
}

impl std::fmt::Display for TornTail {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "`{}` line {}: the last line is incomplete ({} bytes without a newline, an append cut short)",
            self.path.display(),
            self.line,
            self.bytes
        )?;
        match &self.saved_to {
            Some(side) => write!(f, "; it was moved to `{}`", side.display()),
            None => f.write_str("; it was ignored"),
        }
    }
}

/// An open transcript file.
#[derive(Debug)]
pub(crate) struct TranscriptFile {
    path: PathBuf,
    file: File,
    /// Bytes of complete lines (and of an unterminated header): where the
    /// next append goes.
    len: u64,
    /// The file is a header without its newline: the next append supplies it.
    needs_newline: bool,
    writable: bool,
    /// A write failed half-way and could not be rolled back.
    poisoned: bool,
    /// Appends were written without a sync since the last one.
    unsynced: bool,
}

impl TranscriptFile {
    /// Opens an existing transcript and reads it. With [`Access::ReadWrite`]
    /// (read-only all the same when the file or file system does not allow
    /// writes) the file is locked against other processes and a torn last
    /// line is moved to `<file>.torn-<ms>` and cut off the file; with
    /// [`Access::ReadOnly`] nothing is locked or changed.
    ///
    /// Line 1 is never set aside: a file without any newline is taken whole
    /// as the header (the next append starts a new line first), and if it is
    /// not one, loading it fails and the file stays as it was.
    pub fn open(path: &Path, access: Access) -> Result<Opened, TranscriptError> {
        let (mut file, writable) = match access {
            Access::ReadOnly => (
                File::open(path).map_err(|error| open_error(path, error))?,
                false,
            ),
            Access::ReadWrite => match OpenOptions::new().read(true).append(true).open(path) {
                Ok(file) => (file, true),
                Err(error)
                    if matches!(
                        error.kind(),
                        ErrorKind::PermissionDenied | ErrorKind::ReadOnlyFilesystem
                    ) =>
                {
                    let file = File::open(path).map_err(|error| open_error(path, error))?;
                    (file, false)
                }
                Err(error) => return Err(open_error(path, error)),
            },
        };
        if writable {
            match file.try_lock() {
                Ok(()) => {}
                Err(TryLockError::WouldBlock) => {
                    return Err(TranscriptError::Locked {
                        path: path.to_owned(),
                    });
                }
                Err(TryLockError::Error(error)) => {
                    return Err(TranscriptError::io(path, "lock", error));
                }
            }
        }
        let mut contents = Vec::new();
        file.read_to_end(&mut contents)
            .map_err(|error| TranscriptError::io(path, "read", error))?;
        let (complete, needs_newline) = match contents.iter().rposition(|&byte| byte == b'\n') {
            Some(newline) => (newline + 1, false),
            // No newline at all: the first line, which is never set aside.
            None => (contents.len(), !contents.is_empty()),
        };
        let mut opened = TranscriptFile {
            path: path.to_owned(),
            file,
            len: complete as u64,
            needs_newline,
            writable,
            poisoned: false,
            unsynced: false,
        };
        let torn_tail = if complete < contents.len() {
            let tail = contents.split_off(complete);
            let line = contents.iter().filter(|&&byte| byte == b'\n').count() + 1;
            Some(opened.set_aside(line, &tail)?)
        } else {
            None
        };
        Ok(Opened {
            log: Box::new(opened),
            access,
            contents,
            torn_tail,
        })
    }

    /// Writes a new transcript atomically (temporary file, fsync, rename,
    /// directory fsync), creating its directory if needed. Refuses to replace
    /// an existing file.
    pub fn create(path: &Path, contents: &[u8]) -> Result<(), TranscriptError> {
        if path.exists() {
            return Err(TranscriptError::AlreadyExists {
                path: path.to_owned(),
            });
        }
        if let Some(parent) = path
            .parent()
            .filter(|parent| !parent.as_os_str().is_empty())
        {
            fs::create_dir_all(parent)
                .map_err(|error| TranscriptError::io(parent, "create the directory", error))?;
        }
        write_atomically(path, contents)
    }

    /// Saves `tail` (file line `line`) to a new side file and cuts it off the
    /// transcript. A read-only transcript keeps it in place (it is ignored
    /// all the same).
    fn set_aside(&mut self, line: usize, tail: &[u8]) -> Result<TornTail, TranscriptError> {
        let mut torn = TornTail {
            path: self.path.clone(),
            line,
            offset: self.len,
            bytes: tail.len() as u64,
            saved_to: None,
        };
        if self.writable {
            let side = write_side_file(&self.path, tail)?;
            self.file
                .set_len(self.len)
                .and_then(|()| self.file.sync_all())
                .map_err(|error| {
                    TranscriptError::io(&self.path, "cut the torn last line off", error)
                })?;
            sync_parent(&self.path)?;
            torn.saved_to = Some(side);
        }
        Ok(torn)
    }
}

impl TranscriptLog for TranscriptFile {
    /// Whether appends are possible.
    fn is_writable(&self) -> bool {
        self.writable
    }

    /// The file's device and inode numbers, where the platform has them.
    fn identity(&self) -> Option<(u64, u64)> {
        #[cfg(unix)]
        {
            use std::os::unix::fs::MetadataExt;
            let metadata = self.file.metadata().ok()?;
            Some((metadata.dev(), metadata.ino()))
        }
        #[cfg(not(unix))]
        None
    }

    /// Appends whole lines (each ending in `\n`) in one write (preceded by
    /// the header's missing newline, if it lacks one), then syncs as
    /// `policy` says. On failure the file is cut back to where it was; if even
    /// that fails, the handle refuses further writes.
    fn append(&mut self, lines: &[u8], policy: FsyncPolicy) -> Result<(), TranscriptError> {
        if !self.writable {
            return Err(TranscriptError::ReadOnly {
                path: self.path.clone(),
            });
        }
        if self.poisoned {
            return Err(TranscriptError::Poisoned {
                path: self.path.clone(),
            });
        }
        let separated;
        let bytes = if self.needs_newline {
            separated = [&b"\n"[..], lines].concat();
            &separated[..]
        } else {
            lines
        };
        let written = self.file.write_all(bytes).and_then(|()| match policy {
            FsyncPolicy::Always => self.file.sync_data(),
            FsyncPolicy::Never => Ok(()),
        });
        match written {
            Ok(()) => {
                self.len += bytes.len() as u64;
                self.needs_newline = false;
                self.unsynced = policy == FsyncPolicy::Never;
                Ok(())
            }
            Err(error) => {
                if self.file.set_len(self.len).is_err() {
                    self.poisoned = true;
                }
                Err(TranscriptError::io(&self.path, "append to", error))
            }
        }
    }

    /// Flushes appends written without a sync to stable storage
    /// (`fdatasync`); nothing to do when there are none.
    fn sync(&mut self) -> Result<(), TranscriptError> {
        if !self.unsynced {
            return Ok(());
        }
        self.file
            .sync_data()
            .map_err(|error| TranscriptError::io(&self.path, "sync", error))?;
        self.unsynced = false;
        Ok(())
    }
}

fn open_error(path: &Path, error: io::Error) -> TranscriptError {
    if error.kind() == ErrorKind::NotFound {
        TranscriptError::NotFound {
            path: path.to_owned(),
        }
    } else {
        TranscriptError::io(path, "open", error)
    }
}

/// Writes `bytes` to a fresh `<path>.torn-<ms>[-n]` file and syncs it.
fn write_side_file(path: &Path, bytes: &[u8]) -> Result<PathBuf, TranscriptError> {
    let stamp = unix_millis(SystemTime::now());
    let mut attempt = 0u64;
    loop {
        let mut name = path.as_os_str().to_owned();
        name.push(format!(".torn-{stamp}"));
        if attempt > 0 {
            name.push(format!("-{attempt}"));
        }
        let side = PathBuf::from(name);
        match OpenOptions::new().write(true).create_new(true).open(&side) {
            Ok(mut file) => {
                file.write_all(bytes)
                    .and_then(|()| file.sync_all())
                    .map_err(|error| TranscriptError::io(&side, "write", error))?;
                return Ok(side);
            }
            Err(error) if error.kind() == ErrorKind::AlreadyExists => attempt += 1,
            Err(error) => return Err(TranscriptError::io(&side, "create", error)),
        }
    }
}

/// Temporary file in the same directory, fsync, rename over `path`, fsync of
/// the directory: after a crash `path` holds either nothing new or all of it.
pub(crate) fn write_atomically(path: &Path, contents: &[u8]) -> Result<(), TranscriptError> {
    let mut temp_name = path.as_os_str().to_owned();
    temp_name.push(format!(".tmp-{}", uuid::Uuid::new_v4().simple()));
    let temp = PathBuf::from(temp_name);
    let written = OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&temp)
        .and_then(|mut file| {
            file.write_all(contents)?;
            file.sync_all()
        })
        .and_then(|()| fs::rename(&temp, path));
    if let Err(error) = written {
        // The temporary file holds nothing anyone acknowledged.
        let _ = fs::remove_file(&temp);
        return Err(TranscriptError::io(path, "write", error));
    }
    sync_parent(path)
}

/// Makes a rename or truncation in `path`'s directory durable.
fn sync_parent(path: &Path) -> Result<(), TranscriptError> {
    #[cfg(unix)]
    {
        let parent = match path.parent() {
            Some(parent) if !parent.as_os_str().is_empty() => parent,
            _ => Path::new("."),
        };
        File::open(parent)
            .and_then(|dir| dir.sync_all())
            .map_err(|error| TranscriptError::io(parent, "sync directory", error))?;
    }
    #[cfg(not(unix))]
    let _ = path; // Directory handles cannot be synced on this platform.
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sets_a_torn_last_line_aside() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("s.jsonl");
        fs::write(&path, b"{\"a\":1}\n{\"b\":").expect("write");
        let opened = TranscriptFile::open(&path, Access::ReadWrite).expect("opens");
        assert_eq!(opened.contents, b"{\"a\":1}\n");
        let torn = opened.torn_tail.expect("torn tail detected");
        assert_eq!((torn.offset, torn.bytes), (8, 5));
        let side = torn.saved_to.expect("saved");
        assert_eq!(fs::read(side).expect("side file"), b"{\"b\":");
        assert_eq!(fs::read(&path).expect("file"), b"{\"a\":1}\n");
    }

    #[test]
    fn appends_after_the_last_complete_line() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("s.jsonl");
        TranscriptFile::create(&path, b"one\n").expect("create");
        assert!(matches!(
            TranscriptFile::create(&path, b"x\n"),
            Err(TranscriptError::AlreadyExists { .. })
        ));
        let mut opened = TranscriptFile::open(&path, Access::ReadWrite).expect("opens");
        opened
            .log
            .append(b"two\n", FsyncPolicy::Always)
            .expect("append");
        drop(opened);
        assert_eq!(fs::read(&path).expect("file"), b"one\ntwo\n");
    }

    #[test]
    fn one_writer_per_file() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("s.jsonl");
        TranscriptFile::create(&path, b"one\n").expect("create");
        let _first = TranscriptFile::open(&path, Access::ReadWrite).expect("opens");
        assert!(matches!(
            TranscriptFile::open(&path, Access::ReadWrite),
            Err(TranscriptError::Locked { .. })
        ));
    }
}
