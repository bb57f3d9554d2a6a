//! The SQL power's limits (`[sql]` in `ctxbox.toml`, `sql.*`): what one
//! statement, one call and one answer may take. The size of an engine's
//! databases is not here: it is the engine's one state quota
//! (`state.quotaBytes`), turned into SQLite's `max_page_count` when a call
//! opens its transaction ([`page_limit`]).

use serde::{Deserialize, Serialize};

/// Limits of the SQL power (`sql.*`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase", deny_unknown_fields)]
pub struct SqlConfig {
    /// Longest statement text (or `execute-batch` text), bytes.
    pub max_statement_bytes: u32,
    /// Statements one engine call may run, across its databases.
    pub max_statements_per_call: u32,
    /// Rows one answer may hold (a query's `max-rows` may ask for fewer).
    pub max_rows: u32,
    /// Bytes one answer may hold (values and column names).
    pub max_answer_bytes: u64,
    /// The page cache of each connection, KiB (`PRAGMA cache_size`).
    pub cache_kib: u32,
    /// Temporary tables and indexes, KiB: kept in memory
    /// (`temp_store = MEMORY`) and capped here (`temp.max_page_count`).
    pub max_temp_kib: u32,
    /// Databases one engine may have (its main one and those `open(name)`
    /// creates).
    pub max_databases: u32,
    /// SQLite's memory across the whole host, MiB, past which a running
    /// statement is stopped (`limit`): the backstop for what no
    /// per-connection limit bounds (sorts and other transient storage a
    /// statement keeps in memory).
    pub max_heap_mib: u32,
}

impl Default for SqlConfig {
    fn default() -> Self {
        Self {
            max_statement_bytes: 100 * 1024,
            max_statements_per_call: 10_000,
            max_rows: 10_000,
            max_answer_bytes: 16 * 1024 * 1024,
            cache_kib: 2 * 1024,
            max_temp_kib: 16 * 1024,
            max_databases: 64,
            max_heap_mib: 256,
        }
    }
}

impl SqlConfig {
    /// Refuses a limit of zero, naming its key.
    pub fn validate(&self) -> Result<(), String> {
        let zero = [
            ("sql.maxStatementBytes", u64::from(self.max_statement_bytes)),
            (
                "sql.maxStatementsPerCall",
                u64::from(self.max_statements_per_call),
            ),
            ("sql.maxRows", u64::from(self.max_rows)),
            ("sql.maxAnswerBytes", self.max_answer_bytes),
            ("sql.cacheKib", u64::from(self.cache_kib)),
            ("sql.maxTempKib", u64::from(self.max_temp_kib)),
            ("sql.maxDatabases", u64::from(self.max_databases)),
            ("sql.maxHeapMib", u64::from(self.max_heap_mib)),
        ]
        .into_iter()
        .find(|(_, value)| *value == 0);
        match zero {
            Some((key, _)) => Err(format!("`{key}` must be at least 1")),
            None => Ok(()),
        }
    }
}

/// The `max_page_count` of a database of `page_size`-byte pages that holds
/// `pages` now, when its engine may store `quota` bytes and uses `elsewhere`
/// of them in its state, index and other databases: never below what it
/// holds (deleting must stay possible), never above SQLite's own limit.
pub(super) fn page_limit(quota: u64, elsewhere: u64, page_size: u64, pages: u64) -> u64 {
    let room = quota.saturating_sub(elsewhere) / page_size.max(1);
    room.max(pages).clamp(1, u64::from(u32::MAX - 1))
}

/// Bytes SQLite holds across the whole process.
pub(super) fn heap_used() -> i64 {
    // SAFETY: `sqlite3_memory_used` takes no arguments and only reads
    // SQLite's own thread-safe counters.
    unsafe { rusqlite::ffi::sqlite3_memory_used() }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_page_limit_is_what_the_quota_leaves_but_never_below_the_file() {
        assert_eq!(page_limit(64 * 4096, 0, 4096, 3), 64);
        assert_eq!(page_limit(64 * 4096, 60 * 4096, 4096, 3), 4);
        assert_eq!(page_limit(64 * 4096, 80 * 4096, 4096, 3), 3);
        assert_eq!(page_limit(0, 0, 4096, 0), 1);
    }

    #[test]
    fn a_zero_limit_is_named() {
        let config = SqlConfig {
            max_rows: 0,
            ..SqlConfig::default()
        };
        assert_eq!(
            config.validate().unwrap_err(),
            "`sql.maxRows` must be at least 1"
        );
        assert!(SqlConfig::default().validate().is_ok());
    }
}
