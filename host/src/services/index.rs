//! The rules both stores keep for engines' searchable memory
//! (`host.index-*`): what a document costs against the engine's state quota
//! ([`document_cost`]), which writes and searches are refused, how a query's
//! words are matched (long words through the full-text index, short ones by
//! an escaped `LIKE` pattern) and how a page of hits is cut. The stores
//! themselves are `index_sqlite` (FTS5, trigram tokenizer) and
//! `index_postgres` (`pg_trgm`).
//!
//! A document is keyed by (engine, scope, id): its scope is a session id, or
//! the engine's own, stored as the empty session id ([`scope_key`]).

use std::collections::HashMap;
use std::collections::hash_map::Entry;

use crate::contract::index::{
    IndexDocument, IndexHit, IndexOp, IndexPage, IndexQuery, MAX_DOCUMENT_ID_BYTES,
    MAX_DOCUMENT_METADATA_BYTES, MAX_DOCUMENT_TEXT_BYTES, check_id,
};

use super::state::{ENTRY_OVERHEAD_BYTES, Limits, StateError, StateUsage};

/// What the full-text index adds per byte of a document's text, counted
/// against the quota. Measured on the six fixtures' messages indexed ten
/// times over (7,790 documents, 7.9 MB of text, 100 per commit), the
/// embedded store's FTS5 trigram index takes 2.32 bytes per byte of text
/// and the whole database file 3.77 (with the rows, their unique index and
/// the pages FTS5's merges left free): 3 makes what the quota counts 1.08×
/// the file. PostgreSQL's `pg_trgm` index takes less (BENCHMARKS.md, "Engines'
/// searchable memory").
pub const INDEX_BYTES_PER_TEXT_BYTE: u64 = 3;

/// What one engine call's index writes may give the index to do, in bytes
/// of text ([`write_work`]): room for one document of the contract's
/// largest, so that every call's commit stays a small part of a deadline
/// (a megabyte of text of no repeating trigrams takes the embedded index
/// about two seconds on a loaded two-core machine). More is refused at the
/// put, as over a quota.
pub const MAX_CALL_INDEX_BYTES: u64 =
    (MAX_DOCUMENT_TEXT_BYTES + MAX_DOCUMENT_METADATA_BYTES + MAX_DOCUMENT_ID_BYTES + 16 * 1024)
        as u64;

/// Words shorter than this (in characters) cannot use a trigram index.
pub const MIN_INDEXED_WORD_CHARS: usize = 3;

/// What the quota counts for `document`: its id, text and metadata, the
/// full-text index's [`INDEX_BYTES_PER_TEXT_BYTE`] for each byte of text, and
/// [`ENTRY_OVERHEAD_BYTES`], like a state entry. A document is one key.
pub fn document_cost(document: &IndexDocument) -> u64 {
    let text = document.text.len() as u64;
    let metadata = document.metadata.as_ref().map_or(0, String::len) as u64;
    document.id.len() as u64
        + metadata
        + text * (1 + INDEX_BYTES_PER_TEXT_BYTE)
        + ENTRY_OVERHEAD_BYTES
}

/// What one index write gives the index to do, in bytes of text: the
/// `added` bytes of a put (nothing for a delete), the text of the document
/// it replaces or deletes (from its `replaced` cost, [`document_cost`]), and
/// [`ENTRY_OVERHEAD_BYTES`], so that many tiny writes count too.
pub fn write_work(added: u64, replaced: Option<u64>) -> u64 {
    let replaced_text = replaced.map_or(0, |cost| {
        cost.saturating_sub(ENTRY_OVERHEAD_BYTES) / (1 + INDEX_BYTES_PER_TEXT_BYTE)
    });
    ENTRY_OVERHEAD_BYTES + added + replaced_text
}

/// How a scope is stored: the session id, or `""` for the engine's own.
pub(crate) fn scope_key(session: Option<&str>) -> &str {
    session.unwrap_or("")
}

/// The session of a stored scope (`None`: the engine's own).
pub(crate) fn session_of(scope: String) -> Option<String> {
    (!scope.is_empty()).then_some(scope)
}

/// Refuses a write the stores cannot keep: a document breaking the
/// contract's limits, text with NUL (PostgreSQL cannot store it, so neither
/// store takes it), or an empty session id (it would name the engine's
/// scope).
pub(crate) fn check_op(op: &IndexOp) -> Result<(), StateError> {
    let bad = |reason: String| StateError::BadDocument { reason };
    let (session, id) = match op {
        IndexOp::Put {
            session_id,
            document,
        } => {
            document.check().map_err(bad)?;
            let texts = [Some(&document.text), document.metadata.as_ref()];
            if texts.into_iter().flatten().any(|text| text.contains('\0')) {
                return Err(bad(format!("document `{}` contains NUL", document.id)));
            }
            (session_id, &document.id)
        }
        IndexOp::Delete { session_id, id } => {
            check_id(id).map_err(bad)?;
            (session_id, id)
        }
    };
    if id.contains('\0') {
        return Err(bad("a document id cannot contain NUL".to_owned()));
    }
    check_session(session.as_deref()).map_err(bad)
}

fn check_session(session: Option<&str>) -> Result<(), String> {
    match session {
        Some("") => Err("a session id is not empty".to_owned()),
        _ => Ok(()),
    }
}

/// One call's index writes reduced to the last write of each document,
/// and what the engine uses after all of them.
#[derive(Debug)]
pub(crate) struct NetWrites<'a> {
    /// Documents to store, each once: scope ([`scope_key`]), document, cost.
    pub puts: Vec<(&'a str, &'a IndexDocument, u64)>,
    /// Stored documents to remove, each once: scope, id.
    pub deletes: Vec<(&'a str, &'a str)>,
    /// The engine's usage once they are applied.
    pub usage: StateUsage,
}

/// Where one document stands during a batch.
enum Standing<'a> {
    /// As stored (its cost), or absent.
    Stored(Option<u64>),
    /// Put by the batch.
    Put(&'a IndexDocument, u64),
    /// Deleted by the batch.
    Deleted,
}

/// The net effect of `ops` on an engine using `usage`, given what each
/// document the batch names counts for in the store now (`stored(scope,
/// id)`, asked once per document): every write counted in order, as the
/// state store counts its writes.
pub(crate) fn net_writes<'a, E>(
    ops: &'a [IndexOp],
    mut usage: StateUsage,
    mut stored: impl FnMut(&str, &str) -> Result<Option<u64>, E>,
) -> Result<NetWrites<'a>, E> {
    let mut order: Vec<(&'a str, &'a str)> = Vec::new();
    let mut standing: HashMap<(&'a str, &'a str), (Option<u64>, Standing<'a>)> = HashMap::new();
    for op in ops {
        let (session, id) = match op {
            IndexOp::Put {
                session_id,
                document,
            } => (session_id, document.id.as_str()),
            IndexOp::Delete { session_id, id } => (session_id, id.as_str()),
        };
        let key = (scope_key(session.as_deref()), id);
        let (_, now) = match standing.entry(key) {
            Entry::Occupied(entry) => entry.into_mut(),
            Entry::Vacant(entry) => {
                let cost = stored(key.0, key.1)?;
                order.push(key);
                entry.insert((cost, Standing::Stored(cost)))
            }
        };
        let current = match now {
            Standing::Stored(cost) => *cost,
            Standing::Put(_, cost) => Some(*cost),
            Standing::Deleted => None,
        };
        match op {
            IndexOp::Put { document, .. } => {
                let cost = document_cost(document);
                usage = Limits::after_write(usage, current, cost);
                *now = Standing::Put(document, cost);
            }
            IndexOp::Delete { .. } => {
                if let Some(current) = current {
                    usage = Limits::after_delete(usage, current);
                    *now = Standing::Deleted;
                }
            }
        }
    }
    let mut net = NetWrites {
        puts: Vec::new(),
        deletes: Vec::new(),
        usage,
    };
    for key in order {
        match standing.remove(&key) {
            Some((_, Standing::Put(document, cost))) => net.puts.push((key.0, document, cost)),
            Some((Some(_), Standing::Deleted)) => net.deletes.push(key),
            _ => {}
        }
    }
    Ok(net)
}

/// A search's words, split by how they are matched.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Words {
    /// Every word, lowercased, in order ([`IndexQuery::words`]).
    pub all: Vec<String>,
    /// Those of [`MIN_INDEXED_WORD_CHARS`] or more: the trigram index finds them.
    pub long: Vec<String>,
    /// The shorter ones: matched by a pattern on the rows found otherwise.
    pub short: Vec<String>,
}

/// The words of `query`, unless the query (or `session`) is refused: the
/// contract's limits, NUL, an empty session id.
pub(crate) fn check_search(session: Option<&str>, query: &IndexQuery) -> Result<Words, StateError> {
    let bad = |reason: String| StateError::BadQuery { reason };
    query.check().map_err(bad)?;
    if query.text.contains('\0') {
        return Err(bad("a query cannot contain NUL".to_owned()));
    }
    check_session(session).map_err(bad)?;
    let all = query.words();
    let (long, short) = all
        .iter()
        .cloned()
        .partition(|word| word.chars().count() >= MIN_INDEXED_WORD_CHARS);
    Ok(Words { all, long, short })
}

/// A `LIKE` pattern matching text that contains `word` (`\` escapes).
pub(crate) fn like_pattern(word: &str) -> String {
    let mut pattern = String::with_capacity(word.len() + 2);
    pattern.push('%');
    for c in word.chars() {
        if matches!(c, '\\' | '%' | '_') {
            pattern.push('\\');
        }
        pattern.push(c);
    }
    pattern.push('%');
    pattern
}

/// SQL for how densely `text` holds the (lowercased) word bound at `word`,
/// between 0 and 1: its occurrences in `lowered` (SQL for `text`
/// lowercased, which a caller may have computed once for every word),
/// saturating and normalized by the text's length in characters, `chars`
/// (SQL), as `bm25` does a term's frequency (k1 = 1.2, b = 0.75, against an
/// average of 1,000 characters). `length` is the database's function
/// counting characters. Part of both stores' ranking where the full-text
/// index gives none (PostgreSQL's computed in the host: [`density`]).
pub(crate) fn density_sql(
    text: &str,
    lowered: &str,
    chars: &str,
    word: &str,
    length: &str,
) -> String {
    format!(
        "(SELECT tf / (tf + 1.2 * (0.25 + 0.75 * ({chars}) / 1000.0)) FROM (SELECT \
         CAST({length}({text}) - {length}(replace({lowered}, {word}, '')) AS DOUBLE PRECISION) \
         / {length}({word}) AS tf) AS counted)"
    )
}

/// How densely a text holds a word it holds `occurrences` times, given the
/// text's length in characters: [`density_sql`]'s term, computed in the
/// host.
pub(crate) fn density(occurrences: usize, chars: usize) -> f64 {
    let tf = occurrences as f64;
    tf / (tf + 1.2 * (0.25 + 0.75 * chars as f64 / 1000.0))
}

/// A stored document found, before its snippet is cut.
#[derive(Debug)]
pub(crate) struct Found {
    /// Its scope as stored ([`scope_key`]).
    pub scope: String,
    /// Its id.
    pub id: String,
    /// Its text, or the passage of it the snippet is cut from.
    pub text: String,
    /// Its metadata.
    pub metadata: Option<String>,
    /// Higher is better.
    pub score: f64,
}

/// The page of `limit` hits from `found`, which holds one row more than
/// the page when another page follows.
pub(crate) fn page(found: Vec<Found>, words: &Words, limit: u32) -> IndexPage {
    let has_more = found.len() > limit as usize;
    let hits = found
        .into_iter()
        .take(limit as usize)
        .map(|found| IndexHit {
            snippet: crate::contract::index::snippet(&found.text, &words.all),
            id: found.id,
            session_id: session_of(found.scope),
            score: found.score,
            metadata: found.metadata,
        })
        .collect();
    IndexPage { hits, has_more }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::contract::index::IndexScope;

    fn query(text: &str) -> IndexQuery {
        IndexQuery {
            text: text.to_owned(),
            scope: IndexScope::Engine,
            limit: 10,
            offset: 0,
        }
    }

    #[test]
    fn words_split_at_three_characters() {
        let words = check_search(None, &query("Cache 缓存 缓存层 ab x")).expect("valid");
        assert_eq!(words.all, ["cache", "缓存", "缓存层", "ab", "x"]);
        assert_eq!(words.long, ["cache", "缓存层"]);
        assert_eq!(words.short, ["缓存", "ab", "x"]);
    }

    #[test]
    fn refuses_nul_empty_sessions_and_the_contracts_limits() {
        assert!(matches!(
            check_search(None, &query("a\0b")),
            Err(StateError::BadQuery { .. })
        ));
        assert!(matches!(
            check_search(Some(""), &query("ok")),
            Err(StateError::BadQuery { .. })
        ));
        assert!(matches!(
            check_search(None, &query("   ")),
            Err(StateError::BadQuery { .. })
        ));
        let put = |session: Option<&str>, id: &str, text: &str| IndexOp::Put {
            session_id: session.map(str::to_owned),
            document: IndexDocument {
                id: id.to_owned(),
                text: text.to_owned(),
                metadata: None,
            },
        };
        check_op(&put(Some("s"), "d", "fine \u{1} text")).expect("control characters are text");
        for bad in [
            put(None, "d", "nul \0 inside"),
            put(None, "d\0", "text"),
            put(Some(""), "d", "text"),
            put(None, "", "text"),
            IndexOp::Delete {
                session_id: None,
                id: "x".repeat(300),
            },
        ] {
            assert!(
                matches!(check_op(&bad), Err(StateError::BadDocument { .. })),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn a_batch_nets_to_the_last_write_of_each_document_counted_in_order() {
        let document = |id: &str, text: &str| IndexDocument {
            id: id.to_owned(),
            text: text.to_owned(),
            metadata: None,
        };
        let (a1, a2, b) = (
            document("a", "one"),
            document("a", "two!"),
            document("b", "x"),
        );
        let ops = [
            IndexOp::Put {
                session_id: None,
                document: a1.clone(),
            },
            IndexOp::Put {
                session_id: None,
                document: a2.clone(),
            },
            IndexOp::Delete {
                session_id: Some("s".into()),
                id: "gone".into(),
            },
            IndexOp::Put {
                session_id: Some("s".into()),
                document: b.clone(),
            },
            IndexOp::Delete {
                session_id: Some("s".into()),
                id: "b".into(),
            },
            IndexOp::Delete {
                session_id: Some("s".into()),
                id: "never".into(),
            },
        ];
        let before = StateUsage {
            bytes: 1_000,
            keys: 1,
        };
        let mut asked = Vec::new();
        let net = net_writes(&ops, before, |scope, id| {
            asked.push(format!("{scope}/{id}"));
            Ok::<_, ()>((id == "gone").then_some(100))
        })
        .expect("nets");
        assert_eq!(
            asked,
            ["/a", "s/gone", "s/b", "s/never"],
            "each document once"
        );
        assert_eq!(net.puts.len(), 1);
        assert_eq!((net.puts[0].0, net.puts[0].1), ("", &a2));
        assert_eq!(net.deletes, [("s", "gone")], "b was never stored");
        assert_eq!(
            net.usage,
            StateUsage {
                bytes: 1_000 - 100 + document_cost(&a2),
                keys: 1
            }
        );
    }

    #[test]
    fn like_patterns_escape_their_wildcards() {
        assert_eq!(like_pattern("a_b%c\\"), r"%a\_b\%c\\%");
        assert_eq!(like_pattern("缓存"), "%缓存%");
    }

    #[test]
    fn a_document_costs_its_bytes_the_index_and_the_entry_overhead() {
        let document = IndexDocument {
            id: "m1".to_owned(),
            text: "缓存".to_owned(),
            metadata: Some("{}".to_owned()),
        };
        assert_eq!(
            document_cost(&document),
            2 + 2 + 6 * (1 + INDEX_BYTES_PER_TEXT_BYTE) + ENTRY_OVERHEAD_BYTES
        );
    }
}
