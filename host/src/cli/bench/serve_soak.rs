//! A sidecar that lives for weeks: many sessions streamed through one
//! `ctxbox serve` (its real request loop, over an in-process pipe) with a
//! few hundred active at a time and none ever closed by the client, as a
//! gateway drives it. The server's resident memory is read every thousand
//! sessions; with `[serve]`'s bounds it must stay flat once the active set
//! is warm.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

use ctxbox_host::runtime::Runtime;
use ctxbox_host::runtime::config::Config;
use ctxbox_host::serve::{Service, serve};
use serde_json::{Value, json};
use tokio::io::BufReader;

use super::measure::{mib, resident_bytes};
use super::serve_client::Connection;
use super::{Options, Row};

/// Sessions in progress at once.
const ACTIVE: usize = 200;

/// Turns of each session.
const TURNS: usize = 5;

/// Tasks sending requests at once (each drives its share of the active
/// sessions in turn).
const DRIVERS: usize = 8;

/// Memory is read after every this many finished sessions.
const SAMPLE_EVERY: usize = 1_000;

/// The row: turns per second and resident memory every thousand sessions.
pub async fn rows(options: &Options, rows: &mut Vec<Row>) -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let config = Config {
        data_dir: Some(dir.path().to_owned()),
        ..Config::default()
    };
    let bounds = config.serve.clone();
    let service = Arc::new(Service::new(
        Runtime::new(config)?,
        Some("keep-recent".into()),
    )?);
    let (client, server) = tokio::io::duplex(1 << 20);
    let (server_read, server_write) = tokio::io::split(server);
    let serving = tokio::spawn(serve(service, BufReader::new(server_read), server_write));
    let connection = Connection::open(client);
    connection.call("hello", json!({"protocol": 2})).await?;

    let total = options.serve_sessions;
    let started = Instant::now();
    let progress = Arc::new(Progress::default());
    let mut drivers = tokio::task::JoinSet::new();
    for driver in 0..DRIVERS {
        let (connection, progress) = (connection.clone(), progress.clone());
        drivers.spawn(async move { drive(driver, total, &connection, &progress).await });
    }
    while let Some(done) = drivers.join_next().await {
        done??;
    }
    let elapsed = started.elapsed();
    let health = connection.call("health", json!({})).await?["result"].take();
    connection.close().await;
    serving.await??;

    let samples = progress.samples();
    let memory = samples
        .iter()
        .map(|(done, bytes)| format!("{done}: {:.0}", mib(*bytes)))
        .collect::<Vec<_>>()
        .join(", ");
    // Warm once the active set has turned over twice; flat means the last
    // reading is within a tenth (or 16 MiB) of the first warm one.
    let warm = samples.iter().find(|(done, _)| *done >= 2 * SAMPLE_EVERY);
    let flat = match (warm, samples.last()) {
        (Some((_, first)), Some((_, last))) => {
            let allowance = (*first / 10).max(16 << 20);
            Some(*last <= first + allowance)
        }
        _ => None,
    };
    let turns = progress.turns();
    rows.push(Row {
        what: format!(
            "serve soak: {total} sessions × {TURNS} turns through one `ctxbox serve`, {ACTIVE} active, never closed (maxSessions {}, idle {} s)",
            bounds.max_sessions, bounds.idle_session_seconds
        ),
        figure: format!(
            "{:.0} turns/s; resident MiB after N sessions {memory}; sessions held at the end {}, given up {}; {} resends",
            turns as f64 / elapsed.as_secs_f64(),
            health["sessions"],
            health["releasedSessions"],
            progress.resends()
        ),
        target: "flat once warm (last within 10% of the reading at 2,000)".into(),
        met: flat,
    });
    Ok(())
}

/// What every driver has done, shared.
#[derive(Default)]
struct Progress {
    state: Mutex<ProgressState>,
}

#[derive(Default)]
struct ProgressState {
    started: usize,
    finished: usize,
    turns: usize,
    resends: usize,
    samples: Vec<(usize, u64)>,
}

impl Progress {
    fn lock(&self) -> std::sync::MutexGuard<'_, ProgressState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The next session to start, if any are left of `total`.
    fn start(&self, total: usize) -> Option<usize> {
        let mut state = self.lock();
        (state.started < total).then(|| {
            state.started += 1;
            state.started - 1
        })
    }

    fn finished(&self) {
        let mut state = self.lock();
        state.finished += 1;
        if state.finished.is_multiple_of(SAMPLE_EVERY)
            && let Some(resident) = resident_bytes()
        {
            let finished = state.finished;
            state.samples.push((finished, resident.now));
        }
    }

    fn turned(&self, resent: bool) {
        let mut state = self.lock();
        state.turns += 1;
        state.resends += usize::from(resent);
    }

    fn samples(&self) -> Vec<(usize, u64)> {
        self.lock().samples.clone()
    }

    fn turns(&self) -> usize {
        self.lock().turns
    }

    fn resends(&self) -> usize {
        self.lock().resends
    }
}

/// One session as its client knows it.
struct ClientSession {
    id: String,
    messages: Vec<Value>,
    turns: usize,
}

/// Drives this driver's share of the active sessions round-robin, each
/// for [`TURNS`] turns, starting a new session when one finishes.
async fn drive(
    driver: usize,
    total: usize,
    connection: &Connection,
    progress: &Progress,
) -> anyhow::Result<()> {
    let share = ACTIVE / DRIVERS;
    let mut active: Vec<ClientSession> = Vec::new();
    loop {
        while active.len() < share {
            let Some(number) = progress.start(total) else {
                break;
            };
            active.push(ClientSession {
                id: format!("soak-{driver}-{number}"),
                messages: Vec::new(),
                turns: 0,
            });
        }
        if active.is_empty() {
            return Ok(());
        }
        let mut index = 0;
        while index < active.len() {
            let session = &mut active[index];
            let resent = turn(connection, session).await?;
            progress.turned(resent);
            if session.turns == TURNS {
                active.swap_remove(index);
                progress.finished();
            } else {
                index += 1;
            }
        }
    }
}

/// One turn: assemble with the user's message, commit the answer. Answers
/// whether the server had given the session up (and the client resent it).
async fn turn(connection: &Connection, session: &mut ClientSession) -> anyhow::Result<bool> {
    let number = session.turns;
    let base = session.messages.len();
    session.messages.push(json!({
        "role": "user",
        "content": format!("question {number} of {}: {}", session.id, "word ".repeat(80)),
        "timestamp": number * 10,
    }));
    let assemble = |sync: Value| json!({"sessionId": session.id, "tokenBudget": 4_000, "answer": "ranges", "sync": sync});
    let mut answer = connection
        .call(
            "assemble",
            assemble(json!({"base": base, "messages": &session.messages[base..]})),
        )
        .await?;
    let resent = answer["error"]["code"] == "history-mismatch";
    if resent {
        answer = connection
            .call(
                "assemble",
                assemble(json!({"base": 0, "messages": session.messages})),
            )
            .await?;
    }
    anyhow::ensure!(answer["error"].is_null(), "assemble failed: {answer}");
    let reply = json!({
        "role": "assistant",
        "content": [{"type": "text", "text": format!("answer {number}: {}", "word ".repeat(80))}],
        "timestamp": number * 10 + 1,
    });
    let commit = json!({"sessionId": session.id, "advancementKey": format!("{}-{number}", session.id),
                        "messages": [reply]});
    let mut committed = connection.call("commitTurn", commit.clone()).await?;
    // Given up between the assemble and the commit: the session is resent
    // with the commit.
    let unknown = committed["error"]["code"] == "session-unknown";
    if unknown {
        let mut resent = commit;
        resent["sync"] = json!({"base": 0, "messages": session.messages});
        committed = connection.call("commitTurn", resent).await?;
    }
    anyhow::ensure!(
        committed["error"].is_null(),
        "commitTurn failed: {committed}"
    );
    session.messages.push(reply);
    session.turns += 1;
    Ok(resent || unknown)
}
