//! Many hosts on one PostgreSQL: 1, 2 and 4 in-process `ctxbox serve`
//! services (each its own runtime, connection pool and data directory, as
//! separate machines would have) sharing the database a URL names. Sessions
//! are routed to hosts by number, as a gateway routes by session key; each
//! turn is an `assemble` of the new user message and a `commitTurn` of the
//! answer, both under the session's lease. Turns per second, each request's
//! p50 and p99, and the store round trips a turn costs.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use ctxbox_host::runtime::Runtime;
use ctxbox_host::runtime::config::Config;
use ctxbox_host::serve::{Service, serve};
use ctxbox_host::store::{StoreConfig, StoreKind};
use serde_json::json;
use tokio::io::BufReader;
use tokio::task::JoinHandle;

use super::measure::human;
use super::serve_client::Connection;
use super::{Options, Row};

/// Host counts measured.
const HOSTS: [usize; 3] = [1, 2, 4];

/// Sessions driven at once, across all hosts.
const CONCURRENT: usize = 16;

/// Turns of each session.
const TURNS: usize = 10;

/// One row per host count, when a database is given.
pub async fn rows(options: &Options, rows: &mut Vec<Row>) -> anyhow::Result<()> {
    let Some(url) = &options.postgres else {
        rows.push(Row::skipped(
            "shared store: 1, 2 and 4 hosts on one PostgreSQL",
            "give `--postgres URL`",
        ));
        return Ok(());
    };
    let sessions = if options.quick { 32 } else { 200 };
    let run = std::process::id();
    for hosts in HOSTS {
        let cluster = Cluster::start(url, hosts).await?;
        let trips_before = cluster.round_trips();
        let started = Instant::now();
        let timings = Arc::new(Timings::default());
        let next = Arc::new(Mutex::new(0usize));
        let mut drivers = tokio::task::JoinSet::new();
        for _ in 0..CONCURRENT {
            let (connections, timings, next) =
                (cluster.connections.clone(), timings.clone(), next.clone());
            drivers.spawn(async move {
                loop {
                    let session = {
                        let mut next = next.lock().unwrap_or_else(PoisonError::into_inner);
                        if *next == sessions {
                            return anyhow::Ok(());
                        }
                        *next += 1;
                        *next - 1
                    };
                    let host = &connections[session % connections.len()];
                    let id = format!("bench-{run}-{hosts}h-{session}");
                    drive(host, &id, &timings).await?;
                }
            });
        }
        while let Some(done) = drivers.join_next().await {
            done??;
        }
        let elapsed = started.elapsed();
        let round_trips = cluster.round_trips() - trips_before;
        cluster.stop().await?;
        let turns = sessions * TURNS;
        let (assemble, commit) = timings.percentiles();
        rows.push(Row {
            what: format!(
                "shared store: {hosts} host(s) on one PostgreSQL, {sessions} sessions × {TURNS} turns, {CONCURRENT} at once"
            ),
            figure: format!(
                "{:.0} turns/s; assemble p50 {} p99 {}; commitTurn p50 {} p99 {}; {:.1} store round trips a turn",
                turns as f64 / elapsed.as_secs_f64(),
                human(assemble.0),
                human(assemble.1),
                human(commit.0),
                human(commit.1),
                round_trips as f64 / turns as f64,
            ),
            target: "measured (issue 24)".into(),
            met: None,
        });
    }
    Ok(())
}

/// One session's turns through `host`.
async fn drive(host: &Connection, id: &str, timings: &Timings) -> anyhow::Result<()> {
    let mut length = 0usize;
    for turn in 0..TURNS {
        let question = json!({"role": "user", "content": format!("question {turn} {}", "word ".repeat(40)),
                              "timestamp": turn * 10});
        let started = Instant::now();
        let answer = host
            .call(
                "assemble",
                json!({"sessionId": id, "sync": {"base": length, "messages": [question]}}),
            )
            .await?;
        timings.assembled(started.elapsed());
        anyhow::ensure!(answer["error"].is_null(), "assemble failed: {answer}");
        length += 1;
        let reply = json!({"role": "assistant",
                           "content": [{"type": "text", "text": format!("answer {turn} {}", "word ".repeat(60))}],
                           "timestamp": turn * 10 + 1});
        let started = Instant::now();
        let committed = host
            .call(
                "commitTurn",
                json!({"sessionId": id, "advancementKey": format!("{id}-{turn}"), "messages": [reply]}),
            )
            .await?;
        timings.committed(started.elapsed());
        anyhow::ensure!(
            committed["error"].is_null(),
            "commitTurn failed: {committed}"
        );
        length += 1;
    }
    Ok(())
}

/// `hosts` services on the database, each with its connection.
struct Cluster {
    services: Vec<Arc<Service>>,
    connections: Arc<Vec<Connection>>,
    servers: Vec<JoinHandle<std::io::Result<()>>>,
    _dirs: Vec<tempfile::TempDir>,
}

impl Cluster {
    async fn start(url: &str, hosts: usize) -> anyhow::Result<Self> {
        let (mut services, mut connections, mut servers, mut dirs) =
            (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        for _ in 0..hosts {
            let dir = tempfile::tempdir()?;
            let runtime = Runtime::new(Config {
                data_dir: Some(dir.path().to_owned()),
                store: StoreConfig {
                    kind: StoreKind::Postgres,
                    url: Some(url.to_owned()),
                    ..StoreConfig::default()
                },
                ..Config::default()
            })?;
            let service = Arc::new(Service::new(runtime, Some("keep-recent".into()))?);
            let (client, server) = tokio::io::duplex(1 << 20);
            let (read, write) = tokio::io::split(server);
            services.push(service.clone());
            servers.push(tokio::spawn(serve(service, BufReader::new(read), write)));
            let connection = Connection::open(client);
            connection.call("hello", json!({"protocol": 2})).await?;
            // The engine loaded before the clock starts (`info` loads it).
            connection.call("info", json!({})).await?;
            connections.push(connection);
            dirs.push(dir);
        }
        Ok(Self {
            services,
            connections: Arc::new(connections),
            servers,
            _dirs: dirs,
        })
    }

    /// Every host's store round trips so far.
    fn round_trips(&self) -> u64 {
        self.services
            .iter()
            .filter_map(|service| service.live_figures().store_round_trips)
            .sum()
    }

    async fn stop(self) -> anyhow::Result<()> {
        for connection in self.connections.iter() {
            connection.close().await;
        }
        for server in self.servers {
            server.await??;
        }
        Ok(())
    }
}

/// Every request's time, by method.
#[derive(Default)]
struct Timings {
    assemble: Mutex<Vec<Duration>>,
    commit: Mutex<Vec<Duration>>,
}

impl Timings {
    fn assembled(&self, took: Duration) {
        self.assemble
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(took);
    }

    fn committed(&self, took: Duration) {
        self.commit
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(took);
    }

    /// (p50, p99) of assemble, then of commitTurn.
    fn percentiles(&self) -> ((Duration, Duration), (Duration, Duration)) {
        let of = |samples: &Mutex<Vec<Duration>>| {
            let mut samples = samples
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .clone();
            samples.sort_unstable();
            let at = |share: f64| {
                samples
                    .get(
                        ((samples.len() as f64 * share) as usize)
                            .min(samples.len().saturating_sub(1)),
                    )
                    .copied()
                    .unwrap_or_default()
            };
            (at(0.50), at(0.99))
        };
        (of(&self.assemble), of(&self.commit))
    }
}
