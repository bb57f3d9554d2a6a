//! Turning an `assemble` answer into what the provider is sent: the engine's
//! messages (or a reused thread-bootstrap projection plus what came since),
//! the system prompt with the engine's addition, oversized tool traffic
//! (tool results, tool-call arguments, thinking) cut down when overflow
//! recovery asked for it, and tool calls and results always paired. The
//! transcript keeps everything; only prompts are cut.

use std::collections::HashSet;

use super::{Session, TurnError, TurnRunner};
use crate::contract::engine::{CallOptions, ContextEngine};
use crate::contract::history::History;
use crate::contract::tokens;
use crate::contract::types::{AgentMessage, AssembleParams, ContentBlock, ContextProjection};
use crate::provider::unavailable_tool_result;

/// Share of the prompt budget one block of tool traffic may take once
/// truncation is on.
const BLOCK_SHARE: f64 = 0.3;
/// Smallest cap on a block, tokens.
const MIN_BLOCK_TOKENS: u64 = 256;

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
    pub(super) estimated_tokens: u64,
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
        };
        let assembled = self
            .engine
            .assemble(call, session.session_ref(), &history, &params)
            .await?;
        let system_prompt = match &assembled.system_prompt_addition {
            Some(addition) if !addition.is_empty() => {
                format!("{}\n\n{addition}", self.config.system_prompt)
            }
            _ => self.config.system_prompt.clone(),
        };

        let (system_prompt, mut messages) = match assembled.context_projection {
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

        if session.truncate_tool_traffic {
            let cap =
                ((self.config.prompt_budget() as f64 * BLOCK_SHARE) as u64).max(MIN_BLOCK_TOKENS);
            truncate_tool_traffic(&mut messages, cap);
        }
        let messages = pair_tool_messages(messages);
        let estimated_tokens = tokens::estimate_text(&system_prompt)
            + messages.iter().map(tokens::estimate_message).sum::<u64>();
        Ok(Prompt {
            system_prompt,
            messages,
            estimated_tokens,
        })
    }
}

/// The text of the newest user message.
fn latest_user_text<'a>(
    messages: impl DoubleEndedIterator<Item = &'a AgentMessage>,
) -> Option<String> {
    messages.rev().find_map(|message| match message {
        AgentMessage::User { content } => Some(
            content
                .iter()
                .filter_map(|block| match block {
                    ContentBlock::Text { text } => Some(text.as_str()),
                    _ => None,
                })
                .collect::<Vec<_>>()
                .join("\n"),
        ),
        _ => None,
    })
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
/// result without its call: results whose call is not earlier are dropped,
/// and calls left without a result get an "unavailable" one right after
/// their assistant message's results. Engines are validated to keep pairs;
/// this guards what the recording itself may lack (an interrupted call).
fn pair_tool_messages(messages: Vec<AgentMessage>) -> Vec<AgentMessage> {
    let answered: HashSet<String> = messages
        .iter()
        .filter_map(|message| match message {
            AgentMessage::ToolResult { tool_call_id, .. } => Some(tool_call_id.clone()),
            _ => None,
        })
        .collect();
    let mut called: HashSet<String> = HashSet::new();
    let mut paired = Vec::with_capacity(messages.len());
    let mut missing: Vec<AgentMessage> = Vec::new();
    for message in messages {
        let is_result_run = matches!(message, AgentMessage::ToolResult { .. });
        if !is_result_run {
            paired.append(&mut missing);
        }
        match &message {
            AgentMessage::ToolResult { tool_call_id, .. } if !called.contains(tool_call_id) => {
                continue;
            }
            AgentMessage::Assistant { content, .. } => {
                for block in content {
                    if let ContentBlock::ToolCall { id, name, .. } = block {
                        called.insert(id.clone());
                        if !answered.contains(id) {
                            missing.push(unavailable_tool_result(
                                id,
                                name,
                                "its result is not in the history",
                            ));
                        }
                    }
                }
            }
            _ => {}
        }
        paired.push(message);
    }
    paired.append(&mut missing);
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
