//! Text in and out of the summarizer: what it reads for a chunk of messages or
//! a run of summaries, the message a summary becomes in the prompt, and the
//! note that says what the prompt left out.

use std::fmt::Write as _;

use ctxbox_guest::{AgentMessage, ContentBlock, MessageEntry};

use crate::recall::ToolNames;
use crate::records::Node;

/// The custom type of the messages summaries appear as in the prompt.
pub const SUMMARY_MESSAGE_TYPE: &str = "lossless-summary";

/// The custom type of the note saying earlier messages were left out
/// without a summary.
pub const OMISSION_MESSAGE_TYPE: &str = "lossless-omitted";

/// What the summarizer is asked to do with a chunk of messages.
pub(crate) const LEAF_INSTRUCTIONS: &str = "Summarize this part of a conversation between a user \
and an AI agent. Keep decisions and their reasons, open tasks, constraints, the user's requests, \
errors, and exact identifiers, file paths and commands.";

/// What the summarizer is asked to do with a run of summaries.
pub(crate) const CONDENSE_INSTRUCTIONS: &str = "These are consecutive summaries of one \
conversation, oldest first. Merge them into one summary that keeps decisions, open tasks, \
constraints, the user's requests, errors, and exact identifiers, file paths and commands; \
prefer later information where they disagree.";

/// The instructions for the summarizer: `base`, then the caller's own.
pub(crate) fn instructions(base: &str, custom: Option<&str>) -> String {
    match custom {
        Some(custom) if !custom.trim().is_empty() => format!("{base}\n\n{custom}"),
        _ => base.to_owned(),
    }
}

/// The chunk as the summarizer reads it: one paragraph per message, each cut
/// to `max_message_chars` characters.
pub(crate) fn transcript(entries: &[MessageEntry], max_message_chars: usize) -> String {
    let mut text = String::new();
    for entry in entries {
        let (label, body) = describe(&entry.message);
        let _ = writeln!(text, "[{label}]\n{}\n", truncate(&body, max_message_chars));
    }
    text
}

/// The summaries as the summarizer reads them, oldest first.
pub(crate) fn summaries(nodes: &[Node]) -> String {
    let mut text = String::new();
    for node in nodes {
        let _ = writeln!(text, "[{}]\n{}\n", span(node), node.summary);
    }
    text
}

/// The message a summary appears as in the prompt.
pub(crate) fn summary_message(node: &Node) -> AgentMessage {
    AgentMessage::note(
        SUMMARY_MESSAGE_TYPE,
        format!(
            "[Summary of earlier conversation: {}, level {}]\n{}",
            span(node),
            node.level,
            node.summary
        ),
    )
}

/// The note opening a prompt that leaves `omitted` earlier messages out
/// with no summary standing in for them: how many, that they are kept, and
/// which tools find and read them.
pub(crate) fn omission_note(omitted: u64, tools: &ToolNames) -> AgentMessage {
    let messages = if omitted == 1 { "message" } else { "messages" };
    AgentMessage::note(
        OMISSION_MESSAGE_TYPE,
        format!(
            "[lossless: {omitted} earlier {messages} of this conversation are not shown here, \
             with no summary of them; they are stored in full. Find them with the `{}` tool \
             and read them with `{}`.]",
            tools.grep, tools.expand
        ),
    )
}

/// "messages 9–16", numbered from 1 in the order the engine received them.
fn span(node: &Node) -> String {
    format!("messages {}–{}", node.first_seq + 1, node.last_seq + 1)
}

/// A label and the text of a message.
pub(crate) fn describe(message: &AgentMessage) -> (String, String) {
    let (label, body) = match message {
        AgentMessage::User(_) => ("user".into(), message.text()),
        AgentMessage::Assistant(_) => {
            let mut body = message.text();
            for call in message.tool_calls() {
                let _ = write!(body, "\n(calls {} with {})", call.name, call.arguments_json);
            }
            ("assistant".into(), body)
        }
        AgentMessage::ToolResult(result) => {
            let error = if result.is_error { ", failed" } else { "" };
            (
                format!("{} result{error}", result.tool_name),
                message.text(),
            )
        }
        AgentMessage::Custom(custom) => (custom.custom_type.clone(), message.text()),
        AgentMessage::CompactionSummary(_) => {
            ("summary of earlier conversation".into(), message.text())
        }
        AgentMessage::BranchSummary(_) => ("summary of another branch".into(), message.text()),
    };
    (label, with_image_count(message, body))
}

/// `body`, noting the images the message carried (the summarizer reads text).
fn with_image_count(message: &AgentMessage, body: String) -> String {
    let blocks: &[ContentBlock] = match message {
        AgentMessage::User(m) => &m.content,
        AgentMessage::Assistant(m) => &m.content,
        AgentMessage::ToolResult(m) => &m.content,
        AgentMessage::Custom(m) => &m.content,
        AgentMessage::CompactionSummary(_) | AgentMessage::BranchSummary(_) => &[],
    };
    let images = blocks
        .iter()
        .filter(|block| matches!(block, ContentBlock::Image(_)))
        .count();
    match images {
        0 => body,
        n => format!("{body}\n({n} image(s))"),
    }
}

/// `text` cut to `max_chars` characters, saying how much was cut.
fn truncate(text: &str, max_chars: usize) -> String {
    match text.char_indices().nth(max_chars) {
        None => text.to_owned(),
        Some((cut, _)) => format!(
            "{}… [{} more characters]",
            &text[..cut],
            text[cut..].chars().count()
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ctxbox_guest::{
        AssistantMessage, Image, StopReason, ToolCall, ToolResultMessage, UserMessage,
    };

    fn entry(message: AgentMessage) -> MessageEntry {
        MessageEntry {
            id: "e".into(),
            parent_id: None,
            timestamp_ms: 0,
            message,
        }
    }

    #[test]
    fn transcript_shows_roles_tool_calls_results_and_images() {
        let call = AgentMessage::Assistant(AssistantMessage {
            content: vec![
                ContentBlock::Text("let me look".into()),
                ContentBlock::ToolCall(ToolCall {
                    id: "c1".into(),
                    name: "read_file".into(),
                    arguments_json: r#"{"path":"src/main.rs"}"#.into(),
                }),
            ],
            model: None,
            provider: None,
            usage: None,
            stop_reason: StopReason::ToolUse,
            error_message: None,
        });
        let result = AgentMessage::ToolResult(ToolResultMessage {
            tool_call_id: "c1".into(),
            tool_name: "read_file".into(),
            content: vec![ContentBlock::Text("no such file".into())],
            is_error: true,
            details: None,
        });
        let picture = AgentMessage::User(UserMessage {
            content: vec![
                ContentBlock::Text("see".into()),
                ContentBlock::Image(Image {
                    mime_type: "image/png".into(),
                    data: "AAAA".into(),
                }),
            ],
        });
        let text = transcript(
            &[
                entry(AgentMessage::user_text("open main.rs")),
                entry(call),
                entry(result),
                entry(picture),
            ],
            1_000,
        );
        assert!(text.contains("[user]\nopen main.rs"));
        assert!(text.contains("(calls read_file with {\"path\":\"src/main.rs\"})"));
        assert!(text.contains("[read_file result, failed]\nno such file"));
        assert!(text.contains("see\n(1 image(s))"));
    }

    #[test]
    fn long_messages_are_cut_on_character_boundaries() {
        let text = transcript(&[entry(AgentMessage::user_text("日本語のテキスト"))], 3);
        assert!(text.contains("日本語… [5 more characters]"), "{text}");
        assert_eq!(truncate("short", 10), "short");
    }

    #[test]
    fn summaries_name_the_messages_they_cover() {
        let node = Node {
            level: 1,
            sources: vec![0, 1],
            first_seq: 0,
            last_seq: 15,
            summary: "shipped v2".into(),
            tokens: 0,
        };
        assert_eq!(
            summaries(std::slice::from_ref(&node)),
            "[messages 1–16]\nshipped v2\n\n"
        );
        let message = summary_message(&node);
        assert!(
            message
                .text()
                .starts_with("[Summary of earlier conversation: messages 1–16, level 1]")
        );
        assert!(
            matches!(message, AgentMessage::Custom(ref m) if m.custom_type == SUMMARY_MESSAGE_TYPE)
        );
    }

    #[test]
    fn custom_instructions_follow_the_engine_s_own() {
        assert_eq!(instructions("base", None), "base");
        assert_eq!(instructions("base", Some("  ")), "base");
        assert_eq!(
            instructions("base", Some("focus on APIs")),
            "base\n\nfocus on APIs"
        );
    }
}
