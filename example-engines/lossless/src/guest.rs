//! The ports wired to the ctxbox host, for the wasm build.

use ctxbox_guest::{EngineError, HostError, MessageEntry, host};

use crate::ports::{Services, Store};

/// The host's `state-*` store of this engine.
#[derive(Debug, Default, Clone, Copy)]
pub struct HostStore;

impl Store for HostStore {
    fn get(&self, key: &str) -> Result<Option<Vec<u8>>, EngineError> {
        Ok(host::state::get(key)?)
    }

    fn set(&self, key: &str, value: &[u8]) -> Result<(), EngineError> {
        Ok(host::state::set(key, value)?)
    }
}

/// The host's summarizer, token estimator, progress report and abort flag.
#[derive(Debug, Default, Clone, Copy)]
pub struct HostServices;

impl Services for HostServices {
    fn summarize(
        &self,
        text: &str,
        instructions: &str,
        max_tokens: u32,
    ) -> Result<String, HostError> {
        host::summarize(text, Some(instructions), max_tokens)
    }

    fn estimate_tokens(&self, entries: &[MessageEntry]) -> u64 {
        host::estimate_tokens(entries)
    }

    fn report_progress(&self) {
        host::report_progress();
    }

    fn aborted(&self) -> bool {
        host::aborted()
    }
}
