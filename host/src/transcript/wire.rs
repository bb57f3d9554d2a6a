//! The JSON shapes of OpenClaw/pi session files (version 3) and their mapping
//! to and from the host's message types.
//!
//! Reading is lenient: unknown fields are ignored here (the store keeps every
//! line's original bytes, so nothing is lost), content blocks the contract has
//! no case for are kept in the host view as text or as their JSON
//! ([`AnyBlock`]), and missing optional fields take the reference's
//! defaults. Writing produces the shapes pi writes, field for field.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::contract::types::{AgentMessage, ContentBlock, StopReason, Usage};

/// The session format version this module reads and writes.
pub const SESSION_VERSION: u64 = 3;

/// The fields every line carries.
#[derive(Debug, Deserialize)]
pub(crate) struct LineHead {
    #[serde(rename = "type")]
    pub entry_type: String,
    #[serde(default)]
    pub id: Option<String>,
    #[serde(default, rename = "parentId")]
    pub parent_id: Option<String>,
    #[serde(default)]
    pub timestamp: Option<Value>,
}

/// The header line: `{type:"session", version, id, timestamp, cwd, parentSession?}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionHeader {
    /// Always `"session"`.
    #[serde(rename = "type")]
    pub entry_type: String,
    /// Format version (1 when absent, as in the reference).
    #[serde(default = "version_one")]
    pub version: u64,
    /// Session id.
    pub id: String,
    /// When the session started (ISO 8601).
    #[serde(default)]
    pub timestamp: String,
    /// Working directory of the agent.
    #[serde(default)]
    pub cwd: String,
    /// The transcript this one continues (rotation) or was forked from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_session: Option<String>,
}

fn version_one() -> u64 {
    1
}

impl SessionHeader {
    /// A version-3 header for a new session.
    pub fn new(id: String, cwd: String, parent_session: Option<String>) -> Self {
        Self {
            entry_type: "session".into(),
            version: SESSION_VERSION,
            id,
            timestamp: iso_now(),
            cwd,
            parent_session,
        }
    }
}

/// Message content: a bare string or a list of blocks.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub(crate) enum WireContent {
    Text(String),
    Blocks(Vec<AnyBlock>),
}

impl WireContent {
    fn into_blocks(self) -> Vec<ContentBlock> {
        match self {
            Self::Text(text) => vec![ContentBlock::Text { text }],
            Self::Blocks(blocks) => blocks.into_iter().map(|block| block.0).collect(),
        }
    }
}

/// One content block as pi (or another runtime writing its files) wrote it,
/// in the host view. Nothing is left out:
/// - the four kinds the contract has are read as themselves (one of the
///   wrong shape, such as a tool call without an id, makes its message
///   misshapen, as it always has);
/// - a tool result nested in a content array (`toolResult` / `tool_result`,
///   as OpenClaw's Codex runtime and Anthropic-style messages write them) is
///   its payload as text, as the reference's compaction reads it (`text`,
///   else a string `content`; ctxbox also reads a `content` array's text);
/// - any other block is kept whole as a [`ContentBlock::Data`] block holding
///   its JSON.
#[derive(Debug)]
pub(crate) struct AnyBlock(ContentBlock);

impl<'de> Deserialize<'de> for AnyBlock {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let block = Value::deserialize(deserializer)?;
        read_block(block)
            .map(AnyBlock)
            .map_err(serde::de::Error::custom)
    }
}

/// [`AnyBlock`]'s reading of `block`.
fn read_block(block: Value) -> Result<ContentBlock, serde_json::Error> {
    let kind = block
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or_default();
    if matches!(kind, "toolResult" | "tool_result")
        && let Some(text) = nested_result_text(&block)
    {
        return Ok(ContentBlock::Text { text });
    }
    Ok(match kind {
        "text" | "thinking" | "image" | "toolCall" => WireBlock::deserialize(&block)?.into_block(),
        _ => ContentBlock::Data {
            json: block.to_string(),
        },
    })
}

/// The payload of a nested tool result: its `text`, else its `content` (a
/// string, or an array whose text it joins); `None` when it has neither.
fn nested_result_text(block: &Value) -> Option<String> {
    if let Some(text) = block.get("text").and_then(Value::as_str)
        && !text.is_empty()
    {
        return Some(text.to_owned());
    }
    match block.get("content")? {
        Value::String(text) => Some(text.clone()),
        Value::Array(parts) => Some(
            parts
                .iter()
                .map(|part| match part {
                    Value::String(text) => text.clone(),
                    other => match read_block(other.clone()) {
                        Ok(ContentBlock::Text { text }) => text,
                        _ => other.to_string(),
                    },
                })
                .collect::<Vec<_>>()
                .join("\n"),
        ),
        _ => None,
    }
}

/// One of the contract's content blocks as pi writes it.
#[derive(Debug, Deserialize)]
#[serde(tag = "type", rename_all = "camelCase")]
pub(crate) enum WireBlock {
    Text {
        #[serde(default)]
        text: String,
    },
    Thinking {
        #[serde(default)]
        thinking: String,
        #[serde(default, rename = "thinkingSignature")]
        thinking_signature: Option<String>,
    },
    Image {
        #[serde(default)]
        data: String,
        #[serde(default, rename = "mimeType")]
        mime_type: String,
    },
    ToolCall {
        id: String,
        name: String,
        #[serde(default)]
        arguments: Value,
    },
}

impl WireBlock {
    fn into_block(self) -> ContentBlock {
        match self {
            Self::Text { text } => ContentBlock::Text { text },
            Self::Thinking {
                thinking,
                thinking_signature,
            } => ContentBlock::Thinking {
                text: thinking,
                signature: thinking_signature,
            },
            Self::Image { data, mime_type } => ContentBlock::Image { mime_type, data },
            Self::ToolCall {
                id,
                name,
                arguments,
            } => ContentBlock::ToolCall {
                id,
                name,
                arguments_json: arguments.to_string(),
            },
        }
    }
}

/// Usage as pi records it.
#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub(crate) struct WireUsage {
    input: f64,
    output: f64,
    cache_read: f64,
    cache_write: f64,
    total_tokens: f64,
}

impl WireUsage {
    fn into_usage(self) -> Usage {
        let [input, output, cache_read, cache_write, total] = [
            self.input,
            self.output,
            self.cache_read,
            self.cache_write,
            self.total_tokens,
        ]
        .map(count);
        Usage {
            input,
            output,
            cache_read,
            cache_write,
            // The reference falls back to the sum when the total is missing
            // (saturating: the counts are whatever a file or a peer wrote).
            total: if total > 0 {
                total
            } else {
                input
                    .saturating_add(output)
                    .saturating_add(cache_read)
                    .saturating_add(cache_write)
            },
        }
    }
}

/// A non-negative JSON number as a count (providers write floats sometimes).
fn count(value: f64) -> u64 {
    if value.is_finite() && value > 0.0 {
        value as u64
    } else {
        0
    }
}

/// The `message` of a `message` entry.
#[derive(Debug, Deserialize)]
#[serde(tag = "role", rename_all = "camelCase")]
pub(crate) enum WireMessage {
    User {
        content: WireContent,
        #[serde(default)]
        timestamp: Option<f64>,
    },
    Assistant {
        #[serde(default)]
        content: Vec<AnyBlock>,
        #[serde(default)]
        model: Option<String>,
        #[serde(default)]
        provider: Option<String>,
        #[serde(default)]
        usage: Option<WireUsage>,
        #[serde(default, rename = "stopReason")]
        stop_reason: Option<String>,
        #[serde(default, rename = "errorMessage")]
        error_message: Option<String>,
        #[serde(default)]
        timestamp: Option<f64>,
    },
    ToolResult {
        #[serde(rename = "toolCallId")]
        tool_call_id: String,
        #[serde(default, rename = "toolName")]
        tool_name: String,
        content: WireContent,
        #[serde(default, rename = "isError")]
        is_error: bool,
        #[serde(default)]
        details: Option<Value>,
        #[serde(default)]
        timestamp: Option<f64>,
    },
    Custom {
        #[serde(rename = "customType")]
        custom_type: String,
        content: WireContent,
        #[serde(default)]
        display: bool,
        #[serde(default)]
        details: Option<Value>,
        #[serde(default)]
        timestamp: Option<f64>,
    },
    /// A shell command the user ran; models see it as user text.
    BashExecution {
        #[serde(default)]
        command: String,
        #[serde(default)]
        output: String,
        #[serde(default, rename = "exitCode")]
        exit_code: Option<i64>,
        #[serde(default, rename = "excludeFromContext")]
        exclude_from_context: bool,
        #[serde(default)]
        timestamp: Option<f64>,
    },
    BranchSummary {
        summary: String,
        #[serde(rename = "fromId")]
        from_id: String,
        #[serde(default)]
        timestamp: Option<f64>,
    },
    CompactionSummary {
        summary: String,
        #[serde(default, rename = "tokensBefore")]
        tokens_before: f64,
        #[serde(default)]
        timestamp: Option<f64>,
    },
}

impl WireMessage {
    /// The host message and the message's own timestamp (ms), or `None` when
    /// the message is kept out of the model's context.
    pub(crate) fn into_message(self) -> Option<(AgentMessage, Option<i64>)> {
        let millis = |timestamp: Option<f64>| timestamp.filter(|t| t.is_finite()).map(|t| t as i64);
        Some(match self {
            Self::User { content, timestamp } => (
                AgentMessage::User {
                    content: content.into_blocks(),
                },
                millis(timestamp),
            ),
            Self::Assistant {
                content,
                model,
                provider,
                usage,
                stop_reason,
                error_message,
                timestamp,
            } => (
                AgentMessage::Assistant {
                    content: content.into_iter().map(|block| block.0).collect(),
                    model,
                    provider,
                    usage: usage.map(WireUsage::into_usage),
                    stop_reason: stop_reason
                        .as_deref()
                        .map_or(StopReason::Stop, parse_stop_reason),
                    error_message,
                },
                millis(timestamp),
            ),
            Self::ToolResult {
                tool_call_id,
                tool_name,
                content,
                is_error,
                details,
                timestamp,
            } => (
                AgentMessage::ToolResult {
                    tool_call_id,
                    tool_name,
                    content: content.into_blocks(),
                    is_error,
                    details: details.filter(|d| !d.is_null()).map(|d| d.to_string()),
                },
                millis(timestamp),
            ),
            Self::Custom {
                custom_type,
                content,
                display,
                details,
                timestamp,
            } => (
                AgentMessage::Custom {
                    custom_type,
                    content: content.into_blocks(),
                    display,
                    details: details.filter(|d| !d.is_null()).map(|d| d.to_string()),
                },
                millis(timestamp),
            ),
            Self::BashExecution {
                command,
                output,
                exit_code,
                exclude_from_context,
                timestamp,
            } => {
                if exclude_from_context {
                    return None;
                }
                (
                    AgentMessage::user_text(bash_execution_text(&command, &output, exit_code)),
                    millis(timestamp),
                )
            }
            Self::BranchSummary {
                summary,
                from_id,
                timestamp,
            } => (
                AgentMessage::BranchSummary { summary, from_id },
                millis(timestamp),
            ),
            Self::CompactionSummary {
                summary,
                tokens_before,
                timestamp,
            } => (
                AgentMessage::CompactionSummary {
                    summary,
                    tokens_before: count(tokens_before),
                },
                millis(timestamp),
            ),
        })
    }
}

/// How the reference shows a user's shell command to the model.
fn bash_execution_text(command: &str, output: &str, exit_code: Option<i64>) -> String {
    let mut text = format!("Ran `{command}`\n```\n{output}\n```");
    if let Some(code) = exit_code.filter(|&code| code != 0) {
        text.push_str(&format!("\n\nCommand exited with code {code}"));
    }
    text
}

fn parse_stop_reason(reason: &str) -> StopReason {
    match reason {
        "length" => StopReason::Length,
        "toolUse" => StopReason::ToolUse,
        "error" => StopReason::Error,
        "aborted" => StopReason::Aborted,
        _ => StopReason::Stop,
    }
}

fn stop_reason_name(reason: StopReason) -> &'static str {
    match reason {
        StopReason::Stop => "stop",
        StopReason::Length => "length",
        StopReason::ToolUse => "toolUse",
        StopReason::Error => "error",
        StopReason::Aborted => "aborted",
    }
}

/// A `compaction` entry's own fields.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct WireCompaction {
    pub summary: String,
    pub first_kept_entry_id: String,
    #[serde(default)]
    pub tokens_before: f64,
    #[serde(default)]
    pub details: Option<Value>,
}

impl WireCompaction {
    /// `tokensBefore` as a count.
    pub(crate) fn tokens_before(&self) -> u64 {
        count(self.tokens_before)
    }
}

/// A `custom_message` entry's own fields.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct WireCustomMessage {
    pub custom_type: String,
    pub content: WireContent,
    #[serde(default)]
    pub display: bool,
    #[serde(default)]
    pub details: Option<Value>,
}

impl WireCustomMessage {
    pub(crate) fn into_message(self) -> AgentMessage {
        AgentMessage::Custom {
            custom_type: self.custom_type,
            content: self.content.into_blocks(),
            display: self.display,
            details: self.details.filter(|d| !d.is_null()).map(|d| d.to_string()),
        }
    }
}

/// A `branch_summary` entry's own fields.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct WireBranchSummary {
    pub from_id: String,
    #[serde(default)]
    pub summary: String,
}

/// Why a message cannot be written as given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct EncodeError(pub String);

/// The JSON of a new entry holding `message`: a `message` entry, or for
/// custom messages and branch summaries the entry types the reference uses
/// for them. Compaction summaries are written only by compaction.
pub(crate) fn encode_message_entry(
    id: &str,
    parent_id: Option<&str>,
    timestamp: SystemTime,
    message: &AgentMessage,
) -> Result<String, EncodeError> {
    let iso = iso(timestamp);
    let millis = unix_millis(timestamp);
    let head = |entry_type: &str| {
        let mut line = serde_json::Map::new();
        line.insert("type".into(), entry_type.into());
        line.insert("id".into(), id.into());
        line.insert(
            "parentId".into(),
            parent_id.map_or(Value::Null, Value::from),
        );
        line.insert("timestamp".into(), iso.as_str().into());
        line
    };
    let line = match message {
        AgentMessage::User { content } => {
            let mut line = head("message");
            let body = object([
                ("role", "user".into()),
                ("content", encode_blocks(content)?),
                ("timestamp", millis.into()),
            ]);
            line.insert("message".into(), Value::Object(body));
            line
        }
        AgentMessage::Assistant {
            content,
            model,
            provider,
            usage,
            stop_reason,
            error_message,
        } => {
            let mut fields = object([
                ("role", "assistant".into()),
                ("content", encode_blocks(content)?),
            ]);
            if let Some(provider) = provider {
                fields.insert("provider".into(), provider.as_str().into());
            }
            if let Some(model) = model {
                fields.insert("model".into(), model.as_str().into());
            }
            if let Some(usage) = usage {
                fields.insert(
                    "usage".into(),
                    Value::Object(object([
                        ("input", usage.input.into()),
                        ("output", usage.output.into()),
                        ("cacheRead", usage.cache_read.into()),
                        ("cacheWrite", usage.cache_write.into()),
                        ("totalTokens", usage.total.into()),
                    ])),
                );
            }
            fields.insert("stopReason".into(), stop_reason_name(*stop_reason).into());
            if let Some(error) = error_message {
                fields.insert("errorMessage".into(), error.as_str().into());
            }
            fields.insert("timestamp".into(), millis.into());
            let mut line = head("message");
            line.insert("message".into(), Value::Object(fields));
            line
        }
        AgentMessage::ToolResult {
            tool_call_id,
            tool_name,
            content,
            is_error,
            details,
        } => {
            let mut fields = object([
                ("role", "toolResult".into()),
                ("toolCallId", tool_call_id.as_str().into()),
                ("toolName", tool_name.as_str().into()),
                ("content", encode_blocks(content)?),
            ]);
            if let Some(details) = details {
                fields.insert("details".into(), parse_json("details", details)?);
            }
            fields.insert("isError".into(), (*is_error).into());
            fields.insert("timestamp".into(), millis.into());
            let mut line = head("message");
            line.insert("message".into(), Value::Object(fields));
            line
        }
        AgentMessage::Custom {
            custom_type,
            content,
            display,
            details,
        } => {
            let mut line = head("custom_message");
            line.insert("customType".into(), custom_type.as_str().into());
            line.insert("content".into(), encode_blocks(content)?);
            line.insert("display".into(), (*display).into());
            if let Some(details) = details {
                line.insert("details".into(), parse_json("details", details)?);
            }
            line
        }
        AgentMessage::BranchSummary { summary, from_id } => {
            let mut line = head("branch_summary");
            line.insert("fromId".into(), from_id.as_str().into());
            line.insert("summary".into(), summary.as_str().into());
            line
        }
        AgentMessage::CompactionSummary { .. } => {
            return Err(EncodeError(
                "a compaction summary is written by compaction, not appended as a message".into(),
            ));
        }
    };
    Ok(Value::Object(line).to_string())
}

/// What a `compaction` entry records, as the reference's entries do.
#[derive(Debug, Clone, Copy)]
pub(crate) struct CompactionFigures<'a> {
    /// The summary of what was cut.
    pub summary: &'a str,
    /// The first entry kept verbatim.
    pub first_kept_entry_id: &'a str,
    /// The context's size before, in the compaction's caller's units.
    pub tokens_before: u64,
    /// The rebuilt context's size, in the same units.
    pub tokens_after: u64,
    /// `readFiles`, `modifiedFiles` and ctxbox's own figures.
    pub details: &'a Value,
}

/// The JSON of a `compaction` entry.
pub(crate) fn encode_compaction_entry(
    id: &str,
    parent_id: Option<&str>,
    compaction: &CompactionFigures<'_>,
) -> String {
    let line = Value::Object(object([
        ("type", "compaction".into()),
        ("id", id.into()),
        ("parentId", parent_id.map_or(Value::Null, Value::from)),
        ("timestamp", iso_now().into()),
        ("summary", compaction.summary.into()),
        ("firstKeptEntryId", compaction.first_kept_entry_id.into()),
        ("tokensBefore", compaction.tokens_before.into()),
        ("tokensAfter", compaction.tokens_after.into()),
        ("details", compaction.details.clone()),
    ]));
    line.to_string()
}

/// The JSON of a `custom` entry (extension data, never part of the context).
pub(crate) fn encode_custom_entry(
    id: &str,
    parent_id: Option<&str>,
    custom_type: &str,
    data: Value,
) -> String {
    Value::Object(object([
        ("type", "custom".into()),
        ("customType", custom_type.into()),
        ("data", data),
        ("id", id.into()),
        ("parentId", parent_id.map_or(Value::Null, Value::from)),
        ("timestamp", iso_now().into()),
    ]))
    .to_string()
}

fn object<const N: usize>(fields: [(&str, Value); N]) -> Map<String, Value> {
    fields
        .into_iter()
        .map(|(key, value)| (key.to_owned(), value))
        .collect()
}

fn encode_blocks(blocks: &[ContentBlock]) -> Result<Value, EncodeError> {
    blocks
        .iter()
        .map(|block| {
            Ok(match block {
                ContentBlock::Text { text } => {
                    object([("type", "text".into()), ("text", text.as_str().into())])
                }
                ContentBlock::Thinking { text, signature } => {
                    let mut fields = object([
                        ("type", "thinking".into()),
                        ("thinking", text.as_str().into()),
                    ]);
                    if let Some(signature) = signature {
                        fields.insert("thinkingSignature".into(), signature.as_str().into());
                    }
                    fields
                }
                ContentBlock::Image { mime_type, data } => object([
                    ("type", "image".into()),
                    ("data", data.as_str().into()),
                    ("mimeType", mime_type.as_str().into()),
                ]),
                ContentBlock::ToolCall {
                    id,
                    name,
                    arguments_json,
                } => object([
                    ("type", "toolCall".into()),
                    ("id", id.as_str().into()),
                    ("name", name.as_str().into()),
                    (
                        "arguments",
                        parse_json("tool-call arguments", arguments_json)?,
                    ),
                ]),
                ContentBlock::Data { json } => match parse_json("a data block's fields", json)? {
                    Value::Object(fields) => fields,
                    _ => return Err(EncodeError("a data block is not a JSON object".into())),
                },
            })
        })
        .map(|fields| fields.map(Value::Object))
        .collect::<Result<Vec<_>, _>>()
        .map(Value::Array)
}

fn parse_json(what: &str, text: &str) -> Result<Value, EncodeError> {
    serde_json::from_str(text)
        .map_err(|error| EncodeError(format!("{what} are not valid JSON: {error}")))
}

/// Milliseconds since the Unix epoch of a line's `timestamp` (ISO 8601 as pi
/// writes it, or a number of milliseconds).
pub(crate) fn timestamp_millis(value: &Value) -> Option<i64> {
    match value {
        Value::String(text) => humantime::parse_rfc3339_weak(text).ok().map(unix_millis),
        Value::Number(number) => number.as_f64().filter(|n| n.is_finite()).map(|n| n as i64),
        _ => None,
    }
}

/// Milliseconds since the Unix epoch (negative before it).
pub(crate) fn unix_millis(time: SystemTime) -> i64 {
    match time.duration_since(UNIX_EPOCH) {
        Ok(after) => i64::try_from(after.as_millis()).unwrap_or(i64::MAX),
        Err(before) => -i64::try_from(before.duration().as_millis()).unwrap_or(i64::MAX),
    }
}

/// `time` as pi writes timestamps: `2026-04-06T02:31:25.606Z`.
pub(crate) fn iso(time: SystemTime) -> String {
    // Times before 1970 cannot be formatted; the epoch stands in for them.
    let time = time.max(UNIX_EPOCH + Duration::ZERO);
    humantime::format_rfc3339_millis(time).to_string()
}

/// Now, as pi writes timestamps.
pub(crate) fn iso_now() -> String {
    iso(SystemTime::now())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode(json: &str) -> AgentMessage {
        let wire: WireMessage = serde_json::from_str(json).expect("valid message");
        wire.into_message().expect("a context message").0
    }

    #[test]
    fn reads_pi_messages() {
        assert_eq!(
            decode(r#"{"role":"user","content":"hi","timestamp":5}"#),
            AgentMessage::user_text("hi")
        );
        let assistant = decode(
            r#"{"role":"assistant","content":[{"type":"thinking","thinking":"hm","thinkingSignature":"sig"},
                {"type":"toolCall","id":"c1","name":"read","arguments":{"path":"a.rs"},"partialArgs":"x"},
                {"type":"mystery"}],
               "api":"x","provider":"p","model":"m","stopReason":"toolUse",
               "usage":{"input":10,"output":2,"cacheRead":0,"cacheWrite":0,"totalTokens":0,"cost":{"total":0}}}"#,
        );
        let AgentMessage::Assistant {
            content,
            usage,
            stop_reason,
            ..
        } = assistant
        else {
            panic!("an assistant message")
        };
        assert_eq!(
            content[2],
            ContentBlock::Data {
                json: r#"{"type":"mystery"}"#.into()
            },
            "the unknown block is kept whole as its JSON"
        );
        assert_eq!(
            content[1],
            ContentBlock::ToolCall {
                id: "c1".into(),
                name: "read".into(),
                arguments_json: r#"{"path":"a.rs"}"#.into()
            }
        );
        assert_eq!(
            usage.map(|u| u.total),
            Some(12),
            "total falls back to the sum"
        );
        assert_eq!(stop_reason, StopReason::ToolUse);
    }

    #[test]
    fn nested_tool_results_are_read_as_their_payload_and_odd_blocks_as_json() {
        let result = decode(
            r#"{"role":"toolResult","toolCallId":"c1","toolName":"exec","content":[
                {"type":"toolResult","id":"c1","toolCallId":"c1","content":"same","text":"same"},
                {"type":"tool_result","tool_use_id":"c2","content":[{"type":"text","text":"a"},"b"]},
                {"type":"tool_result","tool_use_id":"c3","content":"only content"},
                {"type":"json","json":{"rows":[1,2]}}]}"#,
        );
        assert_eq!(
            result.content(),
            [
                ContentBlock::text("same"),
                ContentBlock::text("a\nb"),
                ContentBlock::text("only content"),
                ContentBlock::Data {
                    json: r#"{"type":"json","json":{"rows":[1,2]}}"#.into()
                },
            ],
            "a payload in both `text` and `content` is read once"
        );
        let line = encode_message_entry("e", None, UNIX_EPOCH, &result).expect("encodes");
        let entry: Value = serde_json::from_str(&line).expect("JSON");
        assert_eq!(
            entry["message"]["content"][3],
            serde_json::json!({"type": "json", "json": {"rows": [1, 2]}}),
            "a data block is written back as it was read"
        );
    }

    #[test]
    fn keeps_excluded_shell_commands_out_of_the_context() {
        let wire: WireMessage = serde_json::from_str(
            r#"{"role":"bashExecution","command":"ls","output":"a","excludeFromContext":true}"#,
        )
        .expect("valid message");
        assert!(wire.into_message().is_none());
    }

    #[test]
    fn written_messages_read_back_equal() {
        let messages = [
            AgentMessage::user_text("grüß dich 你好"),
            AgentMessage::Assistant {
                content: vec![
                    ContentBlock::Thinking {
                        text: "plan".into(),
                        signature: Some("s".into()),
                    },
                    ContentBlock::ToolCall {
                        id: "c1".into(),
                        name: "edit".into(),
                        arguments_json: r#"{"path":"x"}"#.into(),
                    },
                ],
                model: Some("m".into()),
                provider: Some("p".into()),
                usage: Some(Usage {
                    input: 1,
                    output: 2,
                    cache_read: 3,
                    cache_write: 4,
                    total: 10,
                }),
                stop_reason: StopReason::ToolUse,
                error_message: None,
            },
            AgentMessage::ToolResult {
                tool_call_id: "c1".into(),
                tool_name: "edit".into(),
                content: vec![ContentBlock::Image {
                    mime_type: "image/png".into(),
                    data: "AA==".into(),
                }],
                is_error: true,
                details: Some(r#"{"diff":"+1"}"#.into()),
            },
        ];
        for message in messages {
            let line = encode_message_entry("id1", Some("p"), SystemTime::now(), &message)
                .expect("encodable");
            let value: Value = serde_json::from_str(&line).expect("valid JSON");
            assert_eq!(value["type"], "message");
            assert_eq!(value["parentId"], "p");
            let wire: WireMessage =
                serde_json::from_value(value["message"].clone()).expect("pi shape");
            assert_eq!(wire.into_message().expect("context message").0, message);
        }
    }

    #[test]
    fn refuses_arguments_that_are_not_json() {
        let message = AgentMessage::Assistant {
            content: vec![ContentBlock::ToolCall {
                id: "c".into(),
                name: "n".into(),
                arguments_json: "{oops".into(),
            }],
            model: None,
            provider: None,
            usage: None,
            stop_reason: StopReason::ToolUse,
            error_message: None,
        };
        let error = encode_message_entry("i", None, SystemTime::now(), &message)
            .expect_err("invalid arguments");
        assert!(error.0.contains("tool-call arguments"), "{error:?}");
    }

    #[test]
    fn parses_and_formats_pi_timestamps() {
        let millis = timestamp_millis(&Value::from("2026-04-06T02:31:25.606Z")).expect("ISO time");
        assert_eq!(millis, 1_775_442_685_606);
        let time = UNIX_EPOCH + Duration::from_millis(millis as u64);
        assert_eq!(iso(time), "2026-04-06T02:31:25.606Z");
        assert_eq!(timestamp_millis(&Value::from(12)), Some(12));
        assert_eq!(timestamp_millis(&Value::from("yesterday")), None);
    }
}
