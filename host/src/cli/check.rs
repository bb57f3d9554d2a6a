//! `ctxbox check`: the conformance checker, with a readable verdict.

use std::process::ExitCode;

use ctxbox_host::check::{self, CheckOptions, CheckReport};

use super::engine_source::EngineSource;
use super::settings::HostArgs;

/// Arguments of `ctxbox check`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The engine: a `.wasm` component (or a bundled engine's name).
    engine: String,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    host: HostArgs,
}

/// Runs `ctxbox check`: exits non-zero when any check fails.
pub async fn run(args: Args) -> anyhow::Result<ExitCode> {
    let config = args.host.config()?;
    let cache_dir = config
        .sandbox
        .cache_dir
        .clone()
        .unwrap_or_else(|| config.data_dir().join("cache"));
    let options = CheckOptions {
        cache_dir: Some(cache_dir),
    };
    let report = match EngineSource::parse(&args.engine)? {
        EngineSource::Bundled(name, bytes) => {
            check::check_bytes(&format!("bundled:{name}"), bytes, &options).await?
        }
        EngineSource::File(path) => check::check_file(&path, &options).await?,
    };
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print_verdict(&report);
    }
    Ok(if report.passed() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

fn print_verdict(report: &CheckReport) {
    match &report.engine {
        Some(info) => println!(
            "ctxbox check {}: engine {} ({}) {}",
            report.source,
            info.id,
            info.name,
            info.version.as_deref().unwrap_or("")
        ),
        None => println!("ctxbox check {}", report.source),
    }
    let width = report
        .checks
        .iter()
        .map(|check| check.name.len())
        .max()
        .unwrap_or(0);
    for check in &report.checks {
        if check.passed {
            println!("  pass  {:<width$}  {}", check.name, check.got);
        } else {
            println!("  FAIL  {:<width$}", check.name);
            println!("        {:<width$}  expected: {}", "", check.expected);
            println!("        {:<width$}  got:      {}", "", check.got);
        }
    }
    let failed = report.failures().count();
    println!();
    if failed == 0 {
        println!("{} checks passed", report.checks.len());
    } else {
        println!(
            "{} checks: {} passed, {failed} failed",
            report.checks.len(),
            report.checks.len() - failed
        );
    }
}
