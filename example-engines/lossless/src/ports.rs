//! What the engine's logic needs from outside: a key-value store and the
//! host's summarizing services. The wasm build wires them to the host
//! ([`crate::guest`]); native tests and benches plug in their own.

use std::cell::RefCell;
use std::collections::BTreeMap;

use ctxbox_guest::{EngineError, HostError, MessageEntry};

/// A durable key-value store: the host's `state-*` store in wasm.
///
/// Methods take `&self`: a store is a handle to data that lives elsewhere.
pub trait Store {
    /// The value under `key`, if any.
    fn get(&self, key: &str) -> Result<Option<Vec<u8>>, EngineError>;

    /// Stores `value` under `key`, atomically.
    fn set(&self, key: &str, value: &[u8]) -> Result<(), EngineError>;
}

/// The host services compaction uses.
pub trait Services {
    /// Summarizes `text` following `instructions`, in at most `max_tokens`
    /// tokens.
    fn summarize(
        &self,
        text: &str,
        instructions: &str,
        max_tokens: u32,
    ) -> Result<String, HostError>;

    /// The host's token estimate for `entries`.
    fn estimate_tokens(&self, entries: &[MessageEntry]) -> u64;

    /// Tells the host a long compaction is making progress.
    fn report_progress(&self);

    /// Whether the caller has given up on the current call.
    fn aborted(&self) -> bool;
}

/// A [`Store`] in memory, for native tests and benches.
#[derive(Debug, Default, Clone)]
pub struct MemoryStore {
    entries: RefCell<BTreeMap<String, Vec<u8>>>,
}

impl MemoryStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    /// Every key and value, in key order.
    pub fn snapshot(&self) -> BTreeMap<String, Vec<u8>> {
        self.entries.borrow().clone()
    }
}

impl Store for MemoryStore {
    fn get(&self, key: &str) -> Result<Option<Vec<u8>>, EngineError> {
        Ok(self.entries.borrow().get(key).cloned())
    }

    fn set(&self, key: &str, value: &[u8]) -> Result<(), EngineError> {
        self.entries
            .borrow_mut()
            .insert(key.to_owned(), value.to_vec());
        Ok(())
    }
}
