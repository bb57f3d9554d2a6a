//! `ctxbox compare`: one conversation replayed through several engines and
//! windows side by side (as `ctxbox run` replays it), summed up in a table,
//! as JSON, or as one self-contained HTML page of charts.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{Context, bail};
use ctxbox_host::compare::{self, CompareOptions, Comparison, Contender};
use serde_json::json;

use super::replay_setup::{self, Loaded};
use super::settings::HostArgs;

/// Arguments of `ctxbox compare`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// A session transcript (OpenClaw/pi JSONL) to replay, or OpenClaw's
    /// SQLite session store (default: a built-in sample).
    transcript: Option<PathBuf>,
    /// The session of an OpenClaw SQLite store to replay (none: list them).
    #[arg(long, value_name = "ID")]
    session: Option<String>,
    /// An engine to compare: a registered id (e.g. `keep-recent`) or a path
    /// to a `.wasm` component; give it once per engine.
    #[arg(long = "engine", value_name = "ID|PATH.wasm", required = true)]
    engines: Vec<String>,
    /// A model window to replay each engine under, tokens; give it once per
    /// window (default: `agents.defaults.contextTokens`, else 16384).
    #[arg(long = "window", value_name = "TOKENS")]
    windows: Vec<u64>,
    /// Write the report as one self-contained HTML page of charts here.
    #[arg(long, value_name = "FILE")]
    html: Option<PathBuf>,
    /// Print the comparison as JSON instead of a table.
    #[arg(long)]
    json: bool,
    /// Engines replayed at once (default: the machine's cores).
    #[arg(long, value_name = "N")]
    parallel: Option<usize>,
    /// Replay on `legacy` an engine that cannot be loaded (default: that is
    /// an error).
    #[arg(long)]
    fallback: bool,
    #[command(flatten)]
    host: HostArgs,
}

/// Runs `ctxbox compare`. Exits non-zero when a turn of any replay failed.
pub async fn run(args: Args) -> anyhow::Result<ExitCode> {
    let runtime = Arc::new(args.host.runtime()?);
    let mut windows = args.windows.clone();
    if windows.is_empty() {
        windows.push(runtime.config().context_tokens());
    }
    dedup(&mut windows);
    for window in &windows {
        replay_setup::check_window(*window)?;
    }
    let mut ids = Vec::new();
    for spec in &args.engines {
        ids.extend(replay_setup::engine_id(&runtime, Some(spec))?);
    }
    dedup(&mut ids);
    if args.parallel == Some(0) {
        bail!("--parallel 0: at least one replay must run");
    }
    let Some(Loaded {
        script,
        label,
        problems,
    }) = replay_setup::load(
        &runtime,
        args.transcript.as_deref(),
        args.session.as_deref(),
    )?
    else {
        return Ok(ExitCode::SUCCESS);
    };
    let mut contenders = Vec::new();
    for id in &ids {
        contenders.push(Contender {
            engine: replay_setup::select(&runtime, Some(id), args.fallback).await?,
            windows: windows.clone(),
        });
    }
    let progress =
        replay_setup::progress_bar(script.turns.len() * ids.len() * windows.len(), args.json);
    let output_dir = runtime
        .data_dir()
        .join("sessions")
        .join(format!("compare-{}", uuid::Uuid::new_v4()));
    let bar = progress.clone();
    let options = CompareOptions {
        output_dir,
        parallel: args.parallel.unwrap_or_else(|| {
            std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get)
        }),
        abort: replay_setup::abort_on_ctrl_c(),
        on_turn: Arc::new(move || bar.inc(1)),
    };
    let comparison = compare::compare(
        runtime.clone(),
        Arc::new(script),
        &label,
        contenders,
        options,
    )
    .await?;
    progress.finish_and_clear();

    if let Some(path) = &args.html {
        let page = compare::html::page(&comparison)?;
        std::fs::write(path, page)
            .with_context(|| format!("cannot write the report `{}`", path.display()))?;
    }
    if args.json {
        let mut value = serde_json::to_value(&comparison)?;
        value["recordingProblems"] = json!(problems);
        value["html"] = json!(args.html);
        println!("{}", serde_json::to_string_pretty(&value)?);
    } else {
        print_table(&comparison);
        if let Some(path) = &args.html {
            println!("\nreport          {}", path.display());
        }
    }
    let failed = comparison
        .runs
        .iter()
        .any(|run| !run.report.failed_turns.is_empty());
    Ok(if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

/// Drops repeats, keeping the first of each in order.
fn dedup<T: PartialEq + Clone>(items: &mut Vec<T>) {
    let mut seen: Vec<T> = Vec::new();
    items.retain(|item| {
        let first = !seen.contains(item);
        if first {
            seen.push(item.clone());
        }
        first
    });
}

fn print_table(comparison: &Comparison) {
    println!(
        "{:<16}  {:>7}  {:>5}  {:>11}  {:>8}  {:>5}  {:>9}  {:>6}  {:>8}  {:>11}  {:>10}",
        "engine",
        "window",
        "calls",
        "compactions",
        "largest",
        "kept",
        "fallbacks",
        "failed",
        "wall",
        "completions",
        "tool calls"
    );
    for run in &comparison.runs {
        let report = &run.report;
        println!(
            "{:<16}  {:>7}  {:>5}  {:>11}  {:>8}  {:>4.0}%  {:>9}  {:>6}  {:>7.2}s  {:>11}  {:>10}",
            ctxbox_host::contract::text::untrusted_line(&run.engine, 64),
            run.window,
            report.model_calls,
            report.compactions,
            report.largest_prompt_tokens,
            run.share_kept * 100.0,
            report.fallbacks,
            report.failed_turns.len(),
            run.wall_ms as f64 / 1000.0,
            report.completions.completions,
            report.engine_tool_calls
        );
    }
    println!(
        "\nreplayed        {}: {} turns, {} at a time",
        comparison.transcript, comparison.turns, comparison.parallel
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(arguments: &[&str]) -> Result<Args, clap::Error> {
        #[derive(clap::Parser)]
        struct Command {
            #[command(flatten)]
            args: Args,
        }
        <Command as clap::Parser>::try_parse_from(
            std::iter::once("compare").chain(arguments.iter().copied()),
        )
        .map(|command| command.args)
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn two_engines_under_two_windows_make_one_page_and_bad_input_is_an_error() {
        let dir = tempfile::tempdir().expect("temp dir");
        let data = dir.path().join("data");
        let html = dir.path().join("report.html");
        let data_arg = data.to_str().expect("utf-8");
        let html_arg = html.to_str().expect("utf-8");
        let arguments = [
            "--engine",
            "legacy",
            "--engine",
            "keep-recent",
            "--engine",
            "legacy",
            "--window",
            "8192",
            "--window",
            "16384",
            "--html",
            html_arg,
            "--data-dir",
            data_arg,
            "--json",
        ];
        let code = run(parsed(&arguments).expect("parses"))
            .await
            .expect("compares the sample");
        assert_eq!(code, ExitCode::SUCCESS);
        let page = std::fs::read_to_string(&html).expect("the page is written");
        assert_eq!(page.matches("<figure class=\"run\"").count(), 4);
        assert!(
            !page.contains("src=\"http") && !page.contains("href=\"http"),
            "nothing is fetched"
        );

        assert!(
            parsed(&["--html", html_arg]).is_err(),
            "an engine is required"
        );
        let missing = dir.path().join("missing.jsonl");
        for (arguments, expected) in [
            (
                vec!["--engine", "no-such-engine"],
                "no engine `no-such-engine`",
            ),
            (vec!["--engine", "legacy", "--window", "12"], "too small"),
            (
                vec![missing.to_str().expect("utf-8"), "--engine", "legacy"],
                "cannot read the transcript",
            ),
            (
                vec!["--engine", "legacy", "--parallel", "0"],
                "--parallel 0",
            ),
            (
                vec!["--engine", "legacy", "--html", "/nonexistent/report.html"],
                "cannot write the report `/nonexistent/report.html`",
            ),
        ] {
            let mut arguments = arguments;
            arguments.extend(["--data-dir", data_arg]);
            let error = run(parsed(&arguments).expect("parses"))
                .await
                .expect_err("refused");
            let line = super::super::error_line::error_line(&error);
            assert!(line.contains(expected), "{line}");
        }
    }

    #[test]
    fn repeats_are_dropped_in_order() {
        let mut ids = vec!["b", "a", "b", "c", "a"];
        dedup(&mut ids);
        assert_eq!(ids, ["b", "a", "c"]);
    }
}
