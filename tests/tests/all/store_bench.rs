//! The shared store's figures for `BENCHMARKS.md` (ignored by default; a
//! measurement, not a check):
//!
//! ```sh
//! cargo test --release -p ctxbox-tests --test all store_bench -- --ignored --nocapture
//! ```
//!
//! Append latency (one message per durable append) with the embedded store
//! (a session file, `fsync = "always"`) and with PostgreSQL, and committed
//! turns per second through 1, 2 and 4 `serve-host` processes sharing one
//! PostgreSQL on this machine.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use ctxbox_host::contract::types::AgentMessage;
use ctxbox_host::store::Postgres;
use ctxbox_host::transcript::{NewSession, PostgresLogs, TranscriptConfig, TranscriptStore};
use serde_json::json;

use crate::multi_host::{Host, commit};
use crate::pg_cluster;

const APPENDS: usize = 1_000;
const SESSIONS: usize = 200;
const TURNS: usize = 10;
const CLIENTS: usize = 32;

fn percentiles(mut samples: Vec<Duration>) -> (f64, f64) {
    samples.sort();
    let at = |q: f64| samples[((samples.len() - 1) as f64 * q) as usize].as_secs_f64() * 1e3;
    (at(0.50), at(0.99))
}

fn append_latency(store: &TranscriptStore, path: &std::path::Path) -> (f64, f64) {
    let transcript = store.create(path, NewSession::default()).expect("creates");
    let message = [AgentMessage::user_text(
        "a message of about a hundred bytes, the size of a short chat turn in a real session",
    )];
    let samples = (0..APPENDS)
        .map(|_| {
            let started = Instant::now();
            transcript.append(&message).expect("appends");
            started.elapsed()
        })
        .collect();
    percentiles(samples)
}

/// Committed turns per second, `CLIENTS` clients over `hosts` hosts.
fn turns_per_second(url: &str, hosts: usize) -> f64 {
    let dirs: Vec<tempfile::TempDir> = (0..hosts)
        .map(|_| tempfile::tempdir().expect("dir"))
        .collect();
    let hosts: Arc<Vec<Arc<Host>>> = Arc::new(
        dirs.iter()
            .map(|dir| Host::start(url, dir.path()))
            .collect(),
    );
    for host in hosts.iter() {
        host.call("hello", json!({"protocol": 1}))
            .expect("a host answers");
    }
    let next = Arc::new(AtomicUsize::new(0));
    let started = Instant::now();
    let clients: Vec<_> = (0..CLIENTS)
        .map(|_| {
            let (hosts, next) = (hosts.clone(), next.clone());
            std::thread::spawn(move || {
                loop {
                    let index = next.fetch_add(1, Ordering::Relaxed);
                    if index >= SESSIONS * TURNS {
                        break;
                    }
                    // Turn-major order: every session's turn 0, then turn 1, …
                    let (turn, session) = (index / SESSIONS, index % SESSIONS);
                    assert_eq!(commit(&hosts, session, turn).status, "committed");
                }
            })
        })
        .collect();
    for client in clients {
        client.join().expect("a client finished");
    }
    (SESSIONS * TURNS) as f64 / started.elapsed().as_secs_f64()
}

#[test]
#[ignore = "a measurement for BENCHMARKS.md; run with --ignored --nocapture"]
fn store_bench() {
    let Some(url) = pg_cluster::database("store_bench") else {
        return;
    };
    let dir = tempfile::tempdir().expect("dir");
    let (p50, p99) = append_latency(
        &TranscriptStore::new(TranscriptConfig::default()),
        &dir.path().join("bench.jsonl"),
    );
    println!("append latency, embedded (file, fsync always): p50 {p50:.3} ms, p99 {p99:.3} ms");
    let postgres = Postgres::connect(&url, 4).expect("connects");
    let logs = TranscriptStore::with_logs(
        TranscriptConfig::default(),
        Arc::new(PostgresLogs::new(postgres)),
    );
    let (p50, p99) = append_latency(&logs, std::path::Path::new("/bench/append.jsonl"));
    println!("append latency, postgres: p50 {p50:.3} ms, p99 {p99:.3} ms");
    for hosts in [1, 2, 4] {
        // A database per run: the sessions and keys start afresh.
        let url = pg_cluster::database(&format!("store_bench_{hosts}")).expect("the server runs");
        let rate = turns_per_second(&url, hosts);
        println!("commitTurn through {hosts} serve host(s), {CLIENTS} clients: {rate:.0} turns/s");
    }
}
