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
/// warm-up calls.
pub async fn time<F, Fut>(runs: usize, mut call: F) -> Stats
where
    F: FnMut() -> Fut,
    Fut: Future<Output = ()>,
{
    for _ in 0..(runs / 10).max(1) {
        call().await;
    }
    let mut samples = Vec::with_capacity(runs);
    for _ in 0..runs {
        let started = Instant::now();
        call().await;
        samples.push(started.elapsed());
    }
    Stats::of(samples)
}

/// Times synchronous `work` the same way.
pub fn time_sync(runs: usize, mut work: impl FnMut()) -> Stats {
    for _ in 0..(runs / 10).max(1) {
        work();
    }
    let mut samples = Vec::with_capacity(runs);
    for _ in 0..runs {
        let started = Instant::now();
        work();
        samples.push(started.elapsed());
    }
    Stats::of(samples)
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

/// The process's resident memory, bytes (Linux; `None` elsewhere).
pub fn resident_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|line| line.starts_with("VmRSS:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// Bytes as MiB.
pub fn mib(bytes: u64) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}
