//! [`Transcript`]: the one open handle of a session file in this process.
//!
//! It holds every line of the file (original bytes, so unknown entry types
//! and fields are written back unchanged), the entry tree, the cached token
//! estimate of every message and the active context built from them. Its
//! methods do blocking file I/O; call them from async code through
//! `tokio::task::spawn_blocking`.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::SystemTime;

use super::TranscriptConfig;
use super::context::{self, ActiveContext};
use super::delta::{self, DeltaSource, PageLimits};
use super::error::{CorruptLine, TranscriptError};
use super::file::{FsyncPolicy, TornTail};
use super::log::{Access, Opened, TranscriptLog, TranscriptLogs};
use super::record::{self, NodeKind, ROLLBACK_MARKER, ROTATION_MARKER, Record};
use super::wire::{self, SESSION_VERSION, SessionHeader};
use crate::contract::history::History;
use crate::contract::services::{OversizedEntry, TranscriptDelta};
use crate::contract::types::{AgentMessage, MessageEntry, RotatedSession, SessionRef};

/// What opening a transcript found wrong with it. The transcript is usable
/// either way; nothing was dropped from the file.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct OpenReport {
    /// A last line cut short by a crash, set aside (or, opened read-only,
    /// ignored).
    pub torn_tail: Option<TornTail>,
    /// Lines that are not entries. They stay in the file untouched; entries
    /// whose parent is one of them start a new root, as in the reference.
    pub corrupt_lines: Vec<CorruptLine>,
    /// Entries of a known type (`message`, `compaction`, …) whose fields
    /// could not be read. They stay in the file and the tree but are left out
    /// of the context (a tool result answering a call lost this way is then
    /// an orphan, which prompts leave out).
    pub misshapen_entries: Vec<CorruptLine>,
}

impl OpenReport {
    /// Whether opening found nothing wrong.
    pub fn is_clean(&self) -> bool {
        self.torn_tail.is_none()
            && self.corrupt_lines.is_empty()
            && self.misshapen_entries.is_empty()
    }

    /// One line for an operator per problem, in file order, each naming the
    /// file and the line.
    pub fn problems(&self) -> Vec<String> {
        let mut lines: Vec<(usize, String)> = self
            .corrupt_lines
            .iter()
            .map(|corrupt| {
                (
                    corrupt.line,
                    format!("{corrupt} (kept in the file, not read)"),
                )
            })
            .chain(
                self.misshapen_entries
                    .iter()
                    .map(|misshapen| (misshapen.line, misshapen.to_string())),
            )
            .chain(
                self.torn_tail
                    .iter()
                    .map(|torn| (torn.line, torn.to_string())),
            )
            .collect();
        lines.sort_by_key(|(line, _)| *line);
        lines.into_iter().map(|(_, text)| text).collect()
    }
}

/// An open session transcript, shared by everything in the process that
/// works on the session (cheap to clone). Get one from
/// [`TranscriptStore`](super::TranscriptStore).
#[derive(Clone)]
pub struct Transcript {
    pub(super) shared: Arc<Shared>,
}

pub(super) struct Shared {
    path: PathBuf,
    /// Where the lines are stored.
    logs: Arc<dyn TranscriptLogs>,
    config: TranscriptConfig,
    state: Mutex<State>,
    /// Held for the whole of a compaction so two never interleave.
    compaction: tokio::sync::Mutex<()>,
}

struct State {
    log: Box<dyn TranscriptLog>,
    header: SessionHeader,
    header_line: Box<str>,
    /// Lines after the header.
    records: Vec<Record>,
    /// Entry id → record index (the later entry wins, as in the reference).
    by_id: HashMap<String, usize>,
    /// The last entry in file order: where the conversation continues.
    leaf: Option<usize>,
    generation: u64,
    report: OpenReport,
    /// The active context, built on first use after each change.
    context: Option<Arc<ActiveContext>>,
    /// The transcript this one rotated into, if it did.
    successor: Option<RotatedSession>,
    /// The session id of the transcript this one continues (its
    /// `parentSession`), when that file is readable.
    predecessor: Option<String>,
}

impl Transcript {
    /// Reads an opened file into a handle.
    pub(super) fn load(
        path: PathBuf,
        config: TranscriptConfig,
        logs: Arc<dyn TranscriptLogs>,
        opened: Opened,
    ) -> Result<Self, TranscriptError> {
        let Opened {
            log,
            access,
            contents,
            torn_tail,
        } = opened;
        let mut lines = contents.split(|&byte| byte == b'\n');
        let header_bytes = lines.next().unwrap_or_default();
        let bad_header = |reason: String| {
            TranscriptError::BadHeader(CorruptLine {
                path: path.clone(),
                line: 1,
                reason,
            })
        };
        let header_line = std::str::from_utf8(header_bytes)
            .map_err(|error| bad_header(format!("not UTF-8: {error}")))?;
        let header: SessionHeader = serde_json::from_str(header_line)
            .map_err(|error| bad_header(format!("not a session header: {error}")))?;
        if header.entry_type != "session" {
            return Err(bad_header(format!(
                "the first line is a `{}` entry, not the session header",
                header.entry_type
            )));
        }
        if header.version != SESSION_VERSION {
            return Err(TranscriptError::UnsupportedVersion {
                path,
                found: header.version,
                supported: SESSION_VERSION,
            });
        }

        let mut report = OpenReport {
            torn_tail,
            ..OpenReport::default()
        };
        let mut records = Vec::new();
        // `split` yields an empty piece after the final newline.
        let body: Vec<&[u8]> = lines.collect();
        let body = body.split_last().map_or(&[][..], |(_, rest)| rest);
        for (offset, bytes) in body.iter().enumerate() {
            let line = offset + 2;
            let (raw, node) = match std::str::from_utf8(bytes) {
                Ok(text) => match record::parse(text, config.tokenizer) {
                    Ok(node) => {
                        if let Some(reason) = node.as_ref().and_then(|n| n.misshapen.clone()) {
                            report.misshapen_entries.push(CorruptLine {
                                path: path.clone(),
                                line,
                                reason,
                            });
                        }
                        (text.into(), node)
                    }
                    Err(error) => {
                        report.corrupt_lines.push(CorruptLine {
                            path: path.clone(),
                            line,
                            reason: error.0,
                        });
                        (text.into(), None)
                    }
                },
                Err(error) => {
                    report.corrupt_lines.push(CorruptLine {
                        path: path.clone(),
                        line,
                        reason: format!("not UTF-8: {error}"),
                    });
                    (String::from_utf8_lossy(bytes).into(), None)
                }
            };
            records.push(Record { raw, node });
        }
        for problem in report.problems() {
            // A reader's caller reports what it found (and a torn tail may be
            // a live writer's next line): only writers warn.
            match access {
                Access::ReadWrite => tracing::warn!("{problem}"),
                Access::ReadOnly => tracing::debug!("{problem}"),
            }
        }

        let mut by_id = HashMap::with_capacity(records.len());
        let mut leaf = None;
        let mut successor = None;
        for (index, record) in records.iter().enumerate() {
            if let Some(node) = &record.node {
                by_id.insert(node.id.clone(), index);
                leaf = Some(index);
                if let NodeKind::Rotated(rotated) = &node.kind {
                    successor = Some(rotated.clone());
                }
            }
        }
        let generation = delta::generation(header_line, log.identity());
        let predecessor = header
            .parent_session
            .as_deref()
            .and_then(|parent| session_id_of(logs.as_ref(), Path::new(parent)));
        Ok(Self {
            shared: Arc::new(Shared {
                path,
                logs,
                config,
                state: Mutex::new(State {
                    log,
                    header_line: header_line.into(),
                    header,
                    records,
                    by_id,
                    leaf,
                    generation,
                    report,
                    context: None,
                    successor,
                    predecessor,
                }),
                compaction: tokio::sync::Mutex::new(()),
            }),
        })
    }

    fn state(&self) -> MutexGuard<'_, State> {
        // Every update of the state completes before the lock is released;
        // a panic elsewhere cannot leave it half-changed.
        self.shared
            .state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// The file.
    pub fn path(&self) -> &Path {
        &self.shared.path
    }

    /// The session header.
    pub fn header(&self) -> SessionHeader {
        self.state().header.clone()
    }

    /// The session id (the header's).
    pub fn session_id(&self) -> String {
        self.state().header.id.clone()
    }

    /// The session as engine calls name it.
    pub fn session_ref(&self) -> SessionRef {
        SessionRef::new(self.session_id(), self.path().to_string_lossy())
    }

    /// What opening the file found wrong with it.
    pub fn open_report(&self) -> OpenReport {
        self.state().report.clone()
    }

    /// Whether entries can be appended (the file was writable).
    pub fn is_writable(&self) -> bool {
        self.state().log.is_writable()
    }

    /// The id of the entry the conversation continues from.
    pub fn leaf_id(&self) -> Option<String> {
        let state = self.state();
        state.leaf.and_then(|index| {
            state.records[index]
                .node
                .as_ref()
                .map(|node| node.id.clone())
        })
    }

    /// How its entries' tokens are counted (`transcripts.tokenizer`).
    pub fn tokenizer(&self) -> crate::contract::tokens::Tokenizer {
        self.shared.config.tokenizer
    }

    /// How many lines follow the header (entries, and unreadable lines).
    pub fn line_count(&self) -> usize {
        self.state().records.len()
    }

    /// The transcript this one was rotated into by a compaction, if any.
    pub fn successor(&self) -> Option<RotatedSession> {
        self.state().successor.clone()
    }

    /// The active context with what compaction needs to know about it.
    pub fn context(&self) -> Arc<ActiveContext> {
        let mut state = self.state();
        if let Some(context) = &state.context {
            return context.clone();
        }
        let path = context::active_path(&state.records, &state.by_id, state.leaf);
        let built = Arc::new(context::build(&state.records, &path));
        state.context = Some(built.clone());
        built
    }

    /// Every message on the path from the root to the leaf, compactions
    /// ignored: the conversation as it happened on the live branch (what a
    /// replay walks through).
    pub fn active_branch(&self) -> Vec<MessageEntry> {
        let state = self.state();
        context::active_path(&state.records, &state.by_id, state.leaf)
            .into_iter()
            .filter_map(
                |index| match state.records[index].node.as_ref().map(|node| &node.kind) {
                    Some(NodeKind::Message { entry, .. }) => Some(entry.clone()),
                    _ => None,
                },
            )
            .collect()
    }

    /// The active context as engines see it: the messages on the path from
    /// the root to the leaf, after the latest compaction's summary, with
    /// cached token estimates.
    pub fn history(&self) -> History {
        self.context().history.clone()
    }

    /// Appends `messages` as children of the leaf, one after the other, in a
    /// single write that is durable (per the fsync policy) when this returns.
    /// Answers the stored entries, with their new ids. Custom messages and
    /// branch summaries become `custom_message` and `branch_summary` entries,
    /// as in the reference; compaction summaries are refused (compaction
    /// writes them), and so is any append once the transcript has rotated
    /// into another file ([`TranscriptError::Rotated`] names it).
    pub fn append(&self, messages: &[AgentMessage]) -> Result<Vec<MessageEntry>, TranscriptError> {
        self.append_messages(messages, true)
    }

    /// Appends like [`Self::append`], but leaves the write to the page cache:
    /// it is durable (per the fsync policy) once [`Self::commit`] or a
    /// durable append returns. A crash of the process loses nothing; a crash
    /// of the machine may lose what was not committed yet. For appends that
    /// are acknowledged together (a turn's): one sync for all of them.
    pub fn append_uncommitted(
        &self,
        messages: &[AgentMessage],
    ) -> Result<Vec<MessageEntry>, TranscriptError> {
        self.append_messages(messages, false)
    }

    /// Makes every append so far durable, per the fsync policy: one
    /// `fdatasync` when an uncommitted append is waiting, else nothing.
    pub fn commit(&self) -> Result<(), TranscriptError> {
        if self.shared.config.fsync == FsyncPolicy::Never {
            return Ok(());
        }
        self.state().log.sync()
    }

    fn append_messages(
        &self,
        messages: &[AgentMessage],
        durable: bool,
    ) -> Result<Vec<MessageEntry>, TranscriptError> {
        if messages.is_empty() {
            return Ok(Vec::new());
        }
        let mut state = self.state();
        let now = SystemTime::now();
        let timestamp_ms = wire::unix_millis(now);
        let mut parent = state.leaf_id();
        let mut taken: Vec<String> = Vec::new();
        let mut lines = Vec::with_capacity(messages.len());
        let mut entries = Vec::with_capacity(messages.len());
        for message in messages {
            let id = new_id(|candidate| {
                state.by_id.contains_key(candidate) || taken.iter().any(|t| t == candidate)
            });
            let line = wire::encode_message_entry(&id, parent.as_deref(), now, message).map_err(
                |error| TranscriptError::InvalidAppend {
                    path: self.shared.path.clone(),
                    reason: error.0,
                },
            )?;
            entries.push(MessageEntry {
                id: id.clone(),
                parent_id: parent.replace(id.clone()),
                timestamp_ms,
                message: message.clone(),
            });
            taken.push(id);
            lines.push(line);
        }
        let policy = if durable {
            self.shared.config.fsync
        } else {
            FsyncPolicy::Never
        };
        self.write_lines_with(&mut state, lines, policy)?;
        Ok(entries)
    }

    /// Appends a `compaction` entry as a child of the leaf and answers its id.
    /// `first_kept_entry_id` must name an entry of this transcript.
    pub(crate) fn append_compaction(
        &self,
        compaction: &wire::CompactionFigures<'_>,
    ) -> Result<String, TranscriptError> {
        let mut state = self.state();
        if !state.by_id.contains_key(compaction.first_kept_entry_id) {
            return Err(TranscriptError::UnknownEntry {
                path: self.shared.path.clone(),
                id: compaction.first_kept_entry_id.to_owned(),
            });
        }
        let id = new_id(|candidate| state.by_id.contains_key(candidate));
        let parent = state.leaf_id();
        let line = wire::encode_compaction_entry(&id, parent.as_deref(), compaction);
        self.write_lines(&mut state, vec![line])?;
        Ok(id)
    }

    /// Continues this transcript in a new file at `new_path` with header
    /// `new_header`, from its active path's `first_kept_entry_id` (see
    /// [`super::rotate`]): writes the new file atomically, opens it with
    /// `open`, then records the rotation in this file, all under the state
    /// lock, so no append can land in between and be left behind. From then
    /// on this transcript refuses appends ([`TranscriptError::Rotated`]).
    pub(super) fn rotate_into(
        &self,
        new_path: &Path,
        new_header: &SessionHeader,
        first_kept_entry_id: &str,
        open: impl FnOnce(&Path) -> Result<Transcript, TranscriptError>,
    ) -> Result<Transcript, TranscriptError> {
        let mut state = self.state();
        self.check_not_rotated(&state)?;
        let path = context::active_path(&state.records, &state.by_id, state.leaf);
        let contents = super::rotate::compose(
            &self.shared.path,
            new_header,
            &state.records,
            &path,
            first_kept_entry_id,
        )?;
        self.shared.logs.create(new_path, contents.as_bytes())?;
        let successor = open(new_path)?;
        let rotated = RotatedSession {
            session_id: successor.session_id(),
            session_file: successor.path().to_string_lossy().into_owned(),
        };
        let id = new_id(|candidate| state.by_id.contains_key(candidate));
        let parent = state.leaf_id();
        let data = serde_json::json!({
            "sessionId": rotated.session_id,
            "sessionFile": rotated.session_file,
        });
        let line = wire::encode_custom_entry(&id, parent.as_deref(), ROTATION_MARKER, data);
        self.write_lines(&mut state, vec![line])?;
        state.successor = Some(rotated);
        Ok(successor)
    }

    /// Writes a new transcript `new_path` headed `new_header` holding this
    /// one's active branch up to its last completed answer: a subagent's
    /// forked context (see `fork.rs`).
    pub(super) fn fork_into(
        &self,
        new_path: &Path,
        new_header: &SessionHeader,
    ) -> Result<(), TranscriptError> {
        let contents = {
            let state = self.state();
            let branch = context::active_path(&state.records, &state.by_id, state.leaf);
            super::fork::compose(new_header, &state.records, &branch).map_err(|error| {
                TranscriptError::InvalidAppend {
                    path: new_path.to_owned(),
                    reason: format!("the forked session's header cannot be written: {error}"),
                }
            })?
        };
        self.shared.logs.create(new_path, contents.as_bytes())
    }

    /// Takes the entries after `leaf` (`None`: every entry) off the active
    /// branch, durably: a `custom` entry (`ctxbox.turn-rolled-back`, naming
    /// `entry_ids` and `reason`) becomes the leaf as a child of `leaf`, so the
    /// conversation continues from there. Nothing is deleted: the rolled-back
    /// entries stay in the file on a branch of their own, as OpenClaw keeps
    /// abandoned branches. `leaf` must be an entry of this transcript.
    pub fn roll_back_to(
        &self,
        leaf: Option<&str>,
        entry_ids: &[String],
        reason: &str,
    ) -> Result<(), TranscriptError> {
        let mut state = self.state();
        if let Some(leaf) = leaf
            && !state.by_id.contains_key(leaf)
        {
            return Err(TranscriptError::InvalidAppend {
                path: self.shared.path.clone(),
                reason: format!("cannot roll back to `{leaf}`: no such entry"),
            });
        }
        let id = new_id(|candidate| state.by_id.contains_key(candidate));
        let data = serde_json::json!({ "entryIds": entry_ids, "reason": reason });
        let line = wire::encode_custom_entry(&id, leaf, ROLLBACK_MARKER, data);
        self.write_lines(&mut state, vec![line])
    }

    /// Writes a byte-identical copy of the transcript (header, every line,
    /// unreadable ones included) to a new transcript `destination` in the
    /// same store, atomically: a branch of the session to continue apart.
    pub fn save_copy(&self, destination: &Path) -> Result<(), TranscriptError> {
        let contents = {
            let state = self.state();
            let mut contents = String::with_capacity(
                state.header_line.len()
                    + state.records.iter().map(|r| r.raw.len() + 1).sum::<usize>()
                    + 1,
            );
            contents.push_str(&state.header_line);
            contents.push('\n');
            for record in &state.records {
                contents.push_str(&record.raw);
                contents.push('\n');
            }
            contents
        };
        self.shared.logs.create(destination, contents.as_bytes())
    }

    /// `read-transcript-delta` and `read-transcript-page`: the messages (and
    /// compaction summaries) of the active branch after `cursor`, from the
    /// root when `None`; at most `max_messages` of them and `max_bytes` (a
    /// next entry larger than that alone is delivered or answered with the
    /// bytes it needs, as `oversized` says; one larger than
    /// [`MAX_DELTA_PAGE_BYTES`] is skipped with a reset naming it).
    /// Runtime-context carriers are left out. A cursor that no longer fits —
    /// another session's, one from before a rotation, from a replaced file,
    /// one whose last entry left the active branch (a rolled-back turn), or
    /// not one of ours — is answered with a reset to the start. With `fence`
    /// (an entry id: the current turn's first), the read ends before that
    /// entry.
    ///
    /// [`MAX_DELTA_PAGE_BYTES`]: super::MAX_DELTA_PAGE_BYTES
    pub fn read_delta(
        &self,
        cursor: Option<&str>,
        max_messages: u32,
        max_bytes: u64,
        oversized: OversizedEntry,
        fence: Option<&str>,
    ) -> TranscriptDelta {
        let state = self.state();
        let branch = context::active_path(&state.records, &state.by_id, state.leaf);
        let source = DeltaSource {
            records: &state.records,
            branch: &branch,
            session_id: &state.header.id,
            generation: state.generation,
            predecessor: state.predecessor.as_deref(),
        };
        delta::read(
            &source,
            cursor,
            PageLimits::asked(max_messages, max_bytes, oversized),
            fence,
        )
    }

    /// Takes the transcript's compaction lock (held for a whole compaction).
    pub(crate) async fn lock_compaction(&self) -> tokio::sync::MutexGuard<'_, ()> {
        self.shared.compaction.lock().await
    }

    /// Refuses writes to a transcript that rotated into another file.
    fn check_not_rotated(&self, state: &State) -> Result<(), TranscriptError> {
        match &state.successor {
            Some(successor) => Err(TranscriptError::Rotated {
                path: self.shared.path.clone(),
                successor: PathBuf::from(&successor.session_file),
            }),
            None => Ok(()),
        }
    }

    /// Appends whole entry lines and records them (refused once the
    /// transcript has rotated).
    fn write_lines(&self, state: &mut State, lines: Vec<String>) -> Result<(), TranscriptError> {
        self.write_lines_with(state, lines, self.shared.config.fsync)
    }

    fn write_lines_with(
        &self,
        state: &mut State,
        lines: Vec<String>,
        policy: FsyncPolicy,
    ) -> Result<(), TranscriptError> {
        self.check_not_rotated(state)?;
        let mut bytes = Vec::with_capacity(lines.iter().map(|line| line.len() + 1).sum());
        for line in &lines {
            bytes.extend_from_slice(line.as_bytes());
            bytes.push(b'\n');
        }
        state.log.append(&bytes, policy)?;
        let previous_leaf = state.leaf;
        let first_new = state.records.len();
        for line in lines {
            // Lines this module encoded always parse.
            let node = record::parse(&line, self.shared.config.tokenizer)
                .ok()
                .flatten();
            let index = state.records.len();
            if let Some(node) = &node {
                state.by_id.insert(node.id.clone(), index);
                state.leaf = Some(index);
            }
            state.records.push(Record {
                raw: line.into(),
                node,
            });
        }
        state.context = state.context.take().and_then(|previous| {
            context::grown(
                previous,
                &state.records,
                &state.by_id,
                previous_leaf,
                first_new,
            )
            .map(Arc::new)
        });
        Ok(())
    }
}

impl State {
    fn leaf_id(&self) -> Option<String> {
        self.leaf.and_then(|index| {
            self.records[index]
                .node
                .as_ref()
                .map(|node| node.id.clone())
        })
    }
}

impl std::fmt::Debug for Transcript {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Transcript")
            .field("path", &self.shared.path)
            .finish()
    }
}

/// A fresh entry id: 8 hex digits, as the reference makes them, checked
/// against `taken`; a full UUID in the unlikely case of repeated collisions.
fn new_id(taken: impl Fn(&str) -> bool) -> String {
    for _ in 0..100 {
        let candidate = uuid::Uuid::new_v4().simple().to_string()[..8].to_owned();
        if !taken(&candidate) {
            return candidate;
        }
    }
    uuid::Uuid::new_v4().to_string()
}

/// The session id in the header of the transcript at `path`, if readable.
fn session_id_of(logs: &dyn TranscriptLogs, path: &Path) -> Option<String> {
    let first = logs.header_line(path)?;
    serde_json::from_str::<SessionHeader>(&first)
        .ok()
        .map(|header| header.id)
}
