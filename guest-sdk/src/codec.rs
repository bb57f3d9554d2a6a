//! A compact binary encoding for what engines keep in the state store
//! ([`host::state`](crate::host::state)).
//!
//! [`Encoder`] writes and [`Decoder`] reads a sequence of fields: unsigned
//! integers as LEB128 varints, signed ones zig-zag encoded, strings as a
//! length and UTF-8 bytes, and whole messages ([`Encoder::entry`],
//! [`Encoder::message`]). An engine describes its own records with them, and
//! stores transcript messages with [`encode_entry`] / [`decode_entry`], whose
//! leading format byte lets later SDK versions keep reading what earlier ones
//! wrote.
//!
//! It needs no dependency (serde would add its compile time to every guest),
//! and decoding never panics: a truncated or corrupt value is a
//! [`DecodeError`], which converts into an [`EngineError`], so
//! `decode_entry(&bytes)?` in an engine method just works.
//!
//! ```
//! use ctxbox_guest::codec::{Decoder, Encoder};
//!
//! let bytes = Encoder::new().u64(42).str("summary").finish();
//! let mut decoder = Decoder::new(&bytes);
//! assert_eq!(decoder.u64().unwrap(), 42);
//! assert_eq!(decoder.string().unwrap(), "summary");
//! decoder.finish().unwrap();
//! ```

use std::fmt;

use crate::{
    AgentMessage, AssistantMessage, BranchSummary, CompactionSummary, ContentBlock, CustomMessage,
    EngineError, EngineErrorKind, Image, MessageEntry, StopReason, Thinking, ToolCall,
    ToolResultMessage, Usage, UserMessage,
};

/// The format byte [`encode_entry`] writes first.
pub const ENTRY_FORMAT: u8 = 1;

/// Encodes a transcript entry, prefixed with [`ENTRY_FORMAT`].
pub fn encode_entry(entry: &MessageEntry) -> Vec<u8> {
    Encoder::new().u8(ENTRY_FORMAT).entry(entry).finish()
}

/// Decodes what [`encode_entry`] wrote.
pub fn decode_entry(bytes: &[u8]) -> Result<MessageEntry, DecodeError> {
    let mut decoder = Decoder::new(bytes);
    let format = decoder.u8()?;
    if format != ENTRY_FORMAT {
        return Err(DecodeError::new(format!(
            "unknown message entry format {format} (this SDK reads {ENTRY_FORMAT})"
        )));
    }
    let entry = decoder.entry()?;
    decoder.finish()?;
    Ok(entry)
}

/// Why a value could not be decoded: it is truncated, corrupt, or was written
/// by an incompatible format.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecodeError {
    message: String,
}

impl DecodeError {
    /// An error saying `message`.
    pub fn new(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
        }
    }
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "cannot decode stored value: {}", self.message)
    }
}

impl std::error::Error for DecodeError {}

impl From<DecodeError> for EngineError {
    fn from(error: DecodeError) -> Self {
        EngineError::new(EngineErrorKind::Internal, error.to_string())
    }
}

/// Writes fields into a byte buffer; [`finish`](Encoder::finish) returns it.
#[derive(Debug, Default, Clone)]
pub struct Encoder {
    bytes: Vec<u8>,
}

impl Encoder {
    /// An empty buffer.
    pub fn new() -> Self {
        Self::default()
    }

    /// The encoded bytes.
    pub fn finish(self) -> Vec<u8> {
        self.bytes
    }

    /// One byte.
    pub fn u8(mut self, value: u8) -> Self {
        self.bytes.push(value);
        self
    }

    /// A boolean, as one byte.
    pub fn bool(self, value: bool) -> Self {
        self.u8(u8::from(value))
    }

    /// An unsigned integer, as a LEB128 varint (one byte below 128).
    pub fn u64(mut self, mut value: u64) -> Self {
        while value >= 0x80 {
            self.bytes.push((value as u8) | 0x80);
            value >>= 7;
        }
        self.bytes.push(value as u8);
        self
    }

    /// A signed integer, zig-zag encoded so small magnitudes stay short.
    pub fn i64(self, value: i64) -> Self {
        self.u64(((value << 1) ^ (value >> 63)) as u64)
    }

    /// A string: its byte length, then its UTF-8 bytes.
    pub fn str(mut self, value: &str) -> Self {
        self = self.u64(value.len() as u64);
        self.bytes.extend_from_slice(value.as_bytes());
        self
    }

    /// An optional string: a presence flag, then the string.
    pub fn opt_str(self, value: Option<&str>) -> Self {
        match value {
            Some(value) => self.bool(true).str(value),
            None => self.bool(false),
        }
    }

    /// A list: its length, then each item written by `item`.
    pub fn list<T>(self, items: &[T], item: impl Fn(Self, &T) -> Self) -> Self {
        items.iter().fold(self.u64(items.len() as u64), item)
    }

    /// A transcript entry.
    pub fn entry(self, entry: &MessageEntry) -> Self {
        self.str(&entry.id)
            .opt_str(entry.parent_id.as_deref())
            .i64(entry.timestamp_ms)
            .message(&entry.message)
    }

    /// A message: a tag byte for its kind, then its fields.
    pub fn message(self, message: &AgentMessage) -> Self {
        match message {
            AgentMessage::User(m) => self.u8(0).blocks(&m.content),
            AgentMessage::Assistant(m) => {
                let encoder = self
                    .u8(1)
                    .blocks(&m.content)
                    .opt_str(m.model.as_deref())
                    .opt_str(m.provider.as_deref());
                let encoder = match &m.usage {
                    Some(usage) => encoder
                        .bool(true)
                        .u64(usage.input)
                        .u64(usage.output)
                        .u64(usage.cache_read)
                        .u64(usage.cache_write)
                        .u64(usage.total),
                    None => encoder.bool(false),
                };
                encoder
                    .u8(stop_reason_tag(m.stop_reason))
                    .opt_str(m.error_message.as_deref())
            }
            AgentMessage::ToolResult(m) => self
                .u8(2)
                .str(&m.tool_call_id)
                .str(&m.tool_name)
                .blocks(&m.content)
                .bool(m.is_error)
                .opt_str(m.details.as_deref()),
            AgentMessage::Custom(m) => self
                .u8(3)
                .str(&m.custom_type)
                .blocks(&m.content)
                .bool(m.display)
                .opt_str(m.details.as_deref()),
            AgentMessage::CompactionSummary(m) => self.u8(4).str(&m.summary).u64(m.tokens_before),
            AgentMessage::BranchSummary(m) => self.u8(5).str(&m.summary).str(&m.from_id),
        }
    }

    fn blocks(self, blocks: &[ContentBlock]) -> Self {
        self.list(blocks, |encoder, block| match block {
            ContentBlock::Text(text) => encoder.u8(0).str(text),
            ContentBlock::Thinking(thinking) => encoder
                .u8(1)
                .str(&thinking.text)
                .opt_str(thinking.signature.as_deref()),
            ContentBlock::Image(image) => encoder.u8(2).str(&image.mime_type).str(&image.data),
            ContentBlock::ToolCall(call) => encoder
                .u8(3)
                .str(&call.id)
                .str(&call.name)
                .str(&call.arguments_json),
        })
    }
}

/// Reads fields back in the order an [`Encoder`] wrote them.
#[derive(Debug, Clone)]
pub struct Decoder<'a> {
    bytes: &'a [u8],
}

impl<'a> Decoder<'a> {
    /// A decoder over `bytes`.
    pub fn new(bytes: &'a [u8]) -> Self {
        Self { bytes }
    }

    /// Checks that every byte was read: trailing bytes mean the value is not
    /// what the reader expected.
    pub fn finish(self) -> Result<(), DecodeError> {
        if self.bytes.is_empty() {
            Ok(())
        } else {
            Err(DecodeError::new(format!(
                "{} unexpected trailing bytes",
                self.bytes.len()
            )))
        }
    }

    /// One byte.
    #[inline]
    pub fn u8(&mut self) -> Result<u8, DecodeError> {
        let (&byte, rest) = self
            .bytes
            .split_first()
            .ok_or_else(|| DecodeError::new("value ends early"))?;
        self.bytes = rest;
        Ok(byte)
    }

    /// A boolean.
    #[inline]
    pub fn bool(&mut self) -> Result<bool, DecodeError> {
        match self.u8()? {
            0 => Ok(false),
            1 => Ok(true),
            other => Err(DecodeError::new(format!("{other} is not a boolean"))),
        }
    }

    /// An unsigned integer.
    #[inline]
    pub fn u64(&mut self) -> Result<u64, DecodeError> {
        // Most lengths and tags fit one byte.
        if let Some((&byte, rest)) = self.bytes.split_first()
            && byte < 0x80
        {
            self.bytes = rest;
            return Ok(u64::from(byte));
        }
        let mut value = 0u64;
        for shift in (0..64).step_by(7) {
            let byte = self.u8()?;
            let bits = u64::from(byte & 0x7f);
            if shift == 63 && bits > 1 {
                break;
            }
            value |= bits << shift;
            if byte & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err(DecodeError::new("integer overflows 64 bits"))
    }

    /// An unsigned integer that must fit a `u32`.
    pub fn u32(&mut self) -> Result<u32, DecodeError> {
        let value = self.u64()?;
        u32::try_from(value).map_err(|_| DecodeError::new(format!("{value} overflows 32 bits")))
    }

    /// A signed integer.
    #[inline]
    pub fn i64(&mut self) -> Result<i64, DecodeError> {
        let raw = self.u64()?;
        Ok(((raw >> 1) as i64) ^ -((raw & 1) as i64))
    }

    /// A string, borrowed from the bytes being read (no copy).
    pub fn str(&mut self) -> Result<&'a str, DecodeError> {
        std::str::from_utf8(self.raw_str()?).map_err(|_| DecodeError::new("string is not UTF-8"))
    }

    /// A string.
    pub fn string(&mut self) -> Result<String, DecodeError> {
        self.str().map(str::to_owned)
    }

    /// An optional string, borrowed.
    pub fn opt_str(&mut self) -> Result<Option<&'a str>, DecodeError> {
        if self.bool()? {
            self.str().map(Some)
        } else {
            Ok(None)
        }
    }

    /// A string the host wrote (a `history.packed-range` page), borrowed.
    ///
    /// Validated in debug builds only, as the WIT bindings lift every
    /// `string` the host passes: the host writes these bytes from its own
    /// UTF-8 strings, the same guarantee the canonical ABI gives a `string`.
    /// Validation would otherwise be most of the cost of reading a page.
    #[inline]
    pub(crate) fn host_str(&mut self) -> Result<&'a str, DecodeError> {
        let bytes = self.raw_str()?;
        if cfg!(debug_assertions) {
            return std::str::from_utf8(bytes).map_err(|_| DecodeError::new("string is not UTF-8"));
        }
        // SAFETY: the host writes a packed page only from Rust `str`s
        // (`ctxbox_host::contract::packed`), so `bytes` is UTF-8; this is the
        // trust the generated bindings place in every host `string`.
        Ok(unsafe { std::str::from_utf8_unchecked(bytes) })
    }

    /// A string's bytes, unchecked: to skip over a string, or for a reader
    /// that validates them itself.
    #[inline]
    pub(crate) fn raw_str(&mut self) -> Result<&'a [u8], DecodeError> {
        let len = self.u64()?;
        let len = usize::try_from(len)
            .ok()
            .filter(|&len| len <= self.bytes.len())
            .ok_or_else(|| DecodeError::new(format!("string of {len} bytes runs past the end")))?;
        let (text, rest) = self.bytes.split_at(len);
        self.bytes = rest;
        Ok(text)
    }

    /// The next `len` bytes.
    #[inline]
    pub(crate) fn bytes(&mut self, len: usize) -> Result<&'a [u8], DecodeError> {
        if len > self.bytes.len() {
            return Err(DecodeError::new(format!(
                "{len} bytes run past the end ({} left)",
                self.bytes.len()
            )));
        }
        let (taken, rest) = self.bytes.split_at(len);
        self.bytes = rest;
        Ok(taken)
    }

    /// Whether every byte was read.
    pub(crate) fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    /// The bytes not read yet.
    pub(crate) fn rest(self) -> &'a [u8] {
        self.bytes
    }

    /// An optional string.
    pub fn opt_string(&mut self) -> Result<Option<String>, DecodeError> {
        Ok(self.opt_str()?.map(str::to_owned))
    }

    /// A list written by [`Encoder::list`], each item read by `item`.
    pub fn list<T>(
        &mut self,
        mut item: impl FnMut(&mut Self) -> Result<T, DecodeError>,
    ) -> Result<Vec<T>, DecodeError> {
        let len = self.u64()?;
        // Every item takes at least one byte: a corrupt length cannot make us
        // reserve more than the value's size.
        let capacity = usize::try_from(len)
            .unwrap_or(usize::MAX)
            .min(self.bytes.len());
        let mut items = Vec::with_capacity(capacity);
        for _ in 0..len {
            items.push(item(self)?);
        }
        Ok(items)
    }

    /// A transcript entry.
    pub fn entry(&mut self) -> Result<MessageEntry, DecodeError> {
        Ok(MessageEntry {
            id: self.string()?,
            parent_id: self.opt_string()?,
            timestamp_ms: self.i64()?,
            message: self.message()?,
        })
    }

    /// A message.
    pub fn message(&mut self) -> Result<AgentMessage, DecodeError> {
        Ok(match self.u8()? {
            0 => AgentMessage::User(UserMessage {
                content: self.blocks()?,
            }),
            1 => AgentMessage::Assistant(AssistantMessage {
                content: self.blocks()?,
                model: self.opt_string()?,
                provider: self.opt_string()?,
                usage: if self.bool()? {
                    Some(Usage {
                        input: self.u64()?,
                        output: self.u64()?,
                        cache_read: self.u64()?,
                        cache_write: self.u64()?,
                        total: self.u64()?,
                    })
                } else {
                    None
                },
                stop_reason: stop_reason_from_tag(self.u8()?)?,
                error_message: self.opt_string()?,
            }),
            2 => AgentMessage::ToolResult(ToolResultMessage {
                tool_call_id: self.string()?,
                tool_name: self.string()?,
                content: self.blocks()?,
                is_error: self.bool()?,
                details: self.opt_string()?,
            }),
            3 => AgentMessage::Custom(CustomMessage {
                custom_type: self.string()?,
                content: self.blocks()?,
                display: self.bool()?,
                details: self.opt_string()?,
            }),
            4 => AgentMessage::CompactionSummary(CompactionSummary {
                summary: self.string()?,
                tokens_before: self.u64()?,
            }),
            5 => AgentMessage::BranchSummary(BranchSummary {
                summary: self.string()?,
                from_id: self.string()?,
            }),
            other => return Err(DecodeError::new(format!("unknown message kind {other}"))),
        })
    }

    fn blocks(&mut self) -> Result<Vec<ContentBlock>, DecodeError> {
        self.list(|decoder| {
            Ok(match decoder.u8()? {
                0 => ContentBlock::Text(decoder.string()?),
                1 => ContentBlock::Thinking(Thinking {
                    text: decoder.string()?,
                    signature: decoder.opt_string()?,
                }),
                2 => ContentBlock::Image(Image {
                    mime_type: decoder.string()?,
                    data: decoder.string()?,
                }),
                3 => ContentBlock::ToolCall(ToolCall {
                    id: decoder.string()?,
                    name: decoder.string()?,
                    arguments_json: decoder.string()?,
                }),
                other => return Err(DecodeError::new(format!("unknown content block {other}"))),
            })
        })
    }
}

fn stop_reason_tag(reason: StopReason) -> u8 {
    match reason {
        StopReason::Stop => 0,
        StopReason::Length => 1,
        StopReason::ToolUse => 2,
        StopReason::Error => 3,
        StopReason::Aborted => 4,
    }
}

fn stop_reason_from_tag(tag: u8) -> Result<StopReason, DecodeError> {
    Ok(match tag {
        0 => StopReason::Stop,
        1 => StopReason::Length,
        2 => StopReason::ToolUse,
        3 => StopReason::Error,
        4 => StopReason::Aborted,
        other => return Err(DecodeError::new(format!("unknown stop reason {other}"))),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn every_kind_of_entry() -> Vec<MessageEntry> {
        let messages = vec![
            AgentMessage::User(UserMessage {
                content: vec![
                    ContentBlock::Text("héllo 你好".into()),
                    ContentBlock::Image(Image {
                        mime_type: "image/png".into(),
                        data: "iVBORw0KGgo=".into(),
                    }),
                ],
            }),
            AgentMessage::Assistant(AssistantMessage {
                content: vec![
                    ContentBlock::Thinking(Thinking {
                        text: "hmm".into(),
                        signature: Some("sig".into()),
                    }),
                    ContentBlock::ToolCall(ToolCall {
                        id: "call-1".into(),
                        name: "read".into(),
                        arguments_json: r#"{"path":"/etc/hosts"}"#.into(),
                    }),
                ],
                model: Some("m".into()),
                provider: None,
                usage: Some(Usage {
                    input: 1,
                    output: 2,
                    cache_read: 3,
                    cache_write: 4,
                    total: u64::MAX,
                }),
                stop_reason: StopReason::ToolUse,
                error_message: None,
            }),
            AgentMessage::ToolResult(ToolResultMessage {
                tool_call_id: "call-1".into(),
                tool_name: "read".into(),
                content: vec![ContentBlock::Text("127.0.0.1 localhost".into())],
                is_error: true,
                details: Some("{}".into()),
            }),
            AgentMessage::note("memo", "remember"),
            AgentMessage::CompactionSummary(CompactionSummary {
                summary: "before".into(),
                tokens_before: 123_456,
            }),
            AgentMessage::BranchSummary(BranchSummary {
                summary: "branch".into(),
                from_id: "e9".into(),
            }),
        ];
        messages
            .into_iter()
            .enumerate()
            .map(|(index, message)| MessageEntry {
                id: format!("e{index}"),
                parent_id: index.checked_sub(1).map(|parent| format!("e{parent}")),
                timestamp_ms: -1_700_000_000_000 + index as i64,
                message,
            })
            .collect()
    }

    #[test]
    fn entries_of_every_kind_round_trip() {
        for entry in every_kind_of_entry() {
            assert_eq!(decode_entry(&encode_entry(&entry)), Ok(entry));
        }
    }

    #[test]
    fn integers_round_trip_at_their_extremes() {
        let unsigned = [0, 1, 127, 128, 300, u64::from(u32::MAX), u64::MAX];
        let signed = [0, -1, 1, i64::MIN, i64::MAX];
        let bytes = signed
            .iter()
            .fold(Encoder::new().list(&unsigned, |e, &v| e.u64(v)), |e, &v| {
                e.i64(v)
            })
            .finish();
        let mut decoder = Decoder::new(&bytes);
        assert_eq!(decoder.list(Decoder::u64), Ok(unsigned.to_vec()));
        for value in signed {
            assert_eq!(decoder.i64(), Ok(value));
        }
        decoder.finish().unwrap();
    }

    #[test]
    fn small_integers_take_one_byte() {
        assert_eq!(Encoder::new().u64(127).finish(), [127]);
        assert_eq!(Encoder::new().i64(-1).finish(), [1]);
    }

    #[test]
    fn every_truncation_is_an_error_not_a_panic() {
        for entry in every_kind_of_entry() {
            let bytes = encode_entry(&entry);
            for len in 0..bytes.len() {
                assert!(
                    decode_entry(&bytes[..len]).is_err(),
                    "{len} of {} bytes",
                    bytes.len()
                );
            }
        }
    }

    #[test]
    fn corrupt_values_are_errors() {
        let entry = &every_kind_of_entry()[0];
        let mut trailing = encode_entry(entry);
        trailing.push(0);
        assert!(decode_entry(&trailing).is_err());

        let mut wrong_format = encode_entry(entry);
        wrong_format[0] = ENTRY_FORMAT + 1;
        assert!(
            decode_entry(&wrong_format)
                .unwrap_err()
                .to_string()
                .contains("format")
        );

        // A string claiming to be far longer than the value.
        let bytes = Encoder::new().u64(u64::MAX).finish();
        assert!(Decoder::new(&bytes).string().is_err());
        // A list claiming billions of items cannot make the decoder allocate them.
        let bytes = Encoder::new().u64(u64::MAX).finish();
        assert!(Decoder::new(&bytes).list(Decoder::u8).is_err());
        // Eleven continuation bytes overflow a u64.
        assert!(Decoder::new(&[0xff; 11]).u64().is_err());
        assert!(Decoder::new(&[2]).bool().is_err());
        let invalid_utf8 = [2, 0xff, 0xfe];
        assert!(Decoder::new(&invalid_utf8).string().is_err());
    }

    #[test]
    fn decode_errors_become_internal_engine_errors() {
        let error = EngineError::from(DecodeError::new("boom"));
        assert_eq!(error.kind, EngineErrorKind::Internal);
        assert!(error.message.contains("boom"));
    }
}
