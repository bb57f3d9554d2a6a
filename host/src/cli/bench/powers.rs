//! What engines' powers cost across the `ctxbox serve` bridge, the model's
//! and the tool's own work excluded: a reverse model call (an engine's
//! `host.complete` asked of the client, answered at once) and an engine
//! tool's round trip (`callTool` of a tool that echoes). Each against the
//! same request without the power, through one in-process server's real
//! request loop.

use std::sync::Arc;
use std::time::{Duration, Instant};

use ctxbox_host::engines::bundled;
use ctxbox_host::runtime::Runtime;
use ctxbox_host::runtime::config::Config;
use ctxbox_host::serve::{Service, serve};
use serde_json::{Value, json};
use tokio::io::BufReader;

use super::measure::{Stats, human};
use super::serve_client::Connection;
use super::{Options, Row};

/// Requests timed for each figure (a tenth for `--quick`).
const RUNS: usize = 400;

/// The two rows.
pub async fn rows(options: &Options, rows: &mut Vec<Row>) -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let probe = |name: &str| -> anyhow::Result<String> {
        let bytes = bundled::probe(name)
            .ok_or_else(|| anyhow::anyhow!("the {name} probe is not bundled"))?;
        let path = dir.path().join(format!("{name}.wasm"));
        std::fs::write(&path, bytes)?;
        Ok(path.display().to_string())
    };
    let (powers, tools) = (probe("powers-probe")?, probe("tool-spinner")?);
    let service = Arc::new(Service::new(
        Runtime::new(Config {
            data_dir: Some(dir.path().join("data")),
            ..Config::default()
        })?,
        None,
    )?);
    let (client, server) = tokio::io::duplex(1 << 20);
    let (server_read, server_write) = tokio::io::split(server);
    let serving = tokio::spawn(serve(service, BufReader::new(server_read), server_write));
    let connection = Connection::open(client);
    answered(
        connection
            .call(
                "hello",
                json!({"protocol": 2, "capabilities": ["complete"]}),
            )
            .await?,
    )?;
    let runs = options.runs(RUNS);

    // A reverse model call: `assemble` whose engine asks the host's model
    // once, against the same `assemble` asking nothing.
    let assemble = |prompt: &str| {
        json!({"sessionId": "bench", "engine": powers, "prompt": prompt,
               "sync": {"base": 0, "messages": [{"role": "user", "content": "hello", "timestamp": 1}]}})
    };
    let plain = time(&connection, runs, "assemble", assemble("idle"), |_| Ok(())).await?;
    let reverse_before = connection.reverse_answered();
    let completing = time(
        &connection,
        runs,
        "assemble",
        assemble("complete 1"),
        |result| {
            let note = result["messages"][0].to_string();
            anyhow::ensure!(note.contains("completed=1"), "no completion: {note}");
            Ok(())
        },
    )
    .await?;
    anyhow::ensure!(
        connection.reverse_answered() - reverse_before >= runs as u64,
        "the engine did not ask the client's model on every call"
    );
    rows.push(Row {
        what: "reverse model call across the bridge (engine → host.complete → client → engine), the model excluded".into(),
        figure: format!(
            "{} per call ({} with one completion − {} without); with: {}",
            human(completing.median.saturating_sub(plain.median)),
            human(completing.median),
            human(plain.median),
            completing.describe()
        ),
        target: "measured (issue 29)".into(),
        met: None,
    });

    // An engine tool's round trip: `callTool` of a tool that echoes its
    // arguments, against `health`, a request that reaches no engine.
    let call_tool =
        json!({"sessionId": "bench", "engine": tools, "name": "echo", "arguments": {"say": "hi"}});
    answered(connection.call("callTool", call_tool.clone()).await?)?;
    let baseline = time(&connection, runs, "health", json!({}), |_| Ok(())).await?;
    let tool = time(&connection, runs, "callTool", call_tool, |result| {
        anyhow::ensure!(result["isError"] == false, "the tool failed: {result}");
        Ok(())
    })
    .await?;
    rows.push(Row {
        what: "engine tool call round trip (`callTool` of an echoing tool, through the guard)"
            .into(),
        figure: format!(
            "{} per call ({} − {} for `health`, which reaches no engine); {}",
            human(tool.median.saturating_sub(baseline.median)),
            human(tool.median),
            human(baseline.median),
            tool.describe()
        ),
        target: "measured (issue 29)".into(),
        met: None,
    });

    connection.close().await;
    serving.await??;
    Ok(())
}

/// The result of a successful answer.
fn answered(answer: Value) -> anyhow::Result<Value> {
    anyhow::ensure!(answer["error"].is_null(), "the request failed: {answer}");
    Ok(answer["result"].clone())
}

/// `runs` sequential `method` requests (after one untimed warm-up), each
/// result checked by `check`.
async fn time(
    connection: &Connection,
    runs: usize,
    method: &str,
    params: Value,
    check: impl Fn(&Value) -> anyhow::Result<()>,
) -> anyhow::Result<Stats> {
    check(&answered(connection.call(method, params.clone()).await?)?)?;
    let mut samples: Vec<Duration> = Vec::with_capacity(runs);
    for _ in 0..runs {
        let started = Instant::now();
        let result = answered(connection.call(method, params.clone()).await?)?;
        samples.push(started.elapsed());
        check(&result)?;
    }
    Ok(Stats::of(samples))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A quick run: the engine asked the client's model on every call and
    /// the tool answered, or the rows are not made.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn both_powers_rows_are_measured() {
        let mut measured = Vec::new();
        rows(&Options::tiny(), &mut measured)
            .await
            .expect("the powers rows run");
        assert_eq!(measured.len(), 2);
        assert!(measured[0].what.starts_with("reverse model call"));
        assert!(measured[1].what.starts_with("engine tool call"));
        assert!(
            measured.iter().all(|row| row.figure.contains("per call")),
            "{:?}",
            measured.iter().map(|row| &row.figure).collect::<Vec<_>>()
        );
    }
}
