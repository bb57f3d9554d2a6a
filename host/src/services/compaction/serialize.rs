//! History as text for a summarizer, in the reference's labelled form
//! (`[User]: …`, `[Assistant]: …`, `[Assistant tool calls]: read(path="…")`,
//! `[Tool result]: …`), so the model reads a transcript instead of
//! continuing a conversation. Tool results, and blocks kept as their JSON
//! (`ContentBlock::Data`), are cut to 2,000 characters each; a tool result
//! nested in a content array was read as text, so a tool-result message
//! holding one reads `[Tool result]: …` like any other. Any other part too
//! large to summarize safely (the reference's `isOversizedForSummary`: over
//! half the window with the estimate's 1.2 margin) keeps its beginning and
//! end around a note of what was left out. Tool-result `details` never reach
//! a summarizer.

use serde_json::Value;

use crate::contract::types::{AgentMessage, ContentBlock, MessageEntry};

/// Longest tool result passed to a summarizer, in characters.
const TOOL_RESULT_CHARS: usize = 2_000;
/// Share of an oversized part kept from its beginning (the rest from its end).
const ELIDED_HEAD_SHARE: f64 = 0.7;

/// Longest part of one message a summarizer is given for a `window`-token
/// context, in characters: half the window, with the estimate's 1.2 margin,
/// at four characters a token.
pub(crate) fn max_part_chars(window: u64) -> usize {
    usize::try_from(window.saturating_mul(4) * 5 / 12).unwrap_or(usize::MAX)
}

/// `entries` as labelled text, blank lines between messages; no part
/// longer than `max_part_chars` characters ([`max_part_chars`]).
pub(crate) fn conversation(entries: &[MessageEntry], max_part_chars: usize) -> String {
    let mut parts = Parts {
        parts: Vec::new(),
        max_chars: max_part_chars,
    };
    for entry in entries {
        match &entry.message {
            AgentMessage::User { content } => {
                parts.push("[User]", &texts(content, TOOL_RESULT_CHARS))
            }
            AgentMessage::Assistant { content, .. } => {
                let thinking: Vec<&str> = content
                    .iter()
                    .filter_map(|block| match block {
                        ContentBlock::Thinking { text, .. } => Some(text.as_str()),
                        _ => None,
                    })
                    .collect();
                parts.push("[Assistant thinking]", &thinking.join("\n"));
                parts.push("[Assistant]", &texts(content, TOOL_RESULT_CHARS));
                let calls: Vec<String> = content
                    .iter()
                    .filter_map(|block| match block {
                        ContentBlock::ToolCall {
                            name,
                            arguments_json,
                            ..
                        } => Some(format!("{name}({})", arguments(arguments_json))),
                        _ => None,
                    })
                    .collect();
                parts.push("[Assistant tool calls]", &calls.join("; "));
            }
            AgentMessage::ToolResult {
                content, is_error, ..
            } => {
                let label = if *is_error {
                    "[Tool error]"
                } else {
                    "[Tool result]"
                };
                parts.push(
                    label,
                    // The whole result is cut once.
                    &truncate(&texts(content, usize::MAX), TOOL_RESULT_CHARS),
                );
            }
            AgentMessage::Custom { content, .. } => {
                parts.push("[Note]", &texts(content, TOOL_RESULT_CHARS))
            }
            AgentMessage::BranchSummary { summary, .. }
            | AgentMessage::CompactionSummary { summary, .. } => parts.push("[Summary]", summary),
        }
    }
    parts.parts.join("\n\n")
}

/// The labelled parts so far.
struct Parts {
    parts: Vec<String>,
    /// Longest part, in characters.
    max_chars: usize,
}

impl Parts {
    /// `text` under `label`, unless it is blank; elided to the longest part.
    fn push(&mut self, label: &str, text: &str) {
        if !text.trim().is_empty() {
            let text = elide(text, self.max_chars);
            self.parts.push(format!("{label}: {text}"));
        }
    }
}

/// `text` within `max_chars` characters: its beginning and end around a note
/// of how much was left out.
fn elide(text: &str, max_chars: usize) -> std::borrow::Cow<'_, str> {
    let chars = text.chars().count();
    if chars <= max_chars {
        return text.into();
    }
    let head = (max_chars as f64 * ELIDED_HEAD_SHARE) as usize;
    let tail = max_chars - head;
    let start: String = text.chars().take(head).collect();
    let end: String = text.chars().skip(chars - tail).collect();
    format!(
        "{start}\n\n[... {} characters too large to summarize omitted ...]\n\n{end}",
        chars - head - tail
    )
    .into()
}

/// The text of `content`, data blocks' JSON included, each cut to
/// `data_chars` characters.
fn texts(content: &[ContentBlock], data_chars: usize) -> String {
    content
        .iter()
        .filter_map(|block| match block {
            ContentBlock::Text { text } => Some(text.clone()),
            ContentBlock::Data { json } => Some(truncate(json, data_chars)),
            _ => None,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// `key=value, …` for an arguments object, the JSON text otherwise.
fn arguments(arguments_json: &str) -> String {
    match serde_json::from_str::<Value>(arguments_json) {
        Ok(Value::Object(fields)) => fields
            .iter()
            .map(|(key, value)| format!("{key}={value}"))
            .collect::<Vec<_>>()
            .join(", "),
        _ => arguments_json.to_owned(),
    }
}

fn truncate(text: &str, max_chars: usize) -> String {
    match text.char_indices().nth(max_chars) {
        None => text.to_owned(),
        Some((cut, _)) => {
            let rest = text[cut..].chars().count();
            format!("{}\n\n[... {rest} more characters truncated]", &text[..cut])
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::contract::types::StopReason;

    fn entry(message: AgentMessage) -> MessageEntry {
        MessageEntry {
            id: "x".into(),
            parent_id: None,
            timestamp_ms: 0,
            message,
        }
    }

    #[test]
    fn labels_every_role_and_cuts_long_results() {
        let text = conversation(
            &[
                entry(AgentMessage::user_text("fix it")),
                entry(AgentMessage::Assistant {
                    content: vec![
                        ContentBlock::Thinking {
                            text: "hmm".into(),
                            signature: None,
                        },
                        ContentBlock::text("reading"),
                        ContentBlock::ToolCall {
                            id: "c".into(),
                            name: "read".into(),
                            arguments_json: r#"{"path":"a.rs"}"#.into(),
                        },
                    ],
                    model: None,
                    provider: None,
                    usage: None,
                    stop_reason: StopReason::ToolUse,
                    error_message: None,
                }),
                entry(AgentMessage::ToolResult {
                    tool_call_id: "c".into(),
                    tool_name: "read".into(),
                    content: vec![ContentBlock::text("é".repeat(2_005))],
                    is_error: false,
                    details: None,
                }),
            ],
            usize::MAX,
        );
        assert!(
            text.starts_with("[User]: fix it\n\n[Assistant thinking]: hmm\n\n[Assistant]: reading")
        );
        assert!(text.contains(r#"[Assistant tool calls]: read(path="a.rs")"#));
        assert!(text.ends_with("[... 5 more characters truncated]"));
    }

    #[test]
    fn data_blocks_are_summarized_as_their_json_cut_like_tool_results() {
        let rows = "r".repeat(3_000);
        let text = conversation(
            &[
                entry(AgentMessage::User {
                    content: vec![
                        ContentBlock::text("look"),
                        ContentBlock::Data {
                            json: r#"{"type":"file","name":"a.csv"}"#.into(),
                        },
                    ],
                }),
                entry(AgentMessage::ToolResult {
                    tool_call_id: "c".into(),
                    tool_name: "query".into(),
                    content: vec![ContentBlock::Data {
                        json: format!(r#"{{"type":"json","rows":"{rows}"}}"#),
                    }],
                    is_error: false,
                    details: None,
                }),
            ],
            usize::MAX,
        );
        assert!(
            text.starts_with("[User]: look\n{\"type\":\"file\",\"name\":\"a.csv\"}\n\n"),
            "{text}"
        );
        assert!(text.contains("[Tool result]: {\"type\":\"json\",\"rows\":\"rrr"));
        assert!(
            text.ends_with("[... 1025 more characters truncated]"),
            "{text}"
        );
    }

    #[test]
    fn a_part_too_large_to_summarize_keeps_its_ends_and_details_stay_out() {
        let ask = format!("BEGIN {} END", "x".repeat(20_000));
        let limit = max_part_chars(8_192);
        assert_eq!(limit, 13_653, "half of 8,192 tokens, with the 1.2 margin");
        let text = conversation(
            &[
                entry(AgentMessage::user_text(ask)),
                entry(AgentMessage::ToolResult {
                    tool_call_id: "c".into(),
                    tool_name: "read".into(),
                    content: vec![ContentBlock::text("ok")],
                    is_error: false,
                    details: Some(r#"{"secret":"token-123"}"#.into()),
                }),
            ],
            limit,
        );
        assert!(text.starts_with("[User]: BEGIN xxx"), "{text}");
        assert!(text.contains("characters too large to summarize omitted"));
        let user = text
            .split("\n\n[Tool result]")
            .next()
            .expect("the user part");
        assert!(user.ends_with("xxx END"), "both ends kept");
        assert!(
            user.chars().count() <= limit + 100,
            "{}",
            user.chars().count()
        );
        assert!(
            !text.contains("token-123"),
            "details never reach a summarizer"
        );
    }
}
