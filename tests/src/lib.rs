//! Shared helpers for ctxbox's end-to-end tests and benches.

/// Paths of the guest components the build script compiled.
pub mod guests {
    include!(concat!(env!("OUT_DIR"), "/guests.rs"));
}
