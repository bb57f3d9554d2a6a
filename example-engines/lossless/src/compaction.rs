//! Summarizing: leaf summaries of old messages, condensed summaries of
//! summaries, one at a time, each persisted as soon as it is written.
//!
//! A compaction is a loop of steps. Each step first condenses when the newest
//! `condense_fanout` roots share a level (so condensation follows the leaves
//! as they accumulate); otherwise, while the context is over the goal, it
//! summarizes the oldest chunk of unsummarized messages outside the fresh
//! tail. Between steps it reports progress and checks for an abort; a step
//! either completes (node, then meta written) or leaves the store as it was.

use ctxbox_guest::{
    CompactResult, EngineError, HistoryView, HostErrorKind, MessageEntry, MessageKind,
};

use crate::config::Config;
use crate::coverage::Coverage;
use crate::ports::{Services, Store};
use crate::records::{Meta, Node, Root};
use crate::render;
use crate::session::Session;

/// The fewest tokens a summary is allowed, however small its sources.
const MIN_SUMMARY_TOKENS: u64 = 64;

/// How far a compaction goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Goal {
    /// Until the context takes at most this many tokens.
    Within(u64),
    /// Until everything outside the fresh tail is summarized.
    Everything,
}

/// Why a compaction stopped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Stop {
    /// The context meets the goal.
    GoalMet,
    /// Every complete chunk outside the fresh tail is summarized.
    NothingLeft,
    /// The caller gave up.
    Aborted,
    /// The call wrote as many summaries as one call may.
    CallLimit,
    /// The host's summarizer failed, with its message.
    SummarizerFailed(String),
}

/// What a compaction did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Outcome {
    /// Summaries written.
    pub summaries: u32,
    /// Why it stopped.
    pub stop: Stop,
    /// The context's tokens before.
    pub tokens_before: u64,
    /// The context's tokens after.
    pub tokens_after: u64,
}

impl Outcome {
    /// The contract's answer. Summaries live in the engine's store, so it
    /// names no first kept entry: the host's transcript stays whole.
    pub(crate) fn into_result(self) -> CompactResult {
        let reason = match &self.stop {
            Stop::GoalMet => "the context fits its target".to_owned(),
            Stop::NothingLeft => "nothing left to summarize outside the fresh tail".to_owned(),
            Stop::Aborted => "aborted by the caller".to_owned(),
            Stop::CallLimit => format!(
                "stopped after {} summaries; the next compaction continues",
                self.summaries
            ),
            Stop::SummarizerFailed(message) => format!("the summarizer failed: {message}"),
        };
        CompactResult {
            ok: !matches!(self.stop, Stop::SummarizerFailed(_)),
            compacted: self.summaries > 0,
            reason: Some(reason),
            summary: None,
            first_kept_entry_id: None,
            tokens_before: self.tokens_before,
            // A summarizer that ignores its token cap could leave the context
            // larger; then there is no honest figure the host would accept.
            tokens_after: (self.tokens_after <= self.tokens_before).then_some(self.tokens_after),
            rotated_session: None,
            details: None,
        }
    }
}

/// Compacts one session of `history` towards `goal`.
pub(crate) struct Compaction<'a, S, V> {
    /// The session's data.
    pub session: Session<'a, S>,
    /// The host services.
    pub services: &'a V,
    /// The engine's tunables.
    pub config: &'a Config,
    /// The caller's extra instructions for the summarizer.
    pub custom_instructions: Option<&'a str>,
}

/// A summary about to be written.
struct Pending {
    /// What the summarizer reads.
    text: String,
    /// The engine's instructions for it.
    instructions: &'static str,
    /// Its token cap.
    max_tokens: u32,
    /// The node, without its summary yet.
    node: Node,
    /// Where the node goes.
    placement: Placement,
}

/// Where a new node goes in the session's bookkeeping.
enum Placement {
    /// A leaf: messages up to `end` are summarized, the last being `last_entry_id`.
    Leaf { end: u64, last_entry_id: String },
    /// A condensed node replacing the newest `roots` roots.
    Condensed { roots: usize },
}

impl<S: Store, V: Services> Compaction<'_, S, V> {
    /// Runs steps until the goal is met, nothing is left, the caller aborts,
    /// the summarizer fails or the call has written its share.
    pub(crate) fn run(
        &self,
        history: &impl HistoryView,
        goal: Goal,
    ) -> Result<Outcome, EngineError> {
        let mut meta = self.session.meta()?;
        let context_tokens =
            |meta: &Meta| Coverage::locate(meta, history).context_tokens(meta, history);
        let tokens_before = context_tokens(&meta);
        let mut tokens = tokens_before;
        let mut summaries = 0;
        let stop = loop {
            if self.services.aborted() {
                break Stop::Aborted;
            }
            let pending = match self.condensation(&meta)? {
                Some(pending) => pending,
                None if goal_met(goal, tokens) => break Stop::GoalMet,
                None => match self.leaf(&meta)? {
                    Some(pending) => pending,
                    None => break Stop::NothingLeft,
                },
            };
            if summaries >= self.config.max_summaries_per_call {
                break Stop::CallLimit;
            }
            let instructions = render::instructions(pending.instructions, self.custom_instructions);
            let summary =
                match self
                    .services
                    .summarize(&pending.text, &instructions, pending.max_tokens)
                {
                    Ok(summary) => summary,
                    Err(error) if error.kind == HostErrorKind::Aborted => break Stop::Aborted,
                    // The host's budget for this call is spent: the next
                    // call continues.
                    Err(error) if error.kind == HostErrorKind::QuotaExceeded => {
                        break Stop::CallLimit;
                    }
                    Err(error) => break Stop::SummarizerFailed(error.message),
                };
            self.commit(&mut meta, pending, summary)?;
            summaries += 1;
            self.services.report_progress();
            tokens = context_tokens(&meta);
        };
        Ok(Outcome {
            summaries,
            stop,
            tokens_before,
            tokens_after: tokens,
        })
    }

    /// Condensation of the newest roots, when `condense_fanout` of them share
    /// a level.
    fn condensation(&self, meta: &Meta) -> Result<Option<Pending>, EngineError> {
        let fanout = self.config.condense_fanout.max(2) as usize;
        let Some(run_start) = meta.roots.len().checked_sub(fanout) else {
            return Ok(None);
        };
        let run = &meta.roots[run_start..];
        let level = run[0].level;
        if run.iter().any(|root| root.level != level) {
            return Ok(None);
        }
        let children = run
            .iter()
            .map(|root| self.session.node(root.node))
            .collect::<Result<Vec<_>, _>>()?;
        let (Some(first), Some(last)) = (children.first(), children.last()) else {
            return Ok(None);
        };
        let node = Node {
            level: level + 1,
            sources: run.iter().map(|root| root.node).collect(),
            first_seq: first.first_seq,
            last_seq: last.last_seq,
            summary: String::new(),
            tokens: 0,
        };
        let source_tokens = children.iter().map(|child| child.tokens).sum();
        Ok(Some(Pending {
            text: render::summaries(&children),
            instructions: render::CONDENSE_INSTRUCTIONS,
            max_tokens: summary_cap(self.config.condensed_summary_tokens, source_tokens),
            node,
            placement: Placement::Condensed { roots: fanout },
        }))
    }

    /// A leaf summary of the oldest unsummarized chunk, if a whole chunk lies
    /// outside the fresh tail. A chunk never ends right before a tool result:
    /// it takes the results of its last call along, and waits while they
    /// reach into the fresh tail.
    fn leaf(&self, meta: &Meta) -> Result<Option<Pending>, EngineError> {
        let start = meta.summarized_end;
        let limit = meta
            .next_seq
            .saturating_sub(self.config.fresh_tail_messages.into());
        let mut end = start + u64::from(self.config.leaf_chunk_messages.max(1));
        if end > limit {
            return Ok(None);
        }
        let mut chunk = (start..end)
            .map(|seq| self.session.message(seq))
            .collect::<Result<Vec<MessageEntry>, _>>()?;
        while end < meta.next_seq {
            let next = self.session.message(end)?;
            if next.message.kind() != MessageKind::ToolResult {
                break;
            }
            if end >= limit {
                return Ok(None);
            }
            chunk.push(next);
            end += 1;
        }
        let Some(last_entry_id) = chunk.last().map(|entry| entry.id.clone()) else {
            return Ok(None);
        };
        let source_tokens = self.services.estimate_tokens(&chunk);
        Ok(Some(Pending {
            text: render::transcript(&chunk, self.config.max_message_chars),
            instructions: render::LEAF_INSTRUCTIONS,
            max_tokens: summary_cap(self.config.leaf_summary_tokens, source_tokens),
            node: Node {
                level: 0,
                sources: (start..end).collect(),
                first_seq: start,
                last_seq: end - 1,
                summary: String::new(),
                tokens: 0,
            },
            placement: Placement::Leaf { end, last_entry_id },
        }))
    }

    /// Stores the finished node, then the bookkeeping that makes it a root.
    fn commit(
        &self,
        meta: &mut Meta,
        pending: Pending,
        summary: String,
    ) -> Result<(), EngineError> {
        let mut node = pending.node;
        node.summary = summary;
        node.tokens = self.services.estimate_tokens(&[MessageEntry {
            id: String::new(),
            parent_id: None,
            timestamp_ms: 0,
            message: render::summary_message(&node),
        }]);
        let id = meta.next_node;
        self.session.save_node(id, &node)?;
        meta.next_node += 1;
        match pending.placement {
            Placement::Leaf { end, last_entry_id } => {
                meta.summarized_end = end;
                meta.frontier_entry_id = Some(last_entry_id);
            }
            Placement::Condensed { roots } => {
                meta.roots.truncate(meta.roots.len().saturating_sub(roots));
            }
        }
        meta.roots.push(Root {
            node: id,
            level: node.level,
            tokens: node.tokens,
        });
        self.session.save_meta(meta)
    }
}

fn goal_met(goal: Goal, tokens: u64) -> bool {
    match goal {
        Goal::Within(target) => tokens <= target,
        Goal::Everything => false,
    }
}

/// The token cap of a summary: `limit`, but at most half its sources (a
/// summary should compress), and never below [`MIN_SUMMARY_TOKENS`].
fn summary_cap(limit: u32, source_tokens: u64) -> u32 {
    let half = (source_tokens / 2).max(MIN_SUMMARY_TOKENS);
    u32::try_from(half).map_or(limit, |half| half.min(limit))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summaries_are_capped_by_half_their_sources_and_a_floor() {
        assert_eq!(summary_cap(1_200, 10_000), 1_200);
        assert_eq!(summary_cap(1_200, 1_000), 500);
        assert_eq!(summary_cap(1_200, 20), MIN_SUMMARY_TOKENS as u32);
        assert_eq!(summary_cap(1_200, u64::MAX), 1_200);
    }

    #[test]
    fn results_report_failures_and_never_claim_growth() {
        let outcome = |stop, summaries, after| Outcome {
            summaries,
            stop,
            tokens_before: 1_000,
            tokens_after: after,
        };
        let done = outcome(Stop::GoalMet, 3, 400).into_result();
        assert!(done.ok && done.compacted);
        assert_eq!(done.tokens_after, Some(400));
        assert_eq!(done.first_kept_entry_id, None);

        let failed = outcome(Stop::SummarizerFailed("offline".into()), 0, 1_000).into_result();
        assert!(!failed.ok && !failed.compacted);
        assert!(failed.reason.unwrap_or_default().contains("offline"));

        let grew = outcome(Stop::NothingLeft, 1, 1_100).into_result();
        assert_eq!(grew.tokens_after, None);
    }
}
