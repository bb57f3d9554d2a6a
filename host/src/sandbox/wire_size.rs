//! Approximate bytes a value takes on the wire between guest and host: the
//! sum of its strings plus a small fixed cost per field. Used to charge what
//! a guest passes in and to cap what it returns.

use crate::contract::types::{AgentMessage, AssembledItem, ContentBlock, MessageEntry};

/// Fixed cost charged per record or list element.
const ITEM_OVERHEAD: usize = 16;

fn opt(value: &Option<String>) -> usize {
    value.as_ref().map_or(0, String::len)
}

/// Bytes of a content block.
pub(crate) fn block(block: &ContentBlock) -> usize {
    ITEM_OVERHEAD
        + match block {
            ContentBlock::Text { text } | ContentBlock::Data { json: text } => text.len(),
            ContentBlock::Thinking { text, signature } => text.len() + opt(signature),
            ContentBlock::Image { mime_type, data } => mime_type.len() + data.len(),
            ContentBlock::ToolCall {
                id,
                name,
                arguments_json,
            } => id.len() + name.len() + arguments_json.len(),
        }
}

/// Bytes of a message.
pub(crate) fn message(message: &AgentMessage) -> usize {
    let blocks: usize = message.content().iter().map(block).sum();
    ITEM_OVERHEAD
        + blocks
        + match message {
            AgentMessage::User { .. } => 0,
            AgentMessage::Assistant {
                model,
                provider,
                error_message,
                ..
            } => opt(model) + opt(provider) + opt(error_message),
            AgentMessage::ToolResult {
                tool_call_id,
                tool_name,
                details,
                ..
            } => tool_call_id.len() + tool_name.len() + opt(details),
            AgentMessage::Custom {
                custom_type,
                details,
                ..
            } => custom_type.len() + opt(details),
            AgentMessage::CompactionSummary { summary, .. } => summary.len(),
            AgentMessage::BranchSummary { summary, from_id } => summary.len() + from_id.len(),
        }
}

/// Bytes of an entry.
pub(crate) fn entry(entry: &MessageEntry) -> usize {
    ITEM_OVERHEAD + entry.id.len() + opt(&entry.parent_id) + message(&entry.message)
}

/// Bytes of assembled items.
pub(crate) fn items(items: &[AssembledItem]) -> usize {
    items
        .iter()
        .map(|item| match item {
            AssembledItem::Keep { .. } => ITEM_OVERHEAD,
            AssembledItem::Insert(inserted) => message(inserted),
        })
        .sum()
}

/// Bytes of a few optional strings.
pub(crate) fn strings<'a>(values: impl IntoIterator<Item = Option<&'a str>>) -> usize {
    values
        .into_iter()
        .map(|value| value.map_or(0, str::len))
        .sum()
}
