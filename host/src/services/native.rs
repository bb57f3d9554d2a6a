//! [`NativeServices`]: the host services a wasm engine reaches through its
//! imports, backed by the transcript store, native compaction, the configured
//! summarizer and the engine state store.

use std::path::PathBuf;
use std::sync::Arc;

use async_trait::async_trait;

use crate::contract::services::{
    HostServices, ProgressSink, ServiceCall, ServiceError, TranscriptDelta,
};
use crate::contract::types::{CompactParams, CompactResult, SessionRef};
use crate::services::compaction::{CompactionError, Compactor};
use crate::services::state::{EngineState, StateError};
use crate::services::summarize::{SummarizeError, SummaryRequest};
use crate::transcript::TranscriptError;

/// What `summarize` asks for when the engine gives no instructions.
const DEFAULT_INSTRUCTIONS: &str = "Summarize the content concisely, keeping decisions, open tasks, \
constraints, the user's requests and exact identifiers (paths, URLs, ids).";

/// The services of a real host.
#[derive(Debug, Clone)]
pub struct NativeServices {
    compactor: Arc<Compactor>,
    state: Arc<dyn EngineState>,
}

impl NativeServices {
    /// Services compacting, summarizing and reading transcripts with
    /// `compactor` (its transcript store and summarizer), and keeping engine
    /// state in `state`.
    pub fn new(compactor: Arc<Compactor>, state: Arc<dyn EngineState>) -> Self {
        Self { compactor, state }
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
            .map_err(|error| ServiceError::Failed(format!("state task failed: {error}")))?
            .map_err(|error| match error {
                StateError::QuotaExceeded { .. } | StateError::TooManyKeys { .. } => {
                    ServiceError::QuotaExceeded(error.to_string())
                }
                StateError::BadKey { .. } => ServiceError::InvalidArgument(error.to_string()),
                StateError::Sqlite { .. } | StateError::Store(_) | StateError::DataDir { .. } => {
                    ServiceError::Failed(error.to_string())
                }
            })
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
            .compact_session(session, params, progress, call.abort)
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
        let request = SummaryRequest {
            text: text.to_owned(),
            instructions: instructions.unwrap_or(DEFAULT_INSTRUCTIONS).to_owned(),
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
    ) -> Result<TranscriptDelta, ServiceError> {
        let Some(session) = call.session else {
            return Ok(TranscriptDelta::Missing);
        };
        let store = self.compactor.transcripts().clone();
        let path = PathBuf::from(&session.session_file);
        let cursor = cursor.map(str::to_owned);
        // Reading must not lock the file or cut a line the agent is writing.
        tokio::task::spawn_blocking(move || match store.open_read_only(&path) {
            Ok(transcript) => Ok(transcript.read_delta(cursor.as_deref(), max_messages, max_bytes)),
            Err(TranscriptError::NotFound { .. }) => Ok(TranscriptDelta::Missing),
            Err(error) => Err(ServiceError::Failed(error.to_string())),
        })
        .await
        .map_err(|error| ServiceError::Failed(format!("transcript task failed: {error}")))?
    }

    // Every state operation is keyed by `call.engine_id`: the registered id,
    // never the id the engine declares, so engines cannot share a store.
    async fn state_get(
        &self,
        call: ServiceCall<'_>,
        key: &str,
    ) -> Result<Option<Vec<u8>>, ServiceError> {
        let (engine, key) = (call.engine_id.to_owned(), key.to_owned());
        self.state(move |store| store.get(&engine, &key)).await
    }

    async fn state_set(
        &self,
        call: ServiceCall<'_>,
        key: &str,
        value: &[u8],
    ) -> Result<(), ServiceError> {
        let (engine, key, value) = (call.engine_id.to_owned(), key.to_owned(), value.to_vec());
        self.state(move |store| store.set(&engine, &key, &value))
            .await
    }

    async fn state_delete(&self, call: ServiceCall<'_>, key: &str) -> Result<bool, ServiceError> {
        let (engine, key) = (call.engine_id.to_owned(), key.to_owned());
        self.state(move |store| store.delete(&engine, &key)).await
    }

    async fn state_scan(
        &self,
        call: ServiceCall<'_>,
        prefix: &str,
        start_after: Option<&str>,
        limit: u32,
    ) -> Result<Vec<(String, Vec<u8>)>, ServiceError> {
        let (engine, prefix) = (call.engine_id.to_owned(), prefix.to_owned());
        let start_after = start_after.map(str::to_owned);
        self.state(move |store| store.scan(&engine, &prefix, start_after.as_deref(), limit))
            .await
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use tokio_util::sync::CancellationToken;

    use super::*;
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
        let abort = CancellationToken::new();
        let call = ServiceCall {
            engine_id: "engine",
            session: None,
            history: None,
            deadline: Instant::now() + Duration::from_secs(60),
            abort: &abort,
        };
        let cancel = abort.clone();
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
