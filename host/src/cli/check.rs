//! `ctxbox check`: the conformance checker, with a readable verdict.

use std::io::Write;
use std::process::ExitCode;

use ctxbox_host::check::{self, CheckOptions, verdict};

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

/// Runs `ctxbox check`: exits non-zero when any check fails (warnings
/// alone pass).
pub async fn run(args: Args) -> anyhow::Result<ExitCode> {
    run_to(args, &mut std::io::stdout().lock()).await
}

/// [`run`], writing the verdict to `out`.
async fn run_to(args: Args, out: &mut impl Write) -> anyhow::Result<ExitCode> {
    let config = args.host.config()?;
    let cache_dir = config
        .sandbox
        .cache_dir
        .clone()
        .unwrap_or_else(|| config.data_dir().join("cache"));
    // The engine runs with the settings and limits its id is configured
    // with, as a host would run it.
    let options = CheckOptions {
        cache_dir: Some(cache_dir),
        compile_timeout_ms: Some(config.sandbox.compile_timeout_ms),
        engine_configs: config.engine_configs().map_err(anyhow::Error::msg)?,
        engine_limits: config.engine_limits().map_err(anyhow::Error::msg)?,
    };
    let report = match EngineSource::parse(&args.engine)? {
        EngineSource::Bundled(name, bytes) => {
            check::check_bytes(&format!("bundled:{name}"), bytes, &options).await?
        }
        EngineSource::File(path) => check::check_file(&path, &options).await?,
    };
    if args.json {
        writeln!(
            out,
            "{}",
            serde_json::to_string_pretty(&verdict::json(&report))?
        )?;
    } else {
        write!(out, "{}", verdict::text(&report))?;
    }
    Ok(if report.passed() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Parser)]
    struct Command {
        #[command(flatten)]
        args: Args,
    }

    async fn check(arguments: &[&str]) -> (ExitCode, String) {
        let args = Command::try_parse_from(["ctxbox-check"].iter().chain(arguments))
            .expect("the arguments parse")
            .args;
        let mut out = Vec::new();
        let code = run_to(args, &mut out).await.expect("the checker runs");
        (code, String::from_utf8(out).expect("the verdict is UTF-8"))
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_broken_engine_fails_with_its_reason_and_a_failing_exit_code() {
        let dir = tempfile::tempdir().expect("temp dir");
        let wasm = dir.path().join("broken.wasm");
        std::fs::write(&wasm, b"\0asm but not really").expect("write the engine");
        let data_dir = dir.path().join("data");
        let (wasm, data_dir) = (wasm.display().to_string(), data_dir.display().to_string());

        let (code, text) = check(&[&wasm, "--data-dir", &data_dir]).await;
        assert_eq!(code, ExitCode::FAILURE, "{text}");
        assert!(text.contains("  FAIL  load\n"), "{text}");
        assert!(
            text.contains("          expected: a ctxbox:engine"),
            "{text}"
        );
        assert!(
            text.contains("verdict: FAIL (1 check: 0 passed, 1 failed)"),
            "{text}"
        );

        let (code, json) = check(&[&wasm, "--json", "--data-dir", &data_dir]).await;
        assert_eq!(code, ExitCode::FAILURE);
        let json: serde_json::Value = serde_json::from_str(&json).expect("JSON");
        assert_eq!(json["verdict"], "fail");
        assert_eq!(json["checks"][0]["outcome"], "fail");
    }
}
