//! History as text for a summarizer, in the reference's labelled form
//! (`[User]: …`, `[Assistant]: …`, `[Assistant tool calls]: read(path="…")`,
//! `[Tool result]: …`), so the model reads a transcript instead of
//! continuing a conversation. Tool results are cut to 2,000 characters.

use serde_json::Value;

use crate::contract::types::{AgentMessage, ContentBlock, MessageEntry};

/// Longest tool result passed to a summarizer, in characters.
const TOOL_RESULT_CHARS: usize = 2_000;

/// `entries` as labelled text, blank lines between messages.
pub(crate) fn conversation(entries: &[MessageEntry]) -> String {
    let mut parts: Vec<String> = Vec::new();
    for entry in entries {
        match &entry.message {
            AgentMessage::User { content } => push(&mut parts, "[User]", &texts(content)),
            AgentMessage::Assistant { content, .. } => {
                let thinking: Vec<&str> = content
                    .iter()
                    .filter_map(|block| match block {
                        ContentBlock::Thinking { text, .. } => Some(text.as_str()),
                        _ => None,
                    })
                    .collect();
                push(&mut parts, "[Assistant thinking]", &thinking.join("\n"));
                push(&mut parts, "[Assistant]", &texts(content));
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
                push(&mut parts, "[Assistant tool calls]", &calls.join("; "));
            }
            AgentMessage::ToolResult {
                content, is_error, ..
            } => {
                let label = if *is_error {
                    "[Tool error]"
                } else {
                    "[Tool result]"
                };
                push(
                    &mut parts,
                    label,
                    &truncate(&texts(content), TOOL_RESULT_CHARS),
                );
            }
            AgentMessage::Custom { content, .. } => push(&mut parts, "[Note]", &texts(content)),
            AgentMessage::BranchSummary { summary, .. }
            | AgentMessage::CompactionSummary { summary, .. } => {
                push(&mut parts, "[Summary]", summary)
            }
        }
    }
    parts.join("\n\n")
}

fn push(parts: &mut Vec<String>, label: &str, text: &str) {
    if !text.trim().is_empty() {
        parts.push(format!("{label}: {text}"));
    }
}

fn texts(content: &[ContentBlock]) -> String {
    content
        .iter()
        .filter_map(|block| match block {
            ContentBlock::Text { text } => Some(text.as_str()),
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
        let text = conversation(&[
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
        ]);
        assert!(
            text.starts_with("[User]: fix it\n\n[Assistant thinking]: hmm\n\n[Assistant]: reading")
        );
        assert!(text.contains(r#"[Assistant tool calls]: read(path="a.rs")"#));
        assert!(text.ends_with("[... 5 more characters truncated]"));
    }
}
