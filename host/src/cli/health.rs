//! `ctxbox health`: which engines are quarantined, and why; and what each
//! live `ctxbox serve` process on this data directory has done (the
//! snapshot it writes every few seconds, `serve::snapshots`).

use std::process::ExitCode;

use ctxbox_host::contract::text::untrusted_line;
use ctxbox_host::engines::quarantine::QuarantineRecord;
use ctxbox_host::serve::metrics::{Figures, MetricsSnapshot};
use ctxbox_host::serve::snapshots;

use super::settings::HostArgs;

/// Arguments of `ctxbox health`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Print JSON instead of text: the quarantine records, or with
    /// `--serving` the serving processes' figures.
    #[arg(long)]
    json: bool,
    /// Only the live `ctxbox serve` processes' figures (requests, engine
    /// calls, sessions, instances, completions, tool calls).
    #[arg(long)]
    serving: bool,
    /// Only this serving process (implies --serving).
    #[arg(long, value_name = "PID")]
    pid: Option<u32>,
    #[command(flatten)]
    host: HostArgs,
}

/// Runs `ctxbox health`. Exits non-zero when an engine is quarantined, so
/// scripts can alert on it.
pub async fn run(args: Args) -> anyhow::Result<ExitCode> {
    let runtime = args.host.runtime()?;
    let records = runtime.engines().quarantine().list();
    let serving_only = args.serving || args.pid.is_some();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |since| since.as_millis() as i64);
    let processes: Vec<MetricsSnapshot> = snapshots::live(runtime.data_dir(), now)
        .into_iter()
        .filter(|snapshot| args.pid.is_none_or(|pid| snapshot.pid == pid))
        .collect();
    if args.json {
        let json = if serving_only {
            serde_json::to_string_pretty(&processes)?
        } else {
            serde_json::to_string_pretty(&records)?
        };
        println!("{json}");
    } else {
        if !serving_only {
            if records.is_empty() {
                println!(
                    "no engine is quarantined ({} registered)",
                    runtime.engines().registry().ids().len()
                );
            }
            for record in &records {
                print_record(record);
            }
        }
        if processes.is_empty() && serving_only {
            println!("no live `ctxbox serve` process on this data directory");
        }
        for process in &processes {
            println!();
            print_process(process, now);
        }
    }
    Ok(if records.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(2)
    })
}

/// One serving process's figures.
fn print_process(process: &MetricsSnapshot, now_ms: i64) {
    println!(
        "serving process {} (up {}, figures from {} s ago)",
        process.pid,
        humantime::format_duration(std::time::Duration::from_secs(
            ((process.written_at_ms - process.started_at_ms).max(0) / 1000) as u64
        )),
        (now_ms - process.written_at_ms).max(0) / 1000
    );
    println!(
        "  sessions {} ({} given up so far), warm instances {}, quarantined: {}, store round trips: {}",
        process.live_sessions,
        process.released_sessions,
        process.warm_instances,
        if process.quarantined.is_empty() {
            "none".to_owned()
        } else {
            untrusted_line(&process.quarantined.join(", "), 400)
        },
        process.store_round_trips.map_or_else(
            || "none (embedded store)".to_owned(),
            |trips| trips.to_string()
        )
    );
    print_figures("requests", &process.requests);
    print_figures("engine calls", &process.engine_calls);
    for engine in &process.engines {
        println!(
            "  {:<14}{:<18}{} model completions ({} tokens in, {} out; {} refused), {} tool calls",
            "engine",
            untrusted_line(&engine.engine, 64),
            engine.completions,
            engine.input_tokens,
            engine.output_tokens,
            engine.refused_completions,
            engine.tool_calls
        );
    }
}

/// One line per engine and method (or operation): count, outcomes, mean time.
fn print_figures(what: &str, figures: &[Figures]) {
    for figure in figures {
        let outcomes: Vec<String> = figure
            .outcomes
            .iter()
            .map(|(outcome, count)| format!("{outcome} {count}"))
            .collect();
        println!(
            "  {what:<14}{:<18}{:<22}{:>7}  ({}), mean {:.2} ms",
            untrusted_line(&figure.engine, 64),
            figure.name,
            figure.count,
            outcomes.join(", "),
            figure.seconds * 1000.0 / figure.count.max(1) as f64
        );
    }
}

fn print_record(record: &QuarantineRecord) {
    println!("{} ({})", record.engine_id, record.owner);
    println!(
        "  failed in    {}: {}",
        record.operation, record.classification
    );
    println!("  reason       {}", record.reason);
    println!(
        "  since        {} (failures: {})",
        format_time(record.at_ms),
        record.failures
    );
    match record.retry_at_ms {
        Some(retry) => println!("  retry after  {}", format_time(retry)),
        None => println!("  retry        never, until it is registered again"),
    }
    if !record.stderr_tail.trim().is_empty() {
        println!("  stderr tail");
        for line in record
            .stderr_tail
            .trim_end()
            .lines()
            .rev()
            .take(8)
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
        {
            println!("    {line}");
        }
    }
}

/// Milliseconds since the Unix epoch as an RFC 3339 UTC time.
fn format_time(ms: i64) -> String {
    let time = std::time::UNIX_EPOCH + std::time::Duration::from_millis(ms.max(0) as u64);
    humantime::format_rfc3339_seconds(time).to_string()
}
