//! Recovering from a context-overflow error (ARCHITECTURE.md §8): compact with
//! `force: true` toward the budget, at most a few times per turn; a
//! compaction that compacts nothing does not count against that and falls
//! through to one pass of truncating oversized tool traffic.

use super::{Session, TurnError, TurnReport, TurnRunner};
use crate::contract::engine::CallOptions;
use crate::contract::types::{CompactParams, CompactionTarget};

/// What a turn has left for overflow recovery.
pub(super) struct Recovery {
    compactions_left: u32,
}

impl Recovery {
    pub(super) fn new(max_compactions: u32) -> Self {
        Self {
            compactions_left: max_compactions,
        }
    }
}

impl TurnRunner {
    /// Makes room after the provider refused a prompt of `prompt_tokens`
    /// tokens; an error when nothing is left to try.
    pub(super) async fn recover(
        &self,
        session: &mut Session,
        call: &CallOptions,
        report: &mut TurnReport,
        recovery: &mut Recovery,
        prompt_tokens: u64,
    ) -> Result<(), TurnError> {
        if recovery.compactions_left > 0 {
            let params = CompactParams {
                token_budget: Some(self.config.prompt_budget()),
                force: true,
                current_token_count: Some(prompt_tokens),
                compaction_target: CompactionTarget::Budget,
                ..CompactParams::default()
            };
            let result = self.compact_session(session, call, &params, report).await?;
            if result.compacted {
                recovery.compactions_left -= 1;
                return Ok(());
            }
        }
        if !session.truncate_tool_traffic {
            session.truncate_tool_traffic = true;
            report.truncated_tool_traffic = true;
            return Ok(());
        }
        Err(TurnError::ContextOverflow {
            prompt_tokens,
            window: self.config.window,
        })
    }
}
