//! `ctxbox serve --metrics ADDR`: the process's figures ([`ServeMetrics`],
//! [`LiveFigures`]) in Prometheus' text exposition format (version 0.0.4),
//! encoded by `prometheus-client`, over plain HTTP at `GET /metrics`. The
//! endpoint listens on a loopback address unless the operator allows
//! another: it says which engines run and how they fail, which is for the
//! machine's own monitoring, not the network.
//!
//! What a scraper (or anything else on the machine) can hold of the process
//! is bounded: at most [`MAX_CONNECTIONS`] connections are accepted at once
//! (more wait in the kernel's backlog, holding none of the process's file
//! descriptors), each for at most [`CONNECTION_TIMEOUT`], and an accept
//! that fails (descriptors or memory run out) is retried after a pause
//! growing to [`MAX_ACCEPT_PAUSE`], not at once in a loop.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use super::methods::Service;
use super::metrics::{LiveFigures, OUTCOMES, RequestOutcome, ServeMetrics};
use crate::engines::observe::CallOutcome;

/// The most bytes of a request's head read.
const MAX_REQUEST_BYTES: usize = 8 * 1024;
/// How long a client may take to send its request.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);
/// Most connections served at once.
pub const MAX_CONNECTIONS: usize = 8;
/// How long one connection may be held, from accept to its answer's end.
pub const CONNECTION_TIMEOUT: Duration = Duration::from_secs(10);
/// The first pause after a failed accept; it doubles while accepts fail.
const FIRST_ACCEPT_PAUSE: Duration = Duration::from_millis(10);
/// The longest pause after a failed accept.
pub const MAX_ACCEPT_PAUSE: Duration = Duration::from_secs(1);

/// Why the metrics endpoint could not start.
#[derive(Debug, thiserror::Error)]
pub enum EndpointError {
    /// The address is not a loopback one and that was not allowed.
    #[error(
        "refusing to serve metrics on `{0}`: not a loopback address (127.0.0.1, ::1); pass --metrics-allow-remote to serve them there"
    )]
    NotLoopback(SocketAddr),
    /// The address could not be bound.
    #[error("cannot listen for metrics on `{address}`: {source}")]
    Bind {
        /// The address.
        address: SocketAddr,
        /// Why.
        source: std::io::Error,
    },
}

/// Listens on `address`, which must be a loopback address unless
/// `allow_remote`.
pub async fn bind(address: SocketAddr, allow_remote: bool) -> Result<TcpListener, EndpointError> {
    if !address.ip().is_loopback() && !allow_remote {
        return Err(EndpointError::NotLoopback(address));
    }
    TcpListener::bind(address)
        .await
        .map_err(|source| EndpointError::Bind { address, source })
}

/// Answers scrapes on `listener` with `service`'s figures until the task is
/// dropped or aborted.
pub fn spawn_endpoint(listener: TcpListener, service: Arc<Service>) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let connections = Arc::new(tokio::sync::Semaphore::new(MAX_CONNECTIONS));
        let mut pause = FIRST_ACCEPT_PAUSE;
        loop {
            // Never closed: the endpoint owns it.
            let Ok(permit) = connections.clone().acquire_owned().await else {
                return;
            };
            let stream = match listener.accept().await {
                Ok((stream, _)) => {
                    pause = FIRST_ACCEPT_PAUSE;
                    stream
                }
                Err(error) => {
                    tracing::warn!(%error, pause_ms = pause.as_millis() as u64, "the metrics endpoint cannot accept a connection; pausing");
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(MAX_ACCEPT_PAUSE);
                    continue;
                }
            };
            let service = service.clone();
            tokio::spawn(async move {
                match tokio::time::timeout(CONNECTION_TIMEOUT, answer(stream, &service)).await {
                    Ok(Ok(())) => {}
                    Ok(Err(error)) => tracing::debug!(%error, "a metrics scrape failed"),
                    Err(_) => tracing::debug!("a metrics connection held too long was closed"),
                }
                drop(permit);
            });
        }
    })
}

/// Reads one request and answers it: the figures at `GET /metrics`, 404
/// elsewhere, 405 for anything but `GET`.
async fn answer(mut stream: TcpStream, service: &Service) -> std::io::Result<()> {
    let mut head = Vec::with_capacity(512);
    let mut chunk = [0u8; 1024];
    let read = tokio::time::timeout(REQUEST_TIMEOUT, async {
        while !head.windows(4).any(|window| window == b"\r\n\r\n") {
            let n = stream.read(&mut chunk).await?;
            if n == 0 || head.len() + n > MAX_REQUEST_BYTES {
                break;
            }
            head.extend_from_slice(&chunk[..n]);
        }
        Ok::<_, std::io::Error>(())
    })
    .await;
    // A client too slow to ask gets no answer.
    let Ok(read) = read else {
        return Ok(());
    };
    read?;
    let line = head.split(|byte| *byte == b'\r').next().unwrap_or_default();
    let mut parts = line.split(|byte| *byte == b' ');
    let (method, path) = (
        parts.next().unwrap_or_default(),
        parts.next().unwrap_or_default(),
    );
    let (status, content_type, body) = match (method, path) {
        (b"GET", b"/metrics") => (
            "200 OK",
            "text/plain; version=0.0.4; charset=utf-8",
            render(service.metrics(), service.live_figures()),
        ),
        (b"GET", _) => (
            "404 Not Found",
            "text/plain",
            "metrics are at /metrics\n".into(),
        ),
        _ => ("405 Method Not Allowed", "text/plain", "GET only\n".into()),
    };
    let head = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).await?;
    stream.write_all(body.as_bytes()).await?;
    stream.shutdown().await
}

/// `metrics` and `live` in Prometheus' text exposition format.
pub fn render(metrics: &ServeMetrics, live: LiveFigures) -> String {
    let scrape = Scrape {
        started_at_ms: metrics.started_at_ms(),
        requests: super::metrics::lock(&metrics.requests)
            .iter()
            .map(|((method, engine), tally)| {
                (
                    [("method", method.clone()), ("engine", engine.clone())],
                    tally.counts,
                    tally.latency.clone(),
                )
            })
            .collect(),
        calls: super::metrics::each_call(&super::metrics::lock(&metrics.calls))
            .map(|(engine, operation, tally)| {
                (
                    [
                        ("engine", engine.to_owned()),
                        ("operation", operation.as_str().to_owned()),
                    ],
                    tally.counts,
                    tally.latency.clone(),
                )
            })
            .collect(),
        live,
    };
    let mut registry = Registry::default();
    registry.register_collector(Box::new(scrape));
    let mut text = String::new();
    // Writing into a String cannot fail.
    let _ = prometheus_client::encoding::prometheus_text::encode(&mut text, &registry);
    text
}

/// Two labels and their values.
type Labels = [(&'static str, String); 2];

/// What one scrape encodes: a copy of the counts (the histograms shared),
/// and the live figures.
#[derive(Debug)]
struct Scrape {
    started_at_ms: i64,
    requests: Vec<(Labels, [u64; OUTCOMES], Histogram)>,
    calls: Vec<(Labels, [u64; OUTCOMES], Histogram)>,
    live: LiveFigures,
}

impl Collector for Scrape {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let outcomes = RequestOutcome::ALL.map(RequestOutcome::as_str);
        counted(
            &mut encoder,
            "ctxbox_requests",
            "Requests answered, by method, engine and outcome.",
            &self.requests,
            &outcomes,
        )?;
        latencies(
            &mut encoder,
            "ctxbox_request_duration_seconds",
            "How long requests took, by method and engine.",
            &self.requests,
        )?;
        let outcomes = CallOutcome::ALL.map(CallOutcome::as_str);
        counted(
            &mut encoder,
            "ctxbox_engine_calls",
            "Guarded engine calls, by engine, operation and outcome.",
            &self.calls,
            &outcomes,
        )?;
        latencies(
            &mut encoder,
            "ctxbox_engine_call_duration_seconds",
            "How long guarded engine calls took (a fallback's time included), by engine and operation.",
            &self.calls,
        )?;

        let mut tools = encoder.encode_descriptor(
            "ctxbox_engine_tool_calls",
            "Calls of engines' tools, by engine.",
            None,
            MetricType::Counter,
        )?;
        for (labels, counts, _) in &self.calls {
            if labels[1].1 == "call-tool" {
                let total: u64 = counts.iter().sum();
                ConstCounter::new(total).encode(tools.encode_family(&[labels[0].clone()])?)?;
            }
        }
        let mut engines: Vec<_> = self.live.completions.iter().collect();
        engines.sort_by(|a, b| a.0.cmp(b.0));
        let mut completions = encoder.encode_descriptor(
            "ctxbox_engine_completions",
            "Model completions engines asked the host for, by engine and result.",
            None,
            MetricType::Counter,
        )?;
        for (engine, totals) in &engines {
            for (result, count) in [
                ("answered", totals.completions),
                ("refused", totals.refused),
            ] {
                ConstCounter::new(count).encode(
                    completions
                        .encode_family(&[("engine", engine.as_str()), ("result", result)])?,
                )?;
            }
        }
        let mut tokens = encoder.encode_descriptor(
            "ctxbox_engine_completion_tokens",
            "Tokens of engines' model completions, by engine and direction.",
            None,
            MetricType::Counter,
        )?;
        for (engine, totals) in &engines {
            for (direction, count) in [
                ("input", totals.input_tokens),
                ("output", totals.output_tokens),
            ] {
                ConstCounter::new(count).encode(
                    tokens
                        .encode_family(&[("engine", engine.as_str()), ("direction", direction)])?,
                )?;
            }
        }

        gauge(
            &mut encoder,
            "ctxbox_live_sessions",
            "Sessions the server holds.",
            self.live.sessions as i64,
        )?;
        ConstCounter::new(self.live.released_sessions).encode(encoder.encode_descriptor(
            "ctxbox_released_sessions",
            "Sessions given up: idle past serve.idleSessionSeconds, or the least recently used past serve.maxSessions.",
            None,
            MetricType::Counter,
        )?)?;
        gauge(
            &mut encoder,
            "ctxbox_warm_instances",
            "Engine instances alive in the sandbox.",
            i64::from(self.live.warm_instances),
        )?;
        gauge(
            &mut encoder,
            "ctxbox_quarantined_engines",
            "Engines quarantined now.",
            self.live.quarantined.len() as i64,
        )?;
        let mut quarantined = encoder.encode_descriptor(
            "ctxbox_engine_quarantined",
            "1 for each engine quarantined now.",
            None,
            MetricType::Gauge,
        )?;
        for engine in &self.live.quarantined {
            ConstGauge::new(1i64)
                .encode(quarantined.encode_family(&[("engine", engine.as_str())])?)?;
        }
        if let Some(round_trips) = self.live.store_round_trips {
            ConstCounter::new(round_trips).encode(encoder.encode_descriptor(
                "ctxbox_store_round_trips",
                "Connections taken from the shared store's pool: statements and transactions sent to PostgreSQL.",
                None,
                MetricType::Counter,
            )?)?;
        }
        gauge(
            &mut encoder,
            "ctxbox_start_time_seconds",
            "When the server started, seconds since the Unix epoch.",
            self.started_at_ms / 1000,
        )
    }
}

/// A counter family: one series per labels and outcome (`outcomes`: the
/// names of the counts, in order).
fn counted(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    tallies: &[(Labels, [u64; OUTCOMES], Histogram)],
    outcomes: &[&'static str],
) -> Result<(), std::fmt::Error> {
    let mut family = encoder.encode_descriptor(name, help, None, MetricType::Counter)?;
    for (labels, counts, _) in tallies {
        for (outcome, count) in outcomes.iter().zip(counts) {
            let labels = [
                labels[0].clone(),
                labels[1].clone(),
                ("outcome", (*outcome).to_owned()),
            ];
            ConstCounter::new(*count).encode(family.encode_family(&labels)?)?;
        }
    }
    Ok(())
}

/// A histogram family: one series per labels.
fn latencies(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    tallies: &[(Labels, [u64; OUTCOMES], Histogram)],
) -> Result<(), std::fmt::Error> {
    let mut family = encoder.encode_descriptor(name, help, None, MetricType::Histogram)?;
    for (labels, _, histogram) in tallies {
        histogram.encode(family.encode_family(labels)?)?;
    }
    Ok(())
}

fn gauge(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    value: i64,
) -> Result<(), std::fmt::Error> {
    ConstGauge::new(value).encode(encoder.encode_descriptor(name, help, None, MetricType::Gauge)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn only_a_loopback_address_unless_allowed() {
        let public: SocketAddr = "0.0.0.0:0".parse().expect("address");
        let error = bind(public, false).await.expect_err("refused");
        assert!(
            error.to_string().contains("--metrics-allow-remote"),
            "{error}"
        );
        let local: SocketAddr = "127.0.0.1:0".parse().expect("address");
        assert!(bind(local, false).await.is_ok());
    }

    #[test]
    fn the_exposition_has_every_family_with_its_type() {
        let metrics = ServeMetrics::default();
        crate::engines::observe::CallObserver::call_done(
            &metrics,
            "keep-recent",
            crate::contract::failure::Operation::Assemble,
            CallOutcome::Served,
            Duration::from_millis(3),
        );
        let text = render(
            &metrics,
            LiveFigures {
                sessions: 2,
                released_sessions: 5,
                quarantined: vec!["chaos".into()],
                ..LiveFigures::default()
            },
        );
        for line in [
            "# TYPE ctxbox_engine_calls_total counter",
            "ctxbox_engine_calls_total{engine=\"keep-recent\",operation=\"assemble\",outcome=\"served\"} 1",
            "# TYPE ctxbox_engine_call_duration_seconds histogram",
            "ctxbox_engine_call_duration_seconds_count{engine=\"keep-recent\",operation=\"assemble\"} 1",
            "ctxbox_live_sessions 2",
            "ctxbox_released_sessions_total 5",
            "ctxbox_quarantined_engines 1",
            "ctxbox_engine_quarantined{engine=\"chaos\"} 1",
        ] {
            assert!(
                text.lines().any(|have| have == line),
                "no `{line}` in:\n{text}"
            );
        }
    }
}
