//! `ctxbox serve`: a long-lived sidecar that serves many sessions and engines
//! to another process (the OpenClaw plugin in `integrations/openclaw/`) over
//! newline-delimited JSON, protocol versions 1 and 2 (documented in
//! `integrations/openclaw/PROTOCOL.md`): version 2 adds reverse calls (the
//! client's model answers engines' completions, [`reverse`]) and engine
//! tools ([`tools`]).
//!
//! Every engine call goes through the guarded engine, so the sandbox's
//! limits, quarantine and the `legacy` fallback apply as everywhere else;
//! each request also has a deadline of its own and is answered by it.
//!
//! The process counts what it does ([`metrics`]): served to Prometheus
//! with `--metrics` ([`exposition`]) and written to the data directory for
//! `ctxbox health` ([`snapshots`]).

pub mod commits;
mod commits_postgres;
pub mod exposition;
pub mod heap;
mod hearing;
pub mod message;
pub mod methods;
pub mod metrics;
pub mod protocol;
pub mod resident;
pub mod reverse;
pub mod server;
pub mod sessions;
pub mod snapshots;
pub mod stored_histories;
mod tools;

pub use self::commits_postgres::PostgresCommits;
pub use self::methods::Service;
pub use self::server::serve;
