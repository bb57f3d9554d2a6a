//! One very large request through `ctxbox serve`'s request loop: an `ingest`
//! line of 16 MiB of tiny messages (the shape that costs the most memory per
//! byte of input), the resident memory it peaks at, what stays resident
//! once it is answered, and once its session is closed. Run it in a process
//! of its own (`--only large-request`): the peak is the whole process's.

use std::sync::Arc;

use ctxbox_host::runtime::{Config, Runtime};
use ctxbox_host::serve::{Service, serve};
use serde_json::json;
use tokio::io::BufReader;

use super::measure::{mib, resident_bytes};
use super::serve_client::Connection;
use super::{Options, Row};

/// One tiny message, as a client sends it.
const TINY: &str = r#"{"role":"user","content":"hi","timestamp":1700000000000}"#;

/// The three rows.
pub async fn rows(options: &Options, rows: &mut Vec<Row>) -> anyhow::Result<()> {
    const WHAT: &str = "one large request through serve";
    if resident_bytes().is_none() {
        rows.push(Row::skipped(WHAT, "no /proc/self/status here"));
        return Ok(());
    }
    let dir = tempfile::tempdir()?;
    let service = Arc::new(Service::new(
        Runtime::new(Config {
            data_dir: Some(dir.path().join("data")),
            ..Config::default()
        })?,
        Some("keep-recent".to_owned()),
    )?);
    let (client, server) = tokio::io::duplex(1 << 20);
    let (server_read, server_write) = tokio::io::split(server);
    let serving = tokio::spawn(serve(service, BufReader::new(server_read), server_write));
    let connection = Connection::open(client);
    connection.call("hello", json!({"protocol": 1})).await?;
    // The engine is loaded and has served a session before the baseline.
    connection
        .call(
            "ingest",
            json!({"sessionId": "warm", "messages": [json!({"role": "user", "content": "hi"})]}),
        )
        .await?;

    let target_bytes: usize = if options.quick { 1 << 20 } else { 16 << 20 };
    let count = target_bytes / (TINY.len() + 1);
    let mut params = String::with_capacity(target_bytes + 64);
    params.push_str(r#"{"sessionId":"large","messages":["#);
    for index in 0..count {
        if index > 0 {
            params.push(',');
        }
        params.push_str(TINY);
    }
    params.push_str("]}");
    let line_mib = mib(params.len() as u64);
    // The client's own copy of the line is in the baseline.
    let base = resident_bytes().map_or(0, |resident| resident.now);
    let answer = connection.call_text("ingest", &params).await?;
    anyhow::ensure!(
        answer.get("result").is_some(),
        "the ingest failed: {answer}"
    );
    drop(params);
    let answered = resident_bytes().map_or(0, |resident| resident.now);
    let peak = resident_bytes().map_or(0, |resident| resident.peak);
    connection
        .call("closeSession", json!({"sessionId": "large"}))
        .await?;
    let closed = resident_bytes().map_or(0, |resident| resident.now);
    connection.close().await;
    serving.await??;

    let over = |bytes: u64| mib(bytes.saturating_sub(base));
    let row = |what: String, figure: String| Row {
        what,
        figure,
        target: "-".to_owned(),
        met: None,
    };
    rows.push(row(
        format!("{WHAT}: peak over the resident baseline, a {line_mib:.1} MiB ingest of {count} tiny messages"),
        format!("+{:.0} MiB ({:.1}× the line)", over(peak), over(peak) / line_mib),
    ));
    rows.push(row(
        format!("{WHAT}: resident once answered (the session holds the messages)"),
        format!("+{:.0} MiB", over(answered)),
    ));
    rows.push(row(
        format!("{WHAT}: resident once the session is closed"),
        format!("+{:.0} MiB", over(closed)),
    ));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_large_request_rows_are_measured() {
        let mut measured = Vec::new();
        rows(&Options::tiny(), &mut measured)
            .await
            .expect("the large request runs");
        assert_eq!(measured.len(), 3, "{measured:?}");
        assert!(measured[0].figure.contains("MiB"), "{measured:?}");
    }
}
