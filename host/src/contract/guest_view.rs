//! The host's [`History`] seen through the guest SDK's [`HistoryView`], so an
//! engine's logic can run natively on exactly what its wasm build would see
//! (benches compare the two). Feature `guest-view`.

use std::ops::Range;

use ctxbox_guest::HistoryView;

use crate::contract::history::{History, ToolPairing};
use crate::contract::packed::PackedWriter;
use crate::contract::types::{AgentMessage, ContentBlock, MessageEntry, MessageKind, StopReason};

impl HistoryView for History {
    fn len(&self) -> u32 {
        History::len(self) as u32
    }

    fn entry(&self, index: u32) -> Option<ctxbox_guest::MessageEntry> {
        History::entry(self, index as usize).map(guest_entry)
    }

    fn find(&self, entry_id: &str) -> Option<u32> {
        History::find(self, entry_id).map(|index| index as u32)
    }

    fn kind(&self, index: u32) -> Option<ctxbox_guest::MessageKind> {
        use ctxbox_guest::MessageKind as Guest;
        History::kind(self, index as usize).map(|kind| match kind {
            MessageKind::User => Guest::User,
            MessageKind::Assistant => Guest::Assistant,
            MessageKind::ToolResult => Guest::ToolResult,
            MessageKind::Custom => Guest::Custom,
            MessageKind::CompactionSummary => Guest::CompactionSummary,
            MessageKind::BranchSummary => Guest::BranchSummary,
        })
    }

    fn tool_pairing(&self, index: u32) -> Option<ctxbox_guest::ToolPairing> {
        History::tool_pairing(self, index as usize).map(|pairing| match pairing {
            ToolPairing::None => ctxbox_guest::ToolPairing::None,
            ToolPairing::ToolCalls { last_result } => {
                ctxbox_guest::ToolPairing::ToolCalls(last_result)
            }
            ToolPairing::ToolResult { call } => ctxbox_guest::ToolPairing::ToolResult(call),
        })
    }

    fn tokens(&self, range: Range<u32>) -> u64 {
        History::tokens(self, range.start as usize..range.end as usize)
    }

    fn fitting_suffix(&self, max_tokens: u64) -> u32 {
        History::fitting_suffix(self, max_tokens) as u32
    }

    /// Written by the host's own encoder, as `history.packed-range` is.
    fn packed_range(&self, range: Range<u32>) -> Vec<u8> {
        let entries = self.entries();
        let end = (range.end as usize).min(entries.len());
        let start = (range.start as usize).min(end);
        let mut page = PackedWriter::default();
        for entry in &entries[start..end] {
            page.push(entry, usize::MAX);
        }
        page.finish()
    }
}

/// `entry` as the guest SDK's type: what a wasm engine would receive.
pub fn guest_entry(entry: &MessageEntry) -> ctxbox_guest::MessageEntry {
    ctxbox_guest::MessageEntry {
        id: entry.id.clone(),
        parent_id: entry.parent_id.clone(),
        timestamp_ms: entry.timestamp_ms,
        message: guest_message(&entry.message),
    }
}

/// `message` as the guest SDK's type.
pub fn guest_message(message: &AgentMessage) -> ctxbox_guest::AgentMessage {
    use ctxbox_guest as g;
    let blocks = |content: &[ContentBlock]| content.iter().map(guest_block).collect();
    match message {
        AgentMessage::User { content } => g::AgentMessage::User(g::UserMessage {
            content: blocks(content),
        }),
        AgentMessage::Assistant {
            content,
            model,
            provider,
            usage,
            stop_reason,
            error_message,
        } => g::AgentMessage::Assistant(g::AssistantMessage {
            content: blocks(content),
            model: model.clone(),
            provider: provider.clone(),
            usage: usage.map(|usage| g::Usage {
                input: usage.input,
                output: usage.output,
                cache_read: usage.cache_read,
                cache_write: usage.cache_write,
                total: usage.total,
            }),
            stop_reason: match stop_reason {
                StopReason::Stop => g::StopReason::Stop,
                StopReason::Length => g::StopReason::Length,
                StopReason::ToolUse => g::StopReason::ToolUse,
                StopReason::Error => g::StopReason::Error,
                StopReason::Aborted => g::StopReason::Aborted,
            },
            error_message: error_message.clone(),
        }),
        AgentMessage::ToolResult {
            tool_call_id,
            tool_name,
            content,
            is_error,
            details,
        } => g::AgentMessage::ToolResult(g::ToolResultMessage {
            tool_call_id: tool_call_id.clone(),
            tool_name: tool_name.clone(),
            content: blocks(content),
            is_error: *is_error,
            details: details.clone(),
        }),
        AgentMessage::Custom {
            custom_type,
            content,
            display,
            details,
        } => g::AgentMessage::Custom(g::CustomMessage {
            custom_type: custom_type.clone(),
            content: blocks(content),
            display: *display,
            details: details.clone(),
        }),
        AgentMessage::CompactionSummary {
            summary,
            tokens_before,
        } => g::AgentMessage::CompactionSummary(g::CompactionSummary {
            summary: summary.clone(),
            tokens_before: *tokens_before,
        }),
        AgentMessage::BranchSummary { summary, from_id } => {
            g::AgentMessage::BranchSummary(g::BranchSummary {
                summary: summary.clone(),
                from_id: from_id.clone(),
            })
        }
    }
}

fn guest_block(block: &ContentBlock) -> ctxbox_guest::ContentBlock {
    use ctxbox_guest as g;
    match block {
        ContentBlock::Text { text } | ContentBlock::Data { json: text } => {
            g::ContentBlock::Text(text.clone())
        }
        ContentBlock::Thinking { text, signature } => g::ContentBlock::Thinking(g::Thinking {
            text: text.clone(),
            signature: signature.clone(),
        }),
        ContentBlock::Image { mime_type, data } => g::ContentBlock::Image(g::Image {
            mime_type: mime_type.clone(),
            data: data.clone(),
        }),
        ContentBlock::ToolCall {
            id,
            name,
            arguments_json,
        } => g::ContentBlock::ToolCall(g::ToolCall {
            id: id.clone(),
            name: name.clone(),
            arguments_json: arguments_json.clone(),
        }),
    }
}

/// A guest SDK message as the host's type: what the host makes of a message
/// a wasm engine answers with.
pub fn host_message(message: ctxbox_guest::AgentMessage) -> AgentMessage {
    use ctxbox_guest as g;
    let blocks = |content: Vec<g::ContentBlock>| content.into_iter().map(host_block).collect();
    match message {
        g::AgentMessage::User(m) => AgentMessage::User {
            content: blocks(m.content),
        },
        g::AgentMessage::Assistant(m) => AgentMessage::Assistant {
            content: blocks(m.content),
            model: m.model,
            provider: m.provider,
            usage: m.usage.map(|usage| crate::contract::types::Usage {
                input: usage.input,
                output: usage.output,
                cache_read: usage.cache_read,
                cache_write: usage.cache_write,
                total: usage.total,
            }),
            stop_reason: match m.stop_reason {
                g::StopReason::Stop => StopReason::Stop,
                g::StopReason::Length => StopReason::Length,
                g::StopReason::ToolUse => StopReason::ToolUse,
                g::StopReason::Error => StopReason::Error,
                g::StopReason::Aborted => StopReason::Aborted,
            },
            error_message: m.error_message,
        },
        g::AgentMessage::ToolResult(m) => AgentMessage::ToolResult {
            tool_call_id: m.tool_call_id,
            tool_name: m.tool_name,
            content: blocks(m.content),
            is_error: m.is_error,
            details: m.details,
        },
        g::AgentMessage::Custom(m) => AgentMessage::Custom {
            custom_type: m.custom_type,
            content: blocks(m.content),
            display: m.display,
            details: m.details,
        },
        g::AgentMessage::CompactionSummary(m) => AgentMessage::CompactionSummary {
            summary: m.summary,
            tokens_before: m.tokens_before,
        },
        g::AgentMessage::BranchSummary(m) => AgentMessage::BranchSummary {
            summary: m.summary,
            from_id: m.from_id,
        },
    }
}

fn host_block(block: ctxbox_guest::ContentBlock) -> ContentBlock {
    use ctxbox_guest as g;
    match block {
        g::ContentBlock::Text(text) => ContentBlock::Text { text },
        g::ContentBlock::Thinking(thinking) => ContentBlock::Thinking {
            text: thinking.text,
            signature: thinking.signature,
        },
        g::ContentBlock::Image(image) => ContentBlock::Image {
            mime_type: image.mime_type,
            data: image.data,
        },
        g::ContentBlock::ToolCall(call) => ContentBlock::ToolCall {
            id: call.id,
            name: call.name,
            arguments_json: call.arguments_json,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `turns` turns of an ask, a tool call, its result and an answer.
    fn conversation(turns: usize) -> Vec<MessageEntry> {
        let messages = (0..turns).flat_map(|turn| {
            let call = format!("call-{turn}");
            [
                AgentMessage::user_text(format!("question {turn}")),
                AgentMessage::tool_call(&call, "exec", r#"{"command":"ls"}"#),
                AgentMessage::tool_result(&call, "exec", "a.rs\nb.rs"),
                AgentMessage::assistant_text(format!("answer {turn}")),
            ]
        });
        messages
            .enumerate()
            .map(|(index, message)| MessageEntry {
                id: format!("e{index}"),
                parent_id: index.checked_sub(1).map(|parent| format!("e{parent}")),
                timestamp_ms: 0,
                message,
            })
            .collect()
    }

    #[test]
    fn the_native_view_answers_what_a_guest_would_see() {
        let history = History::new(conversation(3));
        let view: &dyn HistoryView = &history;
        assert_eq!(view.len(), 12);
        for index in 0..12 {
            let host = History::entry(&history, index as usize).expect("entry");
            let guest = view.entry(index).expect("entry");
            assert_eq!(guest.id, host.id);
            let host_text: Vec<&str> = host
                .message
                .content()
                .iter()
                .filter_map(|block| match block {
                    ContentBlock::Text { text } => Some(text.as_str()),
                    _ => None,
                })
                .collect();
            assert_eq!(guest.message.text(), host_text.join("\n"));
            assert_eq!(Some(guest.message.kind()), view.kind(index));
            let host_calls: Vec<&str> = host.message.tool_call_ids().collect();
            let guest_calls: Vec<&str> = guest
                .message
                .tool_calls()
                .map(|call| call.id.as_str())
                .collect();
            assert_eq!(guest_calls, host_calls);
            assert_eq!(view.find(&host.id), Some(index));
        }
        assert_eq!(view.entry(12), None);
        for entry in history.entries() {
            assert_eq!(host_message(guest_entry(entry).message), entry.message);
        }
        assert_eq!(view.tokens(0..12), history.total_tokens());
    }
}
