//! Where an engine's SQL databases live: a folder per engine under
//! `<data_dir>/sql/`, named like its state file (`state_files`: a readable
//! part of the id and a digest of all of it), holding `main.sqlite3` and one
//! `db-<name>.sqlite3` per `open(name)`. Names are checked before they reach
//! a path, so no name leaves the folder; the folder's bytes are what the
//! engine's quota counts for its databases.

use std::path::{Path, PathBuf};

use super::super::state_files::engine_stem;

/// Folder of the engines' SQL databases in the data directory.
pub const SQL_DIR: &str = "sql";

/// Longest database name of `open(name)`.
pub const MAX_NAME_CHARS: usize = 64;

/// The folder of `engine`'s databases in `dir` (the data directory's
/// [`SQL_DIR`]).
pub(super) fn engine_dir(dir: &Path, engine: &str) -> PathBuf {
    dir.join(engine_stem(engine))
}

/// The file of database `name` (`None`: the engine's main one) in
/// `engine_dir`, or why the name is refused.
pub(super) fn database_file(engine_dir: &Path, name: Option<&str>) -> Result<PathBuf, String> {
    let Some(name) = name else {
        return Ok(engine_dir.join("main.sqlite3"));
    };
    let valid = !name.is_empty()
        && name.chars().count() <= MAX_NAME_CHARS
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    if !valid {
        return Err(format!(
            "database name `{}` must be 1 to {MAX_NAME_CHARS} of `A-Z a-z 0-9 _ -`",
            crate::contract::text::untrusted_line(name, 80)
        ));
    }
    Ok(engine_dir.join(format!("db-{name}.sqlite3")))
}

/// Bytes the files in `engine_dir` take (databases, logs and journals), but
/// for those of the database at `except`.
pub(super) fn bytes_in(engine_dir: &Path, except: Option<&Path>) -> std::io::Result<u64> {
    let except = except.and_then(Path::file_name).map(|name| name.to_owned());
    let mut total = 0;
    let entries = match std::fs::read_dir(engine_dir) {
        Ok(entries) => entries,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(0),
        Err(error) => return Err(error),
    };
    for entry in entries {
        let entry = entry?;
        if let Some(except) = &except {
            let name = entry.file_name();
            if name
                .as_encoded_bytes()
                .starts_with(except.as_encoded_bytes())
            {
                continue;
            }
        }
        total += entry.metadata()?.len();
    }
    Ok(total)
}

/// How many databases `engine_dir` holds.
pub(super) fn databases_in(engine_dir: &Path) -> std::io::Result<usize> {
    match std::fs::read_dir(engine_dir) {
        Ok(entries) => Ok(entries
            .filter_map(Result::ok)
            .filter(|entry| entry.file_name().to_string_lossy().ends_with(".sqlite3"))
            .count()),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(0),
        Err(error) => Err(error),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_stay_inside_the_engines_folder() {
        let dir = Path::new("/data/sql/engine-0011");
        assert_eq!(database_file(dir, None).unwrap(), dir.join("main.sqlite3"));
        assert_eq!(
            database_file(dir, Some("agent-7_x")).unwrap(),
            dir.join("db-agent-7_x.sqlite3")
        );
        for bad in [
            "",
            "../other",
            "a/b",
            "a.b",
            "a b",
            "\u{202e}x",
            &"n".repeat(65),
        ] {
            let error = database_file(dir, Some(bad)).unwrap_err();
            assert!(error.contains("must be 1 to 64"), "{bad}: {error}");
        }
    }

    #[test]
    fn engines_get_distinct_folders() {
        let dir = Path::new("/data/sql");
        assert_ne!(engine_dir(dir, "a/b"), engine_dir(dir, "a_b"));
        assert_eq!(engine_dir(dir, "a/b").parent(), Some(dir));
    }
}
