//! An engine's searchable memory (`host.index-*` in `wit/host.wit`): the
//! documents, queries and hits, the rules they keep, and [`IndexBatch`], one
//! engine call's pending writes (held until the call answers, dropped when it
//! fails, like its state writes).
//!
//! Documents belong to the engine that wrote them (by the id it is
//! registered under) and to a scope: the engine's own, or one session's. A
//! call searches what was committed before it: its own pending writes become
//! visible to later calls once it has answered.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};

use serde::{Deserialize, Serialize};

/// Longest document id, bytes.
pub const MAX_DOCUMENT_ID_BYTES: usize = 256;
/// Longest document text, bytes.
pub const MAX_DOCUMENT_TEXT_BYTES: usize = 1024 * 1024;
/// Largest document metadata, bytes of JSON.
pub const MAX_DOCUMENT_METADATA_BYTES: usize = 4 * 1024;
/// Longest query text, bytes.
pub const MAX_QUERY_BYTES: usize = 1024;
/// Most words in a query.
pub const MAX_QUERY_WORDS: usize = 32;
/// Most hits in one page.
pub const MAX_PAGE_HITS: u32 = 100;
/// Longest snippet, characters (marks aside).
pub const SNIPPET_CHARS: usize = 300;

/// Whose documents.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum IndexScope {
    /// The engine's own, across its sessions.
    Engine,
    /// The current session's.
    Session,
}

/// A document to index.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IndexDocument {
    /// The engine's name for it, unique within its scope.
    pub id: String,
    /// The text searched.
    pub text: String,
    /// Small JSON metadata returned with hits.
    pub metadata: Option<String>,
}

impl IndexDocument {
    /// Why the document cannot be indexed, if it cannot.
    pub fn check(&self) -> Result<(), String> {
        check_id(&self.id)?;
        if self.text.len() > MAX_DOCUMENT_TEXT_BYTES {
            return Err(format!(
                "document text is {} bytes, over {MAX_DOCUMENT_TEXT_BYTES}",
                self.text.len()
            ));
        }
        if let Some(metadata) = &self.metadata {
            if metadata.len() > MAX_DOCUMENT_METADATA_BYTES {
                return Err(format!(
                    "document metadata is {} bytes, over {MAX_DOCUMENT_METADATA_BYTES}",
                    metadata.len()
                ));
            }
            serde_json::from_str::<serde_json::Value>(metadata)
                .map_err(|error| format!("document metadata is not JSON: {error}"))?;
        }
        Ok(())
    }
}

/// Why `id` is not a document id.
pub fn check_id(id: &str) -> Result<(), String> {
    if id.is_empty() || id.len() > MAX_DOCUMENT_ID_BYTES {
        Err(format!(
            "a document id must be 1 to {MAX_DOCUMENT_ID_BYTES} bytes long, not {}",
            id.len()
        ))
    } else {
        Ok(())
    }
}

/// A search.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IndexQuery {
    /// Words, separated by white space; a hit contains every one
    /// (case-insensitively, as a substring).
    pub text: String,
    /// Whose documents.
    pub scope: IndexScope,
    /// Hits per page.
    pub limit: u32,
    /// Hits to skip.
    pub offset: u32,
}

impl IndexQuery {
    /// Its words, lowercased, each once, in order.
    pub fn words(&self) -> Vec<String> {
        let mut words: Vec<String> = Vec::new();
        for word in self.text.split_whitespace() {
            let word = word.to_lowercase();
            if !words.contains(&word) {
                words.push(word);
            }
        }
        words
    }

    /// Why the query cannot run, if it cannot.
    pub fn check(&self) -> Result<(), String> {
        if self.text.len() > MAX_QUERY_BYTES {
            return Err(format!(
                "the query is {} bytes, over {MAX_QUERY_BYTES}",
                self.text.len()
            ));
        }
        let words = self.words().len();
        if words == 0 || words > MAX_QUERY_WORDS {
            return Err(format!(
                "a query has 1 to {MAX_QUERY_WORDS} words, not {words}"
            ));
        }
        if self.limit == 0 || self.limit > MAX_PAGE_HITS {
            return Err(format!(
                "a page holds 1 to {MAX_PAGE_HITS} hits, not {}",
                self.limit
            ));
        }
        Ok(())
    }
}

/// One document found.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct IndexHit {
    /// The document's id.
    pub id: String,
    /// Its session; `None` for engine documents.
    pub session_id: Option<String>,
    /// Higher is better, within one search.
    pub score: f64,
    /// The best-matching passage, words marked `[` `]`.
    pub snippet: String,
    /// Its metadata.
    pub metadata: Option<String>,
}

/// A page of hits, best first.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct IndexPage {
    /// The hits.
    pub hits: Vec<IndexHit>,
    /// Whether another page follows.
    pub has_more: bool,
}

/// One pending write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IndexOp {
    /// Index (or replace) a document.
    Put {
        /// Its session; `None` for an engine document.
        session_id: Option<String>,
        /// The document.
        document: IndexDocument,
    },
    /// Remove a document.
    Delete {
        /// Its session; `None` for an engine document.
        session_id: Option<String>,
        /// Its id.
        id: String,
    },
}

/// The pending index writes of one engine call, in order.
#[derive(Debug, Default)]
pub struct IndexBatch {
    ops: Mutex<Vec<IndexOp>>,
    /// What the queued writes give the index to do, as [`Self::record`]
    /// was told.
    work: AtomicU64,
}

impl IndexBatch {
    fn ops(&self) -> MutexGuard<'_, Vec<IndexOp>> {
        self.ops.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether the call wrote nothing.
    pub fn is_empty(&self) -> bool {
        self.ops().is_empty()
    }

    /// What the queued writes give the index to do, in bytes of text
    /// (the sum of what [`Self::record`] was told): what the host caps per
    /// call, so that one call's commit stays short.
    pub fn work(&self) -> u64 {
        self.work.load(Ordering::Relaxed)
    }

    /// Queues `op`, which gives the index `work` bytes of text to add or
    /// remove.
    pub fn record(&self, op: IndexOp, work: u64) {
        self.ops().push(op);
        self.work.fetch_add(work, Ordering::Relaxed);
    }

    /// Whether the call's own writes hold document `id` in its scope
    /// (`Some(true)`: put, `Some(false)`: deleted, `None`: not written).
    pub fn pending(&self, session_id: Option<&str>, id: &str) -> Option<bool> {
        self.ops().iter().rev().find_map(|op| match op {
            IndexOp::Put {
                session_id: scope,
                document,
            } if scope.as_deref() == session_id && document.id == id => Some(true),
            IndexOp::Delete {
                session_id: scope,
                id: deleted,
            } if scope.as_deref() == session_id && deleted == id => Some(false),
            _ => None,
        })
    }

    /// What the call's own last write of document `id` in its scope counts
    /// for, by `cost` (`Some(None)`: deleted by the call, `None`: not
    /// written by it).
    pub fn pending_cost(
        &self,
        session_id: Option<&str>,
        id: &str,
        cost: impl Fn(&IndexDocument) -> u64,
    ) -> Option<Option<u64>> {
        self.ops().iter().rev().find_map(|op| match op {
            IndexOp::Put {
                session_id: scope,
                document,
            } if scope.as_deref() == session_id && document.id == id => Some(Some(cost(document))),
            IndexOp::Delete {
                session_id: scope,
                id: deleted,
            } if scope.as_deref() == session_id && deleted == id => Some(None),
            _ => None,
        })
    }

    /// The writes in order, leaving the batch empty.
    pub fn take(&self) -> Vec<IndexOp> {
        let mut ops = self.ops();
        self.work.store(0, Ordering::Relaxed);
        std::mem::take(&mut *ops)
    }
}

/// A passage of `text` around the first match of `words` (lowercased), at
/// most [`SNIPPET_CHARS`] characters, every match marked `[` `]`, with `…`
/// where it was cut. The whole start of the text when nothing matches.
pub fn snippet(text: &str, words: &[String]) -> String {
    let lower: Vec<char> = text.chars().flat_map(char::to_lowercase).collect();
    let chars: Vec<char> = text.chars().collect();
    // Lowercasing can change lengths (rarely); fall back to no marks then.
    let aligned = lower.len() == chars.len();
    let find = |word: &str, from: usize| -> Option<usize> {
        let word: Vec<char> = word.chars().collect();
        if word.is_empty() || !aligned {
            return None;
        }
        (from..lower.len().saturating_sub(word.len() - 1))
            .find(|&at| lower[at..].starts_with(&word))
    };
    let first = words
        .iter()
        .filter_map(|word| find(word, 0))
        .min()
        .unwrap_or(0);
    let start = first.saturating_sub(SNIPPET_CHARS / 3);
    let end = (start + SNIPPET_CHARS).min(chars.len());
    let mut marks = vec![0u8; end - start];
    for word in words {
        let length = word.chars().count();
        let mut at = start;
        while let Some(found) = find(word, at).filter(|&found| found < end) {
            let stop = (found + length).min(end);
            for mark in &mut marks[found - start..stop - start] {
                *mark = 1;
            }
            at = found + length.max(1);
        }
    }
    let mut out = String::with_capacity((end - start) * 2);
    if start > 0 {
        out.push('…');
    }
    let mut marked = false;
    for (offset, c) in chars[start..end].iter().enumerate() {
        let mark = marks[offset] == 1;
        if mark && !marked {
            out.push('[');
        } else if !mark && marked {
            out.push(']');
        }
        marked = mark;
        out.push(*c);
    }
    if marked {
        out.push(']');
    }
    if end < chars.len() {
        out.push('…');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn documents_and_queries_keep_their_limits() {
        let document = IndexDocument {
            id: "m1".into(),
            text: "hello".into(),
            metadata: Some(r#"{"role":"user"}"#.into()),
        };
        document.check().expect("valid");
        assert!(
            IndexDocument {
                id: String::new(),
                ..document.clone()
            }
            .check()
            .is_err()
        );
        assert!(
            IndexDocument {
                metadata: Some("{".into()),
                ..document.clone()
            }
            .check()
            .is_err()
        );
        let query = IndexQuery {
            text: "  Hello hello  world ".into(),
            scope: IndexScope::Session,
            limit: 10,
            offset: 0,
        };
        assert_eq!(query.words(), ["hello", "world"]);
        query.check().expect("valid");
        assert!(
            IndexQuery {
                text: " ".into(),
                ..query.clone()
            }
            .check()
            .is_err()
        );
        assert!(
            IndexQuery {
                limit: 0,
                ..query.clone()
            }
            .check()
            .is_err()
        );
        assert!(
            IndexQuery {
                limit: 101,
                ..query
            }
            .check()
            .is_err()
        );
    }

    #[test]
    fn a_batch_remembers_the_last_write_of_each_document() {
        let batch = IndexBatch::default();
        let put = |id: &str| IndexOp::Put {
            session_id: Some("s".into()),
            document: IndexDocument {
                id: id.into(),
                text: "t".into(),
                metadata: None,
            },
        };
        batch.record(put("a"), 10);
        batch.record(
            IndexOp::Delete {
                session_id: Some("s".into()),
                id: "a".into(),
            },
            20,
        );
        batch.record(put("b"), 30);
        assert_eq!(batch.pending(Some("s"), "a"), Some(false));
        assert_eq!(batch.pending(Some("s"), "b"), Some(true));
        assert_eq!(batch.pending(None, "b"), None, "another scope");
        assert_eq!(batch.work(), 60, "the work of every write");
        assert_eq!(batch.take().len(), 3);
        assert!(batch.is_empty());
        assert_eq!(batch.work(), 0, "taken with the writes");
    }

    #[test]
    fn snippets_mark_every_match_near_the_first() {
        let words = vec!["cache".to_owned(), "缓存".to_owned()];
        assert_eq!(
            snippet("The Cache layer and the 缓存 layer", &words),
            "The [Cache] layer and the [缓存] layer"
        );
        let long = format!("{}needle{}", "a".repeat(1_000), "b".repeat(1_000));
        let cut = snippet(&long, &["needle".to_owned()]);
        assert!(cut.starts_with('…') && cut.ends_with('…'), "{cut}");
        assert!(cut.contains("[needle]"));
        assert!(cut.chars().count() <= SNIPPET_CHARS + 4);
        assert_eq!(
            snippet("no match here", &["zz".to_owned()]),
            "no match here"
        );
    }
}
