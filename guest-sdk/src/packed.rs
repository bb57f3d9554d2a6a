//! Reading history entries in place: the bulk path of
//! [`HistoryView::scan`](crate::HistoryView::scan).
//!
//! The host answers `history.packed-range` with one byte string: each entry
//! as a LEB128 length and the entry in [`codec`](crate::codec)'s layout. An
//! [`EntryView`] borrows its strings from those bytes, so reading a page
//! allocates nothing per entry, where [`History::range`](crate::History::range)
//! allocates every string and list of every entry.

use std::borrow::Cow;

use crate::codec::{DecodeError, Decoder, Encoder};
use crate::{MessageEntry, MessageKind};

/// One history entry read in place from a packed page.
#[derive(Debug, Clone, Copy)]
pub struct EntryView<'a> {
    /// Its position in the history.
    pub index: u32,
    /// The transcript entry id.
    pub id: &'a str,
    /// The entry it follows in the conversation tree.
    pub parent_id: Option<&'a str>,
    /// Milliseconds since the Unix epoch.
    pub timestamp_ms: i64,
    kind: MessageKind,
    /// The whole entry, for [`EntryView::to_entry`].
    entry: &'a [u8],
    /// The message's fields after its tag byte.
    message: &'a [u8],
}

impl<'a> EntryView<'a> {
    /// Reads the entry at `index` from its encoded bytes.
    fn read(index: u32, entry: &'a [u8]) -> Result<Self, DecodeError> {
        let mut decoder = Decoder::new(entry);
        let id = decoder.host_str()?;
        let parent_id = if decoder.bool()? {
            Some(decoder.host_str()?)
        } else {
            None
        };
        let timestamp_ms = decoder.i64()?;
        let kind = match decoder.u8()? {
            0 => MessageKind::User,
            1 => MessageKind::Assistant,
            2 => MessageKind::ToolResult,
            3 => MessageKind::Custom,
            4 => MessageKind::CompactionSummary,
            5 => MessageKind::BranchSummary,
            other => return Err(DecodeError::new(format!("unknown message kind {other}"))),
        };
        let message = decoder.rest();
        Ok(Self {
            index,
            id,
            parent_id,
            timestamp_ms,
            kind,
            entry,
            message,
        })
    }

    /// The message's kind.
    pub fn kind(&self) -> MessageKind {
        self.kind
    }

    /// The message's text blocks, in order (a summary's text for the two
    /// summary kinds), borrowed: what [`AgentMessage::text`] joins.
    ///
    /// [`AgentMessage::text`]: crate::AgentMessage::text
    pub fn texts(&self) -> Result<Vec<&'a str>, DecodeError> {
        let mut texts = Vec::new();
        self.each_text(|text| texts.push(text))?;
        Ok(texts)
    }

    /// The message's text as [`AgentMessage::text`] gives it: its text
    /// blocks joined by newlines. Borrowed when there is one block.
    ///
    /// [`AgentMessage::text`]: crate::AgentMessage::text
    pub fn text(&self) -> Result<Cow<'a, str>, DecodeError> {
        let mut text: Option<Cow<'a, str>> = None;
        self.each_text(|block| match &mut text {
            None => text = Some(Cow::Borrowed(block)),
            Some(joined) => {
                let joined = joined.to_mut();
                joined.push('\n');
                joined.push_str(block);
            }
        })?;
        Ok(text.unwrap_or_default())
    }

    /// The whole entry, decoded into owned values.
    pub fn to_entry(&self) -> Result<MessageEntry, DecodeError> {
        let mut decoder = Decoder::new(self.entry);
        let entry = decoder.entry()?;
        decoder.finish()?;
        Ok(entry)
    }

    /// Calls `visit` with each text block (or summary), skipping every other
    /// field without validating it.
    fn each_text(&self, mut visit: impl FnMut(&'a str)) -> Result<(), DecodeError> {
        let mut decoder = Decoder::new(self.message);
        match self.kind {
            MessageKind::CompactionSummary | MessageKind::BranchSummary => {
                visit(decoder.host_str()?);
                return Ok(());
            }
            MessageKind::ToolResult => {
                decoder.raw_str()?;
                decoder.raw_str()?;
            }
            MessageKind::Custom => {
                decoder.raw_str()?;
            }
            MessageKind::User | MessageKind::Assistant => {}
        }
        for _ in 0..decoder.u64()? {
            match decoder.u8()? {
                0 => visit(decoder.host_str()?),
                1 => {
                    decoder.raw_str()?;
                    if decoder.bool()? {
                        decoder.raw_str()?;
                    }
                }
                2 => {
                    decoder.raw_str()?;
                    decoder.raw_str()?;
                }
                3 => {
                    for _ in 0..3 {
                        decoder.raw_str()?;
                    }
                }
                other => {
                    return Err(DecodeError::new(format!("unknown content block {other}")));
                }
            }
        }
        Ok(())
    }
}

/// `entries` in the `history.packed-range` layout: what the host answers,
/// for histories kept in the guest ([`HistoryView::scan`]'s default).
///
/// [`HistoryView::scan`]: crate::HistoryView::scan
pub fn pack(entries: &[MessageEntry]) -> Vec<u8> {
    let mut page = Vec::new();
    for entry in entries {
        let bytes = Encoder::new().entry(entry).finish();
        page.extend(Encoder::new().u64(bytes.len() as u64).finish());
        page.extend(bytes);
    }
    page
}

/// Calls `visit` with each entry of a packed `page` whose first entry is at
/// `first_index`; answers how many entries the page held.
pub(crate) fn read_page(
    page: &[u8],
    first_index: u32,
    visit: &mut impl FnMut(EntryView<'_>),
) -> Result<u32, DecodeError> {
    let mut decoder = Decoder::new(page);
    let mut count = 0u32;
    while !decoder.is_empty() {
        let len = usize::try_from(decoder.u64()?)
            .map_err(|_| DecodeError::new("entry length overflows"))?;
        let entry = decoder.bytes(len)?;
        visit(EntryView::read(first_index + count, entry)?);
        count += 1;
    }
    Ok(count)
}
