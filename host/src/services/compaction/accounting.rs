//! How big the context is before compacting (ARCHITECTURE.md §6, step 1): the provider's
//! figure when the caller has one, else the last valid assistant `usage`
//! total plus the estimate of the messages after it, and never less than the
//! host's own estimate (so `tokens_after <= tokens_before` holds).

use crate::contract::types::{AgentMessage, StopReason};
use crate::transcript::ActiveContext;

/// Tokens of the context now.
pub(crate) fn tokens_before(context: &ActiveContext, current_token_count: Option<u64>) -> u64 {
    let history = &context.history;
    let estimate = history.total_tokens();
    let reported = current_token_count.or_else(|| {
        // Usage reported before the latest compaction measured a context that
        // no longer exists.
        (context.fresh_from..history.len()).rev().find_map(|index| {
            let entry = history.entry(index)?;
            match &entry.message {
                AgentMessage::Assistant {
                    usage: Some(usage),
                    stop_reason,
                    ..
                } if usage.total > 0
                    && !matches!(stop_reason, StopReason::Error | StopReason::Aborted) =>
                {
                    Some(usage.total + history.tokens(index + 1..history.len()))
                }
                _ => None,
            }
        })
    });
    reported.unwrap_or(0).max(estimate)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::contract::history::History;
    use crate::contract::types::{MessageEntry, Usage};

    fn context(messages: Vec<AgentMessage>, fresh_from: usize) -> ActiveContext {
        let entries = messages
            .into_iter()
            .map(|message| MessageEntry {
                id: String::new(),
                parent_id: None,
                timestamp_ms: 0,
                message,
            })
            .collect();
        ActiveContext {
            history: History::new(entries),
            starts_with_summary: false,
            fresh_from,
            previous_compaction: None,
        }
    }

    fn assistant(total: u64, stop_reason: StopReason) -> AgentMessage {
        AgentMessage::Assistant {
            content: vec![],
            model: None,
            provider: None,
            usage: Some(Usage {
                total,
                ..Usage::default()
            }),
            stop_reason,
            error_message: None,
        }
    }

    #[test]
    fn uses_the_last_valid_usage_plus_what_follows() {
        let later = AgentMessage::user_text("abcd");
        let ctx = context(
            vec![
                assistant(5_000, StopReason::Stop),
                assistant(9_000, StopReason::Aborted),
                later.clone(),
            ],
            0,
        );
        let after: u64 = ctx.history.tokens(1..3);
        assert_eq!(tokens_before(&ctx, None), 5_000 + after);
        assert_eq!(tokens_before(&ctx, Some(7_777)), 7_777);
    }

    #[test]
    fn ignores_usage_from_before_the_latest_compaction_and_never_undercounts() {
        let ctx = context(
            vec![
                assistant(50_000, StopReason::Stop),
                AgentMessage::user_text("x"),
            ],
            1,
        );
        assert_eq!(tokens_before(&ctx, None), ctx.history.total_tokens());
        assert_eq!(tokens_before(&ctx, Some(1)), ctx.history.total_tokens());
    }
}
