//! Engines' searchable memory in the embedded state database: a documents
//! table and an external-content FTS5 table over its text with the trigram
//! tokenizer (substrings of any script, Chinese and Japanese included,
//! without a word segmenter; case-insensitive), kept in sync by [`apply`].
//! Writes run inside the state store's transaction, so a call's state and
//! index writes commit together; searches ([`search`]) run on the store's
//! read connection.
//!
//! The full-text table is written by plain single-row statements after all
//! of a call's document rows, not by triggers: FTS5 flushes its pending
//! terms to disk as a new segment at every statement savepoint (a trigger,
//! an upsert), so a commit of 25 documents wrote 25 segments (and merged
//! them) instead of one.
//!
//! A search matches each word of 3 or more characters as an FTS5 phrase
//! (quoted, so query syntax in it is plain text) and ranks by `bm25`;
//! shorter words are an escaped `LIKE` on the rows found (ASCII letters
//! fold case, as in SQLite's `LIKE`). A query of short words only scans the
//! scope's documents and ranks by how densely they hold the words
//! ([`index::density_sql`]).

use rusqlite::types::Value;
use rusqlite::{Connection, OptionalExtension, Transaction, params, params_from_iter};

use super::index::{self, Found, Words, scope_key};
use super::state::{Footprint, StateUsage};
use crate::contract::index::{IndexOp, IndexQuery};

/// The index's tables, in the state database (added in schema version 3).
pub(super) const SCHEMA: &str = "
    CREATE TABLE index_documents (
        number INTEGER PRIMARY KEY,
        engine INTEGER NOT NULL,
        session TEXT NOT NULL,
        id TEXT NOT NULL,
        text TEXT NOT NULL,
        metadata TEXT,
        cost INTEGER NOT NULL,
        UNIQUE (engine, session, id)
    );
    CREATE VIRTUAL TABLE index_text USING fts5 (
        text, content = 'index_documents', content_rowid = 'number', tokenize = 'trigram'
    );
";

/// Schema version 4: the full-text table is written by [`apply`], no longer
/// by the triggers version 3 created (its content is unchanged).
pub(super) const WITHOUT_TRIGGERS: &str = "
    DROP TRIGGER IF EXISTS index_documents_added;
    DROP TRIGGER IF EXISTS index_documents_removed;
    DROP TRIGGER IF EXISTS index_documents_replaced;
";

/// Applies `ops` for engine number `engine` within `transaction`; answers
/// the engine's usage after them, given `usage` before.
pub(super) fn apply(
    transaction: &Transaction<'_>,
    engine: i64,
    ops: &[IndexOp],
    usage: StateUsage,
) -> rusqlite::Result<StateUsage> {
    let net = index::net_writes(ops, usage, |scope, id| {
        transaction
            .prepare_cached(
                "SELECT cost FROM index_documents WHERE engine = ?1 AND session = ?2 AND id = ?3",
            )?
            .query_row(params![engine, scope, id], |row| row.get::<_, i64>(0))
            .optional()
            .map(|cost| cost.map(|cost| cost.max(0) as u64))
    })?;
    // The documents table first, then the full-text table: a statement
    // with a savepoint after the first full-text write would flush it.
    let mut forgotten: Vec<(i64, String)> = Vec::new();
    let mut added: Vec<(i64, &str)> = Vec::new();
    for (scope, id) in net.deletes {
        let removed = transaction
            .prepare_cached(
                "DELETE FROM index_documents WHERE engine = ?1 AND session = ?2 AND id = ?3
                 RETURNING number, text",
            )?
            .query_row(params![engine, scope, id], |row| {
                Ok((row.get(0)?, row.get(1)?))
            })
            .optional()?;
        forgotten.extend(removed);
    }
    for (scope, document, cost) in net.puts {
        let replaced = transaction
            .prepare_cached(
                "SELECT number, text FROM index_documents
                 WHERE engine = ?1 AND session = ?2 AND id = ?3",
            )?
            .query_row(params![engine, scope, document.id], |row| {
                Ok((row.get(0)?, row.get(1)?))
            })
            .optional()?;
        forgotten.extend(replaced);
        let number: i64 = transaction
            .prepare_cached(
                "INSERT INTO index_documents (engine, session, id, text, metadata, cost)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)
                 ON CONFLICT (engine, session, id) DO UPDATE SET
                     text = excluded.text, metadata = excluded.metadata, cost = excluded.cost
                 RETURNING number",
            )?
            .query_row(
                params![
                    engine,
                    scope,
                    document.id,
                    document.text,
                    document.metadata,
                    i64::try_from(cost).unwrap_or(i64::MAX)
                ],
                |row| row.get(0),
            )?;
        added.push((number, &document.text));
    }
    // Removals before additions: a new document may take the number of one
    // deleted in the same call.
    for (number, text) in &forgotten {
        transaction
            .prepare_cached(
                "INSERT INTO index_text (index_text, rowid, text) VALUES ('delete', ?1, ?2)",
            )?
            .execute(params![number, text])?;
    }
    for (number, text) in added {
        transaction
            .prepare_cached("INSERT INTO index_text (rowid, text) VALUES (?1, ?2)")?
            .execute(params![number, text])?;
    }
    Ok(net.usage)
}

/// Fills the full-text table from every document stored: for a database
/// whose documents were copied in with plain SQL.
pub(super) fn rebuild(connection: &Connection) -> rusqlite::Result<()> {
    connection
        .execute("INSERT INTO index_text (index_text) VALUES ('rebuild')", [])
        .map(|_| ())
}

/// What `engine` (by id) stores now, and what its document `id` in
/// `session`'s scope counts for.
pub(super) fn footprint(
    connection: &Connection,
    engine: &str,
    session: Option<&str>,
    id: &str,
) -> rusqlite::Result<Footprint> {
    connection
        .prepare_cached(
            "SELECT bytes, keys,
                    (SELECT cost FROM index_documents
                     WHERE engine = number AND session = ?2 AND id = ?3)
             FROM engines WHERE id = ?1",
        )?
        .query_row(params![engine, scope_key(session), id], |row| {
            Ok(Footprint {
                usage: StateUsage {
                    bytes: row.get::<_, i64>(0)?.max(0) as u64,
                    keys: row.get::<_, i64>(1)?.max(0) as u64,
                },
                entry: row.get::<_, Option<i64>>(2)?.map(|cost| cost.max(0) as u64),
            })
        })
        .optional()
        .map(Option::unwrap_or_default)
}

/// One page of `engine`'s documents (by id) matching `words`, in
/// `session`'s scope or all of them, best first, and one more when another
/// page follows ([`index::page`] cuts it).
pub(super) fn search(
    connection: &Connection,
    engine: &str,
    session: Option<&str>,
    words: &Words,
    query: &IndexQuery,
) -> rusqlite::Result<Vec<Found>> {
    let number: Option<i64> = connection
        .prepare_cached("SELECT number FROM engines WHERE id = ?1")?
        .query_row(params![engine], |row| row.get(0))
        .optional()?;
    let Some(number) = number else {
        return Ok(Vec::new());
    };
    // ?1 engine, ?2 rows, ?3 offset, then the session, the match, the words.
    let mut values = vec![
        Value::Integer(number),
        Value::Integer(i64::from(query.limit) + 1),
        Value::Integer(i64::from(query.offset)),
    ];
    let mut filters = String::new();
    if let Some(session) = session {
        let at = bind(&mut values, session.to_owned());
        filters.push_str(&format!(" AND d.session = ?{at}"));
    }
    let candidates = if words.long.is_empty() {
        // No word the index can find: scan the scope, ranked by density.
        let mut score = Vec::new();
        for word in &words.short {
            let at = bind(&mut values, word.clone());
            score.push(index::density_sql(
                "d.text",
                "lower(d.text)",
                "length(d.text)",
                &format!("?{at}"),
                "length",
            ));
        }
        format!(
            "SELECT d.number AS number, {} AS score FROM index_documents d
             WHERE d.engine = ?1{filters}",
            score.join(" + ")
        )
    } else {
        let at = bind(&mut values, fts_match(&words.long));
        format!(
            "SELECT d.number AS number, -bm25(index_text) AS score
             FROM index_text JOIN index_documents d ON d.number = index_text.rowid
             WHERE index_text MATCH ?{at} AND d.engine = ?1{filters}"
        )
    };
    let mut likes = String::new();
    for word in &words.short {
        let at = bind(&mut values, index::like_pattern(word));
        likes.push_str(&format!(" AND d.text LIKE ?{at} ESCAPE '\\'"));
    }
    let sql = format!(
        "SELECT d.session, d.id, d.text, d.metadata, hits.score
         FROM ({candidates}{likes} ORDER BY score DESC, number LIMIT ?2 OFFSET ?3) AS hits
         JOIN index_documents d ON d.number = hits.number
         ORDER BY hits.score DESC, hits.number"
    );
    let mut statement = connection.prepare_cached(&sql)?;
    statement
        .query_map(params_from_iter(values), |row| {
            Ok(Found {
                scope: row.get(0)?,
                id: row.get(1)?,
                text: row.get(2)?,
                metadata: row.get(3)?,
                score: row.get(4)?,
            })
        })?
        .collect()
}

/// Adds `value` to the statement's parameters; answers its number.
fn bind(values: &mut Vec<Value>, value: String) -> usize {
    values.push(Value::Text(value));
    values.len()
}

/// An FTS5 query matching documents that contain every word: each one a
/// quoted string (a phrase of its trigrams), so operators, column filters
/// and wildcards in it are plain text.
fn fts_match(words: &[String]) -> String {
    words
        .iter()
        .map(|word| format!("\"{}\"", word.replace('"', "\"\"")))
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::contract::index::{IndexDocument, IndexScope};
    use crate::services::state::{CallWrites, EngineState, StateConfig, StateStore};

    fn store(config: StateConfig) -> (tempfile::TempDir, StateStore) {
        let dir = tempfile::tempdir().expect("temp dir");
        let store = StateStore::open_in(dir.path(), &config).expect("open");
        (dir, store)
    }

    fn put(id: &str, text: &str) -> IndexOp {
        IndexOp::Put {
            session_id: Some("s".to_owned()),
            document: IndexDocument {
                id: id.to_owned(),
                text: text.to_owned(),
                metadata: None,
            },
        }
    }

    fn delete(id: &str) -> IndexOp {
        IndexOp::Delete {
            session_id: Some("s".to_owned()),
            id: id.to_owned(),
        }
    }

    /// Fails unless the full-text table holds exactly its documents' text.
    fn assert_index_matches_documents(connection: &Connection) {
        connection
            .execute(
                "INSERT INTO index_text (index_text, rank) VALUES ('integrity-check', 1)",
                [],
            )
            .expect("the index matches its documents");
    }

    fn index(ops: Vec<IndexOp>) -> CallWrites {
        CallWrites {
            state: Vec::new(),
            index: ops,
        }
    }

    fn query(text: &str) -> IndexQuery {
        IndexQuery {
            text: text.to_owned(),
            scope: IndexScope::Session,
            limit: 10,
            offset: 0,
        }
    }

    #[test]
    fn match_expressions_quote_every_word() {
        assert_eq!(
            fts_match(&["near(".to_owned(), "a\"b*".to_owned(), "or".to_owned()]),
            r#""near(" "a""b*" "or""#
        );
    }

    #[test]
    fn the_full_text_index_follows_every_put_replace_and_delete() {
        let (_dir, store) = store(StateConfig::default());
        store
            .commit(
                "e",
                index(vec![put("a", "alpha one"), put("b", "beta two")]),
                None,
                None,
            )
            .expect("puts");
        store
            .commit(
                "e",
                index(vec![put("a", "alpha replaced"), delete("b")]),
                None,
                None,
            )
            .expect("replaces and deletes");
        let connection = Connection::open(store.engine_path("e")).expect("opens");
        assert_index_matches_documents(&connection);
        let rows: i64 = connection
            .query_row(
                "SELECT count(*) FROM index_text WHERE index_text MATCH 'one'",
                [],
                |row| row.get(0),
            )
            .expect("counts");
        assert_eq!(rows, 0, "the replaced text is gone from the index");
    }

    #[test]
    fn a_version_3_database_keeps_its_index_and_loses_its_triggers() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = crate::services::state_files::engine_file(&dir.path().join("state"), "e");
        std::fs::create_dir_all(path.parent().expect("folder")).expect("folder");
        {
            // Written by a host of schema version 3: the triggers fill the
            // full-text table.
            let connection = Connection::open(&path).expect("creates");
            connection
                .execute_batch(&format!(
                    "CREATE TABLE engines (number INTEGER PRIMARY KEY, id TEXT NOT NULL UNIQUE,
                         bytes INTEGER NOT NULL DEFAULT 0, keys INTEGER NOT NULL DEFAULT 0);
                     CREATE TABLE entries (engine INTEGER NOT NULL, key TEXT NOT NULL,
                         value BLOB NOT NULL, PRIMARY KEY (engine, key)) WITHOUT ROWID;
                     {SCHEMA}
                     CREATE TRIGGER index_documents_added AFTER INSERT ON index_documents BEGIN
                         INSERT INTO index_text (rowid, text) VALUES (new.number, new.text);
                     END;
                     INSERT INTO engines (number, id, bytes, keys) VALUES (1, 'e', 300, 0);
                     INSERT INTO index_documents (engine, session, id, text, metadata, cost)
                         VALUES (1, 's', 'a', 'alpha one', NULL, 150),
                                (1, 's', 'b', 'beta two', NULL, 150);
                     PRAGMA user_version = 3;"
                ))
                .expect("version 3");
        }
        let store = StateStore::open_in(dir.path(), &StateConfig::default()).expect("migrates");
        let found = |text: &str| {
            store
                .search("e", Some("s"), &query(text), None)
                .expect("searches")
                .hits
                .len()
        };
        assert_eq!(found("alpha"), 1, "the index written by the triggers stays");
        store
            .commit(
                "e",
                index(vec![
                    put("a", "alpha replaced"),
                    delete("b"),
                    put("c", "gamma three"),
                ]),
                None,
                None,
            )
            .expect("writes");
        assert_eq!(
            (
                found("one"),
                found("beta"),
                found("replaced"),
                found("gamma")
            ),
            (0, 0, 1, 1)
        );
        let connection = Connection::open(&path).expect("opens");
        let triggers: i64 = connection
            .query_row(
                "SELECT count(*) FROM sqlite_schema WHERE type = 'trigger'",
                [],
                |row| row.get(0),
            )
            .expect("counts");
        assert_eq!(triggers, 0);
        assert_index_matches_documents(&connection);
    }

    #[test]
    fn ranks_by_bm25_and_by_density_for_short_words() {
        let (_dir, store) = store(StateConfig::default());
        let long = format!("缓存 cache {}", "filler text ".repeat(200));
        store
            .commit(
                "e",
                index(vec![
                    put("long", &long),
                    put("dense", "缓存 cache 缓存 cache"),
                ]),
                None,
                None,
            )
            .expect("puts");
        for text in ["cache", "缓存"] {
            let page = store
                .search("e", Some("s"), &query(text), None)
                .expect("searches");
            let ids: Vec<&str> = page.hits.iter().map(|hit| hit.id.as_str()).collect();
            assert_eq!(ids, ["dense", "long"], "{text}");
            assert!(page.hits[0].score > page.hits[1].score, "{text}");
        }
    }

    /// Fills a store to `quota` with documents of `text(n)`; answers how
    /// many it took and the bytes on disk.
    fn fill(quota: u64, text: impl Fn(u64) -> String) -> (u64, u64) {
        let dir = tempfile::tempdir().expect("temp dir");
        let config = StateConfig {
            quota_bytes: quota,
            max_keys: u64::MAX,
        };
        let store = StateStore::open_in(dir.path(), &config).expect("open");
        let session = Some("0b1c9f9e-6c4a-4d0e-9a51-3b1f5f0c2e77".to_owned());
        let mut stored = 0u64;
        loop {
            let document = IndexDocument {
                id: format!("{stored:x}"),
                text: text(stored),
                metadata: None,
            };
            let op = IndexOp::Put {
                session_id: session.clone(),
                document,
            };
            if store.commit("e", index(vec![op]), None, None).is_err() {
                break;
            }
            stored += 1;
        }
        drop(store);
        let on_disk = crate::services::state_files::store_bytes(dir.path());
        (stored, on_disk)
    }

    #[test]
    fn documents_cannot_fill_the_disk_past_the_quota() {
        let quota = 256 * 1024;
        let limit = 4 * quota + crate::services::state::WAL_LIMIT_BYTES;
        // Empty documents: the per-entry overhead.
        let (stored, on_disk) = fill(quota, |_| String::new());
        assert!(stored > 1_000, "{stored}");
        assert!(
            on_disk <= limit,
            "{on_disk} bytes on disk for a {quota}-byte quota"
        );
        // Text of no repeating trigrams: the most index per byte.
        let (stored, on_disk) = fill(quota, |n| {
            let mut seed = n.wrapping_add(1);
            (0..512)
                .map(|_| {
                    seed = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
                    char::from(b'!' + ((seed >> 33) % 94) as u8)
                })
                .collect()
        });
        assert!(stored > 50, "{stored}");
        assert!(
            on_disk <= limit,
            "{on_disk} bytes on disk for a {quota}-byte quota"
        );
    }
}
