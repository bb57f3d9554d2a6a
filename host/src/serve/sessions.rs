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
}

/// A message as the client sent it: its JSON text, kept verbatim (a
/// fraction of the memory of a parsed JSON tree, and answered back as it
/// came).
pub type RawMessage = Box<RawValue>;

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

    /// Applies `sync`: keeps the first `base` messages, replaces the rest.
    /// Refused with `history-mismatch` (and this session's length) when the
    /// server holds fewer than `base` messages or message `base - 1` is not
    /// the one the client means; refused with `invalid-params` when a
    /// message cannot be read. Nothing changes when refused.
    pub fn sync(&mut self, sync: &Sync) -> Result<(), ProtocolError> {
        let mismatch = |why: &str| {
            ProtocolError::new(ErrorCode::HistoryMismatch, why.to_owned())
                .with_data(json!({ "length": self.raw.len() }))
        };
        if sync.base > self.raw.len() {
            return Err(mismatch(&format!(
                "`sync.base` is {} but the server holds {} messages of this session",
                sync.base,
                self.raw.len()
            )));
        }
        if sync.base > 0
            && sync.base_digest.is_some()
            && self.digests[sync.base - 1] != sync.base_digest
        {
            return Err(mismatch(&format!(
                "message {} is not the one the client has (`sync.baseDigest` differs)",
                sync.base - 1
            )));
        }
        let digests = check_digests(sync.digests.as_deref(), sync.messages.len())?;
        let views = read_all(&sync.messages, sync.base)?;
        self.raw.truncate(sync.base);
        self.digests.truncate(sync.base);
        self.positions.retain(|position| *position < sync.base);
        self.push(&sync.messages, digests, views);
        Ok(())
    }

    /// The messages from position `from` on, with their digests: what a
    /// change from `from` on has to store.
    pub fn suffix(&self, from: usize) -> (&[RawMessage], &[Option<String>]) {
        let from = from.min(self.raw.len());
        (&self.raw[from..], &self.digests[from..])
    }

    /// Takes up a history stored by a host that held the session before
    /// (`messages` with their `digests`, in order), in place of an empty
    /// one. Refused, changing nothing, when a message cannot be read.
    pub fn restore(
        &mut self,
        messages: &[RawMessage],
        digests: Vec<Option<String>>,
    ) -> Result<(), ProtocolError> {
        let views = read_all(messages, 0)?;
        self.raw.clear();
        self.digests.clear();
        self.positions.clear();
        self.view = History::default();
        self.push(messages, digests, views);
        Ok(())
    }

    /// Appends `messages` (a committed turn, ingested messages) and returns
    /// where the engine's view of the visible ones starts in
    /// [`history`](Self::history).
    pub fn append(
        &mut self,
        messages: &[RawMessage],
        digests: Option<&[String]>,
    ) -> Result<usize, ProtocolError> {
        let digests = check_digests(digests, messages.len())?;
        let views = read_all(messages, self.raw.len())?;
        let first_new = self.positions.len();
        self.push(messages, digests, views);
        Ok(first_new)
    }

    fn push(&mut self, messages: &[RawMessage], digests: Vec<Option<String>>, views: Vec<Read>) {
        let keep = self.positions.len();
        let mut appended: Vec<MessageEntry> = Vec::new();
        let mut estimates = Vec::new();
        for ((raw, digest), read) in messages.iter().zip(digests).zip(views) {
            if let Some(message) = read.message {
                self.next_id += 1;
                let parent_id = match appended.last() {
                    Some(last) => Some(last.id.clone()),
                    None => keep
                        .checked_sub(1)
                        .and_then(|last| self.view.entry(last))
                        .map(|last| last.id.clone()),
                };
                let entry = MessageEntry {
                    id: format!("m{}", self.next_id),
                    parent_id,
                    timestamp_ms: read.timestamp_ms,
                    message,
                };
                estimates.push(crate::contract::tokens::estimate_message(&entry.message));
                appended.push(entry);
                self.positions.push(self.raw.len());
            }
            self.raw.push(raw.clone());
            self.digests.push(digest);
        }
        self.view = std::mem::take(&mut self.view).edited(keep, appended, &estimates);
    }

    /// The engine's view, as a history snapshot (a cheap handle).
    pub fn history(&self) -> History {
        self.view.clone()
    }

    /// The prompt an `assemble` answer describes, as OpenClaw messages: kept
    /// ranges are the original JSON, inserted messages are encoded.
    pub fn materialize(&self, items: &[AssembledItem]) -> Result<Vec<Value>, String> {
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
                            .map(|position| to_value(&self.raw[*position])),
                    );
                }
                AssembledItem::Insert(inserted) => {
                    messages.push(message::to_openclaw(inserted, now)?);
                }
            }
        }
        Ok(messages)
    }

    /// The same prompt told by reference: `{"keep": [start, end]}` for a run
    /// of the client's own messages (positions in what it sent, end
    /// exclusive), `{"insert": message}` for an engine-made one. The answer
    /// stays small however long the session is.
    pub fn ranges(&self, items: &[AssembledItem]) -> Result<Vec<Value>, String> {
        let now = SystemTime::now();
        let mut ranges: Vec<Value> = Vec::new();
        let mut open: Option<(usize, usize)> = None;
        let close = |open: &mut Option<(usize, usize)>, ranges: &mut Vec<Value>| {
            if let Some((start, end)) = open.take() {
                ranges.push(json!({ "keep": [start, end] }));
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
                    ranges.push(json!({ "insert": message::to_openclaw(inserted, now)? }));
                }
            }
        }
        close(&mut open, &mut ranges);
        Ok(ranges)
    }

    /// Every message held, as the client sent it (the pass-through prompt).
    pub fn raw(&self) -> Vec<Value> {
        self.raw.iter().map(to_value).collect()
    }
}

fn check_digests(
    digests: Option<&[String]>,
    messages: usize,
) -> Result<Vec<Option<String>>, ProtocolError> {
    match digests {
        None => Ok(vec![None; messages]),
        Some(digests) if digests.len() == messages => {
            Ok(digests.iter().cloned().map(Some).collect())
        }
        Some(digests) => Err(ProtocolError::invalid(format!(
            "{} digests for {messages} messages: send one per message or none",
            digests.len()
        ))),
    }
}

/// A message in JSON form, for an answer. A message was JSON when it came,
/// so it reads again; `null` stands in should it not.
fn to_value(raw: &RawMessage) -> Value {
    serde_json::from_str(raw.get()).unwrap_or(Value::Null)
}

/// What the host reads of one client message.
struct Read {
    /// Its host view (`None`: a message engines do not see).
    message: Option<crate::contract::types::AgentMessage>,
    /// Its `timestamp`, ms (0 without one).
    timestamp_ms: i64,
}

/// The host view of each message, or the first that cannot be read, named
/// by its position in the session. Each message is a JSON tree only while
/// it is read.
fn read_all(messages: &[RawMessage], first_position: usize) -> Result<Vec<Read>, ProtocolError> {
    messages
        .iter()
        .enumerate()
        .map(|(offset, raw)| {
            let named = |why: String| {
                ProtocolError::invalid(format!("message {}: {why}", first_position + offset))
            };
            let value: Value =
                serde_json::from_str(raw.get()).map_err(|error| named(error.to_string()))?;
            let timestamp_ms = value
                .get("timestamp")
                .and_then(Value::as_f64)
                .filter(|t| t.is_finite())
                .map_or(0, |t| t as i64);
            let message = message::to_host(&value).map_err(named)?;
            Ok(Read {
                message,
                timestamp_ms,
            })
        })
        .collect()
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

    fn sync(base: usize, digest: Option<&str>, texts: &[&str]) -> Sync {
        Sync {
            base,
            base_digest: digest.map(str::to_owned),
            messages: texts.iter().map(|text| raw(user(text))).collect(),
            digests: Some(texts.iter().map(|text| format!("d-{text}")).collect()),
        }
    }

    #[test]
    fn a_sync_replaces_the_suffix_and_checks_the_anchor() {
        let mut session = SessionHistory::default();
        session.sync(&sync(0, None, &["a", "b"])).expect("first");
        session.sync(&sync(2, Some("d-b"), &["c"])).expect("append");
        assert_eq!(session.len(), 3);
        session
            .sync(&sync(1, Some("d-a"), &["x"]))
            .expect("replace");
        assert_eq!(session.raw(), [user("a"), user("x")]);
        assert_eq!(session.history().len(), 2);

        let error = session.sync(&sync(5, None, &[])).expect_err("gap");
        assert_eq!(error.code, ErrorCode::HistoryMismatch);
        assert_eq!(error.data, Some(json!({"length": 2})));
        let error = session.sync(&sync(2, Some("d-b"), &[])).expect_err("stale");
        assert_eq!(error.code, ErrorCode::HistoryMismatch);
        let bad = Sync {
            base: 2,
            messages: vec![raw(json!({"role": "user"}))],
            ..Sync::default()
        };
        let error = session.sync(&bad).expect_err("unreadable");
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
        let error = session.sync(&huge).expect_err("out of range");
        assert!(
            error.message.starts_with("message 2:") && error.message.contains("out of range"),
            "{}",
            error.message
        );
        assert_eq!(session.len(), 2, "a refused sync changes nothing");
    }

    #[test]
    fn kept_messages_come_back_byte_for_byte_and_hidden_ones_keep_positions() {
        let mut session = SessionHistory::default();
        let hidden = json!({"role": "bashExecution", "command": "ls", "output": "",
            "excludeFromContext": true, "timestamp": 2});
        session
            .append(&[raw(user("a")), raw(hidden), raw(user("b"))], None)
            .expect("appends");
        assert_eq!(session.history().len(), 2);
        let prompt = session
            .materialize(&[
                AssembledItem::Insert(crate::contract::types::AgentMessage::user_text("note")),
                AssembledItem::Keep { start: 1, end: 2 },
            ])
            .expect("materializes");
        assert_eq!(prompt[1], user("b"));
        assert_eq!(prompt[0]["content"][0]["text"], "note");
        // By reference: the hidden message between the two is skipped, so
        // keeping both visible ones is two runs of the client's positions.
        let ranges = session
            .ranges(&[AssembledItem::Keep { start: 0, end: 2 }])
            .expect("ranges");
        assert_eq!(
            ranges,
            vec![json!({"keep": [0, 1]}), json!({"keep": [2, 3]})]
        );
    }
}
