//! The transcript store (ARCHITECTURE.md §7): OpenClaw/pi JSONL session files, version 3.
//!
//! A session file is a header line followed by one JSON entry per line; the
//! entries form a tree through `parentId`, and the model's context is the path
//! from the root to the last entry, after the latest compaction's summary.
//! ctxbox reads files OpenClaw wrote and writes files OpenClaw reads:
//!
//! - every line is kept as it was, so unknown entry types and fields survive
//!   and a read-write round trip is byte-identical ([`Transcript::save_copy`]);
//! - appends go to the end of the file in whole lines and are durable when
//!   they return (per [`FsyncPolicy`]);
//! - a last line torn by a crash is moved to a side file when the transcript
//!   is opened for writing ([`OpenReport::torn_tail`]), never merged with a
//!   later append; line 1, the header, is never set aside;
//! - [`TranscriptStore::open_read_only`] reads without locking or changing
//!   the file (a torn last line is ignored, not cut), for readers beside a
//!   live writer;
//! - an unreadable line in the middle is reported with its file and line
//!   ([`OpenReport::corrupt_lines`], [`OpenReport::problems`]) while the rest
//!   stays readable;
//! - a transcript a compaction rotated away from refuses appends
//!   ([`TranscriptError::Rotated`] names the file the session continues in);
//! - new files (creation, rotation) are written to a temporary file, synced
//!   and renamed.
//!
//! ```no_run
//! # fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use ctxbox_host::transcript::{NewSession, TranscriptConfig, TranscriptStore};
//! use ctxbox_host::contract::types::AgentMessage;
//!
//! let store = TranscriptStore::new(TranscriptConfig::default());
//! let transcript = store.open_or_create("session.jsonl".as_ref(), NewSession::default())?;
//! let stored = transcript.append(&[AgentMessage::user_text("hello")])?;
//! println!("stored as {}", stored[0].id);
//! let history = transcript.history(); // what the engine sees, estimates cached
//! # let _ = history; Ok(()) }
//! ```

mod context;
mod delta;
mod error;
mod file;
mod fork;
mod handle;
mod history_delta;
mod log;
pub mod openclaw;
mod postgres;
mod record;
mod rotate;
mod store;
mod wire;

use serde::{Deserialize, Serialize};

use crate::contract::tokens::Tokenizer;

pub use self::context::{ActiveContext, PreviousCompaction};
pub use self::delta::MAX_PAGE_BYTES as MAX_DELTA_PAGE_BYTES;
pub use self::error::{CorruptLine, TranscriptError};
pub use self::file::{FsyncPolicy, TornTail};
pub use self::handle::{OpenReport, Transcript};
pub(crate) use self::history_delta::read as read_history_delta;
pub use self::log::{Access, Files, Opened, TranscriptLog, TranscriptLogs};
pub use self::postgres::PostgresLogs;
pub use self::store::{NewSession, TranscriptStore};
pub(crate) use self::wire::{CompactionFigures, WireMessage, encode_message_entry, unix_millis};
pub use self::wire::{SESSION_VERSION, SessionHeader};

/// How transcripts are written.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase", deny_unknown_fields)]
pub struct TranscriptConfig {
    /// When appends reach the disk.
    pub fsync: FsyncPolicy,
    /// How the per-entry token figures are counted: `estimate` (default), or
    /// with the `exact-tokens` feature `o200k-base` / `cl100k-base`.
    pub tokenizer: Tokenizer,
}

#[cfg(test)]
mod tests;
