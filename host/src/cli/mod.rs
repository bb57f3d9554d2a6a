//! The `ctxbox` command line: argument parsing and dispatch. Each subcommand
//! lives in its own module.

mod bench;
mod check;
mod compare;
mod compile;
mod doctor;
mod engine_source;
mod error_line;
mod health;
mod inspect;
mod new;
mod openclaw_source;
mod replay_setup;
mod run;
mod serve;
mod settings;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// Run AI-agent context engines as sandboxed WebAssembly components.
#[derive(Debug, Parser)]
#[command(name = "ctxbox", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Replay a real conversation through an engine under a window (the main job).
    Run(run::Args),
    /// Replay one conversation through several engines and windows, side by side (table, JSON, HTML charts).
    Compare(compare::Args),
    /// Run the contract against an engine and print a verdict.
    Check(check::Args),
    /// Measure the performance targets (ratios against native and unguarded baselines).
    Bench(bench::Args),
    /// Show an engine's identity, contract version and imports.
    Inspect(inspect::Args),
    /// Precompile engines into the cache.
    Compile(compile::Args),
    /// Check the installation: binary, data directory, engines, the OpenClaw and Hermes plugins' configuration.
    Doctor(doctor::Args),
    /// Show quarantined engines and why (exit code 2 if any).
    Health(health::Args),
    /// Create a new engine crate to build, check and run.
    New(new::Args),
    /// Serve engines to another process over stdio (newline-delimited JSON).
    Serve(serve::Args),
}

/// Parses the command line, runs the command, and turns an error into one
/// clear line on stderr and a failing exit code.
pub fn main() -> ExitCode {
    init_tracing();
    let cli = Cli::parse();
    if !matches!(cli.command, Command::Serve(_) | Command::Bench(_)) {
        end_quietly_on_a_closed_pipe();
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("error: cannot start the async runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(async {
        match cli.command {
            Command::Run(args) => run::run(args).await,
            Command::Compare(args) => compare::run(args).await,
            Command::Check(args) => check::run(args).await,
            Command::Bench(args) => bench::run(args).await,
            Command::Inspect(args) => inspect::run(args).await,
            Command::Compile(args) => compile::run(args).await,
            Command::Doctor(args) => doctor::run(args).await,
            Command::Health(args) => health::run(args).await,
            Command::New(args) => new::run(args).await,
            Command::Serve(args) => serve::run(args).await,
        }
    });
    match result {
        Ok(code) => code,
        Err(error) => {
            eprintln!("error: {}", error_line::error_line(&error));
            ExitCode::FAILURE
        }
    }
}

/// Logs to stderr, filtered by `RUST_LOG` (default: warnings).
fn init_tracing() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    // Colour codes only for a terminal: a file or a pipe gets plain text.
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
}

/// Lets a report piped into `head` or `less` end the process when the
/// reader goes away, as Unix tools do, instead of panicking in `println!`.
/// `serve` and `bench` keep Rust's default (`SIGPIPE` ignored): a peer or a
/// child hanging up is an error they answer.
fn end_quietly_on_a_closed_pipe() {
    #[cfg(unix)]
    // SAFETY: called once on the main thread before any other thread
    // exists; restoring the default disposition of SIGPIPE has no other
    // effect on this process.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}
