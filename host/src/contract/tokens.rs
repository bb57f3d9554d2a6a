//! The host's token estimator (ARCHITECTURE.md §6): the figure engines and the host
//! budget with.
//!
//! `ceil(weighted chars / 4)` per message, where a CJK character weighs 4 (about
//! one token each, as real tokenizers give), plus 2,000 per image, 12 per
//! message and 6 per content block. The pre-prompt check multiplies the total
//! by [`PRE_PROMPT_SAFETY_FACTOR`].
//!
//! The pre-prompt check weighs a prompt as the reference's
//! `context-token-pressure` does ([`pressure_message`]): tool results at two
//! characters a token and JSON payloads (tool-call names and arguments) at
//! three, since logs, code and JSON tokenize denser than prose.
//!
//! With the `exact-tokens` cargo feature, a [`Tokenizer`] can count text with
//! a real BPE vocabulary instead (the overheads stay). The transcript store
//! caches its per-entry figures with the one configured in
//! `transcripts.tokenizer` ([`count_message`]); the other estimates here keep
//! the heuristic.

use serde::{Deserialize, Serialize};

use crate::contract::types::{AgentMessage, ContentBlock, MessageEntry};

/// Tokens an image counts for.
pub const IMAGE_TOKENS: u64 = 2_000;
/// Per-message overhead.
pub const MESSAGE_OVERHEAD_TOKENS: u64 = 12;
/// Per-content-block overhead.
pub const BLOCK_OVERHEAD_TOKENS: u64 = 6;
/// Factor the pre-prompt check applies to the estimate.
pub const PRE_PROMPT_SAFETY_FACTOR: f64 = 1.2;
/// Characters a token of a JSON payload counts as in the pre-prompt check.
pub const JSON_CHARS_PER_TOKEN: u64 = 3;
/// Characters a token of a tool result counts as in the pre-prompt check.
pub const TOOL_RESULT_CHARS_PER_TOKEN: u64 = 2;

/// How text is counted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", try_from = "String")]
pub enum Tokenizer {
    /// The heuristic above: fast, offline, no vocabulary.
    #[default]
    Estimate,
    /// OpenAI's `o200k_base` vocabulary (GPT-4o and later).
    #[cfg(feature = "exact-tokens")]
    O200kBase,
    /// OpenAI's `cl100k_base` vocabulary (GPT-4, GPT-3.5).
    #[cfg(feature = "exact-tokens")]
    Cl100kBase,
}

impl TryFrom<String> for Tokenizer {
    type Error = String;

    fn try_from(name: String) -> Result<Self, Self::Error> {
        match name.as_str() {
            "estimate" => Ok(Self::Estimate),
            #[cfg(feature = "exact-tokens")]
            "o200k-base" => Ok(Self::O200kBase),
            #[cfg(feature = "exact-tokens")]
            "cl100k-base" => Ok(Self::Cl100kBase),
            #[cfg(not(feature = "exact-tokens"))]
            "o200k-base" | "cl100k-base" => Err(format!(
                "tokenizer `{name}` needs ctxbox built with the `exact-tokens` feature"
            )),
            other => Err(format!(
                "unknown tokenizer `{other}`: expected `estimate`, `o200k-base` or `cl100k-base`"
            )),
        }
    }
}

impl Tokenizer {
    /// Tokens of plain text (no message overhead).
    pub fn count_text(self, text: &str) -> u64 {
        match self {
            Self::Estimate => estimate_text(text),
            #[cfg(feature = "exact-tokens")]
            Self::O200kBase => tiktoken_rs::o200k_base_singleton()
                .encode_ordinary(text)
                .len() as u64,
            #[cfg(feature = "exact-tokens")]
            Self::Cl100kBase => tiktoken_rs::cl100k_base_singleton()
                .encode_ordinary(text)
                .len() as u64,
        }
    }
}

/// Estimated tokens of one message.
pub fn estimate_message(message: &AgentMessage) -> u64 {
    let mut chars = 0u64;
    let shape = for_each_text(message, |text| chars += weighted_chars(text));
    shape.tokens(chars.div_ceil(4))
}

/// Tokens of one message with `tokenizer`: its text counted by it, plus the
/// image, message and block overheads of the estimate. The same as
/// [`estimate_message`] for [`Tokenizer::Estimate`].
pub fn count_message(message: &AgentMessage, tokenizer: Tokenizer) -> u64 {
    match tokenizer {
        Tokenizer::Estimate => estimate_message(message),
        #[cfg(feature = "exact-tokens")]
        exact => {
            let mut text_tokens = 0u64;
            let shape = for_each_text(message, |text| text_tokens += exact.count_text(text));
            shape.tokens(text_tokens)
        }
    }
}

/// The parts of a message that cost tokens besides its text.
struct Shape {
    images: u64,
    blocks: u64,
}

impl Shape {
    fn tokens(&self, text_tokens: u64) -> u64 {
        text_tokens
            + self.images * IMAGE_TOKENS
            + MESSAGE_OVERHEAD_TOKENS
            + self.blocks * BLOCK_OVERHEAD_TOKENS
    }
}

/// Calls `text` with every piece of text of `message` and answers the rest.
fn for_each_text<'a>(message: &'a AgentMessage, mut text: impl FnMut(&'a str)) -> Shape {
    match message {
        AgentMessage::CompactionSummary { summary, .. }
        | AgentMessage::BranchSummary { summary, .. } => {
            text(summary);
            Shape {
                images: 0,
                blocks: 1,
            }
        }
        other => {
            let content = other.content();
            let mut images = 0u64;
            for block in content {
                match block {
                    ContentBlock::Text { text: t }
                    | ContentBlock::Thinking { text: t, .. }
                    | ContentBlock::Data { json: t } => text(t),
                    ContentBlock::ToolCall {
                        name,
                        arguments_json,
                        ..
                    } => {
                        text(name);
                        text(arguments_json);
                    }
                    ContentBlock::Image { .. } => images += 1,
                }
            }
            Shape {
                images,
                blocks: content.len() as u64,
            }
        }
    }
}

/// The pre-prompt check's estimate of one message, weighed as the
/// reference weighs a prompt's pressure: a tool result's text at two
/// characters a token (CJK text still a token a character, whichever is
/// more), a tool call's name and arguments at three, everything else as
/// [`estimate_message`], with the same overheads. Never below
/// [`estimate_message`].
pub fn pressure_message(message: &AgentMessage) -> u64 {
    match message {
        AgentMessage::ToolResult {
            tool_name, content, ..
        } => {
            let mut text_tokens = weighted_chars(tool_name).div_ceil(JSON_CHARS_PER_TOKEN);
            let mut images = 0u64;
            for block in content {
                match block {
                    ContentBlock::Text { text }
                    | ContentBlock::Thinking { text, .. }
                    | ContentBlock::Data { json: text } => {
                        text_tokens += tool_result_text_tokens(text)
                    }
                    ContentBlock::ToolCall { arguments_json, .. } => {
                        text_tokens += weighted_chars(arguments_json).div_ceil(JSON_CHARS_PER_TOKEN)
                    }
                    ContentBlock::Image { .. } => images += 1,
                }
            }
            Shape {
                images,
                blocks: content.len() as u64,
            }
            .tokens(text_tokens)
        }
        AgentMessage::Assistant { content, .. } => {
            let (mut prose, mut json, mut images) = (0u64, 0u64, 0u64);
            for block in content {
                match block {
                    ContentBlock::Text { text }
                    | ContentBlock::Thinking { text, .. }
                    | ContentBlock::Data { json: text } => prose += weighted_chars(text),
                    ContentBlock::ToolCall {
                        name,
                        arguments_json,
                        ..
                    } => json += weighted_chars(name) + weighted_chars(arguments_json),
                    ContentBlock::Image { .. } => images += 1,
                }
            }
            Shape {
                images,
                blocks: content.len() as u64,
            }
            .tokens(prose.div_ceil(4) + json.div_ceil(JSON_CHARS_PER_TOKEN))
        }
        other => estimate_message(other),
    }
}

/// Tokens of a tool result's text in the pre-prompt check: two characters
/// a token, or the CJK-weighted estimate when that is more.
fn tool_result_text_tokens(text: &str) -> u64 {
    let chars = if text.is_ascii() {
        text.len() as u64
    } else {
        text.chars().count() as u64
    };
    chars
        .div_ceil(TOOL_RESULT_CHARS_PER_TOKEN)
        .max(weighted_chars(text).div_ceil(4))
}

/// The pre-prompt check's estimate of plain JSON (tool definitions):
/// three characters a token.
pub fn pressure_json(json: &str) -> u64 {
    weighted_chars(json).div_ceil(JSON_CHARS_PER_TOKEN)
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

/// The longest prefix of `text` whose estimate ([`estimate_text`]) is at
/// most `tokens`.
pub fn estimated_prefix(text: &str, tokens: u64) -> &str {
    let budget = tokens.saturating_mul(4);
    if weighted_chars(text) <= budget {
        return text;
    }
    let mut weight = 0u64;
    for (at, c) in text.char_indices() {
        weight += if is_cjk(c) { 4 } else { 1 };
        if weight > budget {
            return &text[..at];
        }
    }
    text
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
    fn names_the_feature_a_bpe_tokenizer_needs() {
        let parsed: Result<Tokenizer, _> = serde_json::from_str(r#""o200k-base""#);
        #[cfg(feature = "exact-tokens")]
        assert_eq!(parsed.ok(), Some(Tokenizer::O200kBase));
        #[cfg(not(feature = "exact-tokens"))]
        assert!(
            parsed.is_err_and(|error| error.to_string().contains("`exact-tokens` feature")),
            "refused, naming the feature"
        );
        let unknown: Result<Tokenizer, _> = serde_json::from_str(r#""p50k""#);
        assert!(unknown.is_err_and(|error| error.to_string().contains("unknown tokenizer")));
        let message = AgentMessage::user_text("你好 world");
        assert_eq!(
            count_message(&message, Tokenizer::Estimate),
            estimate_message(&message)
        );
    }

    #[cfg(feature = "exact-tokens")]
    #[test]
    fn counts_exact_tokens_with_a_bpe_vocabulary() {
        assert_eq!(Tokenizer::O200kBase.count_text("hello world"), 2);
        assert_eq!(Tokenizer::Cl100kBase.count_text("hello world"), 2);
        assert_eq!(Tokenizer::O200kBase.count_text(""), 0);
        let message = AgentMessage::user_text("hello world");
        assert_eq!(
            count_message(&message, Tokenizer::O200kBase),
            2 + MESSAGE_OVERHEAD_TOKENS + BLOCK_OVERHEAD_TOKENS
        );
    }

    fn assistant(content: Vec<ContentBlock>) -> AgentMessage {
        AgentMessage::Assistant {
            content,
            model: None,
            provider: None,
            usage: None,
            stop_reason: Default::default(),
            error_message: None,
        }
    }

    #[test]
    fn pressure_weighs_tool_results_and_json_heavier_than_prose() {
        let result = AgentMessage::tool_result("c", "exec", "x".repeat(400));
        // "exec" at 3 a token (2) + 400 chars at 2 a token (200).
        assert_eq!(
            pressure_message(&result),
            2 + 200 + MESSAGE_OVERHEAD_TOKENS + BLOCK_OVERHEAD_TOKENS
        );
        assert_eq!(
            estimate_message(&result),
            100 + MESSAGE_OVERHEAD_TOKENS + BLOCK_OVERHEAD_TOKENS
        );
        // CJK text is a token a character either way.
        let cjk = AgentMessage::tool_result("c", "", "你好世界".repeat(10));
        assert_eq!(
            pressure_message(&cjk),
            40 + MESSAGE_OVERHEAD_TOKENS + BLOCK_OVERHEAD_TOKENS
        );
        let call = assistant(vec![
            ContentBlock::text("abcdefgh"),
            ContentBlock::ToolCall {
                id: "c".into(),
                name: "read".into(),
                arguments_json: r#"{"path":"a.rs"}"#.into(),
            },
        ]);
        // prose 8 / 4 = 2; "read" + 15 chars of JSON = 19 / 3 -> 7.
        assert_eq!(
            pressure_message(&call),
            2 + 7 + MESSAGE_OVERHEAD_TOKENS + 2 * BLOCK_OVERHEAD_TOKENS
        );
        let prose = AgentMessage::user_text("hello there");
        assert_eq!(pressure_message(&prose), estimate_message(&prose));
        assert_eq!(pressure_json("{\"a\":1}"), 3);
    }

    #[test]
    fn a_data_block_counts_as_its_json() {
        let json = format!(r#"{{"type":"json","rows":"{}"}}"#, "y".repeat(380));
        let chars = json.len() as u64;
        let result = AgentMessage::ToolResult {
            tool_call_id: "c".into(),
            tool_name: String::new(),
            content: vec![ContentBlock::Data { json: json.clone() }],
            is_error: false,
            details: None,
        };
        assert_eq!(
            estimate_message(&result),
            chars.div_ceil(4) + MESSAGE_OVERHEAD_TOKENS + BLOCK_OVERHEAD_TOKENS,
            "counted, where it used to cost only the overheads"
        );
        // In a tool result, the pre-prompt check weighs it as tool output.
        assert_eq!(
            pressure_message(&result),
            chars.div_ceil(2) + MESSAGE_OVERHEAD_TOKENS + BLOCK_OVERHEAD_TOKENS
        );
        let answer = assistant(vec![ContentBlock::Data { json }]);
        assert_eq!(
            pressure_message(&answer),
            chars.div_ceil(4) + MESSAGE_OVERHEAD_TOKENS + BLOCK_OVERHEAD_TOKENS
        );
    }

    #[test]
    fn counts_tool_call_names_and_arguments() {
        let message = assistant(vec![ContentBlock::ToolCall {
            id: "call-1".into(),
            name: "read".into(),
            arguments_json: r#"{"p":"a"}"#.into(),
        }]);
        // "read" + {"p":"a"} = 13 chars -> 4 tokens.
        assert_eq!(
            estimate_message(&message),
            4 + MESSAGE_OVERHEAD_TOKENS + BLOCK_OVERHEAD_TOKENS
        );
    }
}
