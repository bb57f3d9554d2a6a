//! The host side of the contract's imports: `host` (log, progress, abort,
//! estimates, services); the `history` resource is in `history_resource`.
//!
//! Every import charges the bytes the guest passed in against the call's
//! input budget; breaking it traps the call as `host-limit`.

use std::sync::Arc;

use super::bindings::ctxbox::engine::{host as wit_host, types as wit};
use super::call::CallClock;
use super::convert;
use super::store::{HostTrap, StoreState};
use super::wire_size;
use crate::contract::failure::{FailureKind, Operation};
use crate::contract::services::{
    OversizedEntry, ProgressSink, ServiceCall, ServiceError, TranscriptDelta,
};
use crate::contract::text::untrusted_line;
use crate::contract::tokens;

/// A call that logs this many times its allowance is flooding the host and
/// fails with `host-limit`; below that, records past the allowance are
/// dropped and counted.
const LOG_FLOOD_FACTOR: u32 = 100;
/// Most entries one `state-scan` page may ask for.
const MAX_SCAN_LIMIT: u32 = 10_000;
/// Default and cap of `read-transcript-delta` and `read-transcript-page`
/// pages (ARCHITECTURE.md §7).
const DELTA_DEFAULT_MESSAGES: u32 = 1_000;
const DELTA_MAX_MESSAGES: u32 = 10_000;
const DELTA_DEFAULT_BYTES: u64 = 1024 * 1024;
const DELTA_MAX_BYTES: u64 = crate::transcript::MAX_DELTA_PAGE_BYTES;

type HostResult<T> = Result<T, wit_host::HostError>;

impl StoreState {
    /// Charges `bytes` passed in by the guest against the call's budget.
    pub(super) fn charge(&mut self, bytes: usize) -> wasmtime::Result<()> {
        self.call.input_bytes = self.call.input_bytes.saturating_add(bytes as u64);
        let limit = self.config.max_input_kib_per_call.saturating_mul(1024);
        if self.call.input_bytes > limit {
            return Err(HostTrap::error(
                FailureKind::HostLimit,
                format!(
                    "the engine passed {} bytes to host functions in one {} call, over the {limit} byte limit",
                    self.call.input_bytes, self.call.operation
                ),
            ));
        }
        Ok(())
    }

    fn service_call(&self) -> ServiceCall<'_> {
        self.call.service_call(&self.engine_id)
    }
}

/// Re-arms the call's compaction watchdog at each stage of a delegated
/// compaction.
struct ClockProgress(Arc<CallClock>);

impl ProgressSink for ClockProgress {
    fn progress(&self) {
        self.0.progress();
    }
}

impl StoreState {
    /// A host service's answer as the guest gets it, the host's own
    /// failure noted on the call (it is then never the engine's).
    pub(super) fn answer<T>(&mut self, result: Result<T, ServiceError>) -> HostResult<T> {
        if let Err(ServiceError::HostFault(fault)) = &result {
            self.call.host_fault.get_or_insert_with(|| fault.clone());
        }
        result.map_err(convert::to_wit_host_error)
    }
}

impl StoreState {
    /// The transcript read behind `read-transcript-delta` and
    /// `read-transcript-page`, the engine's limits taken to the defaults and
    /// caps.
    async fn read_transcript(
        &mut self,
        cursor: Option<String>,
        max_messages: Option<u32>,
        max_bytes: Option<u64>,
        oversized: OversizedEntry,
    ) -> wasmtime::Result<Result<TranscriptDelta, ServiceError>> {
        self.charge(cursor.as_ref().map_or(0, String::len))?;
        let max_messages = max_messages
            .unwrap_or(DELTA_DEFAULT_MESSAGES)
            .clamp(1, DELTA_MAX_MESSAGES);
        let max_bytes = max_bytes
            .unwrap_or(DELTA_DEFAULT_BYTES)
            .clamp(1, DELTA_MAX_BYTES);
        let services = self.services.clone();
        Ok(services
            .read_transcript_delta(
                self.service_call(),
                cursor.as_deref(),
                max_messages,
                max_bytes,
                oversized,
            )
            .await)
    }
}

impl wit::Host for StoreState {}

impl wit_host::Host for StoreState {
    fn engine_config(&mut self) -> wasmtime::Result<Option<String>> {
        Ok(self.engine_config.as_deref().map(str::to_owned))
    }

    fn runtime_settings(&mut self) -> wasmtime::Result<Option<String>> {
        Ok(self.call.runtime_settings.clone())
    }

    fn log(&mut self, level: wit_host::LogLevel, message: String) -> wasmtime::Result<()> {
        self.charge(message.len())?;
        self.call.log_records += 1;
        let allowance = self.config.max_log_records_per_call;
        if self.call.log_records > allowance.saturating_mul(LOG_FLOOD_FACTOR) {
            return Err(HostTrap::error(
                FailureKind::HostLimit,
                format!(
                    "the engine wrote more than {} log records in one {} call (allowance {allowance})",
                    allowance.saturating_mul(LOG_FLOOD_FACTOR),
                    self.call.operation
                ),
            ));
        }
        if self.call.log_records > allowance {
            self.call.logs_dropped += 1;
            return Ok(());
        }
        let limit = self.config.max_log_message_bytes as usize;
        let message = untrusted_line(&message, limit);
        let engine = &*self.engine_id;
        let session = self
            .call
            .session
            .as_ref()
            .map_or("", |session| session.session_id.as_str());
        match level {
            wit_host::LogLevel::Trace => {
                tracing::trace!(target: "ctxbox::engine", engine, session, "{message}")
            }
            wit_host::LogLevel::Debug => {
                tracing::debug!(target: "ctxbox::engine", engine, session, "{message}")
            }
            wit_host::LogLevel::Info => {
                tracing::info!(target: "ctxbox::engine", engine, session, "{message}")
            }
            wit_host::LogLevel::Warn => {
                tracing::warn!(target: "ctxbox::engine", engine, session, "{message}")
            }
            wit_host::LogLevel::Error => {
                tracing::error!(target: "ctxbox::engine", engine, session, "{message}")
            }
        }
        Ok(())
    }

    fn report_progress(&mut self) -> wasmtime::Result<()> {
        self.call.clock.progress();
        self.services.progress_reported(self.service_call());
        Ok(())
    }

    fn aborted(&mut self) -> wasmtime::Result<bool> {
        Ok(self.call.abort.is_cancelled() || self.call.clock.near_deadline())
    }

    fn estimate_tokens(&mut self, entries: Vec<wit::MessageEntry>) -> wasmtime::Result<u64> {
        let entries: Vec<_> = entries.into_iter().map(convert::from_wit_entry).collect();
        self.charge(entries.iter().map(wire_size::entry).sum())?;
        Ok(tokens::estimate_entries(&entries))
    }

    async fn delegate_compaction(
        &mut self,
        params: wit::CompactParams,
    ) -> wasmtime::Result<HostResult<wit::CompactResult>> {
        self.charge(wire_size::strings([
            params.custom_instructions.as_deref(),
            params.runtime_settings.as_deref(),
            params.runtime_context.as_deref(),
        ]))?;
        if self.call.operation != Operation::Compact {
            return Ok(Err(convert::to_wit_host_error(
                ServiceError::InvalidArgument(format!(
                    "delegate-compaction is only available during compact, not {}",
                    self.call.operation
                )),
            )));
        }
        let params = convert::from_wit_compact_params(params);
        let progress = ClockProgress(self.call.clock.clone());
        let services = self.services.clone();
        let result = services
            .delegate_compaction(self.service_call(), &params, &progress)
            .await;
        Ok(self
            .answer(result)
            .map(|result| convert::to_wit_compact_result(&result)))
    }

    async fn summarize(
        &mut self,
        text: String,
        instructions: Option<String>,
        max_tokens: u32,
    ) -> wasmtime::Result<HostResult<String>> {
        self.charge(text.len() + instructions.as_ref().map_or(0, String::len))?;
        let services = self.services.clone();
        let result = services
            .summarize(
                self.service_call(),
                &text,
                instructions.as_deref(),
                max_tokens,
            )
            .await;
        Ok(self.answer(result))
    }

    async fn read_transcript_delta(
        &mut self,
        cursor: Option<String>,
        max_messages: Option<u32>,
        max_bytes: Option<u64>,
    ) -> wasmtime::Result<HostResult<wit_host::TranscriptDelta>> {
        let read = self
            .read_transcript(
                cursor,
                max_messages,
                max_bytes,
                OversizedEntry::DeliverAlone,
            )
            .await?;
        Ok(self.answer(read.and_then(convert::to_wit_delta)))
    }

    async fn read_transcript_page(
        &mut self,
        cursor: Option<String>,
        max_messages: Option<u32>,
        max_bytes: Option<u64>,
    ) -> wasmtime::Result<HostResult<wit_host::TranscriptRead>> {
        let read = self
            .read_transcript(
                cursor,
                max_messages,
                max_bytes,
                OversizedEntry::AskForBudget,
            )
            .await?;
        Ok(self.answer(read).map(convert::to_wit_transcript_read))
    }

    async fn state_get(&mut self, key: String) -> wasmtime::Result<HostResult<Option<Vec<u8>>>> {
        self.charge(key.len())?;
        let services = self.services.clone();
        let result = services.state_get(self.service_call(), &key).await;
        Ok(self.answer(result))
    }

    async fn state_set(&mut self, key: String, value: Vec<u8>) -> wasmtime::Result<HostResult<()>> {
        self.charge(key.len() + value.len())?;
        let services = self.services.clone();
        let result = services.state_set(self.service_call(), &key, &value).await;
        Ok(self.answer(result))
    }

    async fn state_delete(&mut self, key: String) -> wasmtime::Result<HostResult<bool>> {
        self.charge(key.len())?;
        let services = self.services.clone();
        let result = services.state_delete(self.service_call(), &key).await;
        Ok(self.answer(result))
    }

    async fn state_scan(
        &mut self,
        prefix: String,
        start_after: Option<String>,
        limit: u32,
    ) -> wasmtime::Result<HostResult<Vec<wit_host::StateEntry>>> {
        self.charge(prefix.len() + start_after.as_ref().map_or(0, String::len))?;
        let services = self.services.clone();
        let result = services
            .state_scan(
                self.service_call(),
                &prefix,
                start_after.as_deref(),
                limit.min(MAX_SCAN_LIMIT),
            )
            .await;
        Ok(self.answer(result).map(|entries| {
            entries
                .into_iter()
                .map(|(key, value)| wit_host::StateEntry { key, value })
                .collect()
        }))
    }

    async fn complete(
        &mut self,
        request: wit_host::CompletionRequest,
    ) -> wasmtime::Result<HostResult<wit_host::Completion>> {
        super::powers::complete(self, request).await
    }

    async fn index_put(
        &mut self,
        scope: wit_host::IndexScope,
        document: wit_host::IndexDocument,
    ) -> wasmtime::Result<HostResult<()>> {
        super::powers::index_put(self, scope, document).await
    }

    async fn index_delete(
        &mut self,
        scope: wit_host::IndexScope,
        id: String,
    ) -> wasmtime::Result<HostResult<bool>> {
        super::powers::index_delete(self, scope, id).await
    }

    async fn index_search(
        &mut self,
        query: wit_host::IndexQuery,
    ) -> wasmtime::Result<HostResult<wit_host::IndexPage>> {
        super::powers::index_search(self, query).await
    }
}
