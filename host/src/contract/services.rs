//! Host services behind the contract's richer imports (`delegate-compaction`,
//! `summarize`, `read-transcript-delta`, `state-*`, `complete`, `index-*`).
//!
//! The sandbox forwards those imports to a [`HostServices`] implementation.
//! Every method has a default answering [`ServiceError::Unavailable`], so a
//! host that offers none of them ([`NoServices`]) still runs every engine that
//! does not need them, and engines that do get a clear error.
//! [`MemoryServices`] keeps state and an index in memory and answers
//! summaries, completions and delegated compactions without any work: for
//! tests, benches, the conformance checker and hosts that want an engine's
//! logic without the real services.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Instant;

use async_trait::async_trait;
use tokio_util::sync::CancellationToken;

use crate::contract::completion::{Completion, CompletionRequest};
use crate::contract::history::History;
use crate::contract::index::{
    IndexBatch, IndexDocument, IndexHit, IndexPage, IndexQuery, IndexScope, snippet,
};
use crate::contract::state_batch::StateBatch;
use crate::contract::types::{CompactParams, CompactResult, MessageEntry, SessionRef};

/// Why a host service refused or failed (the WIT `host-error`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ServiceError {
    /// The service does not exist in this host.
    #[error("{0} is not available in this host")]
    Unavailable(&'static str),
    /// A malformed or out-of-range argument.
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// The engine's storage quota would be exceeded.
    #[error("quota exceeded: {0}")]
    QuotaExceeded(String),
    /// Cancelled or out of time.
    #[error("aborted: {0}")]
    Aborted(String),
    /// The service failed.
    #[error("{0}")]
    Failed(String),
    /// The host itself failed doing the engine's work (its own database,
    /// disk or descriptors): never the engine's failure. The engine sees
    /// `failed`; a call that then fails, or whose writes cannot be
    /// committed for it, is the host's fault
    /// ([`FailureKind::HostFault`](super::failure::FailureKind::HostFault)).
    #[error("host failure: {0}")]
    HostFault(String),
    /// A write refused because another host holds a newer lease on the
    /// session ([`WriteFence`](super::engine::WriteFence)).
    #[error("lease lost: {0}")]
    LeaseLost(String),
}

/// A page of the transcript after a cursor (the WIT `transcript-delta` and
/// `transcript-read`).
#[derive(Debug, Clone, PartialEq)]
pub enum TranscriptDelta {
    /// Appended entries and the next cursor.
    Page {
        /// Cursor for the next read.
        cursor: String,
        /// The entries, in order.
        entries: Vec<MessageEntry>,
        /// Whether more are ready now.
        has_more: bool,
        /// With [`OversizedEntry::AskForBudget`], when the page is empty
        /// because the next entry is larger than `max_bytes`: its size.
        required_bytes: Option<u64>,
        /// The bytes `entries` measure (their lines in the transcript).
        serialized_bytes: u64,
    },
    /// The cursor no longer applies; restart from `cursor`.
    Reset {
        /// Cursor to restart from.
        cursor: String,
        /// Why.
        reason: String,
    },
    /// The transcript cannot be read now (the host's disk or shared store
    /// failed); the cursor the engine holds still applies.
    Unavailable {
        /// `storage_unavailable: ` and what failed.
        reason: String,
    },
    /// The session has no transcript.
    Missing,
}

/// What a transcript page does when its next entry alone is larger than the
/// bytes asked for (never more than the page cap: such an entry is skipped
/// with a reset either way).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OversizedEntry {
    /// Delivers it alone on its page (`read-transcript-delta`).
    DeliverAlone,
    /// Delivers an empty page whose `required_bytes` is the entry's size, so
    /// the engine can ask again with more (`read-transcript-page`, the
    /// reference's `requiredBytes`).
    AskForBudget,
}

/// What a service call knows about the engine call it serves.
#[derive(Debug, Clone, Copy)]
pub struct ServiceCall<'a> {
    /// The id the calling engine is known by: the id it was registered under
    /// (or, outside a registry, the id its `info` declares). State is private
    /// per id.
    pub engine_id: &'a str,
    /// The session of the engine call.
    pub session: Option<&'a SessionRef>,
    /// The history passed to the engine call, if any.
    pub history: Option<&'a History>,
    /// When the service must be done: the engine call's deadline less its
    /// deadline notice, so the engine has the notice to answer in.
    pub deadline: Instant,
    /// Cancelled when the engine call's caller gives up: long services
    /// (compaction, summarizing) stop early.
    pub abort: &'a CancellationToken,
    /// The engine call's state writes, pending until it answers.
    pub state: &'a StateBatch,
    /// The engine call's index writes, pending until it answers.
    pub index: &'a IndexBatch,
    /// What the engine call has used of its per-call budgets.
    pub usage: &'a CallUsage,
    /// The embedding host's id for the request the engine call serves.
    pub request_id: Option<&'a str>,
    /// The embedding host's client the engine call serves
    /// ([`CallOptions::client`](super::engine::CallOptions::client)).
    pub client: Option<u64>,
    /// Where transcript reads stop: the current turn's first entry
    /// ([`CallOptions::transcript_fence`](super::engine::CallOptions::transcript_fence)).
    pub transcript_fence: Option<&'a str>,
    /// The lease the call's writes are fenced by, in a shared store.
    pub write_fence: Option<&'a super::engine::WriteFence>,
}

impl ServiceCall<'_> {
    /// The session id documents of `scope` belong to: `None` for the
    /// engine's own; for a session's, the call's session (an error during a
    /// call about none).
    pub fn index_owner(&self, scope: IndexScope) -> Result<Option<&str>, ServiceError> {
        match scope {
            IndexScope::Engine => Ok(None),
            IndexScope::Session => self
                .session
                .map(|session| Some(session.session_id.as_str()))
                .ok_or_else(|| {
                    ServiceError::InvalidArgument(
                        "the session scope needs a call about a session".into(),
                    )
                }),
        }
    }
}

/// What a [`ServiceCall`] borrows, owned: for hosts and tests that call
/// services outside a sandbox (the sandbox keeps these in its call state).
#[derive(Debug, Default)]
pub struct CallScratch {
    /// The call's pending state writes.
    pub state: StateBatch,
    /// The call's pending index writes.
    pub index: IndexBatch,
    /// What the call used of its budgets.
    pub usage: CallUsage,
    /// Cancelled when the caller gives up.
    pub abort: CancellationToken,
}

impl CallScratch {
    /// A service call of engine `engine_id` about `session`, due by
    /// `deadline`.
    pub fn call<'a>(
        &'a self,
        engine_id: &'a str,
        session: Option<&'a SessionRef>,
        deadline: Instant,
    ) -> ServiceCall<'a> {
        ServiceCall {
            engine_id,
            session,
            history: None,
            deadline,
            abort: &self.abort,
            state: &self.state,
            index: &self.index,
            usage: &self.usage,
            request_id: None,
            client: None,
            transcript_fence: None,
            write_fence: None,
        }
    }
}

/// What one engine call has used of the budgets the host gives each call.
#[derive(Debug, Default)]
pub struct CallUsage {
    completions: AtomicU32,
    completion_tokens: AtomicU64,
}

impl CallUsage {
    /// Completions asked for during the call.
    pub fn completions(&self) -> u32 {
        self.completions.load(Ordering::Relaxed)
    }

    /// Tokens (in and out) those completions took.
    pub fn completion_tokens(&self) -> u64 {
        self.completion_tokens.load(Ordering::Relaxed)
    }

    /// Counts a completion asked for (before it is made).
    pub fn count_completion(&self) -> u32 {
        self.completions.fetch_add(1, Ordering::Relaxed) + 1
    }

    /// Counts tokens a completion took.
    pub fn add_completion_tokens(&self, tokens: u64) {
        self.completion_tokens.fetch_add(tokens, Ordering::Relaxed);
    }
}

/// Reports progress of a long service operation (re-arms the compaction
/// watchdog).
pub trait ProgressSink: Send + Sync {
    /// One stage of work completed.
    fn progress(&self);
}

/// The services a host offers engines. All methods default to `Unavailable`
/// (and the notification to nothing).
#[async_trait]
pub trait HostServices: Send + Sync {
    /// The engine called `report-progress` (the watchdog is re-armed by the
    /// sandbox itself; this only lets a host observe it).
    fn progress_reported(&self, _call: ServiceCall<'_>) {}

    /// Native compaction of the calling session.
    async fn delegate_compaction(
        &self,
        _call: ServiceCall<'_>,
        _params: &CompactParams,
        _progress: &dyn ProgressSink,
    ) -> Result<CompactResult, ServiceError> {
        Err(ServiceError::Unavailable("delegate-compaction"))
    }

    /// Summarizes text.
    async fn summarize(
        &self,
        _call: ServiceCall<'_>,
        _text: &str,
        _instructions: Option<&str>,
        _max_tokens: u32,
    ) -> Result<String, ServiceError> {
        Err(ServiceError::Unavailable("summarize"))
    }

    /// Reads the transcript after a cursor.
    async fn read_transcript_delta(
        &self,
        _call: ServiceCall<'_>,
        _cursor: Option<&str>,
        _max_messages: u32,
        _max_bytes: u64,
        _oversized: OversizedEntry,
    ) -> Result<TranscriptDelta, ServiceError> {
        Err(ServiceError::Unavailable("read-transcript-delta"))
    }

    /// Reads a key of the engine's store.
    async fn state_get(
        &self,
        _call: ServiceCall<'_>,
        _key: &str,
    ) -> Result<Option<Vec<u8>>, ServiceError> {
        Err(ServiceError::Unavailable("state-get"))
    }

    /// Writes a key of the engine's store.
    async fn state_set(
        &self,
        _call: ServiceCall<'_>,
        _key: &str,
        _value: &[u8],
    ) -> Result<(), ServiceError> {
        Err(ServiceError::Unavailable("state-set"))
    }

    /// Deletes a key of the engine's store.
    async fn state_delete(&self, _call: ServiceCall<'_>, _key: &str) -> Result<bool, ServiceError> {
        Err(ServiceError::Unavailable("state-delete"))
    }

    /// Lists keys of the engine's store under a prefix.
    async fn state_scan(
        &self,
        _call: ServiceCall<'_>,
        _prefix: &str,
        _start_after: Option<&str>,
        _limit: u32,
    ) -> Result<Vec<(String, Vec<u8>)>, ServiceError> {
        Err(ServiceError::Unavailable("state-scan"))
    }

    /// Asks the embedding host's model for a completion, within the
    /// call's budgets (`call.usage`).
    async fn complete(
        &self,
        _call: ServiceCall<'_>,
        _request: &CompletionRequest,
    ) -> Result<Completion, ServiceError> {
        Err(ServiceError::Unavailable("complete"))
    }

    /// Indexes a document of `scope` (pending in `call.index`).
    async fn index_put(
        &self,
        _call: ServiceCall<'_>,
        _scope: IndexScope,
        _document: IndexDocument,
    ) -> Result<(), ServiceError> {
        Err(ServiceError::Unavailable("index-put"))
    }

    /// Removes a document of `scope`; answers whether it existed.
    async fn index_delete(
        &self,
        _call: ServiceCall<'_>,
        _scope: IndexScope,
        _id: &str,
    ) -> Result<bool, ServiceError> {
        Err(ServiceError::Unavailable("index-delete"))
    }

    /// Searches the engine's documents.
    async fn index_search(
        &self,
        _call: ServiceCall<'_>,
        _query: &IndexQuery,
    ) -> Result<IndexPage, ServiceError> {
        Err(ServiceError::Unavailable("index-search"))
    }

    /// The engine call answered: makes the state and index writes it left
    /// pending in `call.state` and `call.index` durable, all or none, before
    /// its answer is used. A failed call is never committed; its batches are
    /// dropped. By default there is nothing to commit (a host that writes at
    /// once).
    async fn commit_state(&self, _call: ServiceCall<'_>) -> Result<(), ServiceError> {
        Ok(())
    }
}

/// A host that offers no services: every call answers `Unavailable`.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoServices;

impl HostServices for NoServices {}

/// A document's key in [`MemoryServices`]: (engine, session or `None`, id).
type DocumentKey = (String, Option<String>, String);

/// Host services in memory, with no cost of their own: a state store and an
/// index per engine id, a summarizer that answers `summary N of M
/// characters` at once, a model that answers `completion N: …` with the
/// start of the request's last message, and a delegated compaction that
/// answers a fixed result (or is unavailable). State and index writes take
/// effect at once, not per call; a search matches every word as a
/// case-insensitive substring, best hits being those with the most matches.
/// It counts what it was asked.
#[derive(Debug, Default)]
pub struct MemoryServices {
    state: Mutex<BTreeMap<(String, String), Vec<u8>>>,
    /// Documents by key.
    documents: Mutex<BTreeMap<DocumentKey, IndexDocument>>,
    compaction: Option<CompactResult>,
    summaries: AtomicU32,
    delegated: AtomicU32,
    completions: AtomicU32,
}

impl MemoryServices {
    /// Services whose `delegate-compaction` answers `result`.
    pub fn with_compaction(result: CompactResult) -> Self {
        Self {
            compaction: Some(result),
            ..Self::default()
        }
    }

    /// How many summaries were asked for.
    pub fn summaries(&self) -> u32 {
        self.summaries.load(Ordering::SeqCst)
    }

    /// How many compactions were delegated.
    pub fn delegated(&self) -> u32 {
        self.delegated.load(Ordering::SeqCst)
    }

    /// How many completions were asked for.
    pub fn completions(&self) -> u32 {
        self.completions.load(Ordering::SeqCst)
    }

    fn documents(&self) -> MutexGuard<'_, BTreeMap<DocumentKey, IndexDocument>> {
        self.documents
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// The ids of the engines that wrote state, each once.
    pub fn state_owners(&self) -> Vec<String> {
        let mut owners: Vec<String> = self.state().keys().map(|(id, _)| id.clone()).collect();
        owners.dedup();
        owners
    }

    fn state(&self) -> MutexGuard<'_, BTreeMap<(String, String), Vec<u8>>> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn key(call: ServiceCall<'_>, key: &str) -> (String, String) {
        (call.engine_id.to_owned(), key.to_owned())
    }
}

#[async_trait]
impl HostServices for MemoryServices {
    async fn delegate_compaction(
        &self,
        _call: ServiceCall<'_>,
        _params: &CompactParams,
        _progress: &dyn ProgressSink,
    ) -> Result<CompactResult, ServiceError> {
        self.delegated.fetch_add(1, Ordering::SeqCst);
        self.compaction
            .clone()
            .ok_or(ServiceError::Unavailable("delegate-compaction"))
    }

    async fn summarize(
        &self,
        _call: ServiceCall<'_>,
        text: &str,
        _instructions: Option<&str>,
        _max_tokens: u32,
    ) -> Result<String, ServiceError> {
        let n = self.summaries.fetch_add(1, Ordering::SeqCst) + 1;
        Ok(format!("summary {n} of {} characters", text.len()))
    }

    async fn state_get(
        &self,
        call: ServiceCall<'_>,
        key: &str,
    ) -> Result<Option<Vec<u8>>, ServiceError> {
        Ok(self.state().get(&Self::key(call, key)).cloned())
    }

    async fn state_set(
        &self,
        call: ServiceCall<'_>,
        key: &str,
        value: &[u8],
    ) -> Result<(), ServiceError> {
        self.state().insert(Self::key(call, key), value.to_vec());
        Ok(())
    }

    async fn state_delete(&self, call: ServiceCall<'_>, key: &str) -> Result<bool, ServiceError> {
        Ok(self.state().remove(&Self::key(call, key)).is_some())
    }

    async fn state_scan(
        &self,
        call: ServiceCall<'_>,
        prefix: &str,
        start_after: Option<&str>,
        limit: u32,
    ) -> Result<Vec<(String, Vec<u8>)>, ServiceError> {
        let engine = call.engine_id.to_owned();
        let from = (engine.clone(), start_after.unwrap_or(prefix).to_owned());
        Ok(self
            .state()
            .range(from..)
            .filter(|((_, key), _)| Some(key.as_str()) != start_after)
            .take_while(|((owner, key), _)| *owner == engine && key.starts_with(prefix))
            .take(limit as usize)
            .map(|((_, key), value)| (key.clone(), value.clone()))
            .collect())
    }

    async fn complete(
        &self,
        call: ServiceCall<'_>,
        request: &CompletionRequest,
    ) -> Result<Completion, ServiceError> {
        request.check().map_err(ServiceError::InvalidArgument)?;
        call.usage.count_completion();
        let n = self.completions.fetch_add(1, Ordering::SeqCst) + 1;
        let last = request.messages.last().map_or("", |message| &message.text);
        let text = format!("completion {n}: {}", crate::contract::text::clip(last, 200));
        let input_tokens = crate::contract::tokens::estimate_text(&request.text());
        let output_tokens = crate::contract::tokens::estimate_text(&text);
        call.usage
            .add_completion_tokens(input_tokens + output_tokens);
        Ok(Completion {
            text,
            input_tokens,
            output_tokens,
            model: Some("memory".into()),
        })
    }

    async fn index_put(
        &self,
        call: ServiceCall<'_>,
        scope: IndexScope,
        document: IndexDocument,
    ) -> Result<(), ServiceError> {
        document.check().map_err(ServiceError::InvalidArgument)?;
        let owner = call.index_owner(scope)?.map(str::to_owned);
        self.documents().insert(
            (call.engine_id.to_owned(), owner, document.id.clone()),
            document,
        );
        Ok(())
    }

    async fn index_delete(
        &self,
        call: ServiceCall<'_>,
        scope: IndexScope,
        id: &str,
    ) -> Result<bool, ServiceError> {
        let owner = call.index_owner(scope)?.map(str::to_owned);
        Ok(self
            .documents()
            .remove(&(call.engine_id.to_owned(), owner, id.to_owned()))
            .is_some())
    }

    async fn index_search(
        &self,
        call: ServiceCall<'_>,
        query: &IndexQuery,
    ) -> Result<IndexPage, ServiceError> {
        query.check().map_err(ServiceError::InvalidArgument)?;
        let owner = call.index_owner(query.scope)?;
        let words = query.words();
        let mut hits: Vec<IndexHit> = self
            .documents()
            .iter()
            .filter(|((engine, session, _), _)| {
                engine == call.engine_id && (owner.is_none() || session.as_deref() == owner)
            })
            .filter_map(|((_, session, _), document)| {
                let text = document.text.to_lowercase();
                let matches: usize = words
                    .iter()
                    .map(|word| text.matches(word.as_str()).count())
                    .sum();
                words
                    .iter()
                    .all(|word| text.contains(word.as_str()))
                    .then(|| IndexHit {
                        id: document.id.clone(),
                        session_id: session.clone(),
                        score: matches as f64,
                        snippet: snippet(&document.text, &words),
                        metadata: document.metadata.clone(),
                    })
            })
            .collect();
        hits.sort_by(|a, b| b.score.total_cmp(&a.score));
        let start = (query.offset as usize).min(hits.len());
        let end = (start + query.limit as usize).min(hits.len());
        Ok(IndexPage {
            has_more: end < hits.len(),
            hits: hits.drain(start..end).collect(),
        })
    }
}
