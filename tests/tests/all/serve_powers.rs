//! The engine powers over the sidecar, tried by hostile clients: an answer
//! to a reverse `complete` too large or too long for its request, two
//! clients with models of their own on one server, a committed turn whose
//! engine found no free instance, and a flood of idle connections to the
//! metrics endpoint.

use std::time::Duration;

use ctxbox_host::runtime::config::Config;
use ctxbox_host::sandbox::SandboxConfig;
use ctxbox_host::serve::exposition;
use ctxbox_tests::guests;
use serde_json::{Value, json};

use super::serve::{Client, conversation, full_sync, load, reverse_request};

/// A server with `powers-probe` as its default engine, `max_instances`
/// instances at most, greeted by a client that answers `complete`.
async fn probe_server(dir: &std::path::Path, max_instances: u32) -> Client {
    let config = Config {
        data_dir: Some(dir.to_owned()),
        sandbox: SandboxConfig {
            call_timeout_ms: 20_000,
            max_instances,
            ..SandboxConfig::default()
        },
        ..Config::default()
    };
    let mut client = Client::with_config(config, Some(guests::POWERS_PROBE), 1 << 20);
    let hello = client
        .call(
            "hello",
            json!({"protocol": 2, "capabilities": ["complete"]}),
        )
        .await;
    assert_eq!(hello["result"]["protocol"], 2, "{hello}");
    load(&mut client, guests::POWERS_PROBE).await;
    client
}

/// Asks `powers-probe` (session `session`) for one completion, answers the
/// reverse call with `result`, and gives the probe's report.
async fn complete_answered_with(client: &mut Client, session: &str, result: Value) -> String {
    let id = client
        .send(
            "assemble",
            json!({"sessionId": session, "prompt": "complete 1", "sync": full_sync(&conversation(1))}),
        )
        .await;
    // Nothing else is pending: the next line is the engine's reverse call.
    let line = tokio::time::timeout(Duration::from_secs(60), client.lines.next_line())
        .await
        .expect("a line within a minute")
        .expect("read")
        .expect("the server is still answering");
    let asked: Value = serde_json::from_str(&line).expect("JSON");
    assert_eq!(
        asked["method"], "complete",
        "the engine's completion is asked of this client: {asked}"
    );
    assert_eq!(asked["params"]["maxTokens"], 64, "{asked}");
    let line = json!({"id": asked["id"], "result": result}).to_string();
    client.send_line(&line).await;
    let answer = client.answer(id).await;
    assert_eq!(answer["result"]["servedBy"], "powers-probe", "{answer}");
    answer["result"]["messages"][0].to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_clients_completion_answer_is_bounded_and_measured_by_the_host() {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut client = probe_server(dir.path(), 8).await;

    // 2 MiB: refused unread; the engine hears a failure it can handle.
    let report =
        complete_answered_with(&mut client, "s", json!({"text": "word ".repeat(400_000)})).await;
    assert!(
        report.contains("completed=0") && report.contains("over the 1048576 an answer may take"),
        "{report}"
    );

    // Within the byte cap but far over the request's 64 tokens, claiming a
    // trillion: cut to 64 tokens by the host's estimate, and counted so.
    let report = complete_answered_with(
        &mut client,
        "s",
        json!({"text": "word ".repeat(100_000), "outputTokens": 1_000_000_000_000u64}),
    )
    .await;
    assert!(report.contains("powers: completed=1"), "{report}");
    let totals = client
        .service
        .runtime()
        .completions()
        .totals_of("powers-probe");
    assert_eq!(totals.completions, 1, "{totals:?}");
    assert_eq!(totals.output_tokens, 64, "{totals:?}");
    assert!(totals.input_tokens < 64, "the host's estimate: {totals:?}");

    // The engine's hour was not used up by the client's claims.
    let report = complete_answered_with(&mut client, "s", json!({"text": "fine"})).await;
    assert!(report.contains("powers: completed=1"), "{report}");
    let health = client.result("health", json!({})).await;
    assert_eq!(health["quarantined"], json!([]), "{health}");
    client.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_client_keeps_the_completions_model_it_chose() {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut answering = probe_server(dir.path(), 8).await;
    // A second client of the same server, with no model to offer: its
    // `hello` must not take the first client's model away.
    let mut modelless = Client::connect(answering.service.clone(), 1 << 20);
    let hello = modelless.call("hello", json!({"protocol": 1})).await;
    assert_eq!(hello["result"]["protocol"], 1, "{hello}");

    let report = complete_answered_with(&mut answering, "a", json!({"text": "from a"})).await;
    assert!(report.contains("powers: completed=1"), "{report}");

    // The second client's engine calls have no model.
    let answer = modelless
        .call(
            "assemble",
            json!({"sessionId": "b", "prompt": "complete 1", "sync": full_sync(&conversation(1))}),
        )
        .await;
    let report = answer["result"]["messages"][0].to_string();
    assert!(
        report.contains("completed=0 error=HostErrorKind::Unavailable"),
        "{answer}"
    );
    // Gone, it takes nothing with it.
    modelless.stop().await;
    let report = complete_answered_with(&mut answering, "a", json!({"text": "still a"})).await;
    assert!(report.contains("powers: completed=1"), "{report}");
    answering.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_committed_turn_tells_the_client_its_engine_was_overloaded() {
    let dir = tempfile::tempdir().expect("temp dir");
    // One instance in all, held by a call waiting on the client's model.
    let mut client = probe_server(dir.path(), 1).await;
    let waiting = client
        .send(
            "assemble",
            json!({"sessionId": "a", "prompt": "complete 1", "sync": full_sync(&conversation(1))}),
        )
        .await;
    let asked = reverse_request(&mut client).await;

    // A session the server holds: its first commit brings the (empty)
    // history along.
    let committed = client
        .result(
            "commitTurn",
            json!({"sessionId": "b", "advancementKey": "turn-1", "messages": conversation(1),
                   "sync": full_sync(&[])}),
        )
        .await;
    assert_eq!(committed["status"], "committed", "{committed}");
    assert_eq!(committed["afterTurn"], "overloaded", "{committed}");

    client
        .send_line(&json!({"id": asked["id"], "result": {"text": "ok"}}).to_string())
        .await;
    let answer = client.answer(waiting).await;
    assert!(answer["error"].is_null(), "{answer}");
    // With the instance free again, the engine hears the next turn.
    let committed = client
        .result(
            "commitTurn",
            json!({"sessionId": "b", "advancementKey": "turn-2",
                   "messages": [{"role": "user", "content": "and then?", "timestamp": 99}]}),
        )
        .await;
    assert_eq!(committed["afterTurn"], "done", "{committed}");
    client.stop().await;
}

/// Sockets of this process accepted on local port `port` (server sides of
/// connections to it), from `/proc`: a connection still waiting in the
/// kernel's backlog has no socket in the process yet.
fn accepted_sockets(port: u16) -> usize {
    let ours: std::collections::HashSet<String> = std::fs::read_dir("/proc/self/fd")
        .expect("/proc/self/fd")
        .filter_map(|entry| std::fs::read_link(entry.ok()?.path()).ok())
        .filter_map(|target| {
            let target = target.to_string_lossy().into_owned();
            Some(
                target
                    .strip_prefix("socket:[")?
                    .strip_suffix(']')?
                    .to_owned(),
            )
        })
        .collect();
    let table = std::fs::read_to_string("/proc/net/tcp").expect("/proc/net/tcp");
    table
        .lines()
        .skip(1)
        .filter(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let local_port = fields
                .get(1)
                .and_then(|address| address.rsplit(':').next())
                .and_then(|hex| u16::from_str_radix(hex, 16).ok());
            local_port == Some(port) && fields.get(9).is_some_and(|inode| ours.contains(*inode))
        })
        .count()
        // The listening socket itself.
        .saturating_sub(1)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_connections_cannot_take_the_metrics_endpoints_descriptors() {
    let dir = tempfile::tempdir().expect("temp dir");
    let client = Client::greeted(dir.path(), 10_000, Some("keep-recent")).await;
    let listener = exposition::bind("127.0.0.1:0".parse().expect("address"), false)
        .await
        .expect("binds on loopback");
    let address = listener.local_addr().expect("bound");
    let endpoint = exposition::spawn_endpoint(listener, client.service.clone());

    const IDLE: usize = 120;
    let mut idle = Vec::with_capacity(IDLE);
    for _ in 0..IDLE {
        idle.push(
            tokio::net::TcpStream::connect(address)
                .await
                .expect("connects"),
        );
    }
    // Give the endpoint every chance to accept them all.
    let mut most = 0;
    for _ in 0..20 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        most = most.max(accepted_sockets(address.port()));
    }
    assert!(
        (1..=exposition::MAX_CONNECTIONS).contains(&most),
        "{most} of {IDLE} idle connections accepted at once"
    );
    // Gone, they leave room: a scrape is answered.
    drop(idle);
    let figures = super::serve_metrics::scrape(address).await;
    assert!(figures.contains("ctxbox_requests"), "{figures}");
    endpoint.abort();
    client.stop().await;
}

/// The CPU time process `pid` has used so far (user and system).
fn cpu_time(pid: u32) -> Duration {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("the host's stat");
    // The fields after the command name (in parentheses, possibly spaced).
    let after_name = &stat[stat.rfind(')').expect("a command name") + 2..];
    let fields: Vec<&str> = after_name.split_whitespace().collect();
    let ticks: u64 =
        fields[11].parse::<u64>().expect("utime") + fields[12].parse::<u64>().expect("stime");
    // SAFETY: sysconf only reads a configuration value.
    let per_second = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64;
    Duration::from_millis(ticks * 1_000 / per_second)
}

/// Sets process `pid`'s soft limit on descriptors to `limit` (its hard
/// limit stays, so the soft one can be raised again).
fn limit_descriptors(pid: u32, limit: u64) {
    let mut current = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: a null new limit only reads the current one into `current`.
    let read = unsafe {
        libc::prlimit(
            pid as libc::pid_t,
            libc::RLIMIT_NOFILE,
            std::ptr::null(),
            &mut current,
        )
    };
    assert_eq!(read, 0, "prlimit: {}", std::io::Error::last_os_error());
    let lowered = libc::rlimit {
        rlim_cur: limit.min(current.rlim_max),
        rlim_max: current.rlim_max,
    };
    // SAFETY: `lowered` is a valid limit; the old one is not asked for.
    let set = unsafe {
        libc::prlimit(
            pid as libc::pid_t,
            libc::RLIMIT_NOFILE,
            &lowered,
            std::ptr::null_mut(),
        )
    };
    assert_eq!(set, 0, "prlimit: {}", std::io::Error::last_os_error());
}

#[test]
fn a_host_out_of_descriptors_neither_spins_nor_blames_the_engine() {
    use super::multi_host::Host;
    let dir = tempfile::tempdir().expect("temp dir");
    let data = dir.path().join("data");
    let host = Host::start_alone_with_metrics(&data, "legacy");
    let hello = host.call("hello", json!({"protocol": 1})).expect("greets");
    assert!(hello["error"].is_null(), "{hello}");
    let address: std::net::SocketAddr = (0..600)
        .find_map(|_| {
            let text = std::fs::read_to_string(data.join("metrics-address")).ok();
            if text.is_none() {
                std::thread::sleep(Duration::from_millis(100));
            }
            text?.parse().ok()
        })
        .expect("the metrics endpoint is up within a minute");
    // Three descriptors left: the idle connections below take them.
    let pid = host.pid();
    let open = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .expect("the host's descriptors")
        .count() as u64;
    limit_descriptors(pid, open + 3);
    let idle: Vec<std::net::TcpStream> = (0..40)
        .map(|_| std::net::TcpStream::connect(address).expect("connects"))
        .collect();
    std::thread::sleep(Duration::from_millis(500));
    let (cpu, wall) = (cpu_time(pid), std::time::Instant::now());
    std::thread::sleep(Duration::from_secs(3));
    let share = (cpu_time(pid) - cpu).as_secs_f64() / wall.elapsed().as_secs_f64();
    assert!(
        share < 0.3,
        "an idle host out of descriptors used {:.0}% of a core",
        share * 100.0
    );

    // Loading an engine now meets the host's fault, not the engine's.
    let info = host
        .call("info", json!({"engine": guests::POWERS_PROBE}))
        .expect("answers");
    assert!(info["error"].is_null(), "{info}");
    let health = host.call("health", json!({})).expect("answers");
    assert_eq!(
        health["result"]["quarantined"],
        json!([]),
        "the host's fault is held against no engine: {info} {health}"
    );
    // With descriptors again, the same engine loads.
    drop(idle);
    limit_descriptors(pid, open + 64);
    let mut serving = Value::Null;
    for _ in 0..60 {
        let info = host
            .call("info", json!({"engine": guests::POWERS_PROBE}))
            .expect("answers");
        serving = info["result"]["serving"].clone();
        if serving == "powers-probe" {
            break;
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    assert_eq!(serving, "powers-probe");
}
