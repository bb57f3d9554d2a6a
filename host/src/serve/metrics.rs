//! What one `ctxbox serve` process has done, counted as it happens:
//! requests by method, engine and outcome, engine calls (through the
//! guard's [`CallObserver`]) by engine, operation and outcome, each with a
//! latency histogram. The figures read at the moment of asking (sessions,
//! warm instances, quarantines, store round trips, engines' completions)
//! come with them as [`LiveFigures`]. [`exposition`](super::exposition)
//! serves them to Prometheus; [`snapshots`](super::snapshots) writes them
//! to the data directory for `ctxbox health`.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::protocol::{Answer, ErrorCode, ProtocolError};
use crate::contract::failure::Operation;
use crate::engines::observe::{CallObserver, CallOutcome};
use crate::services::completions::CompletionTotals;

/// How a request ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RequestOutcome {
    /// Answered, by the engine it named.
    Served,
    /// Answered by `legacy` (or passed through) in the engine's place.
    FellBack,
    /// Past its deadline.
    Deadline,
    /// Cancelled by the client.
    Cancelled,
    /// The engine's call failed and nothing stood in (`engine-failed`).
    EngineFailed,
    /// Refused for any other reason (bad parameters, an unknown engine, a
    /// busy session, the store…).
    Error,
}

impl RequestOutcome {
    /// Every outcome, in order.
    pub const ALL: [Self; 6] = [
        Self::Served,
        Self::FellBack,
        Self::Deadline,
        Self::Cancelled,
        Self::EngineFailed,
        Self::Error,
    ];

    /// The snake_case name used in metrics.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Served => "served",
            Self::FellBack => "fell_back",
            Self::Deadline => "deadline",
            Self::Cancelled => "cancelled",
            Self::EngineFailed => "engine_failed",
            Self::Error => "error",
        }
    }

    /// How `answer` ends a request for `engine`: an answer `servedBy`
    /// another engine fell back.
    pub fn of(answer: &Result<Answer, ProtocolError>, engine: &str) -> Self {
        match answer {
            Ok(value) => match value.get("servedBy").and_then(Value::as_str) {
                Some(served_by) if served_by != engine => Self::FellBack,
                _ => Self::Served,
            },
            Err(error) => match error.code {
                ErrorCode::DeadlineExceeded => Self::Deadline,
                ErrorCode::Cancelled => Self::Cancelled,
                ErrorCode::EngineFailed => Self::EngineFailed,
                _ => Self::Error,
            },
        }
    }
}

/// Room for the outcomes of either kind ([`RequestOutcome`], [`CallOutcome`]):
/// the longer list's length, so a new outcome can never index past it.
pub(super) const OUTCOMES: usize = if RequestOutcome::ALL.len() > CallOutcome::ALL.len() {
    RequestOutcome::ALL.len()
} else {
    CallOutcome::ALL.len()
};

/// Outcome counts and latencies of one kind of request or call.
pub(super) struct Tally {
    /// One count per outcome, in the outcome type's `ALL` order (the
    /// counts past its last outcome stay zero).
    pub(super) counts: [u64; OUTCOMES],
    /// Seconds each took, in buckets (for Prometheus)…
    pub(super) latency: Histogram,
    /// …and together.
    seconds: f64,
}

impl Tally {
    fn new() -> Self {
        Self {
            counts: [0; OUTCOMES],
            // 100 µs to about 26 s, ×4 a bucket.
            latency: Histogram::new(exponential_buckets(0.000_1, 4.0, 10)),
            seconds: 0.0,
        }
    }

    fn record(&mut self, outcome: usize, elapsed: Duration) {
        self.counts[outcome] += 1;
        self.latency.observe(elapsed.as_secs_f64());
        self.seconds += elapsed.as_secs_f64();
    }
}

/// A request's labels: its method and engine.
pub(super) type RequestKey = (String, String);
/// Engine calls' tallies by engine, then operation (looked up by the
/// engine's `&str`: no allocation per call once an engine is known).
pub(super) type CallTallies = HashMap<String, HashMap<Operation, Tally>>;

/// The counts of one serving process.
pub struct ServeMetrics {
    started_at_ms: i64,
    pub(super) requests: Mutex<HashMap<RequestKey, Tally>>,
    pub(super) calls: Mutex<CallTallies>,
}

impl Default for ServeMetrics {
    fn default() -> Self {
        Self {
            started_at_ms: now_ms(),
            requests: Mutex::default(),
            calls: Mutex::default(),
        }
    }
}

impl ServeMetrics {
    /// Counts a request to `method` for `engine` that ended with `outcome`
    /// after `elapsed`. Labels must come from a bounded set: an unknown
    /// method or engine is counted as `unknown`.
    pub fn request_done(
        &self,
        method: &str,
        engine: &str,
        outcome: RequestOutcome,
        elapsed: Duration,
    ) {
        let index = RequestOutcome::ALL
            .iter()
            .position(|known| *known == outcome)
            .unwrap_or_default();
        lock(&self.requests)
            .entry((method.to_owned(), engine.to_owned()))
            .or_insert_with(Tally::new)
            .record(index, elapsed);
    }

    /// When the process started, milliseconds since the Unix epoch.
    pub fn started_at_ms(&self) -> i64 {
        self.started_at_ms
    }

    /// Everything counted so far, with `live`, as numbers.
    pub fn snapshot(&self, live: LiveFigures) -> MetricsSnapshot {
        let requests = figures(
            lock(&self.requests)
                .iter()
                .map(|((method, engine), tally)| (engine.clone(), method.clone(), tally)),
            &RequestOutcome::ALL.map(RequestOutcome::as_str),
        );
        let calls = lock(&self.calls);
        let engine_calls = figures(
            each_call(&calls).map(|(engine, operation, tally)| {
                (engine.to_owned(), operation.as_str().to_owned(), tally)
            }),
            &CallOutcome::ALL.map(CallOutcome::as_str),
        );
        let mut engines: BTreeMap<String, EngineFigures> = BTreeMap::new();
        for (engine, _, tally) in
            each_call(&calls).filter(|(_, operation, _)| *operation == Operation::CallTool)
        {
            engines
                .entry(engine.to_owned())
                .or_insert_with(|| EngineFigures::named(engine))
                .tool_calls += tally.counts.iter().sum::<u64>();
        }
        for (engine, totals) in &live.completions {
            let figures = engines
                .entry(engine.clone())
                .or_insert_with(|| EngineFigures::named(engine));
            figures.completions = totals.completions;
            figures.refused_completions = totals.refused;
            figures.input_tokens = totals.input_tokens;
            figures.output_tokens = totals.output_tokens;
        }
        MetricsSnapshot {
            pid: std::process::id(),
            started_at_ms: self.started_at_ms,
            written_at_ms: now_ms(),
            live_sessions: live.sessions,
            released_sessions: live.released_sessions,
            warm_instances: live.warm_instances,
            quarantined: live.quarantined,
            store_round_trips: live.store_round_trips,
            requests,
            engine_calls,
            engines: engines.into_values().collect(),
        }
    }
}

impl CallObserver for ServeMetrics {
    fn call_done(
        &self,
        engine: &str,
        operation: Operation,
        outcome: CallOutcome,
        elapsed: Duration,
    ) {
        let index = CallOutcome::ALL
            .iter()
            .position(|known| *known == outcome)
            .unwrap_or_default();
        let mut calls = lock(&self.calls);
        let operations = match calls.get_mut(engine) {
            Some(operations) => operations,
            None => calls.entry(engine.to_owned()).or_default(),
        };
        operations
            .entry(operation)
            .or_insert_with(Tally::new)
            .record(index, elapsed);
    }
}

/// What is read at the moment of asking rather than counted.
#[derive(Debug, Clone, Default)]
pub struct LiveFigures {
    /// Sessions held.
    pub sessions: usize,
    /// Sessions given up so far (idle, or the least recently used past
    /// `serve.maxSessions`).
    pub released_sessions: u64,
    /// Engine instances alive in the sandbox.
    pub warm_instances: u32,
    /// Engines quarantined now, by id.
    pub quarantined: Vec<String>,
    /// Connections taken from the shared store's pool (`None`: the
    /// embedded store).
    pub store_round_trips: Option<u64>,
    /// Engines' model completions, by engine id.
    pub completions: HashMap<String, CompletionTotals>,
}

/// One serving process's figures at one moment: what `ctxbox health`
/// shows and the metrics endpoint serves.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MetricsSnapshot {
    /// The process.
    pub pid: u32,
    /// When it started, milliseconds since the Unix epoch.
    pub started_at_ms: i64,
    /// When these figures were taken.
    pub written_at_ms: i64,
    /// Sessions held.
    pub live_sessions: usize,
    /// Sessions given up so far.
    #[serde(default)]
    pub released_sessions: u64,
    /// Engine instances alive.
    pub warm_instances: u32,
    /// Engines quarantined, by id.
    pub quarantined: Vec<String>,
    /// Connections taken from the shared store's pool (`None`: embedded).
    pub store_round_trips: Option<u64>,
    /// Requests, by engine and method (`name`).
    pub requests: Vec<Figures>,
    /// Engine calls, by engine and operation (`name`).
    pub engine_calls: Vec<Figures>,
    /// Per engine: its model completions and tool calls.
    pub engines: Vec<EngineFigures>,
}

/// Counts and time of one kind of request or call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Figures {
    /// The engine.
    pub engine: String,
    /// The method or operation.
    pub name: String,
    /// How many ended each way (outcomes that never happened left out).
    pub outcomes: BTreeMap<String, u64>,
    /// How many in all.
    pub count: u64,
    /// Their time together, seconds.
    pub seconds: f64,
}

/// One engine's use of the host's powers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EngineFigures {
    /// The engine.
    pub engine: String,
    /// Model completions answered.
    pub completions: u64,
    /// Model completions refused by a budget or failed.
    pub refused_completions: u64,
    /// Tokens of the completions' requests.
    pub input_tokens: u64,
    /// Tokens of their answers.
    pub output_tokens: u64,
    /// Calls of its tools.
    pub tool_calls: u64,
}

impl EngineFigures {
    fn named(engine: &str) -> Self {
        Self {
            engine: engine.to_owned(),
            completions: 0,
            refused_completions: 0,
            input_tokens: 0,
            output_tokens: 0,
            tool_calls: 0,
        }
    }
}

/// Every engine call's tally with its engine and operation.
pub(super) fn each_call(calls: &CallTallies) -> impl Iterator<Item = (&str, Operation, &Tally)> {
    calls.iter().flat_map(|(engine, operations)| {
        operations
            .iter()
            .map(move |(operation, tally)| (engine.as_str(), *operation, tally))
    })
}

/// `tallies` (each with its engine and name) as figures, sorted by engine
/// and name (`names`: the outcomes' names in tally order).
fn figures<'a>(
    tallies: impl Iterator<Item = (String, String, &'a Tally)>,
    names: &[&'static str],
) -> Vec<Figures> {
    let mut figures: Vec<Figures> = tallies
        .map(|(engine, name, tally)| Figures {
            engine,
            name,
            outcomes: names
                .iter()
                .zip(tally.counts)
                .filter(|(_, count)| *count > 0)
                .map(|(name, count)| ((*name).to_owned(), count))
                .collect(),
            count: tally.counts.iter().sum(),
            seconds: tally.seconds,
        })
        .collect();
    figures.sort_by(|a, b| (&a.engine, &a.name).cmp(&(&b.engine, &b.name)));
    figures
}

pub(super) fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Now, milliseconds since the Unix epoch.
pub(super) fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |since| since.as_millis() as i64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn outcomes_and_latencies_are_counted_by_their_labels() {
        let metrics = ServeMetrics::default();
        metrics.call_done(
            "keep-recent",
            Operation::Assemble,
            CallOutcome::Served,
            Duration::from_millis(2),
        );
        metrics.call_done(
            "keep-recent",
            Operation::Assemble,
            CallOutcome::Deadline,
            Duration::from_millis(8),
        );
        metrics.call_done(
            "keep-recent",
            Operation::CallTool,
            CallOutcome::Served,
            Duration::from_millis(1),
        );
        metrics.request_done(
            "assemble",
            "keep-recent",
            RequestOutcome::of(&Ok(json!({"servedBy": "legacy"}).into()), "keep-recent"),
            Duration::from_millis(9),
        );
        let snapshot = metrics.snapshot(LiveFigures {
            sessions: 3,
            ..LiveFigures::default()
        });
        assert_eq!(snapshot.live_sessions, 3);
        let assemble = &snapshot.engine_calls[0];
        assert_eq!((assemble.name.as_str(), assemble.count), ("assemble", 2));
        assert_eq!(assemble.outcomes["served"], 1);
        assert_eq!(assemble.outcomes["deadline"], 1);
        assert!((assemble.seconds - 0.010).abs() < 1e-9);
        assert_eq!(snapshot.engines[0].tool_calls, 1);
        assert_eq!(snapshot.requests[0].outcomes["fell_back"], 1);
    }

    #[test]
    fn a_request_outcome_follows_the_answer() {
        let error = |code| Err(ProtocolError::new(code, "x"));
        assert_eq!(
            RequestOutcome::of(&Ok(json!({"servedBy": "lossless"}).into()), "lossless"),
            RequestOutcome::Served
        );
        assert_eq!(
            RequestOutcome::of(&Ok(json!({}).into()), "lossless"),
            RequestOutcome::Served
        );
        assert_eq!(
            RequestOutcome::of(&error(ErrorCode::DeadlineExceeded), "x"),
            RequestOutcome::Deadline
        );
        assert_eq!(
            RequestOutcome::of(&error(ErrorCode::SessionBusy), "x"),
            RequestOutcome::Error
        );
    }
}
