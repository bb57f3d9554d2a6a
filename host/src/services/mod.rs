//! The real host services: what an engine's `host` imports reach, and what
//! the native `legacy` engine is built on.
//!
//! - [`native`]: [`NativeServices`], the [`HostServices`](crate::contract::HostServices)
//!   implementation every production engine gets;
//! - [`state`]: the durable per-engine key-value store behind `state-*`
//!   (embedded: one database per engine, `state_files`);
//! - [`index`]: the engines' searchable memory behind `index-*`, kept by the
//!   same stores (`index_sqlite`, `index_postgres`);
//! - [`compaction`]: native compaction of a transcript (`legacy`'s `compact`
//!   and `delegate-compaction`);
//! - [`summarize`]: the summarizers compaction and the `summarize` import use;
//! - [`completions`]: engines' model completions (`complete`) and their
//!   budgets;
//! - [`integrity`]: SQLite's consistency check of the embedded store's
//!   databases (`ctxbox doctor`).
//! - [`sql`]: each engine's own SQL databases (`wit/sql.wit`).

pub mod compaction;
pub mod completions;
pub mod index;
pub(crate) mod index_postgres;
mod index_sqlite;
pub mod integrity;
pub mod native;
mod pool_share;
pub mod sql;
pub mod state;
mod state_files;
mod state_postgres;
pub mod summarize;

pub use self::native::NativeServices;
pub use self::state_postgres::PostgresState;
