//! Work the host does in its stores for an engine (issue 35): bounded by
//! that engine's deadline, and never holding what another engine needs.
//! `powers-probe` attacks (a search over a large index from many calls at
//! once, a batch of index writes far past what one call may write, a state
//! hoard up to the quota) while `powers-twin`, a second engine with a store
//! of its own, does small things that must be answered within its own
//! deadline and without a quarantine. On the embedded store and, when a
//! PostgreSQL test server is available, on a shared one. And the host's own
//! store failing is the host's failure, never the engine's.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ctxbox_host::contract::engine::{CallOptions, ContextEngine};
use ctxbox_host::contract::failure::FailureKind;
use ctxbox_host::contract::history::History;
use ctxbox_host::contract::index::{IndexDocument, IndexOp};
use ctxbox_host::contract::types::AssembleParams;
use ctxbox_host::engines::guard::GuardPolicy;
use ctxbox_host::runtime::Runtime;
use ctxbox_host::sandbox::SandboxConfig;
use ctxbox_host::services::PostgresState;
use ctxbox_host::services::state::{
    CallWrites, EngineState, STATE_DB_FILE, STATE_DIR, StateConfig, StateStore, WAL_LIMIT_BYTES,
};
use ctxbox_host::store::Postgres;
use ctxbox_tests::{conversation, zoo_host};

use crate::engine_powers::{backends, host_with_timeout, probe, session, store_config, try_probe};

/// The test engines' call timeout: the default, which a commit of the
/// most one call may write fits well within.
const CALL_TIMEOUT: Duration = Duration::from_secs(10);

/// Attacking calls at once: as many as the shared store's pool has
/// connections.
const ATTACKERS: usize = 8;

/// Words of two letters, each only at the end of [`filler`]: none can use
/// the trigram index, so a search of them reads every document to its end
/// once for each word, however the matches are then ranked.
const SCANNING_QUERY: &str =
    "qa qb qc qd qe qf qg qh qi qj qk ql qm qn qo qp qr qs qt qu qv qx qy qz wa wb wc wd we wf wg";

/// Text of words none of which holds a `q` or `w` (those of
/// [`SCANNING_QUERY`]), ending with the scanning query's words.
fn filler(bytes: usize) -> String {
    const WORDS: [&str; 12] = [
        "alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india",
        "juliet", "kilo", "november",
    ];
    let mut text = String::with_capacity(bytes + 16);
    let mut n = 0usize;
    while text.len() < bytes {
        text.push_str(WORDS[(n * 7 + n / 12) % WORDS.len()]);
        text.push_str(if n % 9 == 8 {
            " oscar mike lima. "
        } else {
            " "
        });
        n += 1;
    }
    text.truncate(bytes.saturating_sub(SCANNING_QUERY.len() + 1));
    text.push(' ');
    text.push_str(SCANNING_QUERY);
    text
}

/// Indexes `mib` MiB of [`filler`] text as `engine`'s own documents, in the
/// store the host will open, before it starts (with no deadline: setting
/// the scene is not the attack).
fn index_beforehand(data: &Path, url: Option<&str>, engine: &str, mib: usize) {
    let config = StateConfig {
        quota_bytes: u64::MAX / 2,
        max_keys: u64::MAX / 2,
    };
    let store: Arc<dyn EngineState> = match url {
        None => Arc::new(StateStore::open_in(data, &config).expect("opens the store")),
        Some(url) => Arc::new(PostgresState::new(
            Postgres::connect(url, 2).expect("connects"),
            &config,
        )),
    };
    let text = filler(64 * 1024);
    for batch in 0..mib {
        let index = (0..16)
            .map(|n| IndexOp::Put {
                session_id: None,
                document: IndexDocument {
                    id: format!("filler-{batch}-{n}"),
                    text: text.clone(),
                    metadata: None,
                },
            })
            .collect();
        let writes = CallWrites {
            state: Vec::new(),
            index,
        };
        store.commit(engine, writes, None, None).expect("indexes");
    }
}

/// The host of the tests: `powers-probe` and `powers-twin`, on `url`'s
/// database or the embedded store, with room for large indexes.
fn runtime(dir: &Path, url: Option<&str>, state: &str) -> Runtime {
    let store = url.map_or_else(String::new, store_config);
    let timeout = CALL_TIMEOUT.as_millis() as u64;
    host_with_timeout(dir, &format!("{store}[state]\n{state}\n"), timeout)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_huge_search_stops_at_its_deadline_and_holds_up_no_other_engine() {
    for (backend, url) in backends("a_huge_search_stops_at_its_dea") {
        eprintln!("a_huge_search_stops_at_its_deadline_and_holds_up_no_other_engine: {backend}");
        a_huge_search_stops_at_its_deadline_on(url.as_deref()).await;
    }
}

async fn a_huge_search_stops_at_its_deadline_on(url: Option<&str>) {
    let dir = tempfile::tempdir().expect("temp dir");
    let data = dir.path().join("data");
    // Seconds of scanning per search, unbounded: eight at once hold a
    // shared connection far past the victim's deadline.
    index_beforehand(&data, url, "powers-probe", 16);
    let runtime = runtime(dir.path(), url, "quotaBytes = 1073741824");
    let attacker = runtime.select(Some("powers-probe")).await;
    let victim = runtime.select(Some("powers-twin")).await;
    let s = session("s");
    assert_eq!(
        probe(&victim, &s, "put engine note the victim's note").await,
        "put=ok"
    );

    // One session each: calls about one session take turns.
    let attacks: Vec<_> = (0..ATTACKERS)
        .map(|n| {
            let (attacker, s) = (attacker.clone(), session(&format!("attack-{n}")));
            tokio::spawn(async move {
                let started = Instant::now();
                let report =
                    try_probe(&attacker, &s, &format!("search engine {SCANNING_QUERY}")).await;
                (report, started.elapsed())
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(500)).await;
    let started = Instant::now();
    let report = probe(&victim, &s, "search engine victim").await;
    let waited = started.elapsed();
    assert_eq!(report, "hits=note", "the victim's search");
    assert!(
        waited < CALL_TIMEOUT,
        "the victim's search took {waited:?}, past its deadline"
    );
    assert!(victim.serving_selected(), "the victim was quarantined");

    let mut stopped = 0;
    for attack in attacks {
        // A call that ran out of time was served by `legacy` (no report):
        // allowed, the failure is the attacker's own.
        let (report, took) = attack.await.expect("the attack's task");
        assert!(
            took < 3 * CALL_TIMEOUT,
            "an attacking search ended after {took:?}: {report:?}"
        );
        if let Ok(report) = report
            && report.starts_with("search error=HostErrorKind::Aborted")
        {
            assert!(report.contains("deadline"), "{report}");
            stopped += 1;
        }
    }
    assert!(
        stopped > 0,
        "no attacking search was stopped at its deadline"
    );
    // Nothing of the attack is still running: the victim's next search is
    // as quick as its first.
    let started = Instant::now();
    assert_eq!(probe(&victim, &s, "search engine note").await, "hits=note");
    assert!(started.elapsed() < CALL_TIMEOUT, "{:?}", started.elapsed());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_huge_batch_of_documents_is_refused_at_the_put_and_holds_up_no_other_engine() {
    for (backend, url) in backends("a_huge_batch_of_documents_is_r") {
        eprintln!("a_huge_batch_of_documents_is_refused_at_the_put: {backend}");
        a_huge_batch_is_refused_at_the_put_on(url.as_deref()).await;
    }
}

async fn a_huge_batch_is_refused_at_the_put_on(url: Option<&str>) {
    let dir = tempfile::tempdir().expect("temp dir");
    let runtime = runtime(dir.path(), url, "quotaBytes = 268435456");
    let attacker = runtime.select(Some("powers-probe")).await;
    let victim = runtime.select(Some("powers-twin")).await;
    let s = session("s");
    // Both instantiated before the attack.
    assert_eq!(probe(&attacker, &s, "idle").await, "idle");
    assert_eq!(probe(&victim, &s, "idle").await, "idle");

    let attack = {
        let (attacker, s) = (attacker.clone(), session("attack"));
        tokio::spawn(async move {
            let started = Instant::now();
            // 12 MiB of text no trigram of which repeats: minutes of
            // indexing in one commit, were it taken. (Documents of 128 KiB:
            // SQLite checks the deadline between documents, not within one.)
            let report = try_probe(&attacker, &s, "bomb 96 128").await;
            (report, started.elapsed())
        })
    };
    tokio::time::sleep(Duration::from_millis(1_000)).await;
    let started = Instant::now();
    let report = probe(&victim, &s, "put engine note five").await;
    let waited = started.elapsed();
    assert_eq!(report, "put=ok", "the victim's write");
    assert!(
        waited < CALL_TIMEOUT,
        "the victim's write took {waited:?}, past its deadline"
    );
    assert!(victim.serving_selected(), "the victim was quarantined");
    assert_eq!(probe(&victim, &s, "search engine five").await, "hits=note");

    let (report, took) = attack.await.expect("the attack's task");
    // Its time, a commit stopped at its deadline and a loaded machine's
    // slack: seconds, not the minutes its writes would have taken.
    assert!(
        took < 3 * CALL_TIMEOUT,
        "the attacking call ended {took:?} after it started"
    );
    let Ok(report) = report else {
        // Its commit, of the most one call may write, did not fit in what
        // was left of its time on a loaded machine: the engine's own
        // failure, and bounded all the same.
        let record = runtime.engines().quarantine().get("powers-probe");
        let record = record.expect("a failed attacking call is recorded");
        assert!(record.reason.contains("deadline"), "{record:?}");
        return;
    };
    let (bombed, error) = report
        .strip_prefix("bombed=")
        .and_then(|rest| rest.split_once(" error="))
        .unwrap_or_else(|| panic!("the put was not refused: {report}"));
    let bombed: u32 = bombed.parse().expect("a count");
    assert!((1..96).contains(&bombed), "{report}");
    assert!(
        error.starts_with("HostErrorKind::QuotaExceeded") && error.contains("one call may write"),
        "{report}"
    );
}

/// Bytes the embedded state store takes in `data`, in either layout: one
/// file per engine under `state/`, or one shared `state.sqlite3`.
fn state_bytes(data: &Path) -> u64 {
    let shared: u64 = ["", "-wal", "-shm"]
        .iter()
        .map(|suffix| {
            let file = data.join(format!("{STATE_DB_FILE}{suffix}"));
            std::fs::metadata(file).map_or(0, |meta| meta.len())
        })
        .sum();
    shared + ctxbox_tests::bytes_under(&data.join(STATE_DIR))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_state_hoard_leaves_the_disk_on_the_order_of_the_quota() {
    let dir = tempfile::tempdir().expect("temp dir");
    let data = dir.path().join("data");
    let quota: u64 = 16 << 20;
    let runtime = runtime(dir.path(), None, &format!("quotaBytes = {quota}"));
    let attacker = runtime.select(Some("powers-probe")).await;
    let s = session("s");
    let report = probe(&attacker, &s, "hoard 1024").await;
    assert!(
        report.starts_with("hoarded=15 error=HostErrorKind::QuotaExceeded"),
        "{report}"
    );
    let bound = quota + quota / 4 + WAL_LIMIT_BYTES;
    let open = state_bytes(&data);
    assert!(
        open <= bound,
        "{open} bytes on disk for a {quota}-byte quota, the host running"
    );
    drop(attacker);
    drop(runtime);
    let closed = state_bytes(&data);
    eprintln!("state store: {open} bytes on disk for a {quota}-byte quota; {closed} once closed");
    assert!(
        closed <= bound,
        "{closed} bytes on disk for a {quota}-byte quota, the host stopped"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_hosts_own_store_failing_is_never_the_engines_fault() {
    let (dir, host) = zoo_host(SandboxConfig::default(), GuardPolicy::default());
    // A broken data directory: a folder stands where the engine's database
    // goes, so the host cannot open it.
    let store = StateStore::open_in(dir.path(), &StateConfig::default()).expect("opens");
    std::fs::create_dir_all(store.engine_path("services-probe")).expect("a folder");
    let probe = host.select(Some("services-probe")).await;
    let params = AssembleParams {
        prompt: Some("state".to_owned()),
        ..AssembleParams::default()
    };
    // The probe answers the host's `failed` with an error of its own.
    let (history, s) = (History::new(conversation(1)), session("s"));
    let options = CallOptions::default();
    let answer = probe.assemble(&options, &s, &history, &params);
    answer.await.expect("legacy answers in its place");
    let events = probe.take_events();
    assert!(
        matches!(events.as_slice(), [event] if event.classification == FailureKind::HostFault
            && event.reason.contains("host failure")),
        "{events:?}"
    );
    assert!(
        probe.serving_selected(),
        "quarantined for the host's failure"
    );
    assert!(host.quarantine().get("services-probe").is_none());
}
