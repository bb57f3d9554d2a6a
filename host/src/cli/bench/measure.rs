//! Timing and memory readings for `ctxbox bench`.

use std::future::Future;
use std::time::{Duration, Instant};

use serde::Serialize;

use super::callgrind::{self, Dumps};

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

/// How the sandbox rows are measured: by the clock, or by counting
/// instructions under callgrind (`--count-instructions`).
pub enum Meter {
    /// Wall-clock time of each run.
    Clock,
    /// Instructions the bench's thread executes in each run.
    Instructions(Dumps),
}

/// One row's measured runs, read when the row is done.
pub enum Sampler<'a> {
    /// Each run's wall-clock time.
    Clock(Vec<Duration>),
    /// Runs counted so far, into the dumps.
    Instructions { runs: usize, dumps: &'a mut Dumps },
}

impl Meter {
    /// `runs` as many as this meter needs: a count is exact, so under
    /// callgrind (some fifty times slower) a twentieth of them, at least 3.
    pub fn runs(&self, runs: usize) -> usize {
        match self {
            Self::Clock => runs,
            Self::Instructions(_) => (runs / 20).max(3),
        }
    }

    /// Whether this meter counts instructions.
    pub fn counts(&self) -> bool {
        matches!(self, Self::Instructions(_))
    }

    /// Starts measuring one row.
    pub fn sampler(&mut self) -> Sampler<'_> {
        match self {
            Self::Clock => Sampler::Clock(Vec::new()),
            Self::Instructions(dumps) => Sampler::Instructions { runs: 0, dumps },
        }
    }

    /// Measures `runs` calls of `call`, after `runs / 10` (at least one)
    /// unmeasured warm-up calls. The first failing call ends the measurement
    /// with its error: a failure must never be read as a fast success.
    pub async fn measure<F, Fut>(
        &mut self,
        what: &str,
        runs: usize,
        mut call: F,
    ) -> anyhow::Result<Reading>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = anyhow::Result<()>>,
    {
        for _ in 0..warm_up(runs) {
            call().await?;
        }
        let mut sampler = self.sampler();
        for _ in 0..runs {
            sampler.run(call()).await?;
        }
        sampler.read(what)
    }

    /// Measures `runs` calls each of `a` and `b`. By the clock they
    /// alternate, one of each, so a change in the machine's load affects
    /// both sides of a ratio alike; counts need no such care.
    pub async fn measure_pair<A, FutA, B, FutB>(
        &mut self,
        what: [&str; 2],
        runs: usize,
        mut a: A,
        mut b: B,
    ) -> anyhow::Result<(Reading, Reading)>
    where
        A: FnMut() -> FutA,
        FutA: Future<Output = anyhow::Result<()>>,
        B: FnMut() -> FutB,
        FutB: Future<Output = anyhow::Result<()>>,
    {
        if self.counts() {
            let first = self.measure(what[0], runs, a).await?;
            return Ok((first, self.measure(what[1], runs, b).await?));
        }
        for _ in 0..warm_up(runs) {
            a().await?;
            b().await?;
        }
        let (mut samples_a, mut samples_b) = (Vec::new(), Vec::new());
        for _ in 0..runs {
            let started = Instant::now();
            a().await?;
            samples_a.push(started.elapsed());
            let started = Instant::now();
            b().await?;
            samples_b.push(started.elapsed());
        }
        Ok((
            Reading::Time(Stats::of(samples_a)),
            Reading::Time(Stats::of(samples_b)),
        ))
    }

    /// Measures synchronous `work` the same way as [`Meter::measure`].
    pub fn measure_sync(
        &mut self,
        what: &str,
        runs: usize,
        mut work: impl FnMut() -> anyhow::Result<()>,
    ) -> anyhow::Result<Reading> {
        for _ in 0..warm_up(runs) {
            work()?;
        }
        let mut sampler = self.sampler();
        for _ in 0..runs {
            sampler.run_sync(&mut work)?;
        }
        sampler.read(what)
    }
}

impl Sampler<'_> {
    /// Measures one run of `work`.
    pub async fn run<T>(&mut self, work: impl Future<Output = T>) -> T {
        match self {
            Self::Clock(samples) => {
                let started = Instant::now();
                let output = work.await;
                samples.push(started.elapsed());
                output
            }
            Self::Instructions { runs, .. } => {
                *runs += 1;
                callgrind::toggle_collect();
                let output = work.await;
                callgrind::toggle_collect();
                output
            }
        }
    }

    /// Measures one run of synchronous `work`.
    pub fn run_sync<T>(&mut self, work: impl FnOnce() -> T) -> T {
        match self {
            Self::Clock(samples) => {
                let started = Instant::now();
                let output = work();
                samples.push(started.elapsed());
                output
            }
            Self::Instructions { runs, .. } => {
                *runs += 1;
                callgrind::toggle_collect();
                let output = work();
                callgrind::toggle_collect();
                output
            }
        }
    }

    /// What the runs measured; under callgrind, their dump is labelled `what`.
    pub fn read(self, what: &str) -> anyhow::Result<Reading> {
        match self {
            Self::Clock(samples) => Ok(Reading::Time(Stats::of(samples))),
            Self::Instructions { runs, dumps } => {
                let total = dumps.take(what)?;
                Ok(Reading::Instructions {
                    per_run: total / runs.max(1) as u64,
                    runs,
                })
            }
        }
    }
}

/// What a row's runs measured.
#[derive(Debug, Clone, Copy)]
pub enum Reading {
    /// Wall-clock timings.
    Time(Stats),
    /// Instructions per run (mean; callgrind counts them exactly).
    Instructions {
        /// Instructions per run.
        per_run: u64,
        /// How many runs were counted.
        runs: usize,
    },
}

impl Reading {
    /// The timings, if this reading is one: what a time target is judged on.
    pub fn time(&self) -> Option<&Stats> {
        match self {
            Self::Time(stats) => Some(stats),
            Self::Instructions { .. } => None,
        }
    }

    /// The figure ratios divide: the median time in seconds, or the
    /// instructions per run.
    fn magnitude(&self) -> f64 {
        match self {
            Self::Time(stats) => stats.median.as_secs_f64(),
            Self::Instructions { per_run, .. } => *per_run as f64,
        }
    }

    /// The headline figure alone: a median time, or instructions per run.
    pub fn headline(&self) -> String {
        match self {
            Self::Time(stats) => human(stats.median),
            Self::Instructions { per_run, .. } => format!("{} instructions", grouped(*per_run)),
        }
    }

    /// The reading in full, in a readable unit.
    pub fn describe(&self) -> String {
        match self {
            Self::Time(stats) => stats.describe(),
            Self::Instructions { runs, .. } => {
                format!("{} per run (n={runs})", self.headline())
            }
        }
    }

    /// `self / other`: of two medians, or of two counts.
    pub fn ratio(&self, other: &Reading) -> f64 {
        self.magnitude() / other.magnitude()
    }
}

/// `1234567` as `1,234,567`.
fn grouped(figure: u64) -> String {
    let digits = figure.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (index, digit) in digits.chars().enumerate() {
        if index > 0 && (digits.len() - index).is_multiple_of(3) {
            out.push(',');
        }
        out.push(digit);
    }
    out
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

/// Starts the process's peak afresh (Linux's `clear_refs`), so the next
/// [`resident_bytes`] peak is the one reached from now on. `false` when the
/// kernel does not allow it: the peak then is the whole process's.
pub fn reset_peak() -> bool {
    std::fs::write("/proc/self/clear_refs", "5").is_ok()
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
