//! Recovering from a context-overflow error (ARCHITECTURE.md §8): compact with
//! `force: true` toward the budget, at most a few times per turn; a
//! compaction that compacts nothing does not count against that and falls
//! through to one pass of truncating oversized tool traffic.

use super::runtime_settings::{Attempt, CompactionTrigger, compaction_context};
use super::{Session, TurnError, TurnReport, TurnRunner};
use crate::contract::engine::CallOptions;
use crate::contract::types::{CompactParams, CompactionTarget};

/// What a turn has left for overflow recovery.
pub(super) struct Recovery {
    max_compactions: u32,
    compactions_left: u32,
}

impl Recovery {
    pub(super) fn new(max_compactions: u32) -> Self {
        Self {
            max_compactions,
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
            let trigger = CompactionTrigger::Overflow;
            let attempt = Attempt {
                number: recovery.max_compactions - recovery.compactions_left + 1,
                of: recovery.max_compactions,
            };
            let params = CompactParams {
                token_budget: Some(self.config.prompt_budget()),
                force: true,
                current_token_count: Some(prompt_tokens),
                compaction_target: CompactionTarget::Budget,
                runtime_settings: Some(self.compaction_settings(trigger)),
                runtime_context: Some(compaction_context(
                    trigger,
                    Some(prompt_tokens),
                    Some(attempt),
                )),
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
