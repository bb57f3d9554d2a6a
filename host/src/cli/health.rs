//! `ctxbox health`: which engines are quarantined, and why.

use std::process::ExitCode;

use ctxbox_host::engines::quarantine::QuarantineRecord;

use super::settings::HostArgs;

/// Arguments of `ctxbox health`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    host: HostArgs,
}

/// Runs `ctxbox health`. Exits non-zero when an engine is quarantined, so
/// scripts can alert on it.
pub async fn run(args: Args) -> anyhow::Result<ExitCode> {
    let runtime = args.host.runtime()?;
    let records = runtime.engines().quarantine().list();
    if args.json {
        println!("{}", serde_json::to_string_pretty(&records)?);
    } else if records.is_empty() {
        println!(
            "no engine is quarantined ({} registered)",
            runtime.engines().registry().ids().len()
        );
    } else {
        for record in &records {
            print_record(record);
        }
    }
    Ok(if records.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(2)
    })
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
