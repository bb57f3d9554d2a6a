//! `ctxbox serve`: a long-lived sidecar that serves many sessions and engines
//! to another process (the OpenClaw plugin in `integrations/openclaw/`) over
//! newline-delimited JSON, protocol version 1 (documented in
//! `integrations/openclaw/PROTOCOL.md`).
//!
//! Every engine call goes through the guarded engine, so the sandbox's
//! limits, quarantine and the `legacy` fallback apply as everywhere else;
//! each request also has a deadline of its own and is answered by it.

pub mod commits;
mod commits_postgres;
pub mod message;
pub mod methods;
pub mod protocol;
pub mod server;
pub mod sessions;

pub use self::commits_postgres::PostgresCommits;
pub use self::methods::Service;
pub use self::server::serve;
