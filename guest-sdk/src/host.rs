//! Services the ctxbox host offers an engine during a call.
//!
//! Each function is scoped to the calling engine and the session of the call
//! in progress. On targets other than `wasm32` they panic: there is no host.
//!
//! A compaction that summarizes with the host's summarizer, keeps its records
//! in the engine's state store, reports progress and honours an abort:
//!
//! ```no_run
//! use ctxbox_guest::prelude::*;
//!
//! fn summarize_chunks(session: &SessionRef, chunks: &[String]) -> Result<bool, EngineError> {
//!     for (index, chunk) in chunks.iter().enumerate() {
//!         if host::aborted() {
//!             return Ok(false); // the caller gave up, or time is nearly up: stop
//!         }
//!         let summary = host::summarize(chunk, Some("Keep decisions and file paths."), 500)?;
//!         let key = format!("{}/summary/{index:08}", session.session_id);
//!         host::state::set(&key, summary.as_bytes())?;
//!         host::report_progress(); // re-arms the compaction watchdog
//!     }
//!     Ok(true)
//! }
//! ```

pub mod sql;

use crate::__private::bindings::ctxbox::engine::host as raw;
use crate::{
    CompactParams, CompactResult, Completion, CompletionRequest, HostError, LogLevel, MessageEntry,
    StateEntry, TranscriptDelta, TranscriptRead,
};

/// The engine's own settings from the host's configuration
/// (`plugins.entries.<id>.config`) as a JSON object, or `None` when nothing is
/// configured. Parse it with the JSON library of your choice.
pub fn engine_config() -> Option<String> {
    raw::engine_config()
}

/// The runtime settings of the call in progress (schema version, runtime
/// mode, model, limits, diagnostics) as a JSON object, during `assemble`,
/// `compact` and `after-turn`; `None` otherwise, or when the engine's
/// `accepted_host_params` leaves out `RuntimeSettings`.
pub fn runtime_settings() -> Option<String> {
    raw::runtime_settings()
}

/// Writes a record to the host's log. Limited by the host: records past the
/// per-call allowance are dropped and long ones truncated, and a call that
/// logs a hundred times its allowance fails (`host-limit`). The [`trace!`](crate::trace), [`debug!`](crate::debug),
/// [`info!`](crate::info), [`warn!`](crate::warn) and [`error!`](crate::error)
/// macros format and call this.
pub fn log(level: LogLevel, message: &str) {
    raw::log(level, message);
}

/// Tells the host a long `compact` or `after-turn` is making progress,
/// re-arming its watchdog (up to ten windows in total).
pub fn report_progress() {
    raw::report_progress();
}

/// Whether to stop now: the caller has cancelled the current call, or its
/// deadline is near (`sandbox.deadlineNoticeMs` before it). Return early,
/// with what you have or an error: an engine that stops within the notice
/// is never quarantined for it. `summarize` and `complete` end when the
/// notice begins.
pub fn aborted() -> bool {
    raw::aborted()
}

/// The host's token estimate for `entries`.
pub fn estimate_tokens(entries: &[MessageEntry]) -> u64 {
    raw::estimate_tokens(entries)
}

/// Runs the host's native compaction on the current session (only during
/// `compact`).
pub fn delegate_compaction(params: &CompactParams) -> Result<CompactResult, HostError> {
    raw::delegate_compaction(params)
}

/// Summarizes `text` with the host's summarizer in at most `max_tokens` tokens.
pub fn summarize(
    text: &str,
    instructions: Option<&str>,
    max_tokens: u32,
) -> Result<String, HostError> {
    raw::summarize(text, instructions, max_tokens)
}

/// Asks the embedding host's model for a completion: the agent's own model
/// in OpenClaw, the configured provider in `ctxbox run` (a replayed model
/// answers with an extractive summary of the request). Bounded per call and
/// per engine (`completions.*`): past a budget the host answers
/// `quota-exceeded`; without a model, `unavailable`. Waiting for the model
/// burns no fuel, and during `compact`/`after-turn` an answer re-arms the
/// watchdog.
///
/// ```no_run
/// use ctxbox_guest::{CompletionRequest, host};
///
/// # fn main() -> Result<(), ctxbox_guest::HostError> {
/// let summary = host::complete(
///     &CompletionRequest::prompt("Summarize: we chose SQLite for the cache.", 200)
///         .with_system("You summarize conversation history.")
///         .with_purpose("summarize"),
/// )?;
/// assert!(!summary.text.is_empty());
/// # Ok(())
/// # }
/// ```
pub fn complete(request: &CompletionRequest) -> Result<Completion, HostError> {
    raw::complete(request)
}

/// Reads the session's active branch after `cursor` (from the root when
/// `None`), at most `max_messages` entries or `max_bytes` bytes (host defaults
/// when `None`). A rolled-back turn is never delivered: a cursor that had read
/// it gets a reset whose reason starts with `anchor_missing` (keep the cursor
/// it carries and read again). During `bootstrap` and `assemble` the read
/// stops before the current turn's own entries, which `history` holds.
pub fn read_transcript_delta(
    cursor: Option<&str>,
    max_messages: Option<u32>,
    max_bytes: Option<u64>,
) -> Result<TranscriptDelta, HostError> {
    raw::read_transcript_delta(cursor, max_messages, max_bytes)
}

/// Reads what [`read_transcript_delta`] reads, with the reference's page
/// edges: a page never holds more than `max_bytes` (1 MiB when `None`, 64 MiB
/// at most). When the next entry alone is larger, the page is empty and its
/// `required_bytes` is the entry's size: ask again with at least that much
/// ([`read_transcript_page_growing`] does). When the host cannot read the
/// transcript now, the answer is [`TranscriptRead::Unavailable`]: keep your
/// cursor and ask again later.
///
/// Reading every entry that is ready, in pages of up to 64 KiB (an entry
/// larger than that on a page of its own), and again from the start after a
/// reset:
///
/// ```no_run
/// use ctxbox_guest::{HostError, MessageEntry, TranscriptRead, host};
///
/// fn catch_up(cursor: &mut Option<String>, seen: &mut Vec<MessageEntry>) -> Result<(), HostError> {
///     loop {
///         match host::read_transcript_page_growing(cursor.as_deref(), None, 64 << 10, 64 << 20)? {
///             TranscriptRead::Page(page) => {
///                 seen.extend(page.entries);
///                 *cursor = Some(page.cursor);
///                 if !page.has_more {
///                     return Ok(());
///                 }
///             }
///             TranscriptRead::Reset(reset) => {
///                 seen.clear(); // the cursor no longer applies: read again from the start
///                 *cursor = Some(reset.cursor);
///             }
///             // Nothing to read now: keep the cursor and try in a later call.
///             TranscriptRead::Unavailable(_) | TranscriptRead::Missing => return Ok(()),
///         }
///     }
/// }
/// ```
pub fn read_transcript_page(
    cursor: Option<&str>,
    max_messages: Option<u32>,
    max_bytes: Option<u64>,
) -> Result<TranscriptRead, HostError> {
    raw::read_transcript_page(cursor, max_messages, max_bytes)
}

/// [`read_transcript_page`] within `max_bytes`, except that a next entry
/// larger than that but at most `most_bytes` is read anyway: the host's
/// empty page names its size, and this asks once more with exactly that
/// budget (the page then holds that entry alone). An entry larger than
/// `most_bytes` is left to the caller: the answer is the empty page naming
/// its size.
pub fn read_transcript_page_growing(
    cursor: Option<&str>,
    max_messages: Option<u32>,
    max_bytes: u64,
    most_bytes: u64,
) -> Result<TranscriptRead, HostError> {
    let read = read_transcript_page(cursor, max_messages, Some(max_bytes))?;
    match &read {
        TranscriptRead::Page(page) => match page.required_bytes {
            Some(need) if need <= most_bytes => {
                read_transcript_page(Some(&page.cursor), max_messages, Some(need))
            }
            _ => Ok(read),
        },
        _ => Ok(read),
    }
}

/// The engine's durable key-value store: private to the engine id, shared by
/// its sessions, kept across restarts, limited by a byte quota.
///
/// The writes of one call (`set`, `delete`) are one batch: the call reads
/// them back at once (`get` and `scan` see them), the host makes them
/// durable in one transaction when the call answers, before it uses the
/// answer, and drops them all if the call fails (an error, a trap, a broken
/// limit). Other calls — other sessions of the engine — see them only once
/// the call has answered.
///
/// ```no_run
/// use ctxbox_guest::host::state;
///
/// # fn main() -> Result<(), ctxbox_guest::HostError> {
/// state::set("session-1/note/0001", b"first")?;
/// state::set("session-1/note/0002", b"second")?;
/// let notes = state::scan("session-1/note/")?; // in key order
/// assert_eq!(notes.len(), 2);
/// assert_eq!(state::get("session-1/note/0001")?.as_deref(), Some(&b"first"[..]));
/// assert!(state::delete("session-1/note/0001")?);
/// # Ok(())
/// # }
/// ```
pub mod state {
    use super::{HostError, StateEntry, raw};

    /// The value stored under `key`.
    pub fn get(key: &str) -> Result<Option<Vec<u8>>, HostError> {
        raw::state_get(key)
    }

    /// Stores `value` under `key`, atomically.
    pub fn set(key: &str, value: &[u8]) -> Result<(), HostError> {
        raw::state_set(key, value)
    }

    /// Deletes `key`; answers whether it existed.
    pub fn delete(key: &str) -> Result<bool, HostError> {
        raw::state_delete(key)
    }

    /// One page of at most `limit` entries under `prefix`, in key order, after
    /// `start_after`.
    pub fn scan_page(
        prefix: &str,
        start_after: Option<&str>,
        limit: u32,
    ) -> Result<Vec<StateEntry>, HostError> {
        raw::state_scan(prefix, start_after, limit)
    }

    /// Every entry under `prefix`, in key order (paging as needed).
    pub fn scan(prefix: &str) -> Result<Vec<StateEntry>, HostError> {
        const PAGE: u32 = 256;
        let mut all: Vec<StateEntry> = Vec::new();
        loop {
            let after = all.last().map(|entry| entry.key.clone());
            let page = scan_page(prefix, after.as_deref(), PAGE)?;
            let done = page.len() < PAGE as usize;
            all.extend(page);
            if done {
                return Ok(all);
            }
        }
    }
}

/// The engine's searchable memory: a full-text index of documents (an id,
/// text, small JSON metadata), private to the engine, per session or for
/// the whole engine ([`IndexScope`](crate::IndexScope)), counted against its
/// state quota. Matching is by substring, case-insensitively, so Chinese
/// and Japanese text needs no segmenting.
///
/// Writes are batched like [`state`]'s: durable when the call answers,
/// dropped if it fails, seen by later calls (not by the call's own
/// searches).
///
/// ```no_run
/// use ctxbox_guest::host::index;
/// use ctxbox_guest::{IndexDocument, IndexScope};
///
/// # fn main() -> Result<(), ctxbox_guest::HostError> {
/// index::put(IndexScope::Session, &IndexDocument {
///     id: "msg-0042".into(),
///     text: "我们决定用 SQLite 做缓存".into(),
///     metadata: Some(r#"{"role":"assistant"}"#.into()),
/// })?;
/// // … in a later call:
/// let page = index::search("SQLite 缓存", IndexScope::Session, 10, 0)?;
/// for hit in page.hits {
///     println!("{}: {}", hit.id, hit.snippet); // matches marked [like this]
/// }
/// # Ok(())
/// # }
/// ```
pub mod index {
    use super::{HostError, raw};
    use crate::{IndexDocument, IndexPage, IndexQuery, IndexScope};

    /// Indexes `document` in `scope`, replacing one with the same id.
    pub fn put(scope: IndexScope, document: &IndexDocument) -> Result<(), HostError> {
        raw::index_put(scope, document)
    }

    /// Removes document `id` of `scope`; answers whether it existed.
    pub fn delete(scope: IndexScope, id: &str) -> Result<bool, HostError> {
        raw::index_delete(scope, id)
    }

    /// The documents of `scope` containing every word of `text` (separated
    /// by spaces), best first: `limit` hits (1–100) after skipping `offset`.
    pub fn search(
        text: &str,
        scope: IndexScope,
        limit: u32,
        offset: u32,
    ) -> Result<IndexPage, HostError> {
        raw::index_search(&IndexQuery {
            text: text.to_owned(),
            scope,
            limit,
            offset,
        })
    }
}

/// Logs a formatted message at a level: `ctxbox_guest::log!(LogLevel::Info, "kept {n}")`.
#[macro_export]
macro_rules! log {
    ($level:expr, $($arg:tt)+) => {
        $crate::host::log($level, &::std::format!($($arg)+))
    };
}

/// Logs a formatted message at `trace` level.
#[macro_export]
macro_rules! trace {
    ($($arg:tt)+) => { $crate::log!($crate::LogLevel::Trace, $($arg)+) };
}

/// Logs a formatted message at `debug` level.
#[macro_export]
macro_rules! debug {
    ($($arg:tt)+) => { $crate::log!($crate::LogLevel::Debug, $($arg)+) };
}

/// Logs a formatted message at `info` level.
#[macro_export]
macro_rules! info {
    ($($arg:tt)+) => { $crate::log!($crate::LogLevel::Info, $($arg)+) };
}

/// Logs a formatted message at `warn` level.
#[macro_export]
macro_rules! warn {
    ($($arg:tt)+) => { $crate::log!($crate::LogLevel::Warn, $($arg)+) };
}

/// Logs a formatted message at `error` level.
#[macro_export]
macro_rules! error {
    ($($arg:tt)+) => { $crate::log!($crate::LogLevel::Error, $($arg)+) };
}
