//! `ctxbox bench`: every performance target of ARCHITECTURE.md §10 measured in one
//! run, side by side with its baseline, because ratios survive a noisy
//! machine where absolute times do not. Criterion benches
//! (`cargo bench -p ctxbox-tests`) give the detailed statistics behind it.

mod call_times;
mod callgrind;
mod compaction;
mod convergence;
mod index;
mod instance_cost;
mod large_request;
mod measure;
mod memory;
mod powers;
mod recorded;
mod replay;
mod sandbox;
mod serve_client;
mod serve_soak;
mod shared_store;
mod soak;
mod sql;

use std::path::PathBuf;
use std::process::ExitCode;

use serde::Serialize;

use self::measure::{Meter, Reading, Stats};

/// Arguments of `ctxbox bench`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Fewer samples: a smoke run in seconds, not a measurement.
    #[arg(long)]
    quick: bool,
    /// Concurrent warm sessions for the memory target.
    #[arg(long, default_value_t = 1_000)]
    sessions: usize,
    /// Sessions the memory growth is followed to.
    #[arg(long, default_value_t = 5_000)]
    max_sessions: usize,
    /// Messages in the session native compaction is measured on.
    #[arg(long, default_value_t = 100_000)]
    compaction_messages: usize,
    /// Sessions of the soak (load with faults).
    #[arg(long, default_value_t = 1_000)]
    soak_sessions: usize,
    /// Turns per session of the soak.
    #[arg(long, default_value_t = 20)]
    soak_turns: usize,
    /// Sessions streamed through one `ctxbox serve` in the serve soak.
    #[arg(long, default_value_t = 20_000)]
    serve_sessions: usize,
    /// The session to replay (default: the largest fixture when run from a
    /// checkout, else the built-in sample).
    #[arg(long)]
    transcript: Option<PathBuf>,
    /// Measure only these groups (repeatable; default: all).
    #[arg(long, value_enum)]
    only: Vec<Group>,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
    /// Also measure this TypeScript (or any) engine's instance cost beside
    /// the Rust keep-recent's: fresh instances and memory per warm session.
    #[arg(long, value_name = "PATH.wasm")]
    ts_engine: Option<PathBuf>,
    /// Warm sessions per engine for the instance-cost memory figures.
    #[arg(long, default_value_t = 200)]
    ts_sessions: usize,
    /// A `ctxbox.toml` whose `plugins.entries.<id>` settings and limits the
    /// `--ts-engine` runs with, as `ctxbox check --config` runs an engine
    /// (an OpenClaw plugin built with `ctxbox-ts-build --openclaw-plugin`
    /// needs its own fuel and memory).
    #[arg(long, value_name = "ctxbox.toml", requires = "ts_engine")]
    ts_config: Option<PathBuf>,
    /// The PostgreSQL database the `shared` group runs its hosts on and the
    /// `index` group also measures (one without engines' documents: the
    /// index rows measure and vacuum their table; the hosts' sessions are
    /// named per run).
    #[arg(long, value_name = "URL")]
    postgres: Option<String>,
    /// Count the instructions of each sandbox row under valgrind's callgrind
    /// instead of timing it: figures that a loaded machine does not move.
    /// Measures the sandbox rows only; each row's profile is kept for
    /// `callgrind_annotate`.
    #[arg(long)]
    count_instructions: bool,
}

/// The groups of measurements.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Group {
    /// Resident memory of many warm sessions.
    Memory,
    /// Instances, calls, wasm vs native, materialisation, loading, guards.
    Sandbox,
    /// Native compaction of a very long session.
    Compaction,
    /// A full replay of a real session, and every fixture's compactions.
    Replay,
    /// Many concurrent sessions through an engine failing a tenth of its
    /// calls; many more streamed through one `ctxbox serve`.
    Soak,
    /// Engines' powers across the `ctxbox serve` bridge: a reverse model
    /// call, a tool call's round trip.
    Powers,
    /// 1, 2 and 4 hosts on one PostgreSQL (`--postgres URL`).
    Shared,
    /// Engines' searchable memory: puts, searches, bytes on disk.
    Index,
    /// One 16 MiB request through `ctxbox serve`: its peak and what stays
    /// resident (run it alone: the peak is the process's).
    LargeRequest,
    /// Engines' SQL databases: inserts, point selects and FTS5 matches
    /// through the sandbox against rusqlite in-process, bytes on disk.
    Sql,
}

/// What the measurements are given.
pub struct Options {
    quick: bool,
    sessions: usize,
    max_sessions: usize,
    compaction_messages: usize,
    soak_sessions: usize,
    soak_turns: usize,
    serve_sessions: usize,
    transcript: Option<PathBuf>,
    ts_sessions: usize,
    postgres: Option<String>,
}

impl Options {
    /// The smallest quick run, for the rows' own tests.
    #[cfg(test)]
    fn tiny() -> Self {
        Self {
            quick: true,
            sessions: 10,
            max_sessions: 10,
            compaction_messages: 100,
            soak_sessions: 1,
            soak_turns: 1,
            serve_sessions: 1,
            transcript: None,
            ts_sessions: 1,
            postgres: None,
        }
    }

    /// `runs`, or a tenth of it (at least 3) for a quick run.
    fn runs(&self, runs: usize) -> usize {
        if self.quick { (runs / 10).max(3) } else { runs }
    }
}

/// One measured figure beside its target.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    what: String,
    figure: String,
    target: String,
    /// Whether the target is met (`None`: a figure to report, no target).
    met: Option<bool>,
}

impl Row {
    /// A row of one reading against a time target, judged by `met` when the
    /// reading is a time (an instruction count meets no time target).
    fn measured(
        what: &str,
        reading: Reading,
        target: &str,
        met: impl FnOnce(&Stats) -> bool,
    ) -> Self {
        Self {
            what: what.to_owned(),
            figure: reading.describe(),
            target: target.to_owned(),
            met: reading.time().map(met),
        }
    }

    fn skipped(what: &str, why: &str) -> Self {
        Self {
            what: what.to_owned(),
            figure: format!("not measured: {why}"),
            target: "-".to_owned(),
            met: None,
        }
    }
}

/// Runs `ctxbox bench`.
pub async fn run(args: Args) -> anyhow::Result<ExitCode> {
    let options = Options {
        quick: args.quick,
        sessions: if args.quick {
            args.sessions.min(100)
        } else {
            args.sessions
        },
        max_sessions: if args.quick {
            args.max_sessions.min(200)
        } else {
            args.max_sessions
        },
        compaction_messages: if args.quick {
            args.compaction_messages.min(5_000)
        } else {
            args.compaction_messages
        },
        soak_sessions: if args.quick {
            args.soak_sessions.min(50)
        } else {
            args.soak_sessions
        },
        soak_turns: if args.quick {
            args.soak_turns.min(5)
        } else {
            args.soak_turns
        },
        serve_sessions: if args.quick {
            args.serve_sessions.min(1_000)
        } else {
            args.serve_sessions
        },
        transcript: args.transcript,
        ts_sessions: if args.quick {
            args.ts_sessions.min(50)
        } else {
            args.ts_sessions
        }
        .max(1),
        postgres: args.postgres,
    };
    if cfg!(debug_assertions) {
        eprintln!(
            "warning: this is a debug build of ctxbox; its figures say little. Use `cargo run --release -p ctxbox-host -- bench`."
        );
    }
    let mut meter = Meter::Clock;
    if args.count_instructions {
        anyhow::ensure!(
            args.only.iter().all(|group| *group == Group::Sandbox),
            "--count-instructions measures the sandbox rows only; leave out --only or give `--only sandbox`"
        );
        match callgrind::mode()? {
            callgrind::Mode::Rerun => {
                let dir = tempfile::Builder::new()
                    .prefix("ctxbox-callgrind-")
                    .tempdir()?
                    .keep();
                return callgrind::rerun(&dir);
            }
            callgrind::Mode::Counting(dumps) => meter = Meter::Instructions(dumps),
        }
    }
    let mut rows = Vec::new();
    let counting = meter.counts();
    let wanted = |group| {
        if counting {
            group == Group::Sandbox
        } else {
            args.only.is_empty() || args.only.contains(&group)
        }
    };
    // Memory first: later measurements grow the heap it would count.
    if wanted(Group::Memory) {
        memory::rows(&options, &mut rows).await?;
    }
    if wanted(Group::LargeRequest) {
        large_request::rows(&options, &mut rows).await?;
    }
    if wanted(Group::Sandbox) {
        sandbox::rows(&options, &mut meter, &mut rows).await?;
    }
    if wanted(Group::Compaction) {
        compaction::rows(&options, &mut rows).await?;
    }
    if wanted(Group::Replay) {
        replay::rows(&options, &mut rows).await?;
        convergence::rows(&options, &mut rows).await?;
    }
    if wanted(Group::Powers) {
        powers::rows(&options, &mut rows).await?;
    }
    if wanted(Group::Shared) {
        shared_store::rows(&options, &mut rows).await?;
    }
    if wanted(Group::Index) {
        index::rows(&options, &mut rows).await?;
    }
    if wanted(Group::Sql) {
        sql::rows(&options, &mut rows).await?;
    }
    if let Some(ts_engine) = &args.ts_engine {
        let setup = instance_cost::EngineSetup::read(args.ts_config.as_deref())?;
        instance_cost::rows(&options, ts_engine, &setup, &mut rows).await?;
    }
    // Last: a thousand sessions' transcripts grow the heap.
    if wanted(Group::Soak) {
        soak::rows(&options, &mut rows).await?;
        serve_soak::rows(&options, &mut rows).await?;
    }

    let machine = Machine::read(options.quick, counting);
    if args.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&serde_json::json!({ "machine": machine, "rows": rows }))?
        );
    } else {
        println!("{}", machine.describe());
        print_table(&rows);
    }
    Ok(ExitCode::SUCCESS)
}

/// What the figures were measured on.
#[derive(Debug, Serialize)]
struct Machine {
    cores: usize,
    memory_gib: Option<f64>,
    cpu: Option<String>,
    build: &'static str,
    quick: bool,
    /// Whether the figures are instruction counts (callgrind), not times.
    instructions_counted: bool,
}

impl Machine {
    fn read(quick: bool, instructions_counted: bool) -> Self {
        let proc_field = |file: &str, name: &str| -> Option<String> {
            let text = std::fs::read_to_string(file).ok()?;
            let line = text.lines().find(|line| line.starts_with(name))?;
            Some(line.split_once(':')?.1.trim().to_owned())
        };
        Self {
            cores: std::thread::available_parallelism().map_or(0, usize::from),
            memory_gib: proc_field("/proc/meminfo", "MemTotal")
                .and_then(|kib| kib.trim_end_matches("kB").trim().parse::<f64>().ok())
                .map(|kib| kib / (1024.0 * 1024.0)),
            cpu: proc_field("/proc/cpuinfo", "model name"),
            build: if cfg!(debug_assertions) {
                "debug"
            } else {
                "release"
            },
            quick,
            instructions_counted,
        }
    }

    fn describe(&self) -> String {
        format!(
            "machine: {} cores, {} memory, {}; {} build{}{}",
            self.cores,
            self.memory_gib
                .map_or_else(|| "unknown".to_owned(), |gib| format!("{gib:.0} GiB")),
            self.cpu.as_deref().unwrap_or("unknown CPU"),
            self.build,
            if self.quick { ", quick run" } else { "" },
            if self.instructions_counted {
                "; instructions counted by callgrind, per run"
            } else {
                ""
            }
        )
    }
}

fn print_table(rows: &[Row]) {
    let what = rows
        .iter()
        .map(|row| row.what.chars().count())
        .max()
        .unwrap_or(0);
    let target = rows
        .iter()
        .map(|row| row.target.chars().count())
        .max()
        .unwrap_or(0);
    for row in rows {
        let verdict = match row.met {
            Some(true) => "met",
            Some(false) => "MISSED",
            None => "",
        };
        println!(
            "{:<what$}  {:<target$}  {:<6}  {}",
            row.what, row.target, verdict, row.figure
        );
    }
}
