//! Where a host's durable state lives (ARCHITECTURE.md §14): the `[store]`
//! configuration, the shared PostgreSQL database many hosts use at once
//! (connection pool, versioned schema) and the per-session leases that keep
//! two hosts from running turns of one session at the same time.
//!
//! The stores themselves stay with the layer that owns their data, each a
//! trait with an embedded implementation (files and SQLite in the data
//! directory, the default) and a PostgreSQL one built on [`Postgres`]:
//! transcripts (`transcript::TranscriptLogs`), engine state
//! (`services::state::EngineState`), quarantine records
//! (`engines::quarantine::QuarantineBackend`) and turn commits
//! (`serve::commits::TurnCommits`).

mod config;
mod error;
mod lease;
mod postgres;
mod schema;

pub use self::config::{StoreConfig, StoreKind};
pub use self::error::StoreError;
pub use self::lease::{FenceRefusal, Lease, LeaseError, SessionLeases, StaleLease, require_lease};
pub use self::postgres::Postgres;
pub use self::schema::{SCHEMA_VERSION, SIZE_CLASSES};
