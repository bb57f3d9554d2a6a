//! `ctxbox run`: replay a real conversation turn by turn through an engine
//! under a window, and report what the engine did with it.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, bail};
use ctxbox_host::engines::registry::{EngineFactory, RegisterOptions};
use ctxbox_host::provider::ReplayScript;
use ctxbox_host::runner::{RunReport, TurnReport};
use ctxbox_host::runtime::Runtime;

use indicatif::{ProgressBar, ProgressStyle};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use super::settings::HostArgs;

/// The conversation replayed when none is given: a real 23-turn session (a
/// Feishu assistant setting up SSH keys and git backups; see
/// `tests/fixtures/sessions/SOURCES.md`).
pub(crate) const SAMPLE: &[u8] = include_bytes!(
    "../../../tests/fixtures/sessions/qwen-minimax-feishu-zh-3-hook-compactions.jsonl"
);
/// The plugin name engines given by path on the command line register under.
const CLI_OWNER: &str = "cli";

/// Arguments of `ctxbox run`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// A session transcript (OpenClaw/pi JSONL) to replay, or OpenClaw's
    /// SQLite session store (default: a built-in sample).
    transcript: Option<PathBuf>,
    /// The session of an OpenClaw SQLite store to replay (none: list them).
    #[arg(long, value_name = "ID")]
    session: Option<String>,
    /// The engine: a registered id (e.g. `keep-recent`) or a path to a `.wasm`
    /// component (default: `plugins.slots.contextEngine`, else `legacy`).
    #[arg(long, value_name = "ID|PATH.wasm")]
    engine: Option<String>,
    /// The model's context window, tokens (default: `agents.defaults.contextTokens`, else 16384).
    #[arg(long, value_name = "TOKENS")]
    window: Option<u64>,
    /// Where to write the replayed session (default: a new file in the data dir's `sessions/`).
    #[arg(long, value_name = "FILE")]
    output: Option<PathBuf>,
    /// Print a JSON report instead of tables.
    #[arg(long)]
    json: bool,
    /// Replay on `legacy` when the engine given with `--engine` cannot be
    /// loaded, to exercise the guard (default: that is an error).
    #[arg(long)]
    fallback: bool,
    #[command(flatten)]
    host: HostArgs,
}

/// Runs `ctxbox run`.
pub async fn run(args: Args) -> anyhow::Result<ExitCode> {
    let runtime = args.host.runtime()?;
    let window = args
        .window
        .unwrap_or_else(|| runtime.config().context_tokens());
    if window < 1_024 {
        bail!("--window {window} is too small: a model window has at least 1024 tokens");
    }
    let engine_id = engine_id(&runtime, args.engine.as_deref())?;
    let transcript = match super::openclaw_source::resolve(
        &runtime,
        args.transcript.as_deref(),
        args.session.as_deref(),
    )? {
        super::openclaw_source::Recording::Transcript(path) => path,
        super::openclaw_source::Recording::Listed => return Ok(ExitCode::SUCCESS),
    };
    let (recording, label) = recording(&runtime, transcript.as_deref())?;
    let recording_problems = recording.open_report().problems();
    for line in problem_lines(&recording_problems) {
        eprintln!("{line}");
    }
    let script = ReplayScript::from_messages(
        recording
            .active_branch()
            .into_iter()
            .map(|entry| entry.message),
    );
    if script.turns.is_empty() {
        bail!("`{label}` has no user messages to replay");
    }

    let output = match &args.output {
        Some(path) => path.clone(),
        None => runtime
            .data_dir()
            .join("sessions")
            .join(format!("run-{}.jsonl", uuid::Uuid::new_v4())),
    };
    let engine = runtime.select(engine_id.as_deref()).await;
    let selected = engine.selected_id().to_owned();
    if let Some(failure) = engine.resolution_failure()
        && args.engine.is_some()
        && !args.fallback
    {
        bail!(
            "cannot load engine `{selected}`: {} (pass --fallback to replay on legacy instead)",
            failure.message
        );
    }
    let progress = progress_bar(script.turns.len(), args.json);
    let abort = CancellationToken::new();
    let cancel = abort.clone();
    tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            cancel.cancel();
        }
    });
    let report = runtime
        .replay(&script, engine, window, &output, &abort, &mut |_, _| {
            progress.inc(1)
        })
        .await
        .with_context(|| format!("cannot write the replayed session `{}`", output.display()))?;
    progress.finish_and_clear();

    if args.json {
        let summary = json!({
            "transcript": label,
            "engine": selected,
            "window": window,
            "session": output,
            "shareKept": report.share_kept(),
            "recordingProblems": recording_problems,
            "report": report,
        });
        println!("{}", serde_json::to_string_pretty(&summary)?);
    } else {
        print_turns(&report.turns);
        print_compactions(&report);
        print_summary(&report, &label, &selected, window, &output);
        if let Some(postgres) = runtime.shared_store() {
            println!(
                "stored in       PostgreSQL at {} (not a file)",
                postgres.server()
            );
        }
    }
    Ok(if report.failed_turns.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// The engine to select: a registered id, or a component path registered
/// here under its file name. Unknown ids are an error, not a silent fallback.
fn engine_id(runtime: &Runtime, spec: Option<&str>) -> anyhow::Result<Option<String>> {
    let Some(spec) = spec else {
        return Ok(None);
    };
    let path = Path::new(spec);
    if spec.ends_with(".wasm") || path.is_file() {
        if !path.is_file() {
            bail!("no engine component at `{spec}`");
        }
        let id = path
            .file_stem()
            .map(|stem| stem.to_string_lossy().replace('_', "-"))
            .unwrap_or_else(|| spec.to_owned());
        runtime
            .engines()
            .registry()
            .plugin(CLI_OWNER)
            .register(
                &id,
                EngineFactory::WasmFile(path.to_owned()),
                RegisterOptions {
                    allow_same_owner_refresh: true,
                },
            )
            .with_context(|| format!("cannot use `{spec}` as engine `{id}`"))?;
        return Ok(Some(id));
    }
    let registered: Vec<String> = runtime
        .engines()
        .registry()
        .ids()
        .into_iter()
        .map(|(id, _)| id)
        .collect();
    if !registered.iter().any(|id| id == spec) {
        bail!(
            "no engine `{spec}`: registered engines are {}",
            registered.join(", ")
        );
    }
    Ok(Some(spec.to_owned()))
}

/// The recording to replay and how to name it: a file on this machine,
/// whatever store the host writes to. It is only read: opening it takes no
/// lock and changes nothing on disk, even when it is damaged.
fn recording(
    runtime: &Runtime,
    path: Option<&Path>,
) -> anyhow::Result<(ctxbox_host::transcript::Transcript, String)> {
    let path = match path {
        Some(path) => path.to_owned(),
        None => {
            let sample = runtime
                .data_dir()
                .join("samples")
                .join("sample-session.jsonl");
            if !sample.exists() {
                if let Some(dir) = sample.parent() {
                    std::fs::create_dir_all(dir)?;
                }
                std::fs::write(&sample, SAMPLE).with_context(|| {
                    format!("cannot write the sample to `{}`", sample.display())
                })?;
            }
            sample
        }
    };
    let transcript =
        ctxbox_host::transcript::TranscriptStore::new(runtime.config().transcripts.clone())
            .open_read_only(&path)
            .with_context(|| format!("cannot read the transcript `{}`", path.display()))?;
    let label = path.file_name().map_or_else(
        || path.display().to_string(),
        |name| name.to_string_lossy().into_owned(),
    );
    Ok((transcript, label))
}

/// Problems of the recording printed one per line; more are only counted.
const MAX_PROBLEM_LINES: usize = 5;

/// What `ctxbox run` says on stderr about a damaged recording: one warning
/// line per problem (each naming the file and line), at most
/// [`MAX_PROBLEM_LINES`] of them and a count of the rest.
fn problem_lines(problems: &[String]) -> Vec<String> {
    let mut lines: Vec<String> = problems
        .iter()
        .take(MAX_PROBLEM_LINES)
        .map(|problem| format!("warning: {problem}"))
        .collect();
    if problems.len() > MAX_PROBLEM_LINES {
        lines.push(format!(
            "warning: and {} more problems in the recording (see --json)",
            problems.len() - MAX_PROBLEM_LINES
        ));
    }
    lines
}

fn progress_bar(turns: usize, quiet: bool) -> ProgressBar {
    if quiet || !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::new(turns as u64);
    if let Ok(style) =
        ProgressStyle::with_template("{spinner} replaying turn {pos}/{len} {wide_bar} {elapsed}")
    {
        bar.set_style(style);
    }
    bar
}

fn print_turns(turns: &[TurnReport]) {
    println!(
        "{:>4}  {:>5}  {:>8}  {:>11}  {:>9}  {:<16}  fallbacks",
        "turn", "calls", "prompt", "compactions", "overflows", "engine"
    );
    for turn in turns {
        let fallbacks: Vec<String> = turn
            .guard_events
            .iter()
            .map(|event| {
                format!(
                    "{} {} ({})",
                    event.operation, event.classification, event.engine_id
                )
            })
            .collect();
        println!(
            "{:>4}  {:>5}  {:>8}  {:>11}  {:>9}  {:<16}  {}",
            turn.index + 1,
            turn.model_calls,
            turn.largest_prompt_tokens,
            turn.compactions,
            turn.overflow_retries,
            turn.served_by,
            if fallbacks.is_empty() {
                "-".to_owned()
            } else {
                fallbacks.join("; ")
            }
        );
    }
}

/// One line per compaction the runner asked for: its turn, what set it
/// off, the context before and after (the runner's own estimate) and the
/// size that sets off the pre-prompt check; then every stop of the
/// compaction-progress guard.
fn print_compactions(report: &RunReport) {
    let passes = report.compaction_passes();
    if passes.is_empty() {
        return;
    }
    println!();
    println!(
        "{:>4}  {:<16}  {:>7}  {:>7}  {:>7}  {:>9}  outcome",
        "turn", "compaction", "before", "after", "freed", "threshold"
    );
    for (turn, pass) in &passes {
        let outcome = match (pass.compacted, &pass.reason) {
            (true, _) => pass.outcome.as_str().to_owned(),
            (false, Some(reason)) => format!("not compacted: {}", shown(reason)),
            (false, None) => "not compacted".to_owned(),
        };
        println!(
            "{:>4}  {:<16}  {:>7}  {:>7}  {:>7}  {:>9}  {}",
            turn + 1,
            pass.trigger,
            pass.tokens_before,
            pass.tokens_after,
            pass.freed(),
            pass.trigger_tokens,
            outcome
        );
    }
    let stops = report
        .turns
        .iter()
        .chain(report.failed_turns.iter().map(|failed| &failed.done))
        .filter_map(|turn| Some((turn.index, turn.compaction_stopped.as_deref()?)));
    for (turn, stop) in stops {
        println!("{:>4}  {}", turn + 1, shown(stop));
    }
}

/// Engine-supplied text as it may be shown: one escaped line of at most
/// 400 bytes.
fn shown(text: &str) -> String {
    ctxbox_host::contract::text::untrusted_line(text, 400)
}

fn print_summary(report: &RunReport, label: &str, engine: &str, window: u64, output: &Path) {
    println!();
    println!(
        "replayed        {label}: {} turns, {} model calls, engine {engine}, {window}-token window",
        report.turns.len() + report.failed_turns.len(),
        report.model_calls
    );
    println!(
        "engine prompts  largest {} tokens ({:.0}% of the window), last {} tokens",
        report.largest_prompt_tokens,
        report.largest_prompt_tokens as f64 * 100.0 / window as f64,
        report.last_prompt_tokens
    );
    println!(
        "transcript      {} messages, {} tokens; its active context {} tokens",
        report.transcript_messages, report.transcript_tokens, report.transcript_context_tokens
    );
    println!(
        "kept            the last prompt holds {:.0}% of the conversation's tokens",
        report.share_kept() * 100.0
    );
    let freed = report.tokens_freed();
    match (freed.iter().min(), freed.is_empty()) {
        (Some(least), false) => println!(
            "compactions     {} (each freed {} tokens on average, {} at least)",
            report.compactions,
            freed.iter().sum::<u64>() / freed.len() as u64,
            least
        ),
        _ => println!("compactions     {}", report.compactions),
    }
    let completions = &report.completions;
    if completions.completions + completions.refused > 0 || report.engine_tool_calls > 0 {
        println!(
            "engine powers   {} model completions ({} tokens in, {} out; {} refused), {} tool calls",
            completions.completions,
            completions.input_tokens,
            completions.output_tokens,
            completions.refused,
            report.engine_tool_calls
        );
    }
    println!(
        "fallbacks       {} calls served by legacy; quarantined: {}",
        report.fallbacks,
        if report.quarantined.is_empty() {
            "none".to_owned()
        } else {
            report.quarantined.join(", ")
        }
    );
    println!(
        "recorded        {} entries written without a model call ({} tool results without a call)",
        report.recorded_entries, report.orphan_tool_results
    );
    for failed in &report.failed_turns {
        println!(
            "failed turn     {}: {}: {} (after {} model calls; the rest of its recording is written as it was)",
            failed.index + 1,
            failed.kind,
            failed.error,
            failed.done.model_calls
        );
    }
    println!("session         {}", output.display());
}

#[cfg(test)]
mod tests {
    use super::*;
    use ctxbox_host::runtime::config::Config;

    const HEADER: &str = r#"{"type":"session","version":3,"id":"r","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/w"}"#;

    fn user(id: &str, parent: &str) -> String {
        format!(
            r#"{{"type":"message","id":"{id}","parentId":"{parent}","timestamp":"2026-01-01T00:00:01.000Z","message":{{"role":"user","content":"hi"}}}}"#
        )
    }

    #[test]
    fn a_damaged_recording_is_read_as_is_and_its_problems_named() {
        let dir = tempfile::tempdir().expect("temp dir");
        let runtime = Runtime::new(Config {
            data_dir: Some(dir.path().join("data")),
            ..Config::default()
        })
        .expect("runtime");
        let path = dir.path().join("rec.jsonl");
        let body = format!(
            "{HEADER}\n{}\n{{broken\n{}\n{{\"type\":\"mess",
            user("a", "none"),
            user("c", "a")
        );
        std::fs::write(&path, &body).expect("write");

        let (recording, label) = recording(&runtime, Some(&path)).expect("readable");
        assert_eq!(label, "rec.jsonl");
        assert_eq!(
            recording.active_branch().len(),
            2,
            "the rest stays readable"
        );
        let lines = problem_lines(&recording.open_report().problems());
        assert_eq!(lines.len(), 2, "{lines:?}");
        assert!(lines[0].starts_with("warning: `") && lines[0].contains("rec.jsonl` line 3"));
        assert!(lines[1].contains("rec.jsonl` line 5") && lines[1].contains("incomplete"));
        assert_eq!(
            std::fs::read_to_string(&path).expect("read"),
            body,
            "the recording is not changed"
        );
    }

    /// `ctxbox run` as parsed from `arguments`.
    fn parsed(arguments: &[&str]) -> Args {
        #[derive(clap::Parser)]
        struct Command {
            #[command(flatten)]
            args: Args,
        }
        <Command as clap::Parser>::try_parse_from(
            std::iter::once("run").chain(arguments.iter().copied()),
        )
        .expect("arguments parse")
        .args
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_engine_named_on_the_command_line_that_cannot_load_is_an_error() {
        let dir = tempfile::tempdir().expect("temp dir");
        let bad = dir.path().join("bad.wasm");
        std::fs::write(&bad, b"not a component").expect("write");
        let data = dir.path().join("data");
        let transcript = dir.path().join("rec.jsonl");
        std::fs::write(&transcript, format!("{HEADER}\n{}\n", user("a", "none"))).expect("write");
        let common = [
            transcript.to_str().expect("utf-8"),
            "--engine",
            bad.to_str().expect("utf-8"),
            "--data-dir",
            data.to_str().expect("utf-8"),
            "--json",
        ];
        let output = dir.path().join("out.jsonl");
        let mut with_output = common.to_vec();
        with_output.extend(["--output", output.to_str().expect("utf-8")]);

        let error = run(parsed(&with_output)).await.expect_err("refused");
        let line = super::super::error_line::error_line(&error);
        assert!(
            line.starts_with("cannot load engine `bad`: ") && line.contains("--fallback"),
            "{line}"
        );
        assert!(!output.exists(), "nothing replayed");

        with_output.push("--fallback");
        let code = run(parsed(&with_output)).await.expect("replayed on legacy");
        assert_eq!(code, ExitCode::SUCCESS);
        assert!(output.exists());
    }

    #[test]
    fn many_problems_are_counted_not_listed() {
        let problems: Vec<String> = (0..8).map(|line| format!("line {line}")).collect();
        let lines = problem_lines(&problems);
        assert_eq!(lines.len(), MAX_PROBLEM_LINES + 1);
        assert!(lines[MAX_PROBLEM_LINES].contains("3 more"));
    }
}
