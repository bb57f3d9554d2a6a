//! Many hosts, one PostgreSQL: four `serve-host` processes (the `ctxbox
//! serve --store` service) share one database; 200 sessions × 10 turns are
//! routed to them by session key; one host is killed with SIGKILL in the
//! middle and its sessions go to the others, which retry the unanswered turn
//! with the same advancement key. Afterwards every acknowledged turn is in
//! the store, each session's turns are there once each, in turn order, and
//! two hosts racing on the same turn commit it once. And fencing: a host
//! stopped (SIGSTOP) past its lease while another takes its session over
//! has its writes refused when it continues (SIGCONT).

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{Receiver, Sender, channel};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ctxbox_host::serve::PostgresCommits;
use ctxbox_host::serve::commits::TurnCommits;
use ctxbox_host::store::Postgres;
use serde_json::{Value, json};

use crate::pg_cluster;
use ctxbox_tests::guests;

const HOST: &str = env!("CARGO_BIN_EXE_serve-host");
const HOSTS: usize = 4;
const SESSIONS: usize = 200;
const TURNS: usize = 10;
const WORKERS: usize = 25;
/// Short, so the killed host's sessions are free again soon.
const LEASE_MS: u64 = 1_500;

/// One host process and the requests waiting for its answers.
pub(crate) struct Host {
    child: Mutex<Child>,
    stdin: Mutex<ChildStdin>,
    waiting: Arc<Mutex<HashMap<u64, Sender<Option<Value>>>>>,
    next_id: AtomicUsize,
    alive: std::sync::atomic::AtomicBool,
    /// The host's own requests to its client (reverse calls).
    reverse: Mutex<Receiver<Value>>,
}

impl Host {
    pub(crate) fn start(url: &str, data_dir: &std::path::Path) -> Arc<Self> {
        Self::spawn(&[url, &data_dir.display().to_string(), &LEASE_MS.to_string()])
    }

    /// A host with no shared store whose requests `engine` serves.
    pub(crate) fn start_alone(data_dir: &std::path::Path, engine: &str) -> Arc<Self> {
        Self::spawn(&[
            "-",
            &data_dir.display().to_string(),
            &LEASE_MS.to_string(),
            engine,
        ])
    }

    fn spawn(args: &[&str]) -> Arc<Self> {
        let mut child = Command::new(HOST)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("starts a host");
        let stdin = child.stdin.take().expect("stdin");
        let stdout = child.stdout.take().expect("stdout");
        let waiting: Arc<Mutex<HashMap<u64, Sender<Option<Value>>>>> = Arc::default();
        let (reverse_to, reverse) = channel();
        let host = Arc::new(Self {
            child: Mutex::new(child),
            stdin: Mutex::new(stdin),
            waiting: waiting.clone(),
            next_id: AtomicUsize::new(1),
            alive: true.into(),
            reverse: Mutex::new(reverse),
        });
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                let answer: Value = serde_json::from_str(&line).expect("answers are JSON");
                if !answer["method"].is_null() {
                    let _ = reverse_to.send(answer);
                    continue;
                }
                let id = answer["id"].as_u64().expect("answers carry our id");
                if let Some(sender) = waiting.lock().unwrap().remove(&id) {
                    let _ = sender.send(Some(answer));
                }
            }
            // The host is gone: whatever it did not answer never will be.
            for (_, sender) in waiting.lock().unwrap().drain() {
                let _ = sender.send(None);
            }
        });
        host
    }

    /// The answer to `method`, or `None` if the host died first.
    pub(crate) fn call(&self, method: &str, params: Value) -> Option<Value> {
        self.send(method, params)
            .recv_timeout(Duration::from_secs(90))
            .ok()
            .flatten()
    }

    /// Sends `method`; its answer (`None` if the host died first) arrives
    /// on the channel.
    fn send(&self, method: &str, params: Value) -> Receiver<Option<Value>> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed) as u64;
        let (sender, answer) = channel();
        self.waiting.lock().unwrap().insert(id, sender.clone());
        let line = json!({"id": id, "method": method, "params": params, "deadlineMs": 60_000});
        if self.write(&line).is_err() {
            self.waiting.lock().unwrap().remove(&id);
            let _ = sender.send(None);
        }
        answer
    }

    fn write(&self, line: &Value) -> std::io::Result<()> {
        let mut stdin = self.stdin.lock().unwrap();
        writeln!(stdin, "{line}").and_then(|()| stdin.flush())
    }

    /// The next request the host sends its client.
    fn next_reverse(&self) -> Value {
        self.reverse
            .lock()
            .unwrap()
            .recv_timeout(Duration::from_secs(120))
            .expect("a reverse request")
    }

    /// The host's process id.
    pub(crate) fn pid(&self) -> u32 {
        self.child.lock().unwrap().id()
    }

    /// Sends the process `signal` (`STOP`, `CONT`).
    fn signal(&self, signal: &str) {
        let pid = self.pid();
        let status = Command::new("kill")
            .arg(format!("-{signal}"))
            .arg(pid.to_string())
            .status()
            .expect("kill runs");
        assert!(status.success(), "kill -{signal} {pid}");
    }

    /// Requests sent and not answered yet.
    fn in_flight(&self) -> usize {
        self.waiting.lock().unwrap().len()
    }

    fn kill(&self) {
        self.alive.store(false, Ordering::SeqCst);
        self.child.lock().unwrap().kill().expect("SIGKILL");
    }

    fn is_alive(&self) -> bool {
        self.alive.load(Ordering::SeqCst)
    }
}

impl Drop for Host {
    fn drop(&mut self) {
        let mut child = self.child.lock().unwrap();
        let _ = child.kill();
        let _ = child.wait();
    }
}

/// The host a session goes to: its home host by key while that is alive,
/// else one of the live ones by key (only a dead host's sessions move).
fn route(hosts: &[Arc<Host>], session: usize) -> usize {
    let home = session % hosts.len();
    if hosts[home].is_alive() {
        return home;
    }
    let live: Vec<usize> = (0..hosts.len())
        .filter(|&index| hosts[index].is_alive())
        .collect();
    live[session % live.len()]
}

/// An acknowledged commit.
pub(crate) struct Ack {
    /// `committed` or `duplicate`.
    pub status: String,
    /// Whether it took more than one attempt.
    pub retried: bool,
    /// The host that answered.
    pub host: usize,
    /// How many messages of the session that host holds afterwards.
    pub length: u64,
}

fn turn_messages(session: usize, turn: usize) -> Value {
    json!([
        {"role": "user", "content": format!("session {session} turn {turn}"), "timestamp": 1},
        {"role": "assistant", "content": [{"type": "text", "text": format!("answer {turn}")}],
         "stopReason": "stop", "timestamp": 2}
    ])
}

/// Commits one turn, retrying (on another host if its host died) until it
/// is acknowledged; with the session's earlier turns as a sync when the
/// host answering does not know the session (its first turn: the store has
/// nothing of it yet).
pub(crate) fn commit(hosts: &[Arc<Host>], session: usize, turn: usize) -> Ack {
    let params = json!({
        "sessionId": format!("s{session:03}"),
        "advancementKey": format!("s{session:03}:{turn}"),
        "messages": turn_messages(session, turn),
    });
    let earlier: Vec<Value> = (0..turn)
        .flat_map(|earlier| {
            turn_messages(session, earlier)
                .as_array()
                .cloned()
                .unwrap_or_default()
        })
        .collect();
    let mut retried = false;
    let mut resend = false;
    let started = Instant::now();
    loop {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "turn {session}:{turn} never committed"
        );
        let index = route(hosts, session);
        let host = &hosts[index];
        let mut attempt = params.clone();
        if std::mem::take(&mut resend) {
            attempt["sync"] = json!({"base": 0, "messages": earlier});
        }
        match host.call("commitTurn", attempt) {
            Some(answer) if answer["error"].is_null() => {
                return Ack {
                    status: answer["result"]["status"]
                        .as_str()
                        .expect("a status")
                        .to_owned(),
                    retried,
                    host: index,
                    length: answer["result"]["length"].as_u64().expect("a length"),
                };
            }
            Some(answer) if answer["error"]["code"] == "session-unknown" => {
                resend = true;
                continue;
            }
            Some(answer) => {
                // `session-busy` while a dead host's lease runs out.
                assert_eq!(answer["error"]["code"], "session-busy", "{answer}");
            }
            None => assert!(!host.is_alive(), "a live host stopped answering"),
        }
        retried = true;
    }
}

#[test]
fn four_hosts_lose_nothing_when_one_is_killed_mid_run() {
    let Some(url) = pg_cluster::database("four_hosts_lose_nothing") else {
        return;
    };
    let dirs: Vec<tempfile::TempDir> = (0..HOSTS)
        .map(|_| tempfile::tempdir().expect("dir"))
        .collect();
    let hosts: Arc<Vec<Arc<Host>>> = Arc::new(
        dirs.iter()
            .map(|dir| Host::start(&url, dir.path()))
            .collect(),
    );
    for host in hosts.iter() {
        let hello = host
            .call("hello", json!({"protocol": 1}))
            .expect("a host answers");
        assert_eq!(hello["result"]["protocol"], 1, "{hello}");
    }

    let started = Instant::now();
    let acknowledged = Arc::new(AtomicUsize::new(0));
    // Per session: (turn, ack) of every acknowledged commit.
    let acks: Arc<Mutex<HashMap<usize, Vec<(usize, Ack)>>>> = Arc::default();
    let retried = Arc::new(AtomicUsize::new(0));
    let workers: Vec<_> = (0..WORKERS)
        .map(|worker| {
            let (hosts, acks, acknowledged, retried) = (
                hosts.clone(),
                acks.clone(),
                acknowledged.clone(),
                retried.clone(),
            );
            std::thread::spawn(move || {
                let mine: Vec<usize> = (worker..SESSIONS).step_by(WORKERS).collect();
                for turn in 0..TURNS {
                    for &session in &mine {
                        let ack = commit(&hosts, session, turn);
                        if ack.retried {
                            retried.fetch_add(1, Ordering::Relaxed);
                        }
                        acks.lock()
                            .unwrap()
                            .entry(session)
                            .or_default()
                            .push((turn, ack));
                        acknowledged.fetch_add(1, Ordering::Relaxed);
                    }
                }
            })
        })
        .collect();
    // Kill host 0 in the middle of the run, with requests in flight on it.
    while acknowledged.load(Ordering::Relaxed) < SESSIONS * TURNS / 2 || hosts[0].in_flight() < 3 {
        assert!(
            !workers.iter().any(std::thread::JoinHandle::is_finished),
            "a client stopped before the kill"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    hosts[0].kill();
    for worker in workers {
        worker.join().expect("a worker finished");
    }
    let elapsed = started.elapsed();
    eprintln!(
        "multi-host: {} turns in {:.1} s ({:.0} turns/s) on {HOSTS} hosts, one killed; {} turns retried on another host",
        SESSIONS * TURNS,
        elapsed.as_secs_f64(),
        (SESSIONS * TURNS) as f64 / elapsed.as_secs_f64(),
        retried.load(Ordering::Relaxed)
    );
    assert!(
        retried.load(Ordering::Relaxed) > 0,
        "the kill hit sessions of the killed host"
    );

    // Everything acknowledged is in the store, once, in turn order.
    let commits = PostgresCommits::new(Postgres::connect(&url, 2).expect("connects"));
    let acks = acks.lock().unwrap();
    let mut duplicates_acknowledged = 0;
    for session in 0..SESSIONS {
        let id = format!("s{session:03}");
        let expected: Vec<String> = (0..TURNS).map(|turn| format!("{id}:{turn}")).collect();
        assert_eq!(
            commits.keys(&id).expect("lists"),
            expected,
            "session {id}: every turn once, in turn order"
        );
        let turns: Vec<usize> = acks[&session].iter().map(|(turn, _)| *turn).collect();
        assert_eq!(
            turns,
            (0..TURNS).collect::<Vec<_>>(),
            "session {id}: acknowledged in order"
        );
        duplicates_acknowledged += acks[&session]
            .iter()
            .filter(|(_, ack)| ack.status == "duplicate")
            .count();
        // Served by its home host, or by that and then one other after the
        // kill; never back and forth. Each host's copy of the session holds
        // the turns it committed (2 messages each) and, after a move, those
        // the previous host stored (loaded from the store, not resent), never
        // more than the session has.
        let served: Vec<usize> = acks[&session].iter().map(|(_, ack)| ack.host).collect();
        let moves = served.windows(2).filter(|pair| pair[0] != pair[1]).count();
        assert!(served[0] == session % HOSTS, "session {id}: starts at home");
        assert!(
            moves == 0 || (moves == 1 && served[0] == 0),
            "session {id}: moved only off the killed host: {served:?}"
        );
        let mut committed_on: HashMap<usize, u64> = HashMap::new();
        let mut last_length = 0;
        for (turn, ack) in &acks[&session] {
            let count = committed_on.entry(ack.host).or_default();
            if ack.status == "committed" {
                *count += 1;
            }
            assert!(
                ack.length >= 2 * *count && ack.length <= 2 * (*turn as u64 + 1),
                "session {id} turn {turn}: the host's copy holds {} messages",
                ack.length
            );
            assert!(
                ack.length >= last_length,
                "session {id} turn {turn}: shrank"
            );
            last_length = ack.length;
            if served[0] == served[served.len() - 1] {
                assert_eq!(
                    ack.length,
                    2 * (*turn as u64 + 1),
                    "session {id}: never moved"
                );
            }
        }
    }
    // A `duplicate` only ever answers a retry of a turn the killed host
    // committed without answering.
    assert!(duplicates_acknowledged <= retried.load(Ordering::Relaxed));

    // Two hosts racing on the same turn of a session: it commits once.
    let live: Vec<Arc<Host>> = hosts
        .iter()
        .filter(|host| host.is_alive())
        .cloned()
        .collect();
    // The session is told to one host (and so to the store) first: a turn
    // is committed only to a session a host knows.
    let opened = live[0]
        .call(
            "assemble",
            json!({"sessionId": "raced", "sync": {"base": 0, "messages": [
                {"role": "user", "content": "the session starts", "timestamp": 0}]}}),
        )
        .expect("answers");
    assert!(opened["error"].is_null(), "{opened}");
    let racers: Vec<_> = (0..2)
        .map(|index| {
            let host = live[index].clone();
            std::thread::spawn(move || {
                host.call(
                    "commitTurn",
                    json!({"sessionId": "raced", "advancementKey": "raced:0", "messages": turn_messages(0, 0)}),
                )
                .expect("answers")
            })
        })
        .collect();
    let answers: Vec<Value> = racers
        .into_iter()
        .map(|racer| racer.join().expect("joins"))
        .collect();
    let mut statuses: Vec<&str> = answers
        .iter()
        .map(|answer| answer["result"]["status"].as_str().unwrap_or("error"))
        .collect();
    statuses.sort();
    assert_eq!(statuses, ["committed", "duplicate"], "{answers:?}");
    assert_eq!(commits.keys("raced").expect("lists"), ["raced:0"]);
}

/// Fencing, with real processes: host A serves a call that waits on its
/// client (the engine asks for a completion) while it holds the session's
/// lease and the call's index write; A is stopped (SIGSTOP) until its lease
/// runs out, host B takes the session over and writes, then A continues
/// (SIGCONT). A's write is refused (the client hears `session-busy`, to
/// retry), B's stays, and A's engine is not blamed for it.
#[test]
fn a_host_stalled_past_its_lease_has_its_writes_refused() {
    let Some(url) = pg_cluster::database("a_host_stalled_past_its_lease") else {
        return;
    };
    let dirs: Vec<tempfile::TempDir> = (0..2).map(|_| tempfile::tempdir().expect("dir")).collect();
    let (a, b) = (
        Host::start(&url, dirs[0].path()),
        Host::start(&url, dirs[1].path()),
    );
    for host in [&a, &b] {
        let hello = host
            .call(
                "hello",
                json!({"protocol": 2, "capabilities": ["complete"]}),
            )
            .expect("a host answers");
        assert_eq!(hello["result"]["protocol"], 2, "{hello}");
        let loaded = host
            .call("info", json!({"engine": guests::POWERS_PROBE}))
            .expect("loads the engine");
        assert!(loaded["error"].is_null(), "{loaded}");
    }
    let assemble = |command: &str| {
        json!({
            "sessionId": "s", "engine": guests::POWERS_PROBE, "prompt": command,
            "sync": {"base": 0, "messages": [
                {"role": "user", "content": "hello", "timestamp": 1}
            ]}
        })
    };

    let stalled = a.send(
        "assemble",
        assemble("complete-then-put engine stale written by the stalled host"),
    );
    let asked = a.next_reverse();
    assert_eq!(asked["method"], "complete", "{asked}");
    a.signal("STOP");
    // Long past A's lease: its renewals are stopped with it.
    std::thread::sleep(Duration::from_millis(LEASE_MS * 2));
    let taken = b
        .call(
            "assemble",
            assemble("put engine current written by the new holder"),
        )
        .expect("B answers");
    assert!(taken.to_string().contains("put=ok"), "{taken}");
    a.signal("CONT");
    a.write(&json!({"id": asked["id"], "result": {"text": "nothing to add"}}))
        .expect("answers the reverse call");

    let refused = stalled
        .recv_timeout(Duration::from_secs(90))
        .expect("A answers")
        .expect("A is alive");
    assert_eq!(refused["error"]["code"], "session-busy", "{refused}");
    assert!(
        refused["error"]["message"]
            .as_str()
            .is_some_and(|message| message.contains("took the session over")),
        "{refused}"
    );
    // Only B's document was stored; and A, asked again, is served by the
    // engine: a lost lease is not the engine's failure.
    let searched = a
        .call("assemble", assemble("search engine written"))
        .expect("A answers");
    assert!(searched.to_string().contains("hits=current"), "{searched}");
    assert!(!searched.to_string().contains("stale"), "{searched}");
}

/// A session that moves between hosts is loaded from the shared store, not
/// resent: host B takes up where host A stopped with only the new message,
/// and A, whose copy is now older than the store's, does the same.
#[test]
fn a_session_that_moves_is_loaded_from_the_store_not_resent() {
    let Some(url) = pg_cluster::database("a_session_that_moves") else {
        return;
    };
    let dirs: Vec<tempfile::TempDir> = (0..2).map(|_| tempfile::tempdir().expect("dir")).collect();
    let (a, b) = (
        Host::start(&url, dirs[0].path()),
        Host::start(&url, dirs[1].path()),
    );
    for host in [&a, &b] {
        let hello = host
            .call("hello", json!({"protocol": 1}))
            .expect("a host answers");
        assert!(hello["error"].is_null(), "{hello}");
    }
    let message =
        |n: usize| json!({"role": "user", "content": format!("message {n}"), "timestamp": n});
    let assemble = |host: &Host, base: usize, anchor: Option<String>, new: &[usize]| {
        let messages: Vec<Value> = new.iter().map(|&n| message(n)).collect();
        let digests: Vec<String> = new.iter().map(|n| format!("d{n}")).collect();
        host.call(
            "assemble",
            json!({"sessionId": "moving", "sync": {
                "base": base, "baseDigest": anchor, "messages": messages, "digests": digests
            }}),
        )
        .expect("answers")
    };
    let texts = |answer: &Value| -> Vec<String> {
        answer["result"]["messages"]
            .as_array()
            .unwrap_or_else(|| panic!("messages: {answer}"))
            .iter()
            .map(|message| message["content"].as_str().unwrap_or_default().to_owned())
            .collect()
    };

    let first = assemble(&a, 0, None, &[0, 1, 2]);
    assert_eq!(texts(&first), ["message 0", "message 1", "message 2"]);
    // B has never seen the session: it loads A's copy and takes the new
    // message only.
    let moved = assemble(&b, 3, Some("d2".into()), &[3]);
    assert!(moved["error"].is_null(), "no resend asked: {moved}");
    assert_eq!(texts(&moved).len(), 4, "{moved}");
    // A's copy stops at 3: the store's is newer, and A takes it up.
    let back = assemble(&a, 4, Some("d3".into()), &[4]);
    assert!(back["error"].is_null(), "no resend asked: {back}");
    assert_eq!(
        texts(&back),
        [
            "message 0",
            "message 1",
            "message 2",
            "message 3",
            "message 4"
        ]
    );
    // A client whose anchor is not the stored one is still told to resend.
    let wrong = assemble(&b, 5, Some("not-d4".into()), &[5]);
    assert_eq!(wrong["error"]["code"], "history-mismatch", "{wrong}");

    // A turn committed on A is stored with its commit: B takes it up.
    let turn = json!({"sessionId": "moving", "advancementKey": "turn-1",
                      "messages": [message(5)], "digests": ["d5"]});
    let committed = a.call("commitTurn", turn.clone()).expect("answers");
    assert_eq!(committed["result"]["status"], "committed", "{committed}");
    let after_turn = assemble(&b, 6, Some("d5".into()), &[6]);
    assert!(
        after_turn["error"].is_null(),
        "no resend asked: {after_turn}"
    );
    assert_eq!(texts(&after_turn).len(), 7, "{after_turn}");
    assert_eq!(texts(&after_turn)[5], "message 5");
    // The same turn again, on B: a duplicate, which stores nothing.
    let again = b.call("commitTurn", turn).expect("answers");
    assert_eq!(again["result"]["status"], "duplicate", "{again}");
    let on_a = assemble(&a, 7, Some("d6".into()), &[]);
    assert!(on_a["error"].is_null(), "no resend asked: {on_a}");
    assert_eq!(texts(&on_a).len(), 7, "{on_a}");
}
