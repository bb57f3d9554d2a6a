//! Very large requests and answers through `ctxbox serve`'s request loop:
//! a 16 MiB `ingest` line of tiny messages (the shape that costs the most
//! memory per byte of input) and one of 2 KB messages (a long
//! conversation's shape); for each, the resident memory the ingest peaks at,
//! what the session then holds, the peak of an `assemble` whose prompt is
//! every message, and what stays once the session is closed. The client
//! reads answers as a stream and keeps none, so the figures are the
//! server's. Run it in a process of its own (`--only large-request`): the
//! peaks are the process's, started afresh before each request where the
//! kernel allows it.

use std::sync::Arc;

use ctxbox_host::runtime::{Config, Runtime};
use ctxbox_host::serve::{Service, serve};
use serde_json::json;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, DuplexStream, ReadHalf, WriteHalf};

use super::measure::{mib, reset_peak, resident_bytes};
use super::{Options, Row};

/// One tiny message, as a client sends it.
const TINY: &str = r#"{"role":"user","content":"hi","timestamp":1700000000000}"#;

/// What one shape cost, MiB.
struct Figures {
    line_mib: f64,
    count: usize,
    /// The ingest's peak over the resident memory before it.
    ingest_peak: f64,
    /// Resident once the ingest was answered, over the same baseline.
    held: f64,
    answer_mib: f64,
    /// The assemble's peak over the resident memory before it.
    assemble_peak: f64,
    /// Resident once the session is closed, over the first baseline.
    closed: f64,
}

/// The rows: four for each shape.
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
    let mut pipe = Pipe::open(client);
    pipe.call("hello", r#"{"protocol":1}"#).await?;
    // The engine is loaded and has served a session before the baseline.
    pipe.call(
        "ingest",
        r#"{"sessionId":"warm","messages":[{"role":"user","content":"hi"}]}"#,
    )
    .await?;

    let target_bytes: usize = if options.quick { 1 << 20 } else { 16 << 20 };
    let long =
        json!({"role": "user", "content": "x".repeat(2_000), "timestamp": 1_700_000_000_000u64})
            .to_string();
    for (shape, message) in [("tiny", TINY), ("2 KB", long.as_str())] {
        let figures = one_shape(&mut pipe, shape, message, target_bytes).await?;
        let Figures {
            line_mib,
            count,
            answer_mib,
            ..
        } = figures;
        let times = |over: f64, of: f64| format!("+{over:.0} MiB ({:.1}× the line)", over / of);
        let row = |what: String, figure: String| Row {
            what,
            figure,
            target: "-".to_owned(),
            met: None,
        };
        rows.push(row(
            format!("{WHAT}: peak of a {line_mib:.1} MiB ingest of {count} {shape} messages"),
            times(figures.ingest_peak, line_mib),
        ));
        rows.push(row(
            format!("{WHAT}: resident once answered (the session holds the {shape} messages)"),
            times(figures.held, line_mib),
        ));
        rows.push(row(
            format!(
                "{WHAT}: peak of an assemble answering every {shape} message ({answer_mib:.1} MiB)"
            ),
            format!(
                "+{:.0} MiB ({:.1}× the answer)",
                figures.assemble_peak,
                figures.assemble_peak / answer_mib
            ),
        ));
        rows.push(row(
            format!("{WHAT}: resident once the session of {shape} messages is closed"),
            format!("+{:.0} MiB", figures.closed),
        ));
    }
    pipe.close().await;
    serving.await??;
    Ok(())
}

/// Sends one `ingest` of about `target_bytes` made of copies of `message`
/// to session `shape`, asks for a prompt of every message, then closes the
/// session.
async fn one_shape(
    pipe: &mut Pipe,
    shape: &str,
    message: &str,
    target_bytes: usize,
) -> anyhow::Result<Figures> {
    let count = target_bytes / (message.len() + 1);
    let mut params = json!({ "sessionId": shape }).to_string();
    params.pop();
    params.reserve(target_bytes + 64);
    params.push_str(r#","messages":["#);
    for index in 0..count {
        if index > 0 {
            params.push(',');
        }
        params.push_str(message);
    }
    params.push_str("]}");
    let line_mib = mib(params.len() as u64);
    let resident = || resident_bytes().unwrap_or(super::measure::Resident { now: 0, peak: 0 });
    reset_peak();
    // The client's own copy of the line is in the baseline.
    let base = resident().now;
    pipe.call("ingest", &params).await?;
    drop(params);
    let after_ingest = resident();

    reset_peak();
    let before_assemble = resident().now;
    let assemble = json!({ "sessionId": shape, "tokenBudget": 1_000_000_000u64 }).to_string();
    let answer_bytes = pipe.call("assemble", &assemble).await?;
    let assemble_peak = resident().peak;

    pipe.call("closeSession", &json!({ "sessionId": shape }).to_string())
        .await?;
    let closed = resident().now;
    let over = |bytes: u64, base: u64| mib(bytes.saturating_sub(base));
    Ok(Figures {
        line_mib,
        count,
        ingest_peak: over(after_ingest.peak, base),
        held: over(after_ingest.now, base),
        answer_mib: mib(answer_bytes as u64),
        assemble_peak: over(assemble_peak, before_assemble),
        closed: over(closed, base),
    })
}

/// A client that sends one request at a time and reads each answer as a
/// stream, keeping only its beginning.
struct Pipe {
    write: WriteHalf<DuplexStream>,
    read: BufReader<ReadHalf<DuplexStream>>,
    next_id: u64,
}

impl Pipe {
    fn open(stream: DuplexStream) -> Self {
        let (read, write) = tokio::io::split(stream);
        Self {
            write,
            read: BufReader::new(read),
            next_id: 1,
        }
    }

    /// Sends `method` with `params` (JSON text) and returns its answer
    /// line's length; fails unless the answer is a result.
    async fn call(&mut self, method: &str, params: &str) -> anyhow::Result<usize> {
        let id = self.next_id;
        self.next_id += 1;
        let head = format!(r#"{{"id":{id},"method":{},"params":"#, json!(method));
        self.write.write_all(head.as_bytes()).await?;
        self.write.write_all(params.as_bytes()).await?;
        self.write.write_all(b"}\n").await?;
        self.write.flush().await?;
        let (answer_head, bytes) = self.read_line().await?;
        anyhow::ensure!(
            answer_head.starts_with(&format!(r#"{{"id":{id},"result""#)),
            "`{method}` was not answered with a result: {answer_head}"
        );
        Ok(bytes)
    }

    /// The next line's first 4 KiB (as text) and its length.
    async fn read_line(&mut self) -> anyhow::Result<(String, usize)> {
        const KEPT: usize = 4096;
        let mut head = Vec::new();
        let mut bytes = 0;
        loop {
            let chunk = self.read.fill_buf().await?;
            anyhow::ensure!(!chunk.is_empty(), "the server closed the pipe");
            let (taken, done) = match chunk.iter().position(|byte| *byte == b'\n') {
                Some(end) => (end + 1, true),
                None => (chunk.len(), false),
            };
            let room = KEPT.saturating_sub(head.len()).min(taken);
            head.extend_from_slice(&chunk[..room]);
            bytes += taken;
            self.read.consume(taken);
            if done {
                return Ok((String::from_utf8_lossy(&head).into_owned(), bytes - 1));
            }
        }
    }

    /// Ends the input, so the server finishes.
    async fn close(&mut self) {
        let _ = self.write.shutdown().await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_large_request_rows_are_measured() {
        let mut measured = Vec::new();
        rows(&Options::tiny(), &mut measured)
            .await
            .expect("the large requests run");
        assert_eq!(measured.len(), 8, "{measured:?}");
        assert!(
            measured.iter().all(|row| row.figure.contains("MiB")),
            "{measured:?}"
        );
    }
}
