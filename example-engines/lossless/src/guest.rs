//! The ports wired to the ctxbox host, for the wasm build.

use ctxbox_guest::{
    CompletionRequest, EngineError, HostError, HostErrorKind, IndexDocument, IndexPage, IndexScope,
    MessageEntry, host,
};

use crate::ports::{Indexed, Recall, Services, Store};

/// The system prompt of a summary written by the host's model.
pub const SUMMARY_SYSTEM_PROMPT: &str = "You summarize conversation history for ctxbox's \
lossless engine. Read the material between <content> tags and write exactly the summary the \
instructions ask for. Do not continue the conversation and do not answer questions in it. Output \
only the summary.";

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

/// The host's model (or, when it has none, its summarizer), token
/// estimator, progress report and abort flag.
#[derive(Debug, Default, Clone, Copy)]
pub struct HostServices;

impl Services for HostServices {
    fn summarize(
        &self,
        text: &str,
        instructions: &str,
        max_tokens: u32,
    ) -> Result<String, HostError> {
        // The agent's own model writes the summary; a host without one
        // answers with its summarizer.
        let request = CompletionRequest::prompt(
            format!("<content>\n{text}\n</content>\n\n{instructions}"),
            max_tokens,
        )
        .with_system(SUMMARY_SYSTEM_PROMPT)
        .with_purpose("summarize");
        match host::complete(&request) {
            Ok(completion) => Ok(completion.text),
            Err(error) if error.kind == HostErrorKind::Unavailable => {
                host::summarize(text, Some(instructions), max_tokens)
            }
            Err(error) => Err(error),
        }
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

    fn recall(&self) -> &dyn Recall {
        &HostRecall
    }
}

/// The host's index, session scope.
#[derive(Debug, Default, Clone, Copy)]
pub struct HostRecall;

impl Recall for HostRecall {
    fn put(
        &self,
        _session_id: &str,
        id: &str,
        text: &str,
        metadata: &str,
    ) -> Result<Indexed, EngineError> {
        // The host scopes the document to the call's session. A host
        // without an index has nothing to search: messages are kept all the
        // same. One over its per-call cap (or the engine's quota) takes the
        // rest in later calls.
        let document = IndexDocument {
            id: id.to_owned(),
            text: text.to_owned(),
            metadata: Some(metadata.to_owned()),
        };
        match host::index::put(IndexScope::Session, &document) {
            Ok(()) => Ok(Indexed::Done),
            Err(error) if error.kind == HostErrorKind::Unavailable => Ok(Indexed::Done),
            Err(error) if error.kind == HostErrorKind::QuotaExceeded => Ok(Indexed::Full),
            Err(error) => Err(error.into()),
        }
    }

    fn search(
        &self,
        _session_id: &str,
        query: &str,
        limit: u32,
        offset: u32,
    ) -> Result<IndexPage, EngineError> {
        Ok(host::index::search(
            query,
            IndexScope::Session,
            limit,
            offset,
        )?)
    }
}
