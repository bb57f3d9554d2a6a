//! The request loop: reads request lines, runs each request in its own task
//! under its deadline, and writes each answer as one line as soon as it is
//! ready (answers may come out of order; ids match them up).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use serde::Deserialize;
use serde_json::{Value, json};
use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::{Semaphore, mpsc};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use super::methods::Service;
use super::protocol::{
    Answer, ErrorCode, MAX_LINE_BYTES, PROTOCOL_VERSION, ProtocolError, Request, Response,
    SUPPORTED_PROTOCOLS, params, parse_request,
};
use super::reverse::{ClientCompletions, REVERSE_ID_PREFIX, ReverseCalls};

/// How long a `commitTurn` past its deadline may take to say whether it
/// committed (its engine calls are aborted: they end within the sandbox's
/// abort grace).
const COMMIT_SETTLE: Duration = Duration::from_secs(2);

/// Answer lines waiting for the client to read them. When it stops reading,
/// the queue fills, request tasks wait to answer, and the server stops
/// reading requests: memory follows the queue, not the client.
const ANSWER_QUEUE: usize = 64;

/// Extra time a request gets beyond the sandbox's own deadline, so a hung
/// engine is stopped (and quarantined) by the sandbox and answered by
/// `legacy` before the request itself gives up.
const DEADLINE_MARGIN: Duration = Duration::from_secs(2);

#[derive(Debug, Deserialize)]
struct HelloArgs {
    /// The newest version the client speaks.
    protocol: Option<u64>,
    /// Every version the client speaks (instead of `protocol`).
    protocols: Option<Vec<u64>>,
    /// What the client can answer when the server asks (`complete`).
    #[serde(default)]
    capabilities: Vec<String>,
}

#[derive(Debug, Deserialize)]
struct CancelArgs {
    target: Value,
}

/// The requests still running, by id, with the token that cancels each.
/// Capacity the line buffer keeps between lines: ordinary requests fit.
const KEPT_LINE_BUFFER_BYTES: usize = 1024 * 1024;

type InFlight = Arc<Mutex<HashMap<String, CancellationToken>>>;

/// Numbers the connections (clients) served by this process.
static NEXT_CLIENT: AtomicU64 = AtomicU64::new(1);

/// Serves requests from `input` until it ends, answering on `output`; then
/// waits for the requests still running (each ends by its deadline). The
/// connection is one client: what its `hello` chooses (the model of its
/// engines' completions) holds for its own requests only.
pub async fn serve<R, W>(service: Arc<Service>, input: R, output: W) -> std::io::Result<()>
where
    R: AsyncBufRead + Unpin,
    W: AsyncWrite + Unpin + Send + 'static,
{
    super::heap::tune_for_long_life();
    let (answers, mut outbox) = mpsc::channel::<String>(ANSWER_QUEUE);
    let writer_service = service.clone();
    let writer = tokio::spawn(async move {
        let mut output = output;
        while let Some(line) = outbox.recv().await {
            output.write_all(line.as_bytes()).await?;
            output.write_all(b"\n").await?;
            output.flush().await?;
            let bytes = line.len();
            drop(line);
            writer_service.memory_freed(bytes);
        }
        Ok::<_, std::io::Error>(())
    });
    let in_flight: InFlight = Arc::default();
    let slots = Arc::new(Semaphore::new(
        service.runtime().config().serve.max_in_flight,
    ));
    let reverse = Arc::new(ReverseCalls::new(answers.clone()));
    let client = NEXT_CLIENT.fetch_add(1, Ordering::Relaxed);
    let sweeper = service.sweep_interval().map(|every| {
        let service = service.clone();
        tokio::spawn(async move {
            let mut ticks = tokio::time::interval(every);
            ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                ticks.tick().await;
                service.release_idle();
            }
        })
    });
    let mut running = JoinSet::new();
    let mut greeted = false;
    let mut input = input;
    let mut buffer = Vec::new();
    loop {
        buffer.clear();
        // A huge line's buffer is not kept for the connection's lifetime.
        buffer.shrink_to(KEPT_LINE_BUFFER_BYTES);
        let read = (&mut input)
            .take(MAX_LINE_BYTES as u64 + 1)
            .read_until(b'\n', &mut buffer)
            .await?;
        if read == 0 {
            break;
        }
        if buffer.len() > MAX_LINE_BYTES {
            let _ = answers
                .send(error_line(
                    Value::Null,
                    ErrorCode::ParseError,
                    format!("a request line is longer than {MAX_LINE_BYTES} bytes"),
                ))
                .await;
            // Skip the rest of the oversized line.
            skip_line(&mut input).await?;
            continue;
        }
        let Ok(line) = std::str::from_utf8(&buffer) else {
            let _ = answers
                .send(error_line(
                    Value::Null,
                    ErrorCode::ParseError,
                    "the line is not UTF-8".into(),
                ))
                .await;
            continue;
        };
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        // An answer to one of the server's own requests (protocol 2).
        if line.contains(REVERSE_ID_PREFIX) && reverse.take_answer(line) {
            continue;
        }
        let request = match parse_request(line) {
            Ok(request) => request,
            Err(answer) => {
                let _ = answers.send(answer.to_line()).await;
                continue;
            }
        };
        // No two requests in flight with one id, whatever their method.
        let busy = in_flight
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .contains_key(&request.id.to_string());
        if busy {
            let key = request.id.to_string();
            let _ = answers
                .send(error_line(
                    request.id,
                    ErrorCode::DuplicateId,
                    format!("request {key} is still running; use a new id"),
                ))
                .await;
            continue;
        }
        if request.deadline_ms == Some(0) {
            let _ = answers
                .send(error_line(
                    request.id,
                    ErrorCode::InvalidParams,
                    "`deadlineMs` must be at least 1".into(),
                ))
                .await;
            continue;
        }
        match request.method.as_str() {
            "hello" => {
                let outcome = hello(&service, client, &request, &reverse);
                greeted |= outcome.is_ok();
                let _ = answers
                    .send(Response::to(request.id, outcome).to_line())
                    .await;
            }
            _ if !greeted => {
                let _ = answers
                    .send(error_line(
                        request.id,
                        ErrorCode::HandshakeRequired,
                        format!(
                            "send `hello` with \"protocol\": {PROTOCOL_VERSION} (or 1) before `{}`",
                            request.method
                        ),
                    ))
                    .await;
            }
            "cancel" => {
                let outcome = cancel(&in_flight, &request);
                let _ = answers
                    .send(Response::to(request.id, outcome).to_line())
                    .await;
            }
            _ => {
                let key = request.id.to_string();
                let Ok(slot) = slots.clone().try_acquire_owned() else {
                    let _ = answers.send(error_line(
                        request.id,
                        ErrorCode::Overloaded,
                        format!(
                            "{} requests are running (serve.maxInFlight); retry when one answers",
                            service.runtime().config().serve.max_in_flight
                        ),
                    )).await;
                    continue;
                };
                let token = CancellationToken::new();
                let duplicate = {
                    let mut map = in_flight.lock().unwrap_or_else(PoisonError::into_inner);
                    let duplicate = map.contains_key(&key);
                    if !duplicate {
                        map.insert(key.clone(), token.clone());
                    }
                    duplicate
                };
                if duplicate {
                    let _ = answers
                        .send(error_line(
                            request.id,
                            ErrorCode::DuplicateId,
                            format!("request {key} is still running; use a new id"),
                        ))
                        .await;
                    continue;
                }
                let deadline = deadline(&service, &request);
                let service = service.clone();
                let answers = answers.clone();
                let in_flight = in_flight.clone();
                running.spawn(async move {
                    let started = Instant::now();
                    let mut request = request;
                    let engine = request.engine();
                    let outcome = run(service.clone(), client, &mut request, token, deadline).await;
                    service.request_done(
                        &request.method,
                        engine.as_deref(),
                        &outcome,
                        started.elapsed(),
                    );
                    in_flight
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .remove(&key);
                    // The slot is held until the answer is queued: a client
                    // that stops reading holds at most maxInFlight answers.
                    let _ = answers
                        .send(Response::to(request.id, outcome).to_line())
                        .await;
                    drop(slot);
                });
            }
        }
        // Reap finished request tasks as we go.
        while running.try_join_next().is_some() {}
    }
    // The client is gone: no answer to a reverse call can come any more, so
    // the requests waiting on one hear `unavailable` now, not at their
    // deadline (minutes, for a compaction).
    reverse.close();
    while running.join_next().await.is_some() {}
    service.runtime().completions().forget_client(client);
    if let Some(sweeper) = sweeper {
        sweeper.abort();
    }
    drop(answers);
    writer
        .await
        .unwrap_or_else(|error| Err(std::io::Error::other(error)))
}

/// The handshake of client `client`: the newest version both sides speak,
/// and, for a version-2 client that can answer `complete`, the client's
/// model for the completions of engine calls made for it.
fn hello(
    service: &Service,
    client: u64,
    request: &Request,
    reverse: &Arc<ReverseCalls>,
) -> Result<Value, ProtocolError> {
    let args: HelloArgs = params(&request.params)?;
    let offered: Vec<u64> = match (&args.protocols, args.protocol) {
        (Some(versions), _) => versions.clone(),
        (None, Some(newest)) => (1..=newest.min(PROTOCOL_VERSION)).collect(),
        (None, None) => {
            return Err(ProtocolError::invalid(
                "`hello` needs `protocol` (the newest version the client speaks)",
            ));
        }
    };
    let Some(version) = offered
        .iter()
        .copied()
        .filter(|version| SUPPORTED_PROTOCOLS.contains(version))
        .max()
    else {
        return Err(ProtocolError::new(
            ErrorCode::UnsupportedProtocol,
            format!(
                "protocol {offered:?} is not spoken here; this server speaks {SUPPORTED_PROTOCOLS:?}"
            ),
        )
        .with_data(json!({ "supported": SUPPORTED_PROTOCOLS })));
    };
    let client_model = (version >= 2
        && args
            .capabilities
            .iter()
            .any(|capability| capability == "complete"))
    .then(|| ClientCompletions::new(reverse.clone()));
    Ok(service.hello(version, client, client_model))
}

fn cancel(in_flight: &InFlight, request: &Request) -> Result<Value, ProtocolError> {
    let args: CancelArgs = params(&request.params)?;
    let token = in_flight
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .get(&args.target.to_string())
        .cloned();
    if let Some(token) = &token {
        token.cancel();
    }
    Ok(json!({ "cancelled": token.is_some() }))
}

/// How long `request` may take: what it asked for, else the sandbox's call
/// deadline plus a margin; the methods whose engine calls may compact
/// (`compact`, `afterTurn`, `commitTurn`, which runs after-turn) get the
/// compaction window instead.
fn deadline(service: &Service, request: &Request) -> Duration {
    if let Some(ms) = request.deadline_ms {
        return Duration::from_millis(ms);
    }
    let sandbox = &service.runtime().config().sandbox;
    let may_compact = matches!(
        request.method.as_str(),
        "compact" | "afterTurn" | "commitTurn"
    );
    let engine_deadline = if may_compact {
        sandbox.compaction_window()
    } else {
        sandbox.call_timeout()
    };
    engine_deadline + DEADLINE_MARGIN
}

/// Runs one request of client `client` in its own task, answering by
/// `deadline` or on cancellation whatever the task is doing (it is told to
/// stop and finishes in the background).
async fn run(
    service: Arc<Service>,
    client: u64,
    request: &mut Request,
    token: CancellationToken,
    deadline: Duration,
) -> Result<Answer, ProtocolError> {
    let method = request.method.clone();
    // Handed over, not copied: a request's parameters may be most of a
    // 64 MiB line.
    let params = request.take_params();
    let params_bytes = params.get().len();
    let abort = token.clone();
    let id = request.id.to_string();
    let mut work = tokio::spawn(async move {
        let answer = service.call(&method, params, abort, client, id).await;
        service.memory_freed(params_bytes);
        answer
    });
    tokio::select! {
        joined = &mut work => joined.unwrap_or_else(|error| {
            Err(ProtocolError::new(
                ErrorCode::Internal,
                format!("the `{}` handler failed: {error}", request.method),
            ))
        }),
        () = tokio::time::sleep(deadline) => {
            token.cancel();
            let late = ProtocolError::new(
                ErrorCode::DeadlineExceeded,
                format!("`{}` did not finish within {} ms", request.method, deadline.as_millis()),
            );
            if request.method != "commitTurn" {
                return Err(late);
            }
            // A turn commit is durable once written: the client must hear
            // whether it was. Told to stop, the handler ends at once (before
            // the commit: not committed; after it: the engine's calls are
            // cut short), so its own answer is awaited, briefly.
            match tokio::time::timeout(COMMIT_SETTLE, work).await {
                Ok(Ok(Ok(answer))) => Ok(answer),
                _ => Err(late),
            }
        }
        () = token.cancelled() => Err(ProtocolError::new(
            ErrorCode::Cancelled,
            format!("`{}` was cancelled", request.method),
        )),
    }
}

fn error_line(id: Value, code: ErrorCode, message: String) -> String {
    Response::error(id, ProtocolError::new(code, message)).to_line()
}

async fn skip_line<R: AsyncBufRead + Unpin>(input: &mut R) -> std::io::Result<()> {
    loop {
        let chunk = input.fill_buf().await?;
        if chunk.is_empty() {
            return Ok(());
        }
        if let Some(end) = chunk.iter().position(|&byte| byte == b'\n') {
            input.consume(end + 1);
            return Ok(());
        }
        let len = chunk.len();
        input.consume(len);
    }
}
