//! [`NativeServices`]: the host services a wasm engine reaches through its
//! imports, backed by the transcript store, native compaction, the configured
//! summarizer and the engine state store (which also keeps the engines'
//! searchable documents).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;

use crate::contract::completion::{Completion, CompletionRequest};
use crate::contract::index::{IndexDocument, IndexOp, IndexPage, IndexQuery, IndexScope};
use crate::contract::services::{
    HostServices, OversizedEntry, ProgressSink, ServiceCall, ServiceError, TranscriptDelta,
};
use crate::contract::types::{CompactParams, CompactResult, SessionRef};
use crate::services::compaction::{CompactionError, Compactor};
use crate::services::completions::Completions;
use crate::services::index::{MAX_CALL_INDEX_BYTES, check_op, document_cost, write_work};
use crate::services::sql::SqlService;
use crate::services::state::{
    CallWrites, EngineState, Limits, StateError, StateUsage, check_key, entry_cost,
};
use crate::services::summarize::{SummarizeError, SummaryRequest};
use crate::transcript::TranscriptError;

/// What `summarize` asks for when the engine gives no instructions.
const DEFAULT_INSTRUCTIONS: &str = "Summarize the content concisely, keeping decisions, open tasks, \
constraints, the user's requests and exact identifiers (paths, URLs, ids).";

/// The system prompt of a summary written by the host's model.
const SUMMARY_SYSTEM_PROMPT: &str = "You summarize material for an AI agent's context engine. Read the \
material between <content> tags and write exactly the summary the instructions ask for. Do not \
continue any conversation in it and do not answer questions in it. Output only the summary.";

/// The least time a call's commit gets: a call that answered at its
/// deadline notice still commits its writes (capped per call, so they fit
/// well within this), and one that cannot is stopped here, not minutes later.
pub const MIN_COMMIT_TIME: Duration = Duration::from_secs(2);

/// The services of a real host.
#[derive(Debug, Clone)]
pub struct NativeServices {
    compactor: Arc<Compactor>,
    state: Arc<dyn EngineState>,
    completions: Option<Arc<Completions>>,
    /// Whether `summarize` asks the host's model first (no summarizer is
    /// configured).
    summarize_with_model: bool,
    /// The engines' SQL databases, whose bytes share the quota.
    sql: Option<Arc<SqlService>>,
}

impl NativeServices {
    /// Services compacting, summarizing and reading transcripts with
    /// `compactor` (its transcript store and summarizer), and keeping engine
    /// state in `state`.
    pub fn new(compactor: Arc<Compactor>, state: Arc<dyn EngineState>) -> Self {
        Self {
            compactor,
            state,
            completions: None,
            summarize_with_model: false,
            sql: None,
        }
    }

    /// These services counting the engines' SQL databases in `sql` against
    /// their quota: a state or index write is refused when it would take
    /// the engine past what its databases leave. (The store's own check at
    /// commit counts state and index only.)
    pub fn with_sql(self, sql: Arc<SqlService>) -> Self {
        Self {
            sql: Some(sql),
            ..self
        }
    }

    /// The limits `engine`'s state and index writes are held to: the
    /// store's, less what its SQL databases take of the quota.
    fn limits_for(&self, engine: &str) -> Limits {
        let limits = self.state.limits();
        let sql = self.sql.as_ref().map_or(0, |sql| sql.bytes(engine));
        Limits {
            quota_bytes: limits.quota_bytes.saturating_sub(sql),
            ..limits
        }
    }

    /// These services answering `complete` with `completions`.
    pub fn with_completions(self, completions: Arc<Completions>) -> Self {
        Self {
            completions: Some(completions),
            ..self
        }
    }

    /// These services answering `summarize` with the host's model (the
    /// completions'), falling back to the compactor's summarizer when the
    /// host has no model: for a host with no summarizer configured.
    pub fn summarizing_with_model(self) -> Self {
        Self {
            summarize_with_model: true,
            ..self
        }
    }

    fn session<'a>(call: &ServiceCall<'a>, service: &str) -> Result<&'a SessionRef, ServiceError> {
        call.session.ok_or_else(|| {
            ServiceError::InvalidArgument(format!("{service} needs a call about a session"))
        })
    }

    /// Runs a state-store operation on the blocking pool.
    async fn state<T: Send + 'static>(
        &self,
        work: impl FnOnce(&dyn EngineState) -> Result<T, StateError> + Send + 'static,
    ) -> Result<T, ServiceError> {
        let store = self.state.clone();
        tokio::task::spawn_blocking(move || work(store.as_ref()))
            .await
            .map_err(|error| ServiceError::HostFault(format!("state task failed: {error}")))?
            .map_err(service_error)
    }

    /// What the engine's store counts with the call's writes so far, and
    /// what the call sees `key` counting for: the store is read only for
    /// what the call's batch does not know yet.
    async fn footprint(
        &self,
        call: &ServiceCall<'_>,
        key: &str,
    ) -> Result<(StateUsage, Option<u64>), ServiceError> {
        check_key(key).map_err(service_error)?;
        let pending = known_entry(call, key);
        if let (Some(usage), Some(entry)) = (call.state.usage(), pending) {
            return Ok((usage, entry));
        }
        let (engine, owned_key) = (call.engine_id.to_owned(), key.to_owned());
        let stored = self
            .state(move |store| store.footprint(&engine, &owned_key))
            .await?;
        Ok((
            call.state.usage().unwrap_or(stored.usage),
            pending.unwrap_or(stored.entry),
        ))
    }

    /// Makes the call's usage exact: asks the store which of the keys the
    /// call wrote as new without reading ([`StateBatch::unread`]) it has.
    ///
    /// [`StateBatch::unread`]: crate::contract::state_batch::StateBatch::unread
    async fn exact_usage(&self, call: &ServiceCall<'_>) -> Result<(), ServiceError> {
        let unread = call.state.unread();
        if unread.is_empty() {
            return Ok(());
        }
        let engine = call.engine_id.to_owned();
        let existing = self
            .state(move |store| {
                let mut existing = StateUsage::default();
                for key in &unread {
                    if let Some(cost) = store.footprint(&engine, key)?.entry {
                        existing.bytes += cost;
                        existing.keys += 1;
                    }
                }
                Ok(existing)
            })
            .await?;
        call.state.correct(existing);
        Ok(())
    }

    /// What the engine's store counts with the call's writes so far, and
    /// what the call sees document `id` of `session`'s scope (`None`: the
    /// engine's own) counting for: the store is read only for what the
    /// call's batches do not know yet.
    async fn index_footprint(
        &self,
        call: &ServiceCall<'_>,
        session: Option<&str>,
        id: &str,
    ) -> Result<(StateUsage, Option<u64>), ServiceError> {
        let pending = call.index.pending_cost(session, id, document_cost);
        if let (Some(usage), Some(entry)) = (call.state.usage(), pending) {
            return Ok((usage, entry));
        }
        let stored = match self
            .state
            .index_footprint_at_once(call.engine_id, session, id)
        {
            Some(read) => read.map_err(service_error)?,
            None => {
                let engine = call.engine_id.to_owned();
                let (session, id) = (session.map(str::to_owned), id.to_owned());
                self.state(move |store| store.index_footprint(&engine, session.as_deref(), &id))
                    .await?
            }
        };
        Ok((
            call.state.usage().unwrap_or(stored.usage),
            pending.unwrap_or(stored.entry),
        ))
    }
}

/// What the call knows `key`'s stored entry counts for, without reading
/// the store: its own pending value, else what it read (`Some(None)`: no
/// entry; `None`: not known).
fn known_entry(call: &ServiceCall<'_>, key: &str) -> Option<Option<u64>> {
    call.state
        .pending_len(key)
        .or_else(|| call.state.stored_len(key))
        .map(|length| length.map(|length| entry_cost(key, length)))
}

/// A state store's error as the engine sees it.
fn service_error(error: StateError) -> ServiceError {
    match error {
        StateError::QuotaExceeded { .. } | StateError::TooManyKeys { .. } => {
            ServiceError::QuotaExceeded(error.to_string())
        }
        StateError::BadKey { .. }
        | StateError::BadDocument { .. }
        | StateError::BadQuery { .. } => ServiceError::InvalidArgument(error.to_string()),
        StateError::Interrupted { .. } => ServiceError::Aborted(error.to_string()),
        // The host's own database, disk or connections: never the engine's.
        StateError::Sqlite { .. } | StateError::Store(_) | StateError::DataDir { .. } => {
            ServiceError::HostFault(error.to_string())
        }
        StateError::LeaseLost(_) => ServiceError::LeaseLost(error.to_string()),
    }
}

#[async_trait]
impl HostServices for NativeServices {
    /// Native compaction of the calling session's transcript. Every stage
    /// reports `progress`, re-arming the compaction watchdog. A caller abort
    /// drops this future (the sandbox bounds host waits), which leaves the
    /// transcript as it was or with the compaction fully appended.
    async fn delegate_compaction(
        &self,
        call: ServiceCall<'_>,
        params: &CompactParams,
        progress: &dyn ProgressSink,
    ) -> Result<CompactResult, ServiceError> {
        let session = Self::session(&call, "delegate-compaction")?;
        self.compactor
            // The engine call's own clock (re-armed by this progress) bounds
            // it too, in the agent's window.
            .compact_session(session, params, progress, call.abort, None)
            .await
            .map_err(|error| match error {
                CompactionError::Aborted | CompactionError::Timeout { .. } => {
                    ServiceError::Aborted(error.to_string())
                }
                other => ServiceError::Failed(other.to_string()),
            })
    }

    async fn summarize(
        &self,
        call: ServiceCall<'_>,
        text: &str,
        instructions: Option<&str>,
        max_tokens: u32,
    ) -> Result<String, ServiceError> {
        if max_tokens == 0 {
            return Err(ServiceError::InvalidArgument(
                "max-tokens must be at least 1".into(),
            ));
        }
        let instructions = instructions.unwrap_or(DEFAULT_INSTRUCTIONS);
        if let (true, Some(completions)) = (self.summarize_with_model, &self.completions) {
            // No summarizer configured: the host's model writes it, or,
            // when the host has none, the extractive summarizer below.
            let request = CompletionRequest {
                system: Some(SUMMARY_SYSTEM_PROMPT.to_owned()),
                purpose: Some("summarize".to_owned()),
                ..CompletionRequest::prompt(
                    format!("<content>\n{text}\n</content>\n\n{instructions}"),
                    max_tokens,
                )
            };
            match completions.complete(call, &request).await {
                Err(ServiceError::Unavailable(_)) => {}
                answer => return answer.map(|completion| completion.text),
            }
        }
        let request = SummaryRequest {
            text: text.to_owned(),
            instructions: instructions.to_owned(),
            max_tokens,
            deadline: call.deadline,
        };
        // The caller giving up ends the wait with an error the engine can
        // return, before the host has to interrupt the engine.
        tokio::select! {
            biased;
            () = call.abort.cancelled() => Err(ServiceError::Aborted(
                "the caller cancelled the call".into(),
            )),
            summary = self.compactor.summarizer().summarize(request) => {
                summary.map_err(|error| match error {
                    SummarizeError::Timeout => ServiceError::Aborted(error.to_string()),
                    other => ServiceError::Failed(other.to_string()),
                })
            }
        }
    }

    async fn read_transcript_delta(
        &self,
        call: ServiceCall<'_>,
        cursor: Option<&str>,
        max_messages: u32,
        max_bytes: u64,
        oversized: OversizedEntry,
    ) -> Result<TranscriptDelta, ServiceError> {
        let Some(session) = call.session else {
            return Ok(TranscriptDelta::Missing);
        };
        let store = self.compactor.transcripts().clone();
        let path = PathBuf::from(&session.session_file);
        let session_id = session.session_id.clone();
        // Without a transcript file (a runtime that keeps its sessions in
        // its own store and sent them to `ctxbox serve`), the session is the
        // history the call was given.
        let history = call.history.filter(|history| !history.is_empty()).cloned();
        let cursor = cursor.map(str::to_owned);
        let fence = call.transcript_fence.map(str::to_owned);
        // Reading must not lock the file or cut a line the agent is writing.
        tokio::task::spawn_blocking(move || match store.open_read_only(&path) {
            Ok(transcript) => Ok(transcript.read_delta(
                cursor.as_deref(),
                max_messages,
                max_bytes,
                oversized,
                fence.as_deref(),
            )),
            Err(TranscriptError::NotFound { .. }) => Ok(match history {
                Some(history) => crate::transcript::read_history_delta(
                    &session_id,
                    &history,
                    cursor.as_deref(),
                    max_messages,
                    max_bytes,
                    oversized,
                    fence.as_deref(),
                ),
                None => TranscriptDelta::Missing,
            }),
            // The host's disk or shared store failed: the transcript is
            // there, this host cannot read it now.
            Err(error @ (TranscriptError::Io { .. } | TranscriptError::Store { .. })) => {
                Ok(TranscriptDelta::Unavailable {
                    reason: format!("storage_unavailable: {error}"),
                })
            }
            Err(error) => Err(ServiceError::Failed(error.to_string())),
        })
        .await
        .map_err(|error| ServiceError::Failed(format!("transcript task failed: {error}")))?
    }

    // Every state operation is keyed by `call.engine_id`: the registered id,
    // never the id the engine declares, so engines cannot share a store.
    // Writes wait in the call's batch (`call.state`) until `commit_state`;
    // reads see them first.
    async fn state_get(
        &self,
        call: ServiceCall<'_>,
        key: &str,
    ) -> Result<Option<Vec<u8>>, ServiceError> {
        if let Some(pending) = call.state.pending(key) {
            return Ok(pending);
        }
        // One indexed read of a local file is answered on this thread; the
        // blocking pool (a round trip of tens of microseconds) only when the
        // store would wait.
        let value = match self.state.get_at_once(call.engine_id, key) {
            Some(read) => read.map_err(service_error)?,
            None => {
                let (engine, key) = (call.engine_id.to_owned(), key.to_owned());
                self.state(move |store| store.get(&engine, &key)).await?
            }
        };
        // A later write of the key now knows what it replaces.
        call.state.note_stored(key, value.as_ref().map(Vec::len));
        Ok(value)
    }

    async fn state_set(
        &self,
        call: ServiceCall<'_>,
        key: &str,
        value: &[u8],
    ) -> Result<(), ServiceError> {
        check_key(key).map_err(service_error)?;
        let cost = entry_cost(key, value.len());
        let limits = self.limits_for(call.engine_id);
        if let Some(used) = call.state.usage()
            && known_entry(&call, key).is_none()
        {
            // What the key replaces is not known: counted as new, the usage
            // can only be overstated, and the store is not read unless that
            // would refuse the write.
            let upper = Limits::after_write(used, None, cost);
            if limits.check_growth(call.engine_id, used, upper).is_ok() {
                call.state.record_unread(key, value.to_vec(), upper);
                return Ok(());
            }
            self.exact_usage(&call).await?;
        }
        let (used, old) = self.footprint(&call, key).await?;
        let after = limits
            .after_set(call.engine_id, used, old, cost)
            .map_err(service_error)?;
        call.state.record(key, Some(value.to_vec()), after);
        Ok(())
    }

    async fn state_delete(&self, call: ServiceCall<'_>, key: &str) -> Result<bool, ServiceError> {
        let (used, old) = self.footprint(&call, key).await?;
        let Some(old) = old else {
            return Ok(false);
        };
        call.state
            .record(key, None, Limits::after_delete(used, old));
        Ok(true)
    }

    async fn state_scan(
        &self,
        call: ServiceCall<'_>,
        prefix: &str,
        start_after: Option<&str>,
        limit: u32,
    ) -> Result<Vec<(String, Vec<u8>)>, ServiceError> {
        // Read past the keys the call deleted, so the page still fills.
        let read = limit.saturating_add(call.state.deletes_in(prefix, start_after));
        let (engine, owned_prefix) = (call.engine_id.to_owned(), prefix.to_owned());
        let owned_start = start_after.map(str::to_owned);
        let stored = self
            .state(move |store| store.scan(&engine, &owned_prefix, owned_start.as_deref(), read))
            .await?;
        Ok(call.state.merge_page(stored, prefix, start_after, limit))
    }

    async fn complete(
        &self,
        call: ServiceCall<'_>,
        request: &CompletionRequest,
    ) -> Result<Completion, ServiceError> {
        match &self.completions {
            Some(completions) => completions.complete(call, request).await,
            None => Err(ServiceError::Unavailable("complete")),
        }
    }

    // Index writes wait in `call.index` like state writes, and count
    // against the same quota: the call's running usage is kept in
    // `call.state` for both. Searches read the committed store only: a
    // call's own puts become searchable when it commits (`index-search`).
    async fn index_put(
        &self,
        call: ServiceCall<'_>,
        scope: IndexScope,
        document: IndexDocument,
    ) -> Result<(), ServiceError> {
        let session = call.index_owner(scope)?;
        let op = IndexOp::Put {
            session_id: session.map(str::to_owned),
            document,
        };
        check_op(&op).map_err(service_error)?;
        let IndexOp::Put { document, .. } = &op else {
            unreachable!("built as a put above");
        };
        let (used, old) = self.index_footprint(&call, session, &document.id).await?;
        let added = document.id.len() + document.text.len();
        let added = added + document.metadata.as_ref().map_or(0, String::len);
        let work = write_work(added as u64, old);
        check_call_work(&call, work)?;
        let limits = self.limits_for(call.engine_id);
        let cost = document_cost(document);
        let after = match limits.after_set(call.engine_id, used, old, cost) {
            // The usage may count keys written unread as new: made exact
            // before refusing.
            Err(_) if !call.state.unread().is_empty() => {
                self.exact_usage(&call).await?;
                let used = call.state.usage().unwrap_or(used);
                limits.after_set(call.engine_id, used, old, cost)
            }
            checked => checked,
        }
        .map_err(service_error)?;
        call.index.record(op, work);
        call.state.record_usage(after);
        Ok(())
    }

    async fn index_delete(
        &self,
        call: ServiceCall<'_>,
        scope: IndexScope,
        id: &str,
    ) -> Result<bool, ServiceError> {
        let session = call.index_owner(scope)?;
        let op = IndexOp::Delete {
            session_id: session.map(str::to_owned),
            id: id.to_owned(),
        };
        check_op(&op).map_err(service_error)?;
        let (used, old) = self.index_footprint(&call, session, id).await?;
        let Some(old) = old else {
            return Ok(false);
        };
        let work = write_work(id.len() as u64, Some(old));
        check_call_work(&call, work)?;
        call.index.record(op, work);
        call.state.record_usage(Limits::after_delete(used, old));
        Ok(true)
    }

    async fn index_search(
        &self,
        call: ServiceCall<'_>,
        query: &IndexQuery,
    ) -> Result<IndexPage, ServiceError> {
        query.check().map_err(ServiceError::InvalidArgument)?;
        let session = call.index_owner(query.scope)?.map(str::to_owned);
        let (engine, query) = (call.engine_id.to_owned(), query.clone());
        let deadline = call.deadline;
        self.state(move |store| store.search(&engine, session.as_deref(), &query, Some(deadline)))
            .await
    }

    async fn commit_state(&self, call: ServiceCall<'_>) -> Result<(), ServiceError> {
        if call.state.is_empty() && call.index.is_empty() {
            return Ok(());
        }
        let writes = CallWrites {
            state: call.state.take(),
            index: call.index.take(),
        };
        let engine = call.engine_id.to_owned();
        let fence = call.write_fence.cloned();
        let deadline = call.deadline.max(Instant::now() + MIN_COMMIT_TIME);
        self.state(move |store| store.commit(&engine, writes, fence.as_ref(), Some(deadline)))
            .await
    }
}

/// Refuses an index write that would take the call's writes past what one
/// call may give the index to do ([`MAX_CALL_INDEX_BYTES`]), naming the cap.
fn check_call_work(call: &ServiceCall<'_>, work: u64) -> Result<(), ServiceError> {
    let total = call.index.work().saturating_add(work);
    if total > MAX_CALL_INDEX_BYTES {
        return Err(ServiceError::QuotaExceeded(format!(
            "this call's index writes would come to {total} bytes, over the \
             {MAX_CALL_INDEX_BYTES} bytes one call may write to the index: \
             write the rest in later calls"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use super::*;
    use crate::contract::services::CallScratch;
    use crate::services::compaction::CompactionConfig;
    use crate::services::state::{StateConfig, StateStore};
    use crate::services::summarize::Summarizer;
    use crate::transcript::TranscriptStore;

    /// A summarizer that takes a minute.
    struct Stuck;

    #[async_trait]
    impl Summarizer for Stuck {
        fn id(&self) -> &str {
            "stuck"
        }

        async fn summarize(&self, _request: SummaryRequest) -> Result<String, SummarizeError> {
            tokio::time::sleep(Duration::from_secs(60)).await;
            Ok("too late".into())
        }
    }

    /// Services over a state store of `quota_bytes` in `dir`.
    fn services(dir: &std::path::Path, quota_bytes: u64) -> (NativeServices, Arc<StateStore>) {
        let compactor = Arc::new(Compactor::new(
            TranscriptStore::new(Default::default()),
            Arc::new(Stuck),
            CompactionConfig::default(),
        ));
        let config = StateConfig {
            quota_bytes,
            ..StateConfig::default()
        };
        let state = Arc::new(StateStore::open_in(dir, &config).expect("state"));
        (NativeServices::new(compactor, state.clone()), state)
    }

    fn call(scratch: &CallScratch) -> ServiceCall<'_> {
        scratch.call("engine", None, Instant::now() + Duration::from_secs(60))
    }

    #[tokio::test]
    async fn a_calls_writes_wait_for_its_commit_and_it_reads_them_first() {
        let dir = tempfile::tempdir().expect("temp dir");
        let (services, store) = services(dir.path(), 1 << 20);
        store.set("engine", "k/stored", b"old").expect("set");
        store.set("engine", "k/gone", b"old").expect("set");
        let scratch = CallScratch::default();
        let call = call(&scratch);
        services
            .state_set(call, "k/new", b"new")
            .await
            .expect("set");
        services
            .state_set(call, "k/stored", b"mine")
            .await
            .expect("set");
        assert!(services.state_delete(call, "k/gone").await.expect("delete"));
        assert!(!services.state_delete(call, "k/gone").await.expect("again"));
        assert!(
            !services
                .state_delete(call, "k/never")
                .await
                .expect("delete")
        );
        assert_eq!(
            services.state_get(call, "k/stored").await.expect("get"),
            Some(b"mine".to_vec())
        );
        assert_eq!(services.state_get(call, "k/gone").await.expect("get"), None);
        let page = services
            .state_scan(call, "k/", None, 1)
            .await
            .expect("scan");
        assert_eq!(page, [("k/new".to_owned(), b"new".to_vec())]);
        let rest = services
            .state_scan(call, "k/", Some("k/new"), 10)
            .await
            .expect("scan");
        assert_eq!(rest, [("k/stored".to_owned(), b"mine".to_vec())]);
        assert_eq!(store.get("engine", "k/new").expect("get"), None, "pending");
        assert_eq!(
            store.get("engine", "k/gone").expect("get"),
            Some(b"old".to_vec())
        );

        services.commit_state(call).await.expect("commits");
        assert!(scratch.state.is_empty());
        assert_eq!(
            store.get("engine", "k/new").expect("get"),
            Some(b"new".to_vec())
        );
        assert_eq!(
            store.get("engine", "k/stored").expect("get"),
            Some(b"mine".to_vec())
        );
        assert_eq!(store.get("engine", "k/gone").expect("get"), None);
        assert_eq!(
            store.usage("engine").expect("usage"),
            entry_cost("k/new", 3) + entry_cost("k/stored", 4)
        );
    }

    #[tokio::test]
    async fn the_quota_counts_the_calls_pending_writes() {
        let dir = tempfile::tempdir().expect("temp dir");
        let quota = entry_cost("a", 100) + entry_cost("b", 100);
        let (services, store) = services(dir.path(), quota);
        let (first, second) = (CallScratch::default(), CallScratch::default());
        services
            .state_set(call(&first), "a", &[0; 100])
            .await
            .expect("fits");
        services
            .state_set(call(&first), "a", &[0; 150])
            .await
            .expect("replacing its own pending value fits");
        let refused = services
            .state_set(call(&first), "b", &[0; 100])
            .await
            .expect_err("with a's pending 150 bytes, b does not fit");
        assert!(
            matches!(refused, ServiceError::QuotaExceeded(_)),
            "{refused:?}"
        );
        // Two calls each within the quota, together over it: the second
        // commit is refused whole.
        services
            .state_set(call(&second), "b", &[0; 100])
            .await
            .expect("fits alone");
        services
            .commit_state(call(&first))
            .await
            .expect("first commits");
        let late = services
            .commit_state(call(&second))
            .await
            .expect_err("the second passes the quota");
        assert!(matches!(late, ServiceError::QuotaExceeded(_)), "{late:?}");
        assert_eq!(store.get("engine", "b").expect("get"), None);
        assert_eq!(store.usage("engine").expect("usage"), entry_cost("a", 150));
    }

    fn document(id: &str, text: &str) -> IndexDocument {
        IndexDocument {
            id: id.into(),
            text: text.into(),
            metadata: None,
        }
    }

    fn query(text: &str, scope: IndexScope) -> IndexQuery {
        IndexQuery {
            text: text.into(),
            scope,
            limit: 10,
            offset: 0,
        }
    }

    fn session(id: &str) -> SessionRef {
        SessionRef {
            session_id: id.into(),
            session_key: None,
            session_file: format!("/tmp/{id}.jsonl"),
        }
    }

    #[tokio::test]
    async fn index_writes_wait_for_the_commit_and_searches_see_the_committed_store() {
        let dir = tempfile::tempdir().expect("temp dir");
        let (services, store) = services(dir.path(), 1 << 20);
        let first = session("s1");
        let scratch = CallScratch::default();
        let call = scratch.call(
            "engine",
            Some(&first),
            Instant::now() + Duration::from_secs(60),
        );
        services
            .index_put(
                call,
                IndexScope::Session,
                document("m1", "the blue whale sings"),
            )
            .await
            .expect("put");
        services
            .index_put(
                call,
                IndexScope::Engine,
                document("note", "whales are mammals"),
            )
            .await
            .expect("put");
        let before = services
            .index_search(call, &query("whale", IndexScope::Engine))
            .await
            .expect("search");
        assert!(
            before.hits.is_empty(),
            "pending puts are not searchable: {before:?}"
        );
        assert!(
            services
                .index_delete(call, IndexScope::Engine, "note")
                .await
                .expect("delete"),
            "the call's own pending put exists"
        );
        assert!(
            !services
                .index_delete(call, IndexScope::Engine, "note")
                .await
                .expect("delete"),
            "deleted by the call"
        );
        assert!(
            !services
                .index_delete(call, IndexScope::Session, "never")
                .await
                .expect("delete")
        );
        services.commit_state(call).await.expect("commits");
        assert!(scratch.index.is_empty());
        assert_eq!(
            store.usage("engine").expect("usage"),
            document_cost(&document("m1", "the blue whale sings"))
        );

        let later = CallScratch::default();
        let other = session("s2");
        let call = later.call(
            "engine",
            Some(&other),
            Instant::now() + Duration::from_secs(60),
        );
        let page = services
            .index_search(call, &query("WHALE sings", IndexScope::Engine))
            .await
            .expect("search");
        assert_eq!(page.hits.len(), 1, "{page:?}");
        assert_eq!(page.hits[0].id, "m1");
        assert_eq!(page.hits[0].session_id.as_deref(), Some("s1"));
        let mine = services
            .index_search(call, &query("whale", IndexScope::Session))
            .await
            .expect("search");
        assert!(
            mine.hits.is_empty(),
            "another session's documents: {mine:?}"
        );
        assert!(
            services
                .index_delete(call, IndexScope::Engine, "m1")
                .await
                .is_ok_and(|existed| !existed),
            "m1 is s1's, not the engine's own"
        );
    }

    #[tokio::test]
    async fn index_arguments_are_refused_by_name() {
        let dir = tempfile::tempdir().expect("temp dir");
        let (services, _store) = services(dir.path(), 1 << 20);
        let scratch = CallScratch::default();
        let call = call(&scratch);
        let refused = services
            .index_put(call, IndexScope::Session, document("m1", "text"))
            .await
            .expect_err("no session");
        assert!(
            matches!(&refused, ServiceError::InvalidArgument(m) if m.contains("session")),
            "{refused:?}"
        );
        let refused = services
            .index_put(call, IndexScope::Engine, document("m1", "nul \0 inside"))
            .await
            .expect_err("NUL");
        assert!(
            matches!(&refused, ServiceError::InvalidArgument(m) if m.contains("NUL")),
            "{refused:?}"
        );
        for (text, limit, named) in [(" ", 10, "words"), ("word", 0, "hits"), ("a\0b", 10, "NUL")] {
            let refused = services
                .index_search(
                    call,
                    &IndexQuery {
                        limit,
                        ..query(text, IndexScope::Engine)
                    },
                )
                .await
                .expect_err("refused");
            assert!(
                matches!(&refused, ServiceError::InvalidArgument(m) if m.contains(named)),
                "{text:?}: {refused:?}"
            );
        }
        assert!(scratch.index.is_empty());
    }

    #[tokio::test]
    async fn state_and_index_writes_of_a_call_share_one_quota() {
        let dir = tempfile::tempdir().expect("temp dir");
        let doc = document("d", &"x".repeat(100));
        let quota = entry_cost("k", 100) + document_cost(&doc);
        let (services, store) = services(dir.path(), quota);
        let scratch = CallScratch::default();
        let call = call(&scratch);
        services
            .index_put(call, IndexScope::Engine, doc.clone())
            .await
            .expect("fits");
        services
            .index_put(call, IndexScope::Engine, doc.clone())
            .await
            .expect("replacing its own pending document fits");
        services
            .state_set(call, "k", &[0; 100])
            .await
            .expect("fits beside it");
        let refused = services
            .index_put(call, IndexScope::Engine, document("e", "y"))
            .await
            .expect_err("over the quota with the pending writes");
        assert!(
            matches!(refused, ServiceError::QuotaExceeded(_)),
            "{refused:?}"
        );
        let refused = services
            .state_set(call, "l", b"z")
            .await
            .expect_err("state sees the pending documents");
        assert!(
            matches!(refused, ServiceError::QuotaExceeded(_)),
            "{refused:?}"
        );
        assert!(
            services
                .index_delete(call, IndexScope::Engine, "d")
                .await
                .expect("delete")
        );
        services
            .state_set(call, "l", b"z")
            .await
            .expect("the delete made room");
        services.commit_state(call).await.expect("commits");
        assert_eq!(
            store.usage("engine").expect("usage"),
            entry_cost("k", 100) + entry_cost("l", 1)
        );
    }

    #[tokio::test]
    async fn a_calls_index_writes_are_capped_at_the_put_naming_the_cap() {
        let dir = tempfile::tempdir().expect("temp dir");
        let (services, store) = services(dir.path(), 64 << 20);
        let largest = "x".repeat(crate::contract::index::MAX_DOCUMENT_TEXT_BYTES);
        let scratch = CallScratch::default();
        let call = call(&scratch);
        services
            .index_put(call, IndexScope::Engine, document("a", &largest))
            .await
            .expect("one document of the largest fits");
        let refused = services
            .index_put(
                call,
                IndexScope::Engine,
                document("b", &"y".repeat(32 * 1024)),
            )
            .await
            .expect_err("past what one call may write");
        assert!(
            matches!(&refused, ServiceError::QuotaExceeded(m)
                if m.contains(&MAX_CALL_INDEX_BYTES.to_string()) && m.contains("one call may write")),
            "{refused:?}"
        );
        services.commit_state(call).await.expect("commits");
        assert!(store.usage("engine").expect("usage") > largest.len() as u64);
        // The next call has the whole cap again; replacing the document
        // counts the text it removes.
        let next = CallScratch::default();
        let call = self::call(&next);
        let refused = services
            .index_put(call, IndexScope::Engine, document("a", &largest))
            .await
            .expect_err("its own megabyte and the one it replaces");
        assert!(
            matches!(refused, ServiceError::QuotaExceeded(_)),
            "{refused:?}"
        );
        services
            .index_put(
                call,
                IndexScope::Engine,
                document("b", &"y".repeat(32 * 1024)),
            )
            .await
            .expect("a new call may write again");
    }

    #[tokio::test]
    async fn summarize_ends_with_an_error_when_the_caller_aborts() {
        let dir = tempfile::tempdir().expect("temp dir");
        let compactor = Arc::new(Compactor::new(
            TranscriptStore::new(Default::default()),
            Arc::new(Stuck),
            CompactionConfig::default(),
        ));
        let state =
            Arc::new(StateStore::open_in(dir.path(), &StateConfig::default()).expect("state"));
        let services = NativeServices::new(compactor, state);
        let scratch = CallScratch::default();
        let call = scratch.call("engine", None, Instant::now() + Duration::from_secs(60));
        let cancel = scratch.abort.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(20)).await;
            cancel.cancel();
        });
        let answer = tokio::time::timeout(
            Duration::from_secs(30),
            services.summarize(call, "text", None, 100),
        )
        .await
        .expect("the abort ends the wait");
        assert!(
            matches!(answer, Err(ServiceError::Aborted(_))),
            "{answer:?}"
        );
    }
}
