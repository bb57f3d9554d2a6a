//! Test engine: uses the host's model and index as the prompt (`params.prompt`
//! of `assemble`) tells it, and reports what happened in a note it inserts
//! before the history (`powers: …`):
//! - `complete N`: asks the host's model N times; reports `completed=K` and
//!   the first error's kind;
//! - `put SCOPE ID TEXT…`: indexes a document (`SCOPE` `engine` or
//!   `session`); reports `put=ok` or the error;
//! - `put-then-trap SCOPE ID TEXT…`: indexes a document, then panics (the
//!   call fails: its writes must be dropped);
//! - `complete-then-put SCOPE ID TEXT…`: asks the host's model once, then
//!   indexes a document (a call that waits on its host while it holds
//!   writes: the fencing test stalls the host there);
//! - `delete SCOPE ID`: reports `deleted=true|false` (or the error);
//! - `search SCOPE WORDS…`: reports `hits=ID,ID,…` (or the error);
//! - `flood`: puts 4 KiB documents until the host refuses; reports
//!   `flooded=K` and the error's kind.
//! - `bomb N KIB`: puts up to N documents of KIB KiB of text with no
//!   repeating trigrams (the most work for a full-text index) in the
//!   engine's scope; reports `bombed=K` and the error, if the host refused
//!   one.
//! - `hoard KIB`: stores values of KIB KiB under new state keys until the
//!   host refuses; reports `hoarded=K` and the error.

use ctxbox_guest::prelude::*;
use ctxbox_guest::{CompletionRequest, HostError, IndexDocument, IndexScope};

#[derive(Default)]
struct PowersProbe;

fn scope(word: &str) -> IndexScope {
    if word == "engine" {
        IndexScope::Engine
    } else {
        IndexScope::Session
    }
}

fn failure(error: &HostError) -> String {
    format!("{:?}: {}", error.kind, error.message)
}

fn run(command: &str) -> String {
    let mut words = command.split_whitespace();
    match words.next() {
        Some("complete") => {
            let times: u32 = words.next().and_then(|n| n.parse().ok()).unwrap_or(1);
            let mut completed = 0;
            for n in 0..times {
                let request = CompletionRequest::prompt(format!("question {n}: what next?"), 64)
                    .with_purpose("probe");
                match host::complete(&request) {
                    Ok(_) => completed += 1,
                    Err(error) => {
                        return format!("completed={completed} error={}", failure(&error));
                    }
                }
            }
            format!("completed={completed}")
        }
        Some("put") => {
            let scope = scope(words.next().unwrap_or("session"));
            let id = words.next().unwrap_or("doc").to_owned();
            let text = words.collect::<Vec<_>>().join(" ");
            let document = IndexDocument {
                id,
                text,
                metadata: None,
            };
            match host::index::put(scope, &document) {
                Ok(()) => "put=ok".to_owned(),
                Err(error) => format!("put error={}", failure(&error)),
            }
        }
        Some("complete-then-put") => {
            let request = CompletionRequest::prompt("anything to add?", 16).with_purpose("probe");
            if let Err(error) = host::complete(&request) {
                return format!("complete error={}", failure(&error));
            }
            let rest: Vec<&str> = words.collect();
            format!("completed {}", run(&format!("put {}", rest.join(" "))))
        }
        Some("put-then-trap") => {
            let scope = scope(words.next().unwrap_or("session"));
            let id = words.next().unwrap_or("doc").to_owned();
            let text = words.collect::<Vec<_>>().join(" ");
            let document = IndexDocument {
                id,
                text,
                metadata: None,
            };
            let put = host::index::put(scope, &document);
            panic!("trapping after the put ({put:?})");
        }
        Some("delete") => {
            let scope = scope(words.next().unwrap_or("session"));
            let id = words.next().unwrap_or("doc");
            match host::index::delete(scope, id) {
                Ok(existed) => format!("deleted={existed}"),
                Err(error) => format!("delete error={}", failure(&error)),
            }
        }
        Some("search") => {
            let scope = scope(words.next().unwrap_or("session"));
            let query = words.collect::<Vec<_>>().join(" ");
            match host::index::search(&query, scope, 100, 0) {
                Ok(page) => format!(
                    "hits={}",
                    page.hits
                        .iter()
                        .map(|hit| hit.id.as_str())
                        .collect::<Vec<_>>()
                        .join(",")
                ),
                Err(error) => format!("search error={}", failure(&error)),
            }
        }
        Some("flood") => {
            let text = "x".repeat(4096);
            for n in 0.. {
                let document = IndexDocument {
                    id: format!("flood-{n}"),
                    text: text.clone(),
                    metadata: None,
                };
                if let Err(error) = host::index::put(IndexScope::Session, &document) {
                    return format!("flooded={n} error={}", failure(&error));
                }
            }
            unreachable!("the loop returns")
        }
        Some("bomb") => {
            let count: u32 = words.next().and_then(|n| n.parse().ok()).unwrap_or(1);
            let kib: usize = words.next().and_then(|n| n.parse().ok()).unwrap_or(512);
            for n in 0..count {
                let document = IndexDocument {
                    id: format!("bomb-{n}"),
                    text: noise(u64::from(n), kib * 1024),
                    metadata: None,
                };
                if let Err(error) = host::index::put(IndexScope::Engine, &document) {
                    return format!("bombed={n} error={}", failure(&error));
                }
            }
            format!("bombed={count}")
        }
        Some("hoard") => {
            let kib: usize = words.next().and_then(|n| n.parse().ok()).unwrap_or(1024);
            let value = vec![b'h'; kib * 1024];
            for n in 0.. {
                if let Err(error) = host::state::set(&format!("hoard-{n}"), &value) {
                    return format!("hoarded={n} error={}", failure(&error));
                }
            }
            unreachable!("the loop returns")
        }
        _ => "idle".to_owned(),
    }
}

/// `bytes` of printable ASCII from seed `seed`, with no repeating pattern.
fn noise(seed: u64, bytes: usize) -> String {
    let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15).wrapping_add(1);
    (0..bytes)
        .map(|_| {
            state = state
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            char::from(b'!' + ((state >> 33) % 94) as u8)
        })
        .collect()
}

impl Engine for PowersProbe {
    fn info(&self) -> EngineInfo {
        EngineInfo::new("powers-probe", "Powers probe")
    }

    fn assemble(
        &mut self,
        _: &SessionRef,
        history: &History,
        params: AssembleParams,
    ) -> Result<AssembleResult, EngineError> {
        let report = run(params.prompt.as_deref().unwrap_or_default());
        let len = history.len();
        Ok(AssembleResult {
            items: vec![
                AssembledItem::Insert(AgentMessage::note("powers", format!("powers: {report}"))),
                AssembledItem::keep(0..len),
            ],
            estimated_tokens: history.tokens(0..len),
            system_prompt_addition: None,
            context_projection: None,
        })
    }
}

ctxbox_guest::export_engine!(PowersProbe);
