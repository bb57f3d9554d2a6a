//! The engines of one host, above the sandbox: which ids exist
//! ([`registry`]), the guard that stands between a caller and a misbehaving
//! engine ([`guard`]), durable quarantine records ([`quarantine`]) and the
//! in-memory conduct that decides some of them ([`conduct`]), the
//! built-in [`legacy`] engine every call can fall back to, the example
//! engines compiled into this build ([`bundled`]), what configuration says
//! about plugins ([`plugins`]), and resolving the configured slot to a
//! guarded engine ([`selection`]).

pub mod bundled;
pub mod conduct;
pub mod guard;
pub mod legacy;
pub mod observe;
pub mod plugins;
pub mod quarantine;
mod quarantine_postgres;
pub mod registry;
pub mod selection;

pub use self::guard::{GuardPolicy, GuardedEngine};
pub use self::legacy::LegacyEngine;
pub use self::plugins::{FactoryContext, PluginSettings};
pub use self::quarantine::QuarantineStore;
pub use self::quarantine_postgres::PostgresQuarantine;
pub use self::registry::{EngineFactory, LEGACY_ID, Registry};
pub use self::selection::Engines;
