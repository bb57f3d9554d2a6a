//! `delegating`: its own prompt, the host's compaction.
//!
//! `assemble` sends the whole history, except that the output of tool calls
//! older than the last three turns (when it is larger than 100 tokens) is
//! replaced by a short placeholder result for the same call, and adds a
//! system-prompt note saying so. Calls stay answered, so tool-call pairing
//! stays valid. The token budget is left to the host: this engine does not
//! own compaction, so the host compacts before assembling when the session
//! outgrows the window, and `compact` is the SDK default, which delegates to
//! the host's native compaction.
//!
//! The planning logic ([`plan`]) works on any [`HistoryView`], so it also runs
//! natively. It reads the kind of each entry before the recent turns and
//! copies only the stale tool results it replaces.

#![warn(missing_docs)]

mod config;
mod elide;

use ctxbox_guest::prelude::*;

pub use config::Config;
pub use elide::{PLACEHOLDER_TOKENS, SYSTEM_PROMPT_ADDITION, plan};

/// The engine's id.
pub const ID: &str = "delegating";

/// Who the engine is: compaction is the host's, and every host-added
/// parameter is accepted so that `compact` hands them all on to it.
pub fn info() -> EngineInfo {
    EngineInfo::new(ID, "Delegating").with_version(env!("CARGO_PKG_VERSION"))
}

/// The exported engine, with the default [`Config`].
#[derive(Debug, Default)]
pub struct Delegating {
    config: Config,
}

impl Engine for Delegating {
    fn info(&self) -> EngineInfo {
        info()
    }

    fn assemble(
        &mut self,
        _session: &SessionRef,
        history: &History,
        _params: AssembleParams,
    ) -> Result<AssembleResult, EngineError> {
        Ok(plan(history, &self.config))
    }
}

ctxbox_guest::export_engine!(Delegating);

#[cfg(test)]
mod tests;
