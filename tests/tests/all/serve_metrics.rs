//! `ctxbox serve`'s figures while it serves: the Prometheus endpoint
//! scraped over loopback HTTP before and after calls (a served engine, a
//! panicking one the guard quarantines), and the snapshot `ctxbox health`
//! reads from the data directory.

use std::time::{Duration, Instant};

use ctxbox_host::serve::exposition;
use ctxbox_host::serve::metrics::MetricsSnapshot;
use ctxbox_host::serve::snapshots::{self, SnapshotWriter};
use ctxbox_tests::guests;
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::serve::{Client, conversation, full_sync};

/// One scrape of `http://{address}/metrics`: its body.
pub(crate) async fn scrape(address: std::net::SocketAddr) -> String {
    let mut stream = tokio::net::TcpStream::connect(address)
        .await
        .expect("the endpoint accepts");
    stream
        .write_all(b"GET /metrics HTTP/1.1\r\nHost: localhost\r\n\r\n")
        .await
        .expect("asks");
    let mut answer = String::new();
    tokio::time::timeout(Duration::from_secs(60), stream.read_to_string(&mut answer))
        .await
        .expect("answers within a minute")
        .expect("reads");
    let (head, body) = answer.split_once("\r\n\r\n").expect("an HTTP answer");
    assert!(head.starts_with("HTTP/1.1 200 OK"), "{head}");
    assert!(head.contains("text/plain; version=0.0.4"), "{head}");
    body.to_owned()
}

/// The value of the series `series` (name and labels, as exposed); 0 when
/// it is not exposed.
fn value(text: &str, series: &str) -> f64 {
    text.lines()
        .find_map(|line| line.strip_prefix(series)?.strip_prefix(' '))
        .map_or(0.0, |value| value.parse().expect("a number"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_metrics_endpoint_counts_requests_and_engine_calls_as_they_are_made() {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut client = Client::greeted(dir.path(), 10_000, Some("keep-recent")).await;
    let listener = exposition::bind("127.0.0.1:0".parse().expect("address"), false)
        .await
        .expect("binds on loopback");
    let address = listener.local_addr().expect("bound");
    let endpoint = exposition::spawn_endpoint(listener, client.service.clone());

    let served =
        r#"ctxbox_engine_calls_total{engine="keep-recent",operation="assemble",outcome="served"}"#;
    let requests =
        r#"ctxbox_requests_total{method="assemble",engine="keep-recent",outcome="served"}"#;
    let before = scrape(address).await;
    assert_eq!(value(&before, served), 0.0, "{before}");
    assert!(before.contains("# TYPE ctxbox_engine_calls_total counter"));

    let messages = conversation(4);
    for _ in 0..2 {
        let answer = client
            .result(
                "assemble",
                json!({"sessionId": "s", "sync": full_sync(&messages)}),
            )
            .await;
        assert_eq!(answer["servedBy"], "keep-recent");
    }
    // A panicking engine: the first call quarantines it, the second is
    // served by legacy without asking it.
    for _ in 0..2 {
        let answer = client
            .result(
                "assemble",
                json!({"sessionId": "p", "engine": guests::PANICKER, "prompt": "panic",
                       "sync": full_sync(&messages)}),
            )
            .await;
        assert_eq!(answer["servedBy"], "legacy");
    }

    let after = scrape(address).await;
    for (series, expected) in [
        (served, 2.0),
        (requests, 2.0),
        (
            r#"ctxbox_engine_call_duration_seconds_count{engine="keep-recent",operation="assemble"}"#,
            2.0,
        ),
        (
            r#"ctxbox_engine_calls_total{engine="panicker",operation="assemble",outcome="quarantined"}"#,
            1.0,
        ),
        (
            r#"ctxbox_engine_calls_total{engine="panicker",operation="assemble",outcome="fell_back"}"#,
            1.0,
        ),
        (
            r#"ctxbox_requests_total{method="assemble",engine="panicker",outcome="fell_back"}"#,
            2.0,
        ),
        ("ctxbox_live_sessions", 2.0),
        ("ctxbox_quarantined_engines", 1.0),
        (r#"ctxbox_engine_quarantined{engine="panicker"}"#, 1.0),
    ] {
        assert_eq!(value(&after, series), expected, "{series} in:\n{after}");
    }
    assert!(value(&after, "ctxbox_warm_instances") >= 1.0, "{after}");
    assert!(
        after.contains(r#"ctxbox_engine_call_duration_seconds_bucket{engine="keep-recent",operation="assemble",le="+Inf"} 2"#),
        "{after}"
    );

    // What `ctxbox health` reads: the same figures, per live process.
    let snapshot = client.service.snapshot();
    snapshots::write(dir.path(), &snapshot).expect("writes");
    let now = snapshot.written_at_ms;
    let live = snapshots::live(dir.path(), now);
    // Compared as JSON reads it back: serde_json's default float parsing
    // may land one ulp off the written seconds.
    let read_back: MetricsSnapshot =
        serde_json::from_str(&serde_json::to_string(&snapshot).expect("JSON")).expect("parses");
    assert_eq!(live, vec![read_back]);
    let keep_recent = snapshot
        .engine_calls
        .iter()
        .find(|figures| figures.engine == "keep-recent" && figures.name == "assemble")
        .expect("keep-recent's assembles");
    assert_eq!(keep_recent.outcomes["served"], 2);
    assert!(
        snapshots::live(dir.path(), now + 60_000).is_empty(),
        "a snapshot not rewritten is not a live process's"
    );

    // The writer keeps the file fresh and removes it when it stops.
    let path = snapshots::snapshot_path(dir.path(), std::process::id());
    std::fs::remove_file(&path).expect("removes");
    let writer = SnapshotWriter::start(client.service.clone(), Duration::from_millis(50));
    let started = Instant::now();
    while !path.exists() {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "the writer writes"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    writer.stop().await;
    assert!(!path.exists(), "a stopped process leaves no live snapshot");

    endpoint.abort();
    client.stop().await;
}
