//! A sidecar's memory follows what it is sent, not a multiple of it: a real
//! `ctxbox serve` process (serving the bundled `keep-recent` from its wasm
//! sandbox) is sent one large line of the tiniest messages, the shape that
//! costs the most per byte, then asked for a prompt of all of them, then
//! told to close the session; its peak resident memory (`VmHWM`, started
//! afresh before each request) is read from `/proc` after each.
//!
//! The bounds have room: before the host read messages once and took them
//! over, the ingest peaked at 16× the line and the prompt at 13× its answer
//! (a JSON tree per message), which stayed resident.

use std::path::Path;

use serde_json::{Value, json};

use crate::multi_host::Host;

/// One tiny message, as a client sends it.
const TINY: &str = r#"{"role":"user","content":"hi","timestamp":1700000000000}"#;

/// The line's size: large enough that the host's own baseline is noise.
const LINE_BYTES: usize = 16 << 20;

/// A process's resident memory now and its peak since the last reset, MiB.
fn resident(pid: u32) -> (f64, f64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("/proc status");
    let field = |name: &str| -> f64 {
        let line = status
            .lines()
            .find(|line| line.starts_with(name))
            .unwrap_or_else(|| panic!("{name} in /proc status"));
        let kib: f64 = line
            .split_whitespace()
            .nth(1)
            .and_then(|kib| kib.parse().ok())
            .expect("a number of kB");
        kib / 1024.0
    };
    (field("VmRSS:"), field("VmHWM:"))
}

/// Starts `pid`'s peak afresh.
fn reset_peak(pid: u32) {
    std::fs::write(format!("/proc/{pid}/clear_refs"), "5").expect("clear_refs");
}

/// `pid`'s resident memory once it is less than `bound` over `reference`,
/// or after a while if it never is: memory is given back just after an
/// answer is written (and the sandbox returns an instance's pages in the
/// background), so the first reading may come before it.
fn settled(pid: u32, reference: f64, bound: f64) -> f64 {
    let started = std::time::Instant::now();
    loop {
        let (now, _) = resident(pid);
        if now - reference < bound || started.elapsed() > std::time::Duration::from_secs(30) {
            return now;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}

fn mib(bytes: usize) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}

fn answered(answer: Option<Value>, what: &str) -> Value {
    let answer = answer.unwrap_or_else(|| panic!("the host died during {what}"));
    assert!(answer["error"].is_null(), "{what}: {answer}");
    answer
}

#[test]
fn a_large_request_and_its_answer_cost_memory_on_the_order_of_their_size() {
    if !Path::new("/proc/self/clear_refs").exists() {
        eprintln!("skipped: no /proc/<pid>/clear_refs on this system");
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let host = Host::start_alone(&dir.path().join("data"), "keep-recent");
    let pid = host.pid();
    answered(host.call("hello", json!({"protocol": 1})), "hello");
    // The engine is loaded and has served a session before the baseline.
    answered(
        host.call(
            "ingest",
            json!({"sessionId": "warm", "messages": [{"role": "user", "content": "hi"}]}),
        ),
        "the warm-up",
    );

    let tiny: Value = serde_json::from_str(TINY).expect("JSON");
    let count = LINE_BYTES / (TINY.len() + 1);
    let messages = vec![tiny; count];
    // The session's id has the prefix of the server's reverse-call ids, so
    // the line is also looked at as a possible answer to one: that look
    // must not read the request into a tree either.
    let session = "srv-large";
    let line = mib(json!({"sessionId": session, "messages": messages})
        .to_string()
        .len());
    let (base, _) = resident(pid);
    reset_peak(pid);
    answered(
        host.call(
            "ingest",
            json!({"sessionId": session, "messages": messages}),
        ),
        "the ingest",
    );
    let (held, peak) = resident(pid);
    let ingest_peak = peak - base;
    assert!(
        ingest_peak < 13.0 * line,
        "a {line:.1} MiB ingest of {count} tiny messages peaked {ingest_peak:.0} MiB over the baseline"
    );

    reset_peak(pid);
    let prompt = answered(
        host.call(
            "assemble",
            json!({"sessionId": session, "tokenBudget": 1_000_000_000u64}),
        ),
        "the assemble",
    );
    assert_eq!(
        prompt["result"]["messages"].as_array().map(Vec::len),
        Some(count),
        "keep-recent keeps every message within the budget"
    );
    let answer = mib(prompt["result"].to_string().len());
    let (_, peak) = resident(pid);
    let assemble_peak = peak - held;
    let after = settled(pid, held, answer / 2.0);
    assert!(
        assemble_peak < 7.0 * answer,
        "a {answer:.1} MiB prompt peaked {assemble_peak:.0} MiB over what the session holds"
    );
    assert!(
        after - held < answer / 2.0,
        "{:.0} MiB stayed resident after a {answer:.1} MiB answer",
        after - held
    );

    answered(
        host.call("closeSession", json!({"sessionId": session})),
        "closeSession",
    );
    let closed = settled(pid, base, line / 2.0);
    eprintln!(
        "{line:.1} MiB line: ingest peak +{ingest_peak:.0} MiB, held +{:.0}; \
         {answer:.1} MiB prompt: peak +{assemble_peak:.0}, left +{:.0}; closed: +{:.0}",
        held - base,
        after - held,
        closed - base
    );
    // What may stay is not the session's: the engine instance's own memory
    // (bounded by its budget, not by the line) and the allocator's slack.
    assert!(
        closed - base < line / 2.0,
        "{:.0} MiB stayed resident after the session of a {line:.1} MiB line was closed",
        closed - base
    );
}
