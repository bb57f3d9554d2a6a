//! One session's data in the store: typed reads and writes, and appending
//! messages so that an acknowledged message is never lost.

use std::collections::BTreeSet;

use ctxbox_guest::codec::{Decoder, Encoder, decode_entry, encode_entry};
use ctxbox_guest::{EngineError, MessageEntry};

use crate::layout::Keys;
use crate::ports::Store;
use crate::records::{Meta, Node};

/// A session's view of the store.
pub(crate) struct Session<'a, S> {
    store: &'a S,
    keys: Keys,
}

impl<'a, S: Store> Session<'a, S> {
    /// The data of session `session_id` in `store`.
    pub(crate) fn open(store: &'a S, session_id: &str) -> Self {
        Self {
            store,
            keys: Keys::new(session_id),
        }
    }

    /// The session's bookkeeping; empty for a session never seen.
    pub(crate) fn meta(&self) -> Result<Meta, EngineError> {
        match self.store.get(&self.keys.meta())? {
            Some(bytes) => Ok(Meta::decode(&bytes)?),
            None => Ok(Meta::default()),
        }
    }

    /// Writes the session's bookkeeping.
    pub(crate) fn save_meta(&self, meta: &Meta) -> Result<(), EngineError> {
        self.store.set(&self.keys.meta(), &meta.encode())
    }

    /// The message stored with sequence number `seq`.
    pub(crate) fn message(&self, seq: u64) -> Result<MessageEntry, EngineError> {
        let bytes = self
            .store
            .get(&self.keys.message(seq))?
            .ok_or_else(|| missing(format!("message {seq}")))?;
        Ok(decode_entry(&bytes)?)
    }

    /// How many messages are indexed for recall (a prefix); `None` for a
    /// session stored before the engine kept count (it indexed every
    /// message as it stored it).
    pub(crate) fn indexed(&self) -> Result<Option<u64>, EngineError> {
        self.store
            .get(&self.keys.indexed())?
            .map(|bytes| Decoder::new(&bytes).u64())
            .transpose()
            .map_err(EngineError::from)
    }

    /// Records that the first `indexed` messages are indexed.
    pub(crate) fn save_indexed(&self, indexed: u64) -> Result<(), EngineError> {
        self.store
            .set(&self.keys.indexed(), &Encoder::new().u64(indexed).finish())
    }

    /// Summary node `node`.
    pub(crate) fn node(&self, node: u64) -> Result<Node, EngineError> {
        let bytes = self
            .store
            .get(&self.keys.node(node))?
            .ok_or_else(|| missing(format!("summary node {node}")))?;
        Ok(Node::decode(&bytes)?)
    }

    /// Writes summary node `node`.
    pub(crate) fn save_node(&self, node: u64, record: &Node) -> Result<(), EngineError> {
        self.store.set(&self.keys.node(node), &record.encode())
    }

    /// Stores the entries not stored yet (by transcript id), in order, and
    /// answers the new ones with their sequence numbers.
    ///
    /// Writes go messages first, then the meta that counts them, then the
    /// id index: a call cut short can leave a message stored twice (its index
    /// entry missing, a retry stores it again), never an acknowledged message
    /// lost or an index entry pointing at another message.
    pub(crate) fn append(
        &self,
        entries: Vec<MessageEntry>,
    ) -> Result<Vec<(u64, MessageEntry)>, EngineError> {
        let mut meta = self.meta()?;
        // Index entries are written after the meta that counts their
        // messages: a session with no messages has none to look up.
        let may_have_seen = meta.next_seq > 0;
        let mut appended: Vec<(u64, MessageEntry)> = Vec::new();
        // A BTreeSet, not a HashSet: no random seed, so the component needs
        // no `wasi:random` import.
        let mut in_this_call: BTreeSet<String> = BTreeSet::new();
        for entry in entries {
            let already_stored = in_this_call.contains(&entry.id)
                || (may_have_seen && self.store.get(&self.keys.entry_index(&entry.id))?.is_some());
            if already_stored {
                continue;
            }
            let seq = meta.next_seq + appended.len() as u64;
            self.store
                .set(&self.keys.message(seq), &encode_entry(&entry))?;
            in_this_call.insert(entry.id.clone());
            appended.push((seq, entry));
        }
        if appended.is_empty() {
            return Ok(appended);
        }
        meta.next_seq += appended.len() as u64;
        self.save_meta(&meta)?;
        for (seq, entry) in &appended {
            let seq = Encoder::new().u64(*seq).finish();
            self.store.set(&self.keys.entry_index(&entry.id), &seq)?;
        }
        Ok(appended)
    }
}

fn missing(what: String) -> EngineError {
    EngineError::internal(format!("{what} is missing from the store"))
}
