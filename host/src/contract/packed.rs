//! The packed history encoding of `history.packed-range` (`wit/history.wit`):
//! entries one after another, each a LEB128 byte length and the entry in the
//! guest SDK's codec layout (`ctxbox_guest::codec`). Written straight from the
//! host's own entries: nothing is cloned on the way, and the guest receives
//! one byte string instead of a string and a list allocation per field.

use super::types::{AgentMessage, ContentBlock, MessageEntry, StopReason};

/// Appends entries to a packed page.
#[derive(Debug, Default)]
pub struct PackedWriter {
    bytes: Vec<u8>,
}

impl PackedWriter {
    /// An empty page with room for `capacity` bytes.
    pub fn with_capacity(capacity: usize) -> Self {
        Self {
            bytes: Vec::with_capacity(capacity),
        }
    }

    /// Appends `entry`, prefixed with its encoded length. `size_hint` is
    /// about its size: under 128 bytes the length takes one byte, written
    /// after the entry; otherwise one pass counts the bytes and the next
    /// writes them in place, so a long entry is never moved.
    pub fn push(&mut self, entry: &MessageEntry, size_hint: usize) {
        if size_hint < 0x80 {
            let start = self.bytes.len();
            self.bytes.push(0);
            write_entry(&mut self.bytes, entry);
            let len = self.bytes.len() - start - 1;
            if len < 0x80 {
                self.bytes[start] = len as u8;
            } else {
                // The hint was low: make room for the longer length.
                let mut prefix = Vec::new();
                varint(&mut prefix, len as u64);
                self.bytes.splice(start..start + 1, prefix);
            }
            return;
        }
        let mut len = ByteCount(0);
        write_entry(&mut len, entry);
        varint(&mut self.bytes, len.0 as u64);
        self.bytes.reserve(len.0);
        write_entry(&mut self.bytes, entry);
    }

    /// The page's bytes.
    pub fn finish(self) -> Vec<u8> {
        self.bytes
    }
}

/// One entry in the codec layout, without the length prefix.
pub fn encode_entry(entry: &MessageEntry) -> Vec<u8> {
    let mut bytes = Vec::new();
    write_entry(&mut bytes, entry);
    bytes
}

/// Where an entry's bytes go: a buffer, or a count of them.
trait Sink {
    fn push(&mut self, byte: u8);
    fn extend_from_slice(&mut self, bytes: &[u8]);
}

impl Sink for Vec<u8> {
    fn push(&mut self, byte: u8) {
        Vec::push(self, byte);
    }

    fn extend_from_slice(&mut self, bytes: &[u8]) {
        Vec::extend_from_slice(self, bytes);
    }
}

/// Counts the bytes written to it.
struct ByteCount(usize);

impl Sink for ByteCount {
    fn push(&mut self, _: u8) {
        self.0 += 1;
    }

    fn extend_from_slice(&mut self, bytes: &[u8]) {
        self.0 += bytes.len();
    }
}

fn write_entry(out: &mut impl Sink, entry: &MessageEntry) {
    string(out, &entry.id);
    opt_string(out, entry.parent_id.as_deref());
    varint(out, zigzag(entry.timestamp_ms));
    match &entry.message {
        AgentMessage::User { content } => {
            out.push(0);
            blocks(out, content);
        }
        AgentMessage::Assistant {
            content,
            model,
            provider,
            usage,
            stop_reason,
            error_message,
        } => {
            out.push(1);
            blocks(out, content);
            opt_string(out, model.as_deref());
            opt_string(out, provider.as_deref());
            match usage {
                Some(usage) => {
                    out.push(1);
                    for figure in [
                        usage.input,
                        usage.output,
                        usage.cache_read,
                        usage.cache_write,
                        usage.total,
                    ] {
                        varint(out, figure);
                    }
                }
                None => out.push(0),
            }
            out.push(stop_reason_tag(*stop_reason));
            opt_string(out, error_message.as_deref());
        }
        AgentMessage::ToolResult {
            tool_call_id,
            tool_name,
            content,
            is_error,
            details,
        } => {
            out.push(2);
            string(out, tool_call_id);
            string(out, tool_name);
            blocks(out, content);
            out.push(u8::from(*is_error));
            opt_string(out, details.as_deref());
        }
        AgentMessage::Custom {
            custom_type,
            content,
            display,
            details,
        } => {
            out.push(3);
            string(out, custom_type);
            blocks(out, content);
            out.push(u8::from(*display));
            opt_string(out, details.as_deref());
        }
        AgentMessage::CompactionSummary {
            summary,
            tokens_before,
        } => {
            out.push(4);
            string(out, summary);
            varint(out, *tokens_before);
        }
        AgentMessage::BranchSummary { summary, from_id } => {
            out.push(5);
            string(out, summary);
            string(out, from_id);
        }
    }
}

fn blocks(out: &mut impl Sink, blocks: &[ContentBlock]) {
    varint(out, blocks.len() as u64);
    for block in blocks {
        match block {
            // A data block crosses as the text of its JSON, as it does in
            // the WIT bindings.
            ContentBlock::Text { text } | ContentBlock::Data { json: text } => {
                out.push(0);
                string(out, text);
            }
            ContentBlock::Thinking { text, signature } => {
                out.push(1);
                string(out, text);
                opt_string(out, signature.as_deref());
            }
            ContentBlock::Image { mime_type, data } => {
                out.push(2);
                string(out, mime_type);
                string(out, data);
            }
            ContentBlock::ToolCall {
                id,
                name,
                arguments_json,
            } => {
                out.push(3);
                string(out, id);
                string(out, name);
                string(out, arguments_json);
            }
        }
    }
}

/// The codec's tag of each stop reason.
fn stop_reason_tag(reason: StopReason) -> u8 {
    match reason {
        StopReason::Stop => 0,
        StopReason::Length => 1,
        StopReason::ToolUse => 2,
        StopReason::Error => 3,
        StopReason::Aborted => 4,
    }
}

fn varint(out: &mut impl Sink, mut value: u64) {
    while value >= 0x80 {
        out.push((value as u8) | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

fn zigzag(value: i64) -> u64 {
    ((value << 1) ^ (value >> 63)) as u64
}

fn string(out: &mut impl Sink, value: &str) {
    varint(out, value.len() as u64);
    out.extend_from_slice(value.as_bytes());
}

fn opt_string(out: &mut impl Sink, value: Option<&str>) {
    match value {
        Some(value) => {
            out.push(1);
            string(out, value);
        }
        None => out.push(0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_entry_is_prefixed_with_its_length() {
        let entry = MessageEntry {
            id: "e1".into(),
            parent_id: None,
            timestamp_ms: -1,
            message: AgentMessage::User {
                content: vec![ContentBlock::text("hi")],
            },
        };
        let mut page = PackedWriter::default();
        page.push(&entry, 0);
        page.push(&entry, 1_000);
        let body = encode_entry(&entry);
        // id "e1", no parent, zig-zag -1 = 1, user tag, one text block "hi".
        assert_eq!(body, [2, b'e', b'1', 0, 1, 0, 1, 0, 2, b'h', b'i']);
        let one = [&[body.len() as u8][..], &body].concat();
        assert_eq!(page.finish(), [one.clone(), one].concat());
    }

    #[test]
    fn a_low_size_hint_still_gives_the_right_length() {
        let entry = MessageEntry {
            id: "e".repeat(300),
            parent_id: None,
            timestamp_ms: 0,
            message: AgentMessage::User { content: vec![] },
        };
        let (mut hinted, mut counted) = (PackedWriter::default(), PackedWriter::default());
        hinted.push(&entry, 0);
        counted.push(&entry, 10_000);
        let page = hinted.finish();
        assert_eq!(page, counted.finish());
        // 306 bytes of entry (a 2-byte id length, the id, 4 more): a
        // two-byte length.
        assert_eq!(&page[..2], [0x80 | (306 & 0x7f) as u8, (306 >> 7) as u8]);
    }

    #[test]
    fn long_values_take_several_length_bytes() {
        let mut out = Vec::new();
        varint(&mut out, 300);
        assert_eq!(out, [0xac, 0x02]);
        assert_eq!(zigzag(i64::MIN), u64::MAX);
    }
}
