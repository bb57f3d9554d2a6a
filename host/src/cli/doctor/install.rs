//! The data directory: there (or creatable), writable, with room, and its
//! SQLite databases sound.

use std::path::Path;

use ctxbox_host::services::integrity;

use super::report::Finding;

/// Free space below which the data directory is a problem, bytes: engine
/// state, commits and compiled engines grow, and SQLite needs room to
/// write.
pub const MIN_FREE_BYTES: u64 = 256 * 1024 * 1024;

/// The checks of `dir`.
pub fn data_dir(dir: &Path) -> Vec<Finding> {
    let subject = dir.display().to_string();
    if !dir.exists() {
        let parent = dir.ancestors().skip(1).find(|ancestor| ancestor.exists());
        return vec![match parent {
            Some(parent) if writable(parent).is_ok() => Finding::note(
                "data-dir",
                subject,
                "does not exist yet; ctxbox creates it on first use",
                "",
            ),
            _ => Finding::problem(
                "data-dir",
                subject.clone(),
                "does not exist, and cannot be created (no writable folder above it)",
                format!(
                    "create it (`mkdir -p {subject}`) or point --data-dir (the plugins' dataDir / data_dir) at a writable folder"
                ),
            ),
        }];
    }
    let mut findings = vec![match writable(dir) {
        Ok(()) => Finding::ok("data-dir", subject.clone(), "writable"),
        Err(error) => Finding::problem(
            "data-dir",
            subject.clone(),
            format!("not writable: {error}"),
            format!(
                "give this user write access (`chown -R $(id -un) {subject}`) or use another data directory"
            ),
        ),
    }];
    findings.push(match free_bytes(dir) {
        Some(free) if free < MIN_FREE_BYTES => Finding::problem(
            "data-dir",
            "free space",
            format!("{} MiB free on its filesystem", free / (1024 * 1024)),
            format!(
                "free at least {} MiB there, or use a data directory on another filesystem",
                MIN_FREE_BYTES / (1024 * 1024)
            ),
        ),
        Some(free) => Finding::ok(
            "data-dir",
            "free space",
            format!("{} MiB free", free / (1024 * 1024)),
        ),
        None => Finding::note("data-dir", "free space", "cannot be measured here", ""),
    });
    let databases = integrity::databases(dir);
    if databases.is_empty() {
        findings.push(Finding::ok("data-dir", "databases", "none yet"));
    }
    for database in databases {
        let name = database
            .strip_prefix(dir)
            .unwrap_or(&database)
            .display()
            .to_string();
        findings.push(match integrity::quick_check(&database) {
            Ok(()) => Finding::ok("data-dir", name, "sound (SQLite quick_check)"),
            Err(error) => Finding::problem(
                "data-dir",
                name,
                error.to_string(),
                format!(
                    "stop every ctxbox using this data directory, then restore the file from a backup, or move it aside (`mv {0} {0}.damaged`): ctxbox starts it anew, and what it held (quarantines, commits or that engine's state) is lost",
                    database.display()
                ),
            ),
        });
    }
    findings
}

/// Whether a file can be made in `dir` (made and removed at once).
fn writable(dir: &Path) -> std::io::Result<()> {
    tempfile::Builder::new()
        .prefix(".ctxbox-doctor-")
        .tempfile_in(dir)
        .map(drop)
}

/// Bytes free for this user on the filesystem of `dir`.
fn free_bytes(dir: &Path) -> Option<u64> {
    use std::os::unix::ffi::OsStrExt;
    let path = std::ffi::CString::new(dir.as_os_str().as_bytes()).ok()?;
    let mut stats = std::mem::MaybeUninit::<libc::statvfs>::uninit();
    // SAFETY: `path` is a NUL-terminated string and `stats` a buffer of
    // the right type, which statvfs fills when it returns 0.
    let stats = unsafe {
        if libc::statvfs(path.as_ptr(), stats.as_mut_ptr()) != 0 {
            return None;
        }
        stats.assume_init()
    };
    #[allow(clippy::unnecessary_cast)] // the field types differ between platforms
    Some(stats.f_bavail as u64 * stats.f_frsize as u64)
}

#[cfg(test)]
mod tests {
    use super::super::report::Status;
    use super::*;

    #[test]
    fn a_sound_data_dir_passes() {
        let dir = tempfile::tempdir().expect("tempdir");
        rusqlite::Connection::open(dir.path().join("quarantine.sqlite3"))
            .and_then(|db| db.execute_batch("CREATE TABLE t (x INTEGER);"))
            .expect("database");
        let findings = data_dir(dir.path());
        assert!(
            findings.iter().all(|f| f.status != Status::Problem),
            "{findings:?}"
        );
        assert!(findings.iter().any(|f| f.subject == "quarantine.sqlite3"));
    }

    #[test]
    fn a_damaged_database_is_named_with_its_fix() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::create_dir(dir.path().join("state")).expect("state");
        let file = dir.path().join("state").join("keep-recent-0.sqlite3");
        std::fs::write(
            &file,
            b"this is not a database, it is a text file long enough",
        )
        .expect("write");
        let findings = data_dir(dir.path());
        let problem = findings
            .iter()
            .find(|f| f.status == Status::Problem)
            .expect("a problem");
        assert_eq!(problem.subject, "state/keep-recent-0.sqlite3");
        assert!(
            problem
                .fix
                .as_deref()
                .unwrap_or("")
                .contains("move it aside")
        );
    }

    #[test]
    fn a_missing_data_dir_is_a_note_when_it_can_be_created() {
        let dir = tempfile::tempdir().expect("tempdir");
        let findings = data_dir(&dir.path().join("not-yet"));
        assert_eq!(findings.len(), 1);
        assert_eq!(findings[0].status, Status::Note);
    }
}
