//! Turning an `assemble` answer into what the provider is sent: the engine's
//! messages (or a reused thread-bootstrap projection plus what came since),
//! the system prompt with the engine's addition, oversized tool traffic cut
//! down when overflow recovery or the pre-prompt check asked for it (every
//! tool result to the reference's cap on one result, then tool results,
//! tool-call arguments and thinking as far as the budget needs), and tool
//! calls and results always paired. The
//! transcript keeps everything; only prompts are cut.

use std::collections::HashSet;

use super::{Session, TurnError, TurnRunner, tool_results};
use crate::contract::engine::{CallOptions, ContextEngine};
use crate::contract::history::History;
use crate::contract::tokens;
use crate::contract::types::{AgentMessage, AssembleParams, ContentBlock, ContextProjection};
use crate::provider::{runs_its_tool_calls, unavailable_tool_result};

/// What the note on a cut block costs, tokens (an upper bound).
const NOTE_TOKENS: u64 = 24;
/// Rounds of fitting before the cut prompt is taken as it is (each round
/// corrects the estimate of the one before).
const FIT_ROUNDS: usize = 4;

/// A prompt the engine asked to reuse for its thread until `epoch` changes,
/// or until the context it was built from changes under it.
pub(super) struct Projection {
    epoch: u64,
    system_prompt: String,
    messages: Vec<AgentMessage>,
    /// History length when it was built: later entries are appended to it.
    history_len: usize,
    /// Ids of the first and the last entry it was built from. A context
    /// rebuilt since (a compaction starts it with a new summary entry; a
    /// branch switch ends it elsewhere) no longer has them there.
    first_id: Option<String>,
    last_id: Option<String>,
}

impl Projection {
    fn new(
        epoch: u64,
        system_prompt: String,
        messages: Vec<AgentMessage>,
        history: &History,
    ) -> Self {
        let entries = history.entries();
        Self {
            epoch,
            system_prompt,
            messages,
            history_len: entries.len(),
            first_id: entries.first().map(|entry| entry.id.clone()),
            last_id: entries.last().map(|entry| entry.id.clone()),
        }
    }

    /// Whether `history` is the context this was built from, with entries
    /// appended since or not.
    pub(super) fn extends_into(&self, history: &History) -> bool {
        let entries = history.entries();
        let id_at = |index: usize| entries.get(index).map(|entry| entry.id.as_str());
        entries.len() >= self.history_len
            && id_at(0) == self.first_id.as_deref()
            && self.history_len.checked_sub(1).and_then(id_at) == self.last_id.as_deref()
    }
}

/// What one model call is sent.
pub(super) struct Prompt {
    pub(super) system_prompt: String,
    pub(super) messages: Vec<AgentMessage>,
    /// By the host's plain estimate.
    pub(super) estimated_tokens: u64,
    /// By the pre-prompt check's weighted estimate, uncalibrated, tool
    /// definitions included.
    pub(super) weighted_tokens: u64,
}

impl TurnRunner {
    /// Asks the engine for the prompt and prepares it for the provider.
    pub(super) async fn assemble_prompt(
        &self,
        session: &mut Session,
        call: &CallOptions,
    ) -> Result<Prompt, TurnError> {
        let history = session.history();
        let params = AssembleParams {
            token_budget: Some(self.config.prompt_budget()),
            available_tools: self.config.tools.clone(),
            citations_mode: None,
            model: self.config.model.clone(),
            prompt: latest_user_text(history.entries().iter().map(|entry| &entry.message)),
            runtime_settings: Some(self.runtime_settings(None)),
        };
        // The engine's transcript reads stop before this turn's entries.
        let fenced = call.clone().fenced_before(session.turn_fence());
        let assembled = self
            .engine
            .assemble(&fenced, session.session_ref(), &history, &params)
            .await?;
        let system_prompt = match &assembled.system_prompt_addition {
            Some(addition) if !addition.is_empty() => {
                format!("{}\n\n{addition}", self.config.system_prompt)
            }
            _ => self.config.system_prompt.clone(),
        };

        let (system_prompt, messages) = match assembled.context_projection {
            Some(ContextProjection::ThreadBootstrap { epoch }) => {
                let reusable = session.projection.as_ref().filter(|projection| {
                    projection.epoch == epoch && projection.extends_into(&history)
                });
                match reusable {
                    Some(projection) => {
                        let mut messages = projection.messages.clone();
                        messages.extend(
                            history.entries()[projection.history_len..]
                                .iter()
                                .map(|entry| entry.message.clone()),
                        );
                        (projection.system_prompt.clone(), messages)
                    }
                    None => {
                        let messages = history.materialize(&assembled.items);
                        session.projection = Some(Projection::new(
                            epoch,
                            system_prompt.clone(),
                            messages.clone(),
                            &history,
                        ));
                        (system_prompt, messages)
                    }
                }
            }
            _ => {
                session.projection = None;
                (system_prompt, history.materialize(&assembled.items))
            }
        };

        let mut messages = pair_tool_messages(messages);
        // The turn's runtime context reaches the model last, after the ask
        // and its tool traffic, so everything before stays cacheable (the
        // reference's carrier relocation); no history holds it.
        messages.extend(session.turn_carriers().iter().cloned());
        if session.truncate_tool_traffic {
            cap_tool_results(
                &mut messages,
                tool_results::result_cap_tokens(self.config.window),
            );
            let budget = self
                .config
                .prompt_budget()
                .saturating_sub(tokens::estimate_text(&system_prompt));
            fit_tool_traffic(&mut messages, budget);
        }
        let estimated_tokens = tokens::estimate_text(&system_prompt)
            + messages.iter().map(tokens::estimate_message).sum::<u64>();
        let weighted_tokens =
            super::pressure::weighted(&system_prompt, &messages, self.tool_definition_tokens);
        Ok(Prompt {
            system_prompt,
            messages,
            estimated_tokens,
            weighted_tokens,
        })
    }
}

/// The text of the newest user message.
fn latest_user_text<'a>(
    messages: impl DoubleEndedIterator<Item = &'a AgentMessage>,
) -> Option<String> {
    messages.rev().find_map(|message| match message {
        AgentMessage::User { content } => Some(ContentBlock::joined_text(content)),
        _ => None,
    })
}

/// Cuts every tool result's text down to `max_tokens`, the reference's cap
/// on one result for the window: a prompt the model refused can be over its
/// window while the host's estimate says it fits.
fn cap_tool_results(messages: &mut [AgentMessage], max_tokens: u64) {
    for message in messages {
        if let AgentMessage::ToolResult { content, .. } = message {
            for block in content {
                if let ContentBlock::Text { text } = block
                    && let Some(cut) = truncated(text, max_tokens)
                {
                    *text = cut;
                }
            }
        }
    }
}

/// Cuts tool traffic so `messages` take at most `budget` tokens, by as
/// little as that takes: every block is capped at one size, the largest that
/// removes the whole excess across all of them (so five large results share
/// the cut instead of each keeping a fixed share that together still does
/// not fit). The conversation's own text is never cut; when it alone is over
/// the budget, tool traffic is cut to its notes and the prompt stays over.
fn fit_tool_traffic(messages: &mut Vec<AgentMessage>, budget: u64) {
    let total: u64 = messages.iter().map(tokens::estimate_message).sum();
    if total <= budget {
        return;
    }
    let sizes = tool_traffic_sizes(messages);
    let mut excess = total - budget;
    let mut cut = messages.clone();
    for _ in 0..FIT_ROUNDS {
        let cap = cap_removing(&sizes, excess);
        cut.clone_from(messages);
        truncate_tool_traffic(&mut cut, cap);
        let now: u64 = cut.iter().map(tokens::estimate_message).sum();
        if now <= budget || cap == 0 {
            break;
        }
        // The estimate of the cut missed (escaping, per-message rounding):
        // take off what is still over, too.
        excess += now - budget;
    }
    *messages = cut;
}

/// Token sizes of the blocks [`truncate_tool_traffic`] may cut.
fn tool_traffic_sizes(messages: &[AgentMessage]) -> Vec<u64> {
    let mut sizes = Vec::new();
    for message in messages {
        let is_tool_result = matches!(message, AgentMessage::ToolResult { .. });
        for block in message.content() {
            match block {
                ContentBlock::Text { text } if is_tool_result => {
                    sizes.push(tokens::estimate_text(text))
                }
                ContentBlock::Thinking { text, .. } => sizes.push(tokens::estimate_text(text)),
                ContentBlock::ToolCall { arguments_json, .. } => {
                    sizes.push(tokens::estimate_text(arguments_json))
                }
                _ => {}
            }
        }
    }
    sizes
}

/// The largest cap on blocks of `sizes` that takes at least `excess` tokens
/// off them (a cut block gains a note); 0 when no cap does.
fn cap_removing(sizes: &[u64], excess: u64) -> u64 {
    let removed = |cap: u64| -> u64 {
        sizes
            .iter()
            .filter(|&&size| size > cap)
            .map(|&size| (size - cap).saturating_sub(NOTE_TOKENS))
            .sum()
    };
    let (mut low, mut high) = (0u64, sizes.iter().copied().max().unwrap_or(0));
    if removed(low) < excess {
        return 0;
    }
    // `removed` falls as the cap grows: the largest cap still removing enough.
    while low < high {
        let middle = low + (high - low).div_ceil(2);
        if removed(middle) >= excess {
            low = middle;
        } else {
            high = middle - 1;
        }
    }
    low
}

/// Cuts every block of tool traffic down to about `max_tokens` tokens: tool
/// results' text, tool-call arguments (kept valid JSON: an object holding the
/// beginning of the original) and thinking. The conversation's own text is
/// left alone.
fn truncate_tool_traffic(messages: &mut [AgentMessage], max_tokens: u64) {
    for message in messages {
        let is_tool_result = matches!(message, AgentMessage::ToolResult { .. });
        let blocks = match message {
            AgentMessage::ToolResult { content, .. } | AgentMessage::Assistant { content, .. } => {
                content
            }
            _ => continue,
        };
        for block in blocks {
            match block {
                ContentBlock::Text { text } if is_tool_result => {
                    if let Some(cut) = truncated(text, max_tokens) {
                        *text = cut;
                    }
                }
                ContentBlock::Thinking { text, .. } => {
                    if let Some(cut) = truncated(text, max_tokens) {
                        *text = cut;
                    }
                }
                ContentBlock::ToolCall { arguments_json, .. } => {
                    if let Some(cut) = truncated(arguments_json, max_tokens) {
                        *arguments_json = serde_json::json!({
                            "truncatedArguments": cut,
                            "originalChars": arguments_json.chars().count(),
                        })
                        .to_string();
                    }
                }
                _ => {}
            }
        }
    }
}

/// `text` cut to about `max_tokens` tokens with a note saying so, or `None`
/// if it fits.
fn truncated(text: &str, max_tokens: u64) -> Option<String> {
    if tokens::estimate_text(text) <= max_tokens {
        return None;
    }
    let budget = max_tokens * 4;
    let mut weight = 0u64;
    let end = text
        .char_indices()
        .find(|(_, c)| {
            weight += tokens::weighted_chars(c.encode_utf8(&mut [0; 4]));
            weight > budget
        })
        .map_or(text.len(), |(index, _)| index);
    Some(format!(
        "{}\n…[truncated: {} more characters did not fit the context window]",
        &text[..end],
        text[end..].chars().count()
    ))
}

/// Makes sure the provider never sees a tool call without its result or a
/// result without its call, as the reference's transcript repair does
/// (`session-transcript-repair`): answers that failed or were aborted are
/// left out (their calls may be cut off mid-stream and were never run, so no
/// result is made up for them and results recorded for them are dropped);
/// each call's result is moved right after its assistant message, in call
/// order, from wherever it sits before the next assistant message (a user
/// message that came between goes after the results); a second result for
/// the same call is dropped, anywhere; a result with no call before it is
/// dropped; a call with no result gets an "unavailable" one. Engines are
/// validated to keep pairs; this guards what a recording itself may hold.
fn pair_tool_messages(messages: Vec<AgentMessage>) -> Vec<AgentMessage> {
    let mut slots: Vec<Option<AgentMessage>> = messages
        .into_iter()
        .filter(|message| {
            !matches!(message, AgentMessage::Assistant { .. }) || runs_its_tool_calls(message)
        })
        .map(Some)
        .collect();
    let mut answered: HashSet<String> = HashSet::new();
    let mut paired = Vec::with_capacity(slots.len());
    let mut index = 0;
    while index < slots.len() {
        let Some(message) = slots[index].take() else {
            index += 1;
            continue;
        };
        let calls: Vec<(String, String)> = match &message {
            AgentMessage::ToolResult { .. } => {
                // Before any call of it, or a duplicate: dropped.
                index += 1;
                continue;
            }
            AgentMessage::Assistant { content, .. } => content
                .iter()
                .filter_map(|block| match block {
                    ContentBlock::ToolCall { id, name, .. } => Some((id.clone(), name.clone())),
                    _ => None,
                })
                .collect(),
            _ => Vec::new(),
        };
        paired.push(message);
        index += 1;
        if calls.is_empty() {
            continue;
        }
        // The span whose results may answer these calls: up to the next
        // assistant message.
        let span_end = (index..slots.len())
            .find(|&at| matches!(slots[at], Some(AgentMessage::Assistant { .. })))
            .unwrap_or(slots.len());
        for (id, name) in calls {
            if !answered.insert(id.clone()) {
                continue;
            }
            let found = (index..span_end).find(|&at| {
                matches!(&slots[at], Some(AgentMessage::ToolResult { tool_call_id, .. }) if *tool_call_id == id)
            });
            paired.push(match found.and_then(|at| slots[at].take()) {
                Some(result) => result,
                None => unavailable_tool_result(&id, &name, "its result is not in the history"),
            });
        }
    }
    paired
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::contract::types::StopReason;

    fn call(id: &str) -> AgentMessage {
        AgentMessage::Assistant {
            content: vec![ContentBlock::ToolCall {
                id: id.into(),
                name: "exec".into(),
                arguments_json: "{}".into(),
            }],
            model: None,
            provider: None,
            usage: None,
            stop_reason: StopReason::ToolUse,
            error_message: None,
        }
    }

    fn result(id: &str, text: &str) -> AgentMessage {
        AgentMessage::tool_result(id, "exec", text)
    }

    #[test]
    fn pairs_are_completed_and_orphans_dropped() {
        let user = AgentMessage::user_text("go");
        let messages = vec![
            result("gone", "x"),
            user.clone(),
            call("c1"),
            call("c2"),
            result("c2", "ok"),
        ];
        let paired = pair_tool_messages(messages);
        assert_eq!(paired.len(), 5);
        assert_eq!(paired[0], user);
        assert_eq!(paired[1], call("c1"));
        // The missing result goes right after its call, before the next call.
        assert!(
            matches!(&paired[2], AgentMessage::ToolResult { tool_call_id, is_error: true, .. } if tool_call_id == "c1")
        );
        assert_eq!(paired[3], call("c2"));
        assert_eq!(paired[4], result("c2", "ok"));
    }

    #[test]
    fn a_displaced_result_is_moved_right_after_its_call() {
        let user = AgentMessage::user_text("meanwhile");
        let two_calls = AgentMessage::Assistant {
            content: vec![
                ContentBlock::ToolCall {
                    id: "c1".into(),
                    name: "read".into(),
                    arguments_json: "{}".into(),
                },
                ContentBlock::ToolCall {
                    id: "c2".into(),
                    name: "exec".into(),
                    arguments_json: "{}".into(),
                },
            ],
            model: None,
            provider: None,
            usage: None,
            stop_reason: StopReason::ToolUse,
            error_message: None,
        };
        let paired = pair_tool_messages(vec![two_calls.clone(), user.clone(), result("c2", "ok")]);
        assert_eq!(paired.len(), 4);
        assert_eq!(paired[0], two_calls);
        assert!(
            matches!(&paired[1], AgentMessage::ToolResult { tool_call_id, is_error: true, .. } if tool_call_id == "c1"),
            "the missing one is made up, in call order"
        );
        assert_eq!(paired[2], result("c2", "ok"));
        assert_eq!(paired[3], user, "the user message follows the results");
    }

    #[test]
    fn a_duplicate_result_is_dropped_within_a_span_and_across_the_transcript() {
        let within = pair_tool_messages(vec![
            call("c1"),
            result("c1", "first"),
            result("c1", "second"),
            AgentMessage::user_text("ok"),
        ]);
        assert_eq!(
            within,
            vec![
                call("c1"),
                result("c1", "first"),
                AgentMessage::user_text("ok")
            ]
        );
        let across = pair_tool_messages(vec![
            call("c1"),
            result("c1", "first"),
            AgentMessage::assistant_text("ok"),
            result("c1", "second (duplicate)"),
        ]);
        assert_eq!(
            across,
            vec![
                call("c1"),
                result("c1", "first"),
                AgentMessage::assistant_text("ok")
            ]
        );
    }

    #[test]
    fn each_tool_result_is_capped_and_nothing_else_is_cut() {
        let long_call =
            AgentMessage::tool_call("c1", "exec", format!("{{\"a\":\"{}\"}}", "b".repeat(900)));
        let mut messages = vec![long_call.clone(), result("c1", &"a".repeat(4_000))];
        cap_tool_results(&mut messages, 100);
        assert_eq!(messages[0], long_call, "arguments are not results");
        let AgentMessage::ToolResult { content, .. } = &messages[1] else {
            panic!("still a tool result");
        };
        assert!(
            matches!(&content[0], ContentBlock::Text { text } if text.contains("3600 more characters"))
        );
    }

    #[test]
    fn oversized_tool_results_are_cut_with_a_note() {
        let mut messages = vec![result("c1", &"a".repeat(4_000)), result("c2", "short")];
        truncate_tool_traffic(&mut messages, 100);
        let AgentMessage::ToolResult { content, .. } = &messages[0] else {
            panic!("still a tool result");
        };
        let ContentBlock::Text { text } = &content[0] else {
            panic!("text");
        };
        assert!(text.starts_with(&"a".repeat(400)));
        assert!(text.contains("3600 more characters"), "{text}");
        assert_eq!(messages[1], result("c2", "short"));
    }

    #[test]
    fn oversized_tool_arguments_stay_valid_json_and_user_text_is_kept() {
        let file = format!(r#"{{"path":"bot.py","content":"{}"}}"#, "x".repeat(8_000));
        let file_chars = file.chars().count();
        let user = AgentMessage::user_text("y".repeat(8_000));
        let mut messages = vec![
            user.clone(),
            AgentMessage::Assistant {
                content: vec![
                    ContentBlock::Thinking {
                        text: "z".repeat(8_000),
                        signature: None,
                    },
                    ContentBlock::ToolCall {
                        id: "c1".into(),
                        name: "write".into(),
                        arguments_json: file,
                    },
                ],
                model: None,
                provider: None,
                usage: None,
                stop_reason: StopReason::ToolUse,
                error_message: None,
            },
        ];
        truncate_tool_traffic(&mut messages, 100);
        assert_eq!(messages[0], user, "the conversation's own text is not cut");
        let blocks = messages[1].content();
        let ContentBlock::Thinking { text, .. } = &blocks[0] else {
            panic!("thinking");
        };
        assert!(text.len() < 1_000);
        let ContentBlock::ToolCall { arguments_json, .. } = &blocks[1] else {
            panic!("tool call");
        };
        let arguments: serde_json::Value =
            serde_json::from_str(arguments_json).expect("valid JSON");
        assert_eq!(arguments["originalChars"], file_chars);
        assert!(
            arguments["truncatedArguments"]
                .as_str()
                .is_some_and(|cut| cut.starts_with(r#"{"path":"bot.py""#))
        );
    }

    #[test]
    fn parallel_results_share_a_cut_sized_to_the_excess() {
        // Five whole-file reads of ~3,200 tokens each: each is under a fixed
        // share of a 12k budget, together they are not.
        let mut messages = vec![AgentMessage::user_text("read the five files")];
        for id in ["c1", "c2", "c3", "c4", "c5"] {
            messages.push(call(id));
        }
        for id in ["c1", "c2", "c3", "c4", "c5"] {
            messages.push(result(id, &"x".repeat(12_800)));
        }
        let total: u64 = messages.iter().map(tokens::estimate_message).sum();
        assert!(total > 16_000, "{total}");
        fit_tool_traffic(&mut messages, 12_000);
        let fitted: u64 = messages.iter().map(tokens::estimate_message).sum();
        assert!(fitted <= 12_000, "{fitted}");
        assert!(fitted > 11_000, "cut no more than needed: {fitted}");
        let sizes: Vec<usize> = messages[6..]
            .iter()
            .map(|message| match &message.content()[0] {
                ContentBlock::Text { text } => text.len(),
                other => panic!("{other:?}"),
            })
            .collect();
        assert!(
            sizes.windows(2).all(|pair| pair[0] == pair[1]),
            "one cap for all: {sizes:?}"
        );
        assert_eq!(messages[0], AgentMessage::user_text("read the five files"));
    }

    #[test]
    fn a_prompt_within_its_budget_is_not_cut() {
        let mut messages = vec![result("c1", &"x".repeat(4_000))];
        let before = messages.clone();
        fit_tool_traffic(&mut messages, 2_000);
        assert_eq!(messages, before);
    }

    #[test]
    fn the_cap_removes_the_excess_and_no_more() {
        let sizes = [1_000, 1_000, 100];
        let cap = cap_removing(&sizes, 500);
        let removed: u64 = sizes
            .iter()
            .filter(|&&size| size > cap)
            .map(|&size| size - cap - NOTE_TOKENS)
            .sum();
        assert!((500..500 + 2 * 2).contains(&removed), "{cap}: {removed}");
        assert_eq!(cap_removing(&sizes, 10_000), 0, "no cap removes that much");
    }

    #[test]
    fn failed_and_aborted_answers_and_their_results_stay_out_of_prompts() {
        let failed = AgentMessage::Assistant {
            content: vec![ContentBlock::ToolCall {
                id: "cut-off".into(),
                name: "exec".into(),
                arguments_json: "{\"comm".into(),
            }],
            model: None,
            provider: None,
            usage: None,
            stop_reason: StopReason::Error,
            error_message: Some("stream ended".into()),
        };
        let user = AgentMessage::user_text("again");
        let paired = pair_tool_messages(vec![
            failed,
            result("cut-off", "partial"),
            user.clone(),
            call("c1"),
            result("c1", "ok"),
        ]);
        assert_eq!(paired, vec![user, call("c1"), result("c1", "ok")]);
    }

    #[test]
    fn cjk_text_is_cut_by_weight() {
        let text = "你".repeat(1_000);
        let cut = truncated(&text, 100).expect("too long");
        assert!(cut.starts_with(&"你".repeat(100)));
        assert!(!cut.starts_with(&"你".repeat(101)));
    }

    #[test]
    fn the_latest_user_text_is_the_prompt() {
        let messages = [
            AgentMessage::user_text("first"),
            call("c"),
            AgentMessage::user_text("second"),
        ];
        assert_eq!(latest_user_text(messages.iter()).as_deref(), Some("second"));
    }
}
