//! Timing and memory readings for `ctxbox bench`.

use std::future::Future;
use std::time::{Duration, Instant};

use serde::Serialize;

/// The spread of a set of timings.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Stats {
    /// Fastest sample.
    pub min: Duration,
    /// Middle sample.
    pub median: Duration,
    /// Slowest sample.
    pub max: Duration,
    /// How many samples.
    pub samples: usize,
}

impl Stats {
    /// The stats of `samples` (at least one).
    pub fn of(mut samples: Vec<Duration>) -> Self {
        samples.sort_unstable();
        let samples_len = samples.len().max(1);
        Self {
            min: samples.first().copied().unwrap_or_default(),
            median: samples.get(samples.len() / 2).copied().unwrap_or_default(),
            max: samples.last().copied().unwrap_or_default(),
            samples: samples_len,
        }
    }

    /// `median (min … max)` in a readable unit.
    pub fn describe(&self) -> String {
        format!(
            "median {} (min {}, max {}; n={})",
            human(self.median),
            human(self.min),
            human(self.max),
            self.samples
        )
    }
}

/// Times `runs` calls of `call`, after `runs / 10` (at least one) unmeasured
/// warm-up calls. The first failing call ends the measurement with its error:
/// a failure must never be timed as a fast success.
pub async fn time<F, Fut>(runs: usize, mut call: F) -> anyhow::Result<Stats>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = anyhow::Result<()>>,
{
    for _ in 0..warm_up(runs) {
        call().await?;
    }
    let mut samples = Vec::with_capacity(runs);
    for _ in 0..runs {
        let started = Instant::now();
        call().await?;
        samples.push(started.elapsed());
    }
    Ok(Stats::of(samples))
}

/// Times `runs` calls each of `a` and `b`, alternating one of each, so a
/// change in the machine's load affects both sides of a ratio alike.
pub async fn time_pair<A, FutA, B, FutB>(
    runs: usize,
    mut a: A,
    mut b: B,
) -> anyhow::Result<(Stats, Stats)>
where
    A: FnMut() -> FutA,
    FutA: Future<Output = anyhow::Result<()>>,
    B: FnMut() -> FutB,
    FutB: Future<Output = anyhow::Result<()>>,
{
    for _ in 0..warm_up(runs) {
        a().await?;
        b().await?;
    }
    let mut samples_a = Vec::with_capacity(runs);
    let mut samples_b = Vec::with_capacity(runs);
    for _ in 0..runs {
        let started = Instant::now();
        a().await?;
        samples_a.push(started.elapsed());
        let started = Instant::now();
        b().await?;
        samples_b.push(started.elapsed());
    }
    Ok((Stats::of(samples_a), Stats::of(samples_b)))
}

/// Times synchronous `work` the same way as [`time`].
pub fn time_sync(
    runs: usize,
    mut work: impl FnMut() -> anyhow::Result<()>,
) -> anyhow::Result<Stats> {
    for _ in 0..warm_up(runs) {
        work()?;
    }
    let mut samples = Vec::with_capacity(runs);
    for _ in 0..runs {
        let started = Instant::now();
        work()?;
        samples.push(started.elapsed());
    }
    Ok(Stats::of(samples))
}

/// Unmeasured calls before `runs` measured ones.
fn warm_up(runs: usize) -> usize {
    (runs / 10).max(1)
}

/// `a / b` of two medians.
pub fn ratio(a: &Stats, b: &Stats) -> f64 {
    a.median.as_secs_f64() / b.median.as_secs_f64()
}

/// A duration in the unit that reads best.
pub fn human(duration: Duration) -> String {
    let nanos = duration.as_nanos() as f64;
    if nanos < 1_000.0 {
        format!("{nanos:.0} ns")
    } else if nanos < 1_000_000.0 {
        format!("{:.2} µs", nanos / 1e3)
    } else if nanos < 1_000_000_000.0 {
        format!("{:.2} ms", nanos / 1e6)
    } else {
        format!("{:.2} s", nanos / 1e9)
    }
}

/// The process's resident memory now and at its peak, bytes (Linux; `None`
/// elsewhere).
pub fn resident_bytes() -> Option<Resident> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let field = |name: &str| -> Option<u64> {
        let line = status.lines().find(|line| line.starts_with(name))?;
        let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
        Some(kib * 1024)
    };
    Some(Resident {
        now: field("VmRSS:")?,
        peak: field("VmHWM:")?,
    })
}

/// Resident memory readings.
#[derive(Debug, Clone, Copy)]
pub struct Resident {
    /// Resident now.
    pub now: u64,
    /// The process's peak so far.
    pub peak: u64,
}

/// Bytes as MiB.
pub fn mib(bytes: u64) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}
