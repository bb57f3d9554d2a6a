//! The host's token estimator (DESIGN §7): the figure engines and the host
//! budget with.
//!
//! `ceil(weighted chars / 4)` per message, where a CJK character weighs 4 (about
//! one token each, as real tokenizers give), plus 2,000 per image, 12 per
//! message and 6 per content block. The pre-prompt check multiplies the total
//! by [`PRE_PROMPT_SAFETY_FACTOR`].

use crate::types::{AgentMessage, ContentBlock, MessageEntry};

/// Tokens an image counts for.
pub const IMAGE_TOKENS: u64 = 2_000;
/// Per-message overhead.
pub const MESSAGE_OVERHEAD_TOKENS: u64 = 12;
/// Per-content-block overhead.
pub const BLOCK_OVERHEAD_TOKENS: u64 = 6;
/// Factor the pre-prompt check applies to the estimate.
pub const PRE_PROMPT_SAFETY_FACTOR: f64 = 1.2;

/// Estimated tokens of one message.
pub fn estimate_message(message: &AgentMessage) -> u64 {
    let mut chars = 0u64;
    let mut images = 0u64;
    let blocks = match message {
        AgentMessage::CompactionSummary { summary, .. }
        | AgentMessage::BranchSummary { summary, .. } => {
            chars += weighted_chars(summary);
            1
        }
        other => {
            let content = other.content();
            for block in content {
                match block {
                    ContentBlock::Text { text } | ContentBlock::Thinking { text, .. } => {
                        chars += weighted_chars(text)
                    }
                    ContentBlock::ToolCall {
                        name,
                        arguments_json,
                        ..
                    } => chars += weighted_chars(name) + weighted_chars(arguments_json),
                    ContentBlock::Image { .. } => images += 1,
                }
            }
            content.len() as u64
        }
    };
    chars.div_ceil(4)
        + images * IMAGE_TOKENS
        + MESSAGE_OVERHEAD_TOKENS
        + blocks * BLOCK_OVERHEAD_TOKENS
}

/// Estimated tokens of a list of entries.
pub fn estimate_entries(entries: &[MessageEntry]) -> u64 {
    entries
        .iter()
        .map(|entry| estimate_message(&entry.message))
        .sum()
}

/// Estimated tokens of plain text (no message overhead).
pub fn estimate_text(text: &str) -> u64 {
    weighted_chars(text).div_ceil(4)
}

/// Characters of `text`, CJK ones counting four.
pub fn weighted_chars(text: &str) -> u64 {
    let bytes = text.as_bytes();
    // ASCII, the common case, needs no decoding.
    if bytes.is_ascii() {
        return bytes.len() as u64;
    }
    text.chars().map(|c| if is_cjk(c) { 4 } else { 1 }).sum()
}

/// Whether `c` is a CJK ideograph, kana, hangul syllable, or CJK / full-width
/// punctuation.
fn is_cjk(c: char) -> bool {
    matches!(c as u32,
        0x3000..=0x303F   // CJK symbols and punctuation
        | 0x3040..=0x30FF // hiragana, katakana
        | 0x3400..=0x4DBF // CJK extension A
        | 0x4E00..=0x9FFF // CJK unified ideographs
        | 0xAC00..=0xD7AF // hangul syllables
        | 0xF900..=0xFAFF // CJK compatibility ideographs
        | 0xFF00..=0xFFEF // half- and full-width forms
        | 0x20000..=0x2FA1F // CJK extensions B–F, compatibility supplement
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_ascii_by_four_chars() {
        assert_eq!(estimate_text("abcd"), 1);
        assert_eq!(estimate_text("abcde"), 2);
        assert_eq!(estimate_text(""), 0);
    }

    #[test]
    fn counts_cjk_as_a_token_each() {
        assert_eq!(estimate_text("你好世界"), 4);
        assert_eq!(estimate_text("こんにちは"), 5);
        // Arabic and German letters are ordinary characters.
        assert_eq!(estimate_text("مرحبا"), 2);
        assert_eq!(estimate_text("Grüße"), 2);
    }

    #[test]
    fn adds_message_block_and_image_overheads() {
        let message = AgentMessage::User {
            content: vec![
                ContentBlock::text("abcdefgh"),
                ContentBlock::Image {
                    mime_type: "image/png".into(),
                    data: "AAAA".into(),
                },
            ],
        };
        assert_eq!(
            estimate_message(&message),
            2 + IMAGE_TOKENS + MESSAGE_OVERHEAD_TOKENS + 2 * BLOCK_OVERHEAD_TOKENS
        );
    }

    #[test]
    fn counts_tool_call_names_and_arguments() {
        let message = AgentMessage::Assistant {
            content: vec![ContentBlock::ToolCall {
                id: "call-1".into(),
                name: "read".into(),
                arguments_json: r#"{"p":"a"}"#.into(),
            }],
            model: None,
            provider: None,
            usage: None,
            stop_reason: Default::default(),
            error_message: None,
        };
        // "read" + {"p":"a"} = 13 chars -> 4 tokens.
        assert_eq!(
            estimate_message(&message),
            4 + MESSAGE_OVERHEAD_TOKENS + BLOCK_OVERHEAD_TOKENS
        );
    }
}
