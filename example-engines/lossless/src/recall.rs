//! Recall: every stored message indexed in the host's searchable memory, and
//! the two tools the model can call to reach what summaries stand in for —
//! `grep` (search the whole conversation) and `expand` (read a span of
//! messages back, such as the one a summary names: "messages 9–16").

use std::fmt::Write as _;

use ctxbox_guest::{EngineError, EngineErrorKind, MessageEntry, ToolDefinition};
use serde::Deserialize;

use crate::ports::{Indexed, Recall, Store};
use crate::render;
use crate::session::Session;

/// Characters of one message's text indexed (a huge tool output is indexed
/// by its start).
const MAX_INDEXED_CHARS: usize = 64 * 1024;
/// Hits `grep` answers by default, and at most.
const GREP_DEFAULT_HITS: u32 = 8;
const GREP_MAX_HITS: u32 = 20;
/// Messages `expand` reads at most, and characters of each.
const EXPAND_MAX_MESSAGES: u64 = 50;
const EXPAND_MAX_CHARS: usize = 4_000;

/// The tool names.
pub const GREP: &str = "grep";
/// See [`GREP`].
pub const EXPAND: &str = "expand";

/// The names the model sees the engine's tools by: a runtime may show them
/// under a prefix of its own (the OpenClaw and Hermes plugins show `grep` as
/// `ctxbox_grep`), which the assemble call's available tools tell.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolNames {
    /// What [`GREP`] is called.
    pub grep: String,
    /// What [`EXPAND`] is called.
    pub expand: String,
}

impl ToolNames {
    /// The names among `available` (the tools the model is offered) that are
    /// the engine's: the name itself, else one ending in `_<name>`; the bare
    /// name when none is.
    pub fn among(available: &[String]) -> Self {
        let shown = |bare: &str| {
            let suffix = format!("_{bare}");
            available
                .iter()
                .find(|name| *name == bare)
                .or_else(|| available.iter().find(|name| name.ends_with(&suffix)))
                .map_or_else(|| bare.to_owned(), String::clone)
        };
        Self {
            grep: shown(GREP),
            expand: shown(EXPAND),
        }
    }
}

/// The tools the engine offers the model.
pub fn tools() -> Vec<ToolDefinition> {
    vec![
        ToolDefinition::new(
            GREP,
            "Search this whole conversation, including the parts that are only summarized in \
             your context, for messages containing every given word (substring, case-insensitive; \
             works for Chinese and Japanese). Answers the matching messages by number with a \
             snippet; read one in full with `expand`.",
            r#"{"type":"object","properties":{"query":{"type":"string","description":"Words to find, separated by spaces"},"limit":{"type":"integer","minimum":1,"maximum":20,"description":"Hits per page (default 8)"},"page":{"type":"integer","minimum":0,"description":"Page, from 0"}},"required":["query"],"additionalProperties":false}"#,
        ),
        ToolDefinition::new(
            EXPAND,
            "Read messages of this conversation back in full, by number (as a summary names \
             them, e.g. \"messages 9–16\", or as `grep` answers them): from `from` to `to`, at \
             most 50 at a time.",
            r#"{"type":"object","properties":{"from":{"type":"integer","minimum":1},"to":{"type":"integer","minimum":1}},"required":["from","to"],"additionalProperties":false}"#,
        ),
    ]
}

/// Indexes the session's messages not indexed yet, oldest first: those an
/// earlier call left over, then `appended` (just stored, with their sequence
/// numbers). One document per message, `m<number>`. When the host takes no
/// more documents in this call (its per-call cap, or the engine's quota),
/// the rest wait for the next call that stores messages: recall catches up
/// in bounded steps, and storing a message never fails for its index.
pub fn index<S: Store>(
    recall: &dyn Recall,
    session: &Session<'_, S>,
    session_id: &str,
    appended: &[(u64, MessageEntry)],
) -> Result<(), EngineError> {
    let Some(&(first_new, _)) = appended.first() else {
        return Ok(());
    };
    // A session stored before the count was kept indexed every message as
    // it stored it.
    let recorded = session.indexed()?;
    let mut next = recorded.unwrap_or(first_new);
    while next < first_new {
        let entry = session.message(next)?;
        if put(recall, session_id, next, &entry)? == Indexed::Full {
            break;
        }
        next += 1;
    }
    if next == first_new {
        for (seq, entry) in appended {
            if put(recall, session_id, *seq, entry)? == Indexed::Full {
                break;
            }
            next = seq + 1;
        }
    }
    if recorded != Some(next) {
        session.save_indexed(next)?;
    }
    Ok(())
}

/// Indexes message `seq` as document `m<seq + 1>`.
fn put(
    recall: &dyn Recall,
    session_id: &str,
    seq: u64,
    entry: &MessageEntry,
) -> Result<Indexed, EngineError> {
    let (label, body) = render::describe(&entry.message);
    if body.trim().is_empty() {
        return Ok(Indexed::Done);
    }
    let text: String = body.chars().take(MAX_INDEXED_CHARS).collect();
    let metadata = format!(
        r#"{{"message":{},"role":{},"entryId":{}}}"#,
        seq + 1,
        json_string(&label),
        json_string(&entry.id)
    );
    recall.put(session_id, &format!("m{}", seq + 1), &text, &metadata)
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct GrepArguments {
    query: String,
    limit: Option<u32>,
    page: Option<u32>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ExpandArguments {
    from: u64,
    to: u64,
}

#[derive(Deserialize)]
struct HitMetadata {
    message: u64,
    role: String,
}

/// Answers the model's call to tool `name`.
pub fn call<S: Store>(
    recall: &dyn Recall,
    session: &Session<'_, S>,
    session_id: &str,
    name: &str,
    arguments: &str,
) -> Result<String, EngineError> {
    match name {
        GREP => grep(recall, session_id, parse(arguments)?),
        EXPAND => expand(session, parse(arguments)?),
        other => Err(EngineError::new(
            EngineErrorKind::Unsupported,
            format!("no tool `{other}`: the tools are `{GREP}` and `{EXPAND}`"),
        )),
    }
}

fn parse<'de, T: Deserialize<'de>>(arguments: &'de str) -> Result<T, EngineError> {
    serde_json::from_str(arguments).map_err(|error| {
        EngineError::new(
            EngineErrorKind::InvalidInput,
            format!("the arguments do not fit the tool's parameters: {error}"),
        )
    })
}

fn grep(
    recall: &dyn Recall,
    session_id: &str,
    arguments: GrepArguments,
) -> Result<String, EngineError> {
    let query = arguments.query.trim();
    if query.is_empty() {
        return Err(EngineError::new(
            EngineErrorKind::InvalidInput,
            "the query is empty",
        ));
    }
    let limit = arguments
        .limit
        .unwrap_or(GREP_DEFAULT_HITS)
        .clamp(1, GREP_MAX_HITS);
    let page = arguments.page.unwrap_or(0);
    let found = recall.search(session_id, query, limit, page.saturating_mul(limit))?;
    if found.hits.is_empty() {
        return Ok(format!("No message contains all of: {query}"));
    }
    let mut answer = format!("Messages containing all of: {query} (page {page})\n");
    for hit in &found.hits {
        let (number, role) = hit
            .metadata
            .as_deref()
            .and_then(|metadata| serde_json::from_str::<HitMetadata>(metadata).ok())
            .map_or((0, String::new()), |metadata| {
                (metadata.message, metadata.role)
            });
        let _ = writeln!(answer, "\n[message {number}, {role}]\n{}", hit.snippet);
    }
    if found.has_more {
        let _ = write!(answer, "\n(more: page {})", page + 1);
    }
    Ok(answer)
}

fn expand<S: Store>(
    session: &Session<'_, S>,
    arguments: ExpandArguments,
) -> Result<String, EngineError> {
    let stored = session.meta()?.next_seq;
    let (from, to) = (arguments.from, arguments.to);
    if from == 0 || to < from || to > stored {
        return Err(EngineError::new(
            EngineErrorKind::InvalidInput,
            format!("messages {from}–{to} are not in this conversation of {stored} messages"),
        ));
    }
    let to = to.min(from + EXPAND_MAX_MESSAGES - 1);
    let mut answer = String::new();
    for number in from..=to {
        let entry = session.message(number - 1)?;
        let (label, body) = render::describe(&entry.message);
        let body: String = body.chars().take(EXPAND_MAX_CHARS).collect();
        let _ = writeln!(answer, "[message {number}, {label}]\n{body}\n");
    }
    if to < arguments.to {
        let _ = write!(
            answer,
            "(read up to message {to}; ask again from {})",
            to + 1
        );
    }
    Ok(answer)
}

/// `text` as a JSON string literal.
fn json_string(text: &str) -> String {
    serde_json::Value::from(text).to_string()
}
