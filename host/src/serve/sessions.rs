//! The server's copy of each session's history: the client sends only what
//! changed (a `sync`: "from position `base` on, the messages are these"),
//! the server keeps every message's original JSON for the answer and the
//! host view for the engine.

use std::time::SystemTime;

use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{Value, json};

use super::message;
use super::protocol::{ErrorCode, ProtocolError};
use crate::contract::history::History;
use crate::contract::types::{AssembledItem, MessageEntry};

/// "The session's messages from position `base` on are `messages`": what a
/// client sends instead of the whole history.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Sync {
    /// How many messages the client believes the server already has.
    pub base: usize,
    /// The client's digest of message `base - 1`, checked against the one it
    /// sent with that message; `null` skips the check.
    #[serde(default)]
    pub base_digest: Option<String>,
    /// The messages from `base` on, as OpenClaw has them.
    #[serde(default)]
    pub messages: Vec<RawMessage>,
    /// One client-computed digest per message (opaque to the server).
    #[serde(default)]
    pub digests: Option<Vec<String>>,
    /// The runtime really reset the session's history (`/new`, a branch
    /// rollback, its own compaction): the sync may drop or rewrite messages
    /// the server holds. Without it such a sync is refused
    /// ([`SessionHistory::sync`]).
    #[serde(default)]
    pub reset: bool,
}

/// A message as the client sent it: its JSON text, kept verbatim (a
/// fraction of the memory of a parsed JSON tree, and answered back as it
/// came).
pub type RawMessage = Box<RawValue>;

/// Client messages read and checked but not yet part of a history: what a
/// sync, an ingest or a turn adds once nothing about it can fail. Reading
/// takes the messages over (they are never copied) and holds each visible
/// one's host view once, so a large request costs its messages plus their
/// views, not several copies of either.
#[derive(Default)]
pub struct Batch {
    /// The messages as the client sent them.
    raw: Vec<RawMessage>,
    /// The client's digest of each message, if it sent one.
    digests: Vec<Option<String>>,
    /// The visible messages' host views, in order; their ids are given when
    /// the batch joins a history.
    entries: Vec<MessageEntry>,
    /// For each of `entries`, its offset in `raw`.
    offsets: Vec<usize>,
    /// For each of `entries`, its token estimate.
    estimates: Vec<u64>,
}

impl Batch {
    /// Reads `messages` a client sent, with its optional `digests` (one per
    /// message or none), the first of them at `first_position` of its
    /// session (to name a message that cannot be read).
    pub fn from_client(
        messages: Vec<RawMessage>,
        digests: Option<Vec<String>>,
        first_position: usize,
    ) -> Result<Self, ProtocolError> {
        let digests = per_message(digests, messages.len())?;
        Self::read(messages, digests, first_position)
    }

    /// Reads a history the shared store kept: `messages` with their
    /// `digests`, one per message.
    pub fn from_store(
        messages: Vec<RawMessage>,
        digests: Vec<Option<String>>,
    ) -> Result<Self, ProtocolError> {
        Self::read(messages, digests, 0)
    }

    /// The host view of each message, or the first that cannot be read,
    /// named by its position in the session. Each message is a JSON tree
    /// only while it is read.
    fn read(
        raw: Vec<RawMessage>,
        digests: Vec<Option<String>>,
        first_position: usize,
    ) -> Result<Self, ProtocolError> {
        let mut entries = Vec::with_capacity(raw.len());
        let mut offsets = Vec::with_capacity(raw.len());
        let mut estimates = Vec::with_capacity(raw.len());
        for (offset, message) in raw.iter().enumerate() {
            let named = |why: String| {
                ProtocolError::invalid(format!("message {}: {why}", first_position + offset))
            };
            let value: Value =
                serde_json::from_str(message.get()).map_err(|error| named(error.to_string()))?;
            let Some(message) = message::to_host(&value).map_err(named)? else {
                continue;
            };
            let timestamp_ms = value
                .get("timestamp")
                .and_then(Value::as_f64)
                .filter(|t| t.is_finite())
                .map_or(0, |t| t as i64);
            estimates.push(crate::contract::tokens::estimate_message(&message));
            offsets.push(offset);
            entries.push(MessageEntry {
                id: String::new(),
                parent_id: None,
                timestamp_ms,
                message,
            });
        }
        Ok(Self {
            raw,
            digests,
            entries,
            offsets,
            estimates,
        })
    }

    /// The messages as the client sent them.
    pub fn messages(&self) -> &[RawMessage] {
        &self.raw
    }

    /// The client's digest of each message, if it sent one.
    pub fn digests(&self) -> &[Option<String>] {
        &self.digests
    }
}

/// A client's optional `digests` for `count` messages, one per message:
/// refused unless it sent one per message or none.
fn per_message(
    digests: Option<Vec<String>>,
    count: usize,
) -> Result<Vec<Option<String>>, ProtocolError> {
    match digests {
        None => Ok(vec![None; count]),
        Some(digests) if digests.len() == count => Ok(digests.into_iter().map(Some).collect()),
        Some(digests) => Err(ProtocolError::invalid(format!(
            "{} digests for {count} messages: send one per message or none",
            digests.len()
        ))),
    }
}

/// One session's history.
#[derive(Default)]
pub struct SessionHistory {
    /// Every message as the client sent it.
    raw: Vec<RawMessage>,
    /// The client's digest of each message, if it sent one.
    digests: Vec<Option<String>>,
    /// The engine's view: entries visible to the model, each with its
    /// token estimate computed once. Grown in place turn by turn.
    view: History,
    /// For each entry of `view`, the position in `raw` it stands for.
    positions: Vec<usize>,
    /// Entry ids are never reused, even after the client replaced a suffix.
    next_id: u64,
    /// Whether the shared store was asked for this session's history since
    /// this host began holding it.
    pub(super) loaded: bool,
    /// Whether the client (a sync) or the shared store has told this host
    /// the session's history: a turn committed to a session it has not been
    /// told would reach the engine as if it were the whole session.
    known: bool,
}

impl SessionHistory {
    /// Number of messages held.
    pub fn len(&self) -> usize {
        self.raw.len()
    }

    /// Whether no message is held.
    pub fn is_empty(&self) -> bool {
        self.raw.is_empty()
    }

    /// Whether this host was told the session's history (by a sync, or by
    /// the shared store), rather than holding it empty because it never had
    /// it or gave it up.
    pub fn is_known(&self) -> bool {
        self.known
    }

    /// Whether a sync from position `base` fits this history: refused with
    /// `history-mismatch` (and this session's length) when the server holds
    /// fewer than `base` messages or message `base - 1` is not the one the
    /// client means (its `base_digest`; `None` skips the check).
    pub fn check_base(&self, base: usize, base_digest: Option<&str>) -> Result<(), ProtocolError> {
        let mismatch = |why: String| {
            ProtocolError::new(ErrorCode::HistoryMismatch, why)
                .with_data(json!({ "length": self.raw.len() }))
        };
        if base > self.raw.len() {
            return Err(mismatch(format!(
                "`sync.base` is {base} but the server holds {} messages of this session",
                self.raw.len()
            )));
        }
        if base > 0 && base_digest.is_some() && self.digests[base - 1].as_deref() != base_digest {
            return Err(mismatch(format!(
                "message {} is not the one the client has (`sync.baseDigest` differs)",
                base - 1
            )));
        }
        Ok(())
    }

    /// Applies `sync`: keeps the first `base` messages, replaces the rest.
    /// Unless the sync is marked `reset`, it may only re-send held messages
    /// as they are and add new ones: one that would leave fewer messages
    /// than held, or sends a message whose digest differs from the held
    /// one's at its position, is refused with `history-mismatch` (a
    /// runtime's projection of the session must never replace the session).
    /// Held messages re-sent unchanged stay as they are (the engine sees
    /// the same entries). Refused as well as
    /// [`check_base`](Self::check_base) refuses, or with `invalid-params`
    /// when a message cannot be read. Nothing changes when refused.
    pub fn sync(&mut self, sync: Sync) -> Result<(), ProtocolError> {
        self.check_base(sync.base, sync.base_digest.as_deref())?;
        let Sync {
            base,
            mut messages,
            digests,
            reset,
            ..
        } = sync;
        let mut digests = per_message(digests, messages.len())?;
        let unchanged = if reset {
            0
        } else {
            self.unchanged_prefix(base, &messages, &digests)?
        };
        messages.drain(..unchanged);
        digests.drain(..unchanged);
        let from = base + unchanged;
        let batch = Batch::read(messages, digests, from)?;
        self.replace_from(from, batch);
        Ok(())
    }

    /// How many of `messages` (with their `digests`), sent for the
    /// positions from `base` on, are the held messages there, unchanged
    /// (same digest, or without digests the same JSON text). Refused with
    /// `history-mismatch`, naming both lengths, when they would leave fewer
    /// messages than held or one has another digest than the held one.
    fn unchanged_prefix(
        &self,
        base: usize,
        messages: &[RawMessage],
        digests: &[Option<String>],
    ) -> Result<usize, ProtocolError> {
        let held = self.raw.len();
        let leaves = base + messages.len();
        let refuse = |why: String| {
            ProtocolError::new(
                ErrorCode::HistoryMismatch,
                format!(
                    "{why}: the server holds {held} messages of this session and the sync \
                     would leave {leaves}; a sync re-sends held messages unchanged or adds \
                     new ones, unless it is marked `reset: true` (a reset the runtime made)"
                ),
            )
            .with_data(json!({ "length": held }))
        };
        if leaves < held {
            return Err(refuse("the sync would drop messages".to_owned()));
        }
        let mut unchanged = 0;
        for offset in 0..held - base {
            let position = base + offset;
            let same = match (&digests[offset], &self.digests[position]) {
                (Some(sent), Some(kept)) if sent != kept => {
                    return Err(refuse(format!(
                        "message {position} is not the one held (its digest differs)"
                    )));
                }
                (Some(_), Some(_)) => true,
                _ => messages[offset].get() == self.raw[position].get(),
            };
            if same && unchanged == offset {
                unchanged += 1;
            }
        }
        Ok(unchanged)
    }

    /// Keeps the first `base` messages (all of them if there are fewer) and
    /// puts `batch` after them (from 0: a history taken up from the shared
    /// store).
    pub fn replace_from(&mut self, base: usize, batch: Batch) {
        self.known = true;
        let base = base.min(self.raw.len());
        self.raw.truncate(base);
        self.digests.truncate(base);
        self.positions.retain(|position| *position < base);
        self.push(batch);
    }

    /// The messages from position `from` on, with their digests: what a
    /// change from `from` on has to store.
    pub fn suffix(&self, from: usize) -> (&[RawMessage], &[Option<String>]) {
        let from = from.min(self.raw.len());
        (&self.raw[from..], &self.digests[from..])
    }

    /// Appends `batch` (a committed turn, ingested messages) and returns
    /// where the engine's view of its visible messages starts in
    /// [`history`](Self::history).
    pub fn append(&mut self, batch: Batch) -> usize {
        let first_new = self.positions.len();
        self.push(batch);
        first_new
    }

    fn push(&mut self, batch: Batch) {
        let keep = self.positions.len();
        let Batch {
            raw,
            digests,
            mut entries,
            offsets,
            estimates,
        } = batch;
        let first_position = self.raw.len();
        let mut parent_id = keep
            .checked_sub(1)
            .and_then(|last| self.view.entry(last))
            .map(|last| last.id.clone());
        for (entry, offset) in entries.iter_mut().zip(offsets) {
            self.next_id += 1;
            entry.id = format!("m{}", self.next_id);
            entry.parent_id = parent_id.replace(entry.id.clone());
            self.positions.push(first_position + offset);
        }
        self.raw.extend(raw);
        self.digests.extend(digests);
        self.view = std::mem::take(&mut self.view).edited(keep, entries, &estimates);
    }

    /// The engine's view, as a history snapshot (a cheap handle).
    pub fn history(&self) -> History {
        self.view.clone()
    }

    /// The prompt an `assemble` answer describes, as OpenClaw messages: kept
    /// ranges are the original JSON text, inserted messages are encoded.
    pub fn materialize(&self, items: &[AssembledItem]) -> Result<Vec<RawMessage>, String> {
        let now = SystemTime::now();
        let mut messages = Vec::new();
        for item in items {
            match item {
                AssembledItem::Keep { start, end } => {
                    let end = (*end as usize).min(self.positions.len());
                    let start = (*start as usize).min(end);
                    messages.extend(
                        self.positions[start..end]
                            .iter()
                            .map(|position| self.raw[*position].clone()),
                    );
                }
                AssembledItem::Insert(inserted) => {
                    messages.push(raw_json(&message::to_openclaw(inserted, now)?));
                }
            }
        }
        Ok(messages)
    }

    /// The same prompt told by reference: `{"keep": [start, end]}` for a run
    /// of the client's own messages (positions in what it sent, end
    /// exclusive), `{"insert": message}` for an engine-made one. The answer
    /// stays small however long the session is.
    pub fn ranges(&self, items: &[AssembledItem]) -> Result<Vec<RawMessage>, String> {
        let now = SystemTime::now();
        let mut ranges: Vec<RawMessage> = Vec::new();
        let mut open: Option<(usize, usize)> = None;
        let close = |open: &mut Option<(usize, usize)>, ranges: &mut Vec<RawMessage>| {
            if let Some((start, end)) = open.take() {
                ranges.push(raw_json(&json!({ "keep": [start, end] })));
            }
        };
        for item in items {
            match item {
                AssembledItem::Keep { start, end } => {
                    let end = (*end as usize).min(self.positions.len());
                    let start = (*start as usize).min(end);
                    for position in &self.positions[start..end] {
                        open = match open {
                            Some((first, last)) if last == *position => Some((first, position + 1)),
                            _ => {
                                close(&mut open, &mut ranges);
                                Some((*position, position + 1))
                            }
                        };
                    }
                }
                AssembledItem::Insert(inserted) => {
                    close(&mut open, &mut ranges);
                    ranges.push(raw_json(
                        &json!({ "insert": message::to_openclaw(inserted, now)? }),
                    ));
                }
            }
        }
        close(&mut open, &mut ranges);
        Ok(ranges)
    }

    /// Every message held, as the client sent it (the pass-through prompt).
    pub fn raw(&self) -> Vec<RawMessage> {
        self.raw.clone()
    }
}

/// `value` as JSON text, for an answer that is otherwise text already.
pub fn raw_json(value: &Value) -> RawMessage {
    // A JSON tree always encodes; `null` stands in should it not.
    serde_json::value::to_raw_value(value).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn user(text: &str) -> Value {
        json!({"role": "user", "content": text, "timestamp": 1, "extra": {"kept": true}})
    }

    fn raw(message: Value) -> RawMessage {
        RawValue::from_string(message.to_string()).expect("JSON")
    }

    fn trees(messages: &[RawMessage]) -> Vec<Value> {
        messages
            .iter()
            .map(|message| serde_json::from_str(message.get()).expect("JSON"))
            .collect()
    }

    fn sync(base: usize, digest: Option<&str>, texts: &[&str]) -> Sync {
        Sync {
            base,
            base_digest: digest.map(str::to_owned),
            messages: texts.iter().map(|text| raw(user(text))).collect(),
            digests: Some(texts.iter().map(|text| format!("d-{text}")).collect()),
            reset: false,
        }
    }

    fn reset(base: usize, texts: &[&str]) -> Sync {
        Sync {
            reset: true,
            ..sync(base, None, texts)
        }
    }

    #[test]
    fn a_sync_replaces_the_suffix_and_checks_the_anchor() {
        let mut session = SessionHistory::default();
        session.sync(sync(0, None, &["a", "b"])).expect("first");
        session.sync(sync(2, Some("d-b"), &["c"])).expect("append");
        assert_eq!(session.len(), 3);
        session.sync(reset(1, &["x"])).expect("replace");
        assert_eq!(trees(&session.raw()), [user("a"), user("x")]);
        assert_eq!(session.history().len(), 2);

        let error = session.sync(sync(5, None, &[])).expect_err("gap");
        assert_eq!(error.code, ErrorCode::HistoryMismatch);
        assert_eq!(error.data, Some(json!({"length": 2})));
        let error = session.sync(sync(2, Some("d-b"), &[])).expect_err("stale");
        assert_eq!(error.code, ErrorCode::HistoryMismatch);
        let bad = Sync {
            base: 2,
            messages: vec![raw(json!({"role": "user"}))],
            ..Sync::default()
        };
        let error = session.sync(bad).expect_err("unreadable");
        assert!(error.message.starts_with("message 2:"), "{}", error.message);
        assert_eq!(session.len(), 2, "a refused sync changes nothing");
        // Still JSON text, but its number is past f64's range (found by the
        // sidecar fuzz target): refused by name, never stored.
        let huge = Sync {
            base: 2,
            messages: vec![
                RawValue::from_string(
                    r#"{"role":"user","content":"x","usage":{"cacheRead":2E99999}}"#.to_owned(),
                )
                .expect("JSON text"),
            ],
            ..Sync::default()
        };
        let error = session.sync(huge).expect_err("out of range");
        assert!(
            error.message.starts_with("message 2:") && error.message.contains("out of range"),
            "{}",
            error.message
        );
        assert_eq!(session.len(), 2, "a refused sync changes nothing");
    }

    #[test]
    fn a_sync_that_would_drop_or_rewrite_held_messages_is_refused_unless_a_reset() {
        let mut session = SessionHistory::default();
        assert!(!session.is_known(), "never told");
        session
            .sync(sync(0, None, &["a", "b", "c", "d"]))
            .expect("first");
        assert!(session.is_known());
        let ids: Vec<String> = session
            .history()
            .entries()
            .iter()
            .map(|e| e.id.clone())
            .collect();

        // A runtime's projection (the kept tail only) would shrink it.
        let error = session
            .sync(sync(0, None, &["c", "d"]))
            .expect_err("shrinks");
        assert_eq!(error.code, ErrorCode::HistoryMismatch);
        assert_eq!(error.data, Some(json!({"length": 4})));
        assert!(
            error.message.contains("holds 4") && error.message.contains("would leave 2"),
            "names both lengths: {}",
            error.message
        );
        // So would a rewrite of a held message at its own position.
        let error = session
            .sync(sync(1, Some("d-a"), &["x", "c", "d"]))
            .expect_err("rewrites");
        assert_eq!(error.code, ErrorCode::HistoryMismatch);
        assert!(error.message.contains("message 1"), "{}", error.message);
        assert_eq!(
            trees(&session.raw()),
            [user("a"), user("b"), user("c"), user("d")]
        );

        // Held messages re-sent unchanged, plus new ones: the held entries
        // stay as they were (same ids), the new ones are added.
        session
            .sync(sync(0, None, &["a", "b", "c", "d", "e"]))
            .expect("re-sent and extended");
        assert_eq!(session.len(), 5);
        let kept: Vec<String> = session.history().entries()[..4]
            .iter()
            .map(|e| e.id.clone())
            .collect();
        assert_eq!(kept, ids, "unchanged messages are not replaced");
        // Without digests, the same JSON text is the same message.
        let undigested = Sync {
            digests: None,
            ..sync(3, None, &["d", "e"])
        };
        session.sync(undigested).expect("the same text again");
        assert_eq!(session.len(), 5);

        // A reset the runtime made replaces the history as sent.
        session.sync(reset(0, &["c", "d"])).expect("a reset");
        assert_eq!(trees(&session.raw()), [user("c"), user("d")]);
    }

    #[test]
    fn kept_messages_come_back_byte_for_byte_and_hidden_ones_keep_positions() {
        let mut session = SessionHistory::default();
        let hidden = json!({"role": "bashExecution", "command": "ls", "output": "",
            "excludeFromContext": true, "timestamp": 2});
        session.append(
            Batch::from_client(vec![raw(user("a")), raw(hidden), raw(user("b"))], None, 0)
                .expect("reads"),
        );
        assert_eq!(session.history().len(), 2);
        let prompt = session
            .materialize(&[
                AssembledItem::Insert(crate::contract::types::AgentMessage::user_text("note")),
                AssembledItem::Keep { start: 1, end: 2 },
            ])
            .expect("materializes");
        assert_eq!(prompt[1].get(), raw(user("b")).get(), "byte for byte");
        assert_eq!(trees(&prompt)[0]["content"][0]["text"], "note");
        // By reference: the hidden message between the two is skipped, so
        // keeping both visible ones is two runs of the client's positions.
        let ranges = session
            .ranges(&[AssembledItem::Keep { start: 0, end: 2 }])
            .expect("ranges");
        assert_eq!(
            trees(&ranges),
            vec![json!({"keep": [0, 1]}), json!({"keep": [2, 3]})]
        );
    }
}
