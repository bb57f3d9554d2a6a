//! The embedded store's health on disk: every SQLite database a data
//! directory holds ([`databases`]: the quarantine, the turn commits, each
//! engine's state file under `state/`) and SQLite's own consistency check of
//! one of them ([`quick_check`]), for `ctxbox doctor`. Read-only: a check
//! never creates, migrates or repairs a file.

use std::path::{Path, PathBuf};
use std::time::Duration;

use rusqlite::{Connection, OpenFlags};

use super::state_files::STATE_DIR;

/// Most problems `quick_check` reports; a damaged file can list thousands.
const MAX_PROBLEMS: usize = 10;

/// How long a check waits for a writer (a running `ctxbox serve`) to let go.
const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// Why a database failed its check.
#[derive(Debug, thiserror::Error)]
pub enum IntegrityError {
    /// SQLite could not open or read it (not a database, unreadable, locked).
    #[error("cannot read `{}`: {source}", path.display())]
    Unreadable {
        /// The file.
        path: PathBuf,
        /// Why.
        source: rusqlite::Error,
    },
    /// It opened, and `PRAGMA quick_check` found damage.
    #[error("`{}` is damaged: {}", path.display(), problems.join("; "))]
    Damaged {
        /// The file.
        path: PathBuf,
        /// What SQLite reported, at most ten lines.
        problems: Vec<String>,
    },
}

/// The SQLite databases in `data_dir` and its `state/` folder, sorted; none
/// when the directory does not exist.
pub fn databases(data_dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    for dir in [data_dir.to_path_buf(), data_dir.join(STATE_DIR)] {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        found.extend(
            entries.flatten().map(|entry| entry.path()).filter(|path| {
                path.is_file() && path.extension().is_some_and(|ext| ext == "sqlite3")
            }),
        );
    }
    found.sort();
    found
}

/// Runs SQLite's `PRAGMA quick_check` on the database at `path`, opened
/// read-only.
pub fn quick_check(path: &Path) -> Result<(), IntegrityError> {
    let unreadable = |source| IntegrityError::Unreadable {
        path: path.to_owned(),
        source,
    };
    let connection = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(unreadable)?;
    connection.busy_timeout(BUSY_TIMEOUT).map_err(unreadable)?;
    let mut statement = connection
        .prepare(&format!("PRAGMA quick_check({MAX_PROBLEMS})"))
        .map_err(unreadable)?;
    let lines: Vec<String> = statement
        .query_map([], |row| row.get::<_, String>(0))
        .map_err(unreadable)?
        .collect::<Result<_, _>>()
        .map_err(unreadable)?;
    if lines.len() == 1 && lines[0] == "ok" {
        Ok(())
    } else {
        Err(IntegrityError::Damaged {
            path: path.to_owned(),
            problems: lines,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn database(path: &Path) {
        let connection = Connection::open(path).expect("create");
        connection
            .execute_batch(
                "CREATE TABLE t (k INTEGER PRIMARY KEY, v TEXT);
                 INSERT INTO t (v) VALUES ('one'), ('two');",
            )
            .expect("fill");
    }

    #[test]
    fn lists_the_data_dirs_and_the_state_folders_databases() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::create_dir(dir.path().join(STATE_DIR)).expect("state dir");
        database(&dir.path().join("quarantine.sqlite3"));
        database(&dir.path().join(STATE_DIR).join("keep-recent-00.sqlite3"));
        std::fs::write(dir.path().join("notes.txt"), "not a database").expect("write");
        let found = databases(dir.path());
        assert_eq!(
            found,
            vec![
                dir.path().join("quarantine.sqlite3"),
                dir.path().join(STATE_DIR).join("keep-recent-00.sqlite3"),
            ]
        );
        assert!(databases(&dir.path().join("missing")).is_empty());
    }

    #[test]
    fn a_sound_database_passes_and_a_damaged_one_is_named() {
        let dir = tempfile::tempdir().expect("tempdir");
        let sound = dir.path().join("sound.sqlite3");
        database(&sound);
        quick_check(&sound).expect("a fresh database is sound");

        let garbage = dir.path().join("garbage.sqlite3");
        std::fs::write(&garbage, vec![0x5a; 8192]).expect("write");
        let error = quick_check(&garbage).expect_err("not a database");
        assert!(error.to_string().contains("garbage.sqlite3"), "{error}");

        // A sound header with its table's page overwritten.
        let damaged = dir.path().join("damaged.sqlite3");
        database(&damaged);
        let mut bytes = std::fs::read(&damaged).expect("read");
        let page = 4096;
        assert!(bytes.len() >= 2 * page, "two pages at least");
        for byte in &mut bytes[page..2 * page] {
            *byte = 0xff;
        }
        std::fs::write(&damaged, bytes).expect("damage");
        let error = quick_check(&damaged).expect_err("damaged");
        assert!(error.to_string().contains("damaged.sqlite3"), "{error}");
    }
}
