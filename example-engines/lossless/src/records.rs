//! The engine's own records and their encoding (the SDK's
//! [`codec`](ctxbox_guest::codec), each record led by a format byte).

use ctxbox_guest::codec::{DecodeError, Decoder, Encoder};

/// The format byte of every record written by this version.
const FORMAT: u8 = 1;

/// A session's bookkeeping: how far messages and summaries go.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Meta {
    /// The sequence number the next stored message gets (= messages stored).
    pub next_seq: u64,
    /// Messages `0..summarized_end` are covered by leaf summaries.
    pub summarized_end: u64,
    /// The transcript id of message `summarized_end - 1`: where the
    /// summarized part ends in a history the host passes.
    pub frontier_entry_id: Option<String>,
    /// The id the next summary node gets.
    pub next_node: u64,
    /// The summaries nothing condenses yet, oldest first: together they cover
    /// messages `0..summarized_end`, in order.
    pub roots: Vec<Root>,
}

/// A summary node that no higher summary covers yet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Root {
    /// The node's id.
    pub node: u64,
    /// The node's level (0 for a leaf).
    pub level: u32,
    /// Estimated tokens of the node's message in the prompt.
    pub tokens: u64,
}

/// A summary: a node of the DAG, linked to what it covers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Node {
    /// 0 for a leaf, which summarizes messages; n + 1 for a summary of
    /// level-n nodes.
    pub level: u32,
    /// What the node covers, oldest first: message sequence numbers for a
    /// leaf, node ids above.
    pub sources: Vec<u64>,
    /// The first message the node covers, directly or through its sources.
    pub first_seq: u64,
    /// The last message the node covers.
    pub last_seq: u64,
    /// The summarizer's text.
    pub summary: String,
    /// Estimated tokens of the node's message in the prompt.
    pub tokens: u64,
}

impl Meta {
    /// The record's bytes.
    pub(crate) fn encode(&self) -> Vec<u8> {
        Encoder::new()
            .u8(FORMAT)
            .u64(self.next_seq)
            .u64(self.summarized_end)
            .opt_str(self.frontier_entry_id.as_deref())
            .u64(self.next_node)
            .list(&self.roots, |encoder, root| {
                encoder
                    .u64(root.node)
                    .u64(root.level.into())
                    .u64(root.tokens)
            })
            .finish()
    }

    /// Reads what [`Meta::encode`] wrote.
    pub(crate) fn decode(bytes: &[u8]) -> Result<Self, DecodeError> {
        let mut decoder = Decoder::new(bytes);
        expect_format(&mut decoder, "session meta")?;
        let meta = Self {
            next_seq: decoder.u64()?,
            summarized_end: decoder.u64()?,
            frontier_entry_id: decoder.opt_string()?,
            next_node: decoder.u64()?,
            roots: decoder.list(|decoder| {
                Ok(Root {
                    node: decoder.u64()?,
                    level: decoder.u32()?,
                    tokens: decoder.u64()?,
                })
            })?,
        };
        decoder.finish()?;
        if meta.summarized_end > meta.next_seq {
            return Err(DecodeError::new(format!(
                "session meta says {} messages are summarized but only {} are stored",
                meta.summarized_end, meta.next_seq
            )));
        }
        Ok(meta)
    }
}

impl Node {
    /// The record's bytes.
    pub(crate) fn encode(&self) -> Vec<u8> {
        Encoder::new()
            .u8(FORMAT)
            .u64(self.level.into())
            .list(&self.sources, |encoder, &source| encoder.u64(source))
            .u64(self.first_seq)
            .u64(self.last_seq)
            .str(&self.summary)
            .u64(self.tokens)
            .finish()
    }

    /// Reads what [`Node::encode`] wrote.
    pub(crate) fn decode(bytes: &[u8]) -> Result<Self, DecodeError> {
        let mut decoder = Decoder::new(bytes);
        expect_format(&mut decoder, "summary node")?;
        let node = Self {
            level: decoder.u32()?,
            sources: decoder.list(Decoder::u64)?,
            first_seq: decoder.u64()?,
            last_seq: decoder.u64()?,
            summary: decoder.string()?,
            tokens: decoder.u64()?,
        };
        decoder.finish()?;
        Ok(node)
    }
}

fn expect_format(decoder: &mut Decoder<'_>, what: &str) -> Result<(), DecodeError> {
    match decoder.u8()? {
        FORMAT => Ok(()),
        other => Err(DecodeError::new(format!(
            "{what} has format {other}, this engine reads {FORMAT}"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta() -> Meta {
        Meta {
            next_seq: 300,
            summarized_end: 264,
            frontier_entry_id: Some("e263".into()),
            next_node: 40,
            roots: vec![
                Root {
                    node: 30,
                    level: 2,
                    tokens: 900,
                },
                Root {
                    node: 39,
                    level: 0,
                    tokens: 120,
                },
            ],
        }
    }

    fn node() -> Node {
        Node {
            level: 1,
            sources: vec![3, 4, 5, 6],
            first_seq: 24,
            last_seq: 55,
            summary: "decided to ship".into(),
            tokens: 70,
        }
    }

    #[test]
    fn records_round_trip() {
        assert_eq!(Meta::decode(&meta().encode()), Ok(meta()));
        assert_eq!(Meta::decode(&Meta::default().encode()), Ok(Meta::default()));
        assert_eq!(Node::decode(&node().encode()), Ok(node()));
    }

    #[test]
    fn corrupt_records_are_errors() {
        let bytes = meta().encode();
        for len in 0..bytes.len() {
            assert!(Meta::decode(&bytes[..len]).is_err());
        }
        let mut other_format = node().encode();
        other_format[0] = FORMAT + 1;
        assert!(Node::decode(&other_format).is_err());
        assert!(Meta::decode(b"garbage that is not a record").is_err());
    }

    #[test]
    fn meta_claiming_more_summarized_than_stored_is_corrupt() {
        let inconsistent = Meta {
            next_seq: 3,
            summarized_end: 8,
            ..meta()
        };
        assert!(Meta::decode(&inconsistent.encode()).is_err());
    }
}
