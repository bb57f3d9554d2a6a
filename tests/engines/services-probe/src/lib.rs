//! Test engine that exercises the host services from inside the sandbox.
//!
//! `assemble` runs the probe named by the prompt and answers the whole
//! history followed by a note with the probe's report:
//! - `state`: sets, reads, scans and deletes keys of its private store;
//! - `delta`: reads the transcript from the cursor it keeps in its store, two
//!   entries per page, following resets;
//! - `page`: reads the transcript from its start with `read-transcript-page`:
//!   first within 64 bytes (smaller than any entry, so the host names the
//!   bytes the first entry needs), then page by page within 64 bytes through
//!   `read_transcript_page_growing`, which asks again with what each entry
//!   needs;
//! - `summarize`: summarizes the history's text with the host's summarizer;
//! - `quota`: tries to store more than its quota allows;
//! - `overlay`: changes keys the `state` probe stored, then reads them back
//!   within the same call (its writes are pending until the call answers);
//! - `doomed` / `doomed-trap`: writes keys, then fails with an
//!   `engine-error` / traps, so none of its writes may be kept.
//!
//! `compact` reports progress and delegates to the host's native compaction.

use ctxbox_guest::prelude::*;
use ctxbox_guest::{CompactParams, CompactResult, HostErrorKind, TranscriptDelta, TranscriptRead};

/// The engine's id (its state lives under it).
const ID: &str = "services-probe";

#[derive(Default)]
struct Probe;

impl Engine for Probe {
    fn info(&self) -> EngineInfo {
        EngineInfo::new(ID, "Services probe")
    }

    fn assemble(
        &mut self,
        _session: &SessionRef,
        history: &History,
        params: AssembleParams,
    ) -> Result<AssembleResult, EngineError> {
        let report = match params.prompt.as_deref() {
            Some("state") => state_probe()?,
            Some("delta") => delta_probe()?,
            Some("page") => page_probe()?,
            Some("summarize") => summarize_probe(history)?,
            Some("quota") => quota_probe()?,
            Some("hoard") => hoard_probe()?,
            Some("overlay") => overlay_probe()?,
            Some("doomed") => {
                host::state::set("doomed/a", b"lost")?;
                host::state::delete("other")?;
                return Err(EngineError::internal("failing on purpose after writing"));
            }
            Some("doomed-trap") => {
                host::state::set("doomed/b", b"lost")?;
                panic!("trapping on purpose after writing");
            }
            other => return Err(EngineError::internal(format!("no probe named {other:?}"))),
        };
        let len = history.len();
        Ok(AssembleResult {
            items: vec![
                AssembledItem::keep(0..len),
                AssembledItem::Insert(AgentMessage::note(ID, report)),
            ],
            estimated_tokens: history.tokens(0..len),
            system_prompt_addition: None,
            context_projection: None,
        })
    }

    fn compact(
        &mut self,
        _session: &SessionRef,
        _history: &History,
        params: CompactParams,
    ) -> Result<CompactResult, EngineError> {
        host::report_progress();
        Ok(host::delegate_compaction(&params)?)
    }
}

ctxbox_guest::export_engine!(Probe);

/// `get=… scan=… deleted=…,… missing=…`
fn state_probe() -> Result<String, EngineError> {
    host::state::set("probe/a", b"1")?;
    host::state::set("probe/b", b"2")?;
    host::state::set("other", b"3")?;
    let got =
        host::state::get("probe/a")?.map(|value| String::from_utf8_lossy(&value).into_owned());
    let scanned: Vec<String> = host::state::scan("probe/")?
        .into_iter()
        .map(|entry| entry.key)
        .collect();
    let first_delete = host::state::delete("probe/b")?;
    let second_delete = host::state::delete("probe/b")?;
    let missing = host::state::get("probe/b")?;
    Ok(format!(
        "get={} scan={} deleted={first_delete},{second_delete} missing={}",
        got.unwrap_or_default(),
        scanned.join(","),
        missing.map_or("none", |_| "some")
    ))
}

/// `get=… scan=… value=…` after setting `probe/c`, replacing `probe/a` and
/// deleting `other`: what the call sees of its own writes.
fn overlay_probe() -> Result<String, EngineError> {
    host::state::set("probe/c", b"c")?;
    host::state::set("probe/a", b"replaced")?;
    let deleted = host::state::delete("other")?;
    let other = host::state::get("other")?;
    let scanned: Vec<String> = host::state::scan("probe/")?
        .into_iter()
        .map(|entry| format!("{}={}", entry.key, String::from_utf8_lossy(&entry.value)))
        .collect();
    let keys = host::state::scan("")?.len();
    Ok(format!(
        "deleted={deleted} other={} scan={} keys={keys}",
        other.map_or("none", |_| "some"),
        scanned.join(",")
    ))
}

/// Bytes within which `page` reads: less than any transcript line.
const TINY_BUDGET: u64 = 64;

/// `need <bytes>` for the first read within [`TINY_BUDGET`], then one line per
/// answer as `page` reads on: `page <ids> more=<bool> bytes=<n>`,
/// `reset <reason>`, `unavailable <reason>`, `missing`.
fn page_probe() -> Result<String, EngineError> {
    let mut lines = Vec::new();
    let mut cursor: Option<String> = None;
    for _ in 0..100 {
        let read = if cursor.is_none() && lines.is_empty() {
            host::read_transcript_page(None, None, Some(TINY_BUDGET))?
        } else {
            host::read_transcript_page_growing(cursor.as_deref(), None, TINY_BUDGET, 1 << 20)?
        };
        match read {
            TranscriptRead::Page(page) => {
                if let Some(need) = page.required_bytes {
                    lines.push(format!("need {need}"));
                    cursor = Some(page.cursor);
                    continue;
                }
                let ids: Vec<&str> = page.entries.iter().map(|entry| entry.id.as_str()).collect();
                lines.push(format!(
                    "page {} more={} bytes={}",
                    ids.join(","),
                    page.has_more,
                    page.serialized_bytes
                ));
                cursor = Some(page.cursor);
                if !page.has_more {
                    break;
                }
            }
            TranscriptRead::Reset(reset) => {
                lines.push(format!("reset {}", reset.reason));
                cursor = Some(reset.cursor);
            }
            TranscriptRead::Unavailable(reason) => {
                lines.push(format!("unavailable {reason}"));
                break;
            }
            TranscriptRead::Missing => {
                lines.push("missing".to_owned());
                break;
            }
        }
    }
    Ok(lines.join("\n"))
}

/// One line per page or reset: `page <ids> more=<bool>`, `reset <reason>`,
/// `missing`. The cursor survives in the engine's store between calls.
fn delta_probe() -> Result<String, EngineError> {
    let mut cursor =
        host::state::get("cursor")?.map(|bytes| String::from_utf8_lossy(&bytes).into_owned());
    let mut lines = Vec::new();
    for _ in 0..100 {
        match host::read_transcript_delta(cursor.as_deref(), Some(2), None)? {
            TranscriptDelta::Page(page) => {
                let ids: Vec<&str> = page.entries.iter().map(|entry| entry.id.as_str()).collect();
                lines.push(format!("page {} more={}", ids.join(","), page.has_more));
                cursor = Some(page.cursor);
                if !page.has_more {
                    break;
                }
            }
            TranscriptDelta::Reset(reset) => {
                lines.push(format!("reset {}", reset.reason));
                cursor = Some(reset.cursor);
            }
            TranscriptDelta::Missing => {
                lines.push("missing".to_owned());
                break;
            }
        }
    }
    if let Some(cursor) = &cursor {
        host::state::set("cursor", cursor.as_bytes())?;
    }
    Ok(lines.join("\n"))
}

fn summarize_probe(history: &History) -> Result<String, EngineError> {
    let text: Vec<String> = history
        .to_vec()
        .iter()
        .map(|entry| entry.message.text())
        .collect();
    Ok(host::summarize(&text.join("\n"), None, 200)?)
}

/// Hostile: stores empty values under tiny keys until the host refuses,
/// trying to fill the disk with bookkeeping rather than bytes.
fn hoard_probe() -> Result<String, EngineError> {
    let mut stored = 0u64;
    loop {
        match host::state::set(&format!("{stored:x}"), &[]) {
            Ok(()) => stored += 1,
            Err(error) if matches!(error.kind, HostErrorKind::QuotaExceeded) => {
                return Ok(format!("hoarded {stored}: {}", error.message));
            }
            Err(error) => return Err(error.into()),
        }
    }
}

fn quota_probe() -> Result<String, EngineError> {
    match host::state::set("big", &[7u8; 4096]) {
        Ok(()) => Ok("stored".to_owned()),
        Err(error) if matches!(error.kind, HostErrorKind::QuotaExceeded) => {
            Ok(format!("quota-exceeded: {}", error.message))
        }
        Err(error) => Err(error.into()),
    }
}
