//! The statements `ctxbox bench --only sql` measures, shared by the bench
//! probe (through the sandbox) and the host's bench (rusqlite in-process,
//! `host/src/cli/bench/sql.rs`), so both run exactly the same SQL.

/// The table, its FTS5 index (external content) and the trigger filling it.
pub const SCHEMA: &str =
    "CREATE TABLE IF NOT EXISTS rows(id INTEGER PRIMARY KEY, text TEXT NOT NULL);
CREATE VIRTUAL TABLE IF NOT EXISTS rows_fts USING fts5(text, content='rows', content_rowid='id');
CREATE TRIGGER IF NOT EXISTS rows_ai AFTER INSERT ON rows BEGIN
  INSERT INTO rows_fts(rowid, text) VALUES (new.id, new.text);
END;";

/// One row.
pub const INSERT: &str = "INSERT INTO rows(id, text) VALUES (?, ?)";

/// A point select.
pub const SELECT: &str = "SELECT text FROM rows WHERE id = ?";

/// An FTS5 match, ten best.
pub const MATCH: &str = "SELECT rowid FROM rows_fts WHERE rows_fts MATCH ? ORDER BY rank LIMIT 10";

/// Words rows are made of; each row has two of them.
const WORDS: [&str; 16] = [
    "alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet",
    "kilo", "lima", "mike", "november", "oscar", "papa",
];

/// The text of row `id` (about 100 bytes).
pub fn row_text(id: i64) -> String {
    format!(
        "row {id}: deploy release {} to host {} with the {} rollout plan and its checks",
        WORDS[id.rem_euclid(16) as usize],
        id.rem_euclid(251),
        WORDS[(id / 16).rem_euclid(16) as usize]
    )
}

/// The word match number `id` looks for.
pub fn word(id: i64) -> &'static str {
    WORDS[id.rem_euclid(16) as usize]
}
