//! What the engine's logic needs from outside: a key-value store, the
//! host's summarizing services, and a searchable index of the session's
//! messages. The wasm build wires them to the host ([`crate::guest`]);
//! native tests and benches plug in their own.

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;

use ctxbox_guest::{EngineError, HostError, IndexHit, IndexPage, MessageEntry};

/// A durable key-value store: the host's `state-*` store in wasm.
///
/// Methods take `&self`: a store is a handle to data that lives elsewhere.
pub trait Store {
    /// The value under `key`, if any.
    fn get(&self, key: &str) -> Result<Option<Vec<u8>>, EngineError>;

    /// Stores `value` under `key`, atomically.
    fn set(&self, key: &str, value: &[u8]) -> Result<(), EngineError>;
}

/// The host services the engine uses.
pub trait Services {
    /// Summarizes `text` following `instructions`, in at most `max_tokens`
    /// tokens.
    fn summarize(
        &self,
        text: &str,
        instructions: &str,
        max_tokens: u32,
    ) -> Result<String, HostError>;

    /// The host's token estimate for `entries`.
    fn estimate_tokens(&self, entries: &[MessageEntry]) -> u64;

    /// Tells the host a long compaction is making progress.
    fn report_progress(&self);

    /// Whether the caller has given up on the current call.
    fn aborted(&self) -> bool;

    /// The index of the sessions' messages.
    fn recall(&self) -> &dyn Recall;
}

/// A full-text index of one engine's session documents: the host's
/// `index-*` in wasm (session scope).
pub trait Recall {
    /// Indexes (or replaces) document `id` of session `session_id`;
    /// answers [`Indexed::Full`] when the host takes no more documents in
    /// this call (its per-call cap, or the engine's quota).
    fn put(
        &self,
        session_id: &str,
        id: &str,
        text: &str,
        metadata: &str,
    ) -> Result<Indexed, EngineError>;

    /// Session `session_id`'s documents containing every word of `query`,
    /// best first.
    fn search(
        &self,
        session_id: &str,
        query: &str,
        limit: u32,
        offset: u32,
    ) -> Result<IndexPage, EngineError>;
}

/// Whether a document was indexed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Indexed {
    /// It was (or the host keeps no index: nothing to do).
    Done,
    /// The host takes no more documents in this call: the rest wait for a
    /// later one.
    Full,
}

/// A [`Recall`] in memory (case-insensitive substring match, most matches
/// first), for native tests and benches.
#[derive(Debug, Default, Clone)]
pub struct MemoryRecall {
    /// (session, id) → (text, metadata).
    documents: RefCell<BTreeMap<(String, String), (String, String)>>,
    /// Documents taken until the next [`Self::limit_calls`] (`None`: no
    /// limit), like a host's per-call cap.
    call_allowance: Cell<Option<u32>>,
}

impl MemoryRecall {
    /// Documents indexed, in all sessions.
    pub fn len(&self) -> usize {
        self.documents.borrow().len()
    }

    /// Whether nothing is indexed.
    pub fn is_empty(&self) -> bool {
        self.documents.borrow().is_empty()
    }

    /// Takes at most `documents` more documents (`None`: any number) until
    /// called again: a host's per-call cap, for tests.
    pub fn limit_calls(&self, documents: Option<u32>) {
        self.call_allowance.set(documents);
    }
}

impl Recall for MemoryRecall {
    fn put(
        &self,
        session_id: &str,
        id: &str,
        text: &str,
        metadata: &str,
    ) -> Result<Indexed, EngineError> {
        if let Some(left) = self.call_allowance.get() {
            if left == 0 {
                return Ok(Indexed::Full);
            }
            self.call_allowance.set(Some(left - 1));
        }
        self.documents.borrow_mut().insert(
            (session_id.to_owned(), id.to_owned()),
            (text.to_owned(), metadata.to_owned()),
        );
        Ok(Indexed::Done)
    }

    fn search(
        &self,
        session_id: &str,
        query: &str,
        limit: u32,
        offset: u32,
    ) -> Result<IndexPage, EngineError> {
        let words: Vec<String> = query.split_whitespace().map(str::to_lowercase).collect();
        let mut hits: Vec<IndexHit> = self
            .documents
            .borrow()
            .iter()
            .filter(|((session, _), _)| session == session_id)
            .filter_map(|((_, id), (text, metadata))| {
                let lower = text.to_lowercase();
                let score: usize = words
                    .iter()
                    .map(|word| lower.matches(word.as_str()).count())
                    .sum();
                words
                    .iter()
                    .all(|word| lower.contains(word.as_str()))
                    .then(|| IndexHit {
                        id: id.clone(),
                        session_id: Some(session_id.to_owned()),
                        score: score as f64,
                        snippet: text.chars().take(300).collect(),
                        metadata: Some(metadata.clone()),
                    })
            })
            .collect();
        hits.sort_by(|a, b| b.score.total_cmp(&a.score));
        let start = (offset as usize).min(hits.len());
        let end = (start + limit as usize).min(hits.len());
        Ok(IndexPage {
            has_more: end < hits.len(),
            hits: hits.drain(start..end).collect(),
        })
    }
}

/// A [`Store`] in memory, for native tests and benches.
#[derive(Debug, Default, Clone)]
pub struct MemoryStore {
    entries: RefCell<BTreeMap<String, Vec<u8>>>,
}

impl MemoryStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    /// Every key and value, in key order.
    pub fn snapshot(&self) -> BTreeMap<String, Vec<u8>> {
        self.entries.borrow().clone()
    }
}

impl Store for MemoryStore {
    fn get(&self, key: &str) -> Result<Option<Vec<u8>>, EngineError> {
        Ok(self.entries.borrow().get(key).cloned())
    }

    fn set(&self, key: &str, value: &[u8]) -> Result<(), EngineError> {
        self.entries
            .borrow_mut()
            .insert(key.to_owned(), value.to_vec());
        Ok(())
    }
}
