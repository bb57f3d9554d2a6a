//! The host the checker runs engines against: the real services (native
//! compaction, summarizer, transcripts, state store) with what a check needs
//! on top: every progress report is timestamped, the summarizer and the
//! model can be paced (each summary or completion takes a set time, like a
//! model would) so that a compaction
//! lasts long enough to need progress and an abort lands in the middle of
//! it (the real `summarize` returns as soon as the caller aborts, so an
//! engine waiting on it is never blamed for the host's wait).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use async_trait::async_trait;

use crate::contract::completion::{Completion, CompletionRequest};
use crate::contract::index::{IndexDocument, IndexPage, IndexQuery, IndexScope};
use crate::contract::services::{
    HostServices, OversizedEntry, ProgressSink, ServiceCall, ServiceError, TranscriptDelta,
};
use crate::contract::types::{CompactParams, CompactResult};
use crate::provider::completion::{CompletionContext, CompletionError, ModelCompletions};
use crate::services::completions::ExtractiveCompletions;
use crate::services::native::NativeServices;
use crate::services::summarize::{
    ExtractiveSummarizer, SummarizeError, Summarizer, SummaryRequest,
};

/// How long each summary takes; zero: as long as the extractive summarizer
/// needs (a few microseconds).
#[derive(Debug, Default)]
pub(crate) struct Pace(AtomicU64);

impl Pace {
    /// Each summary from now on takes `pace`.
    pub(crate) fn set(&self, pace: Duration) {
        let millis = u64::try_from(pace.as_millis()).unwrap_or(u64::MAX);
        self.0.store(millis, Ordering::Relaxed);
    }

    fn get(&self) -> Duration {
        Duration::from_millis(self.0.load(Ordering::Relaxed))
    }
}

/// The extractive summarizer, slowed to the checker's [`Pace`] (never past
/// a request's deadline).
pub(crate) struct PacedSummarizer {
    pace: Arc<Pace>,
}

impl PacedSummarizer {
    pub(crate) fn new(pace: Arc<Pace>) -> Self {
        Self { pace }
    }
}

#[async_trait]
impl Summarizer for PacedSummarizer {
    fn id(&self) -> &str {
        "extractive-paced"
    }

    async fn summarize(&self, request: SummaryRequest) -> Result<String, SummarizeError> {
        let pace = self.pace.get();
        if !pace.is_zero() {
            let until = (Instant::now() + pace).min(request.deadline);
            tokio::time::sleep_until(until.into()).await;
        }
        ExtractiveSummarizer.summarize(request).await
    }
}

/// The offline extractive model, slowed to the checker's [`Pace`] like the
/// summarizer, so an engine that summarizes through `host.complete` (as
/// `lossless` does) compacts as slowly as one using `host.summarize`. A
/// caller's abort ends the wait at once, as it ends a real model call.
#[derive(Debug)]
pub(crate) struct PacedCompletions {
    pace: Arc<Pace>,
}

impl PacedCompletions {
    pub(crate) fn new(pace: Arc<Pace>) -> Self {
        Self { pace }
    }
}

#[async_trait]
impl ModelCompletions for PacedCompletions {
    fn id(&self) -> &str {
        "extractive-paced"
    }

    async fn complete(
        &self,
        context: CompletionContext<'_>,
        request: &CompletionRequest,
    ) -> Result<Completion, CompletionError> {
        let pace = self.pace.get();
        if !pace.is_zero() {
            let until = (Instant::now() + pace).min(context.deadline);
            tokio::select! {
                () = tokio::time::sleep_until(until.into()) => {}
                () = context.abort.cancelled() => {
                    return Err(CompletionError::Aborted("the caller aborted".into()));
                }
            }
        }
        ExtractiveCompletions.complete(context, request).await
    }
}

/// The real services, observed.
pub(crate) struct CheckServices {
    inner: NativeServices,
    progress: Mutex<Vec<Instant>>,
}

impl CheckServices {
    pub(crate) fn new(inner: NativeServices) -> Self {
        Self {
            inner,
            progress: Mutex::new(Vec::new()),
        }
    }

    /// The moments progress was reported since the last call, oldest first.
    pub(crate) fn take_progress(&self) -> Vec<Instant> {
        std::mem::take(&mut *self.progress.lock().unwrap_or_else(PoisonError::into_inner))
    }

    fn note_progress(&self) {
        self.progress
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(Instant::now());
    }
}

/// Notes each stage of a delegated compaction before passing it on.
struct NotingSink<'a> {
    inner: &'a dyn ProgressSink,
    services: &'a CheckServices,
}

impl ProgressSink for NotingSink<'_> {
    fn progress(&self) {
        self.services.note_progress();
        self.inner.progress();
    }
}

#[async_trait]
impl HostServices for CheckServices {
    fn progress_reported(&self, _call: ServiceCall<'_>) {
        self.note_progress();
    }

    async fn delegate_compaction(
        &self,
        call: ServiceCall<'_>,
        params: &CompactParams,
        progress: &dyn ProgressSink,
    ) -> Result<CompactResult, ServiceError> {
        let noting = NotingSink {
            inner: progress,
            services: self,
        };
        self.inner.delegate_compaction(call, params, &noting).await
    }

    async fn summarize(
        &self,
        call: ServiceCall<'_>,
        text: &str,
        instructions: Option<&str>,
        max_tokens: u32,
    ) -> Result<String, ServiceError> {
        // The real service returns as soon as the caller aborts.
        self.inner
            .summarize(call, text, instructions, max_tokens)
            .await
    }

    async fn read_transcript_delta(
        &self,
        call: ServiceCall<'_>,
        cursor: Option<&str>,
        max_messages: u32,
        max_bytes: u64,
        oversized: OversizedEntry,
    ) -> Result<TranscriptDelta, ServiceError> {
        self.inner
            .read_transcript_delta(call, cursor, max_messages, max_bytes, oversized)
            .await
    }

    async fn state_get(
        &self,
        call: ServiceCall<'_>,
        key: &str,
    ) -> Result<Option<Vec<u8>>, ServiceError> {
        self.inner.state_get(call, key).await
    }

    async fn state_set(
        &self,
        call: ServiceCall<'_>,
        key: &str,
        value: &[u8],
    ) -> Result<(), ServiceError> {
        self.inner.state_set(call, key, value).await
    }

    async fn state_delete(&self, call: ServiceCall<'_>, key: &str) -> Result<bool, ServiceError> {
        self.inner.state_delete(call, key).await
    }

    async fn state_scan(
        &self,
        call: ServiceCall<'_>,
        prefix: &str,
        start_after: Option<&str>,
        limit: u32,
    ) -> Result<Vec<(String, Vec<u8>)>, ServiceError> {
        self.inner
            .state_scan(call, prefix, start_after, limit)
            .await
    }

    async fn complete(
        &self,
        call: ServiceCall<'_>,
        request: &CompletionRequest,
    ) -> Result<Completion, ServiceError> {
        let answer = self.inner.complete(call, request).await;
        // An answer re-arms a compaction's watchdog (`sandbox::powers`):
        // the judge counts it as the progress it is.
        if answer.is_ok() {
            self.note_progress();
        }
        answer
    }

    async fn index_put(
        &self,
        call: ServiceCall<'_>,
        scope: IndexScope,
        document: IndexDocument,
    ) -> Result<(), ServiceError> {
        self.inner.index_put(call, scope, document).await
    }

    async fn index_delete(
        &self,
        call: ServiceCall<'_>,
        scope: IndexScope,
        id: &str,
    ) -> Result<bool, ServiceError> {
        self.inner.index_delete(call, scope, id).await
    }

    async fn index_search(
        &self,
        call: ServiceCall<'_>,
        query: &IndexQuery,
    ) -> Result<IndexPage, ServiceError> {
        self.inner.index_search(call, query).await
    }

    async fn commit_state(&self, call: ServiceCall<'_>) -> Result<(), ServiceError> {
        self.inner.commit_state(call).await
    }
}
