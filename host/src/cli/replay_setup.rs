//! What `ctxbox run` and `ctxbox compare` share before and while they replay
//! a recording: reading it (or the built-in sample, or a session of
//! OpenClaw's SQLite store), the engines named on the command line, Ctrl-C,
//! and the progress bar.

use std::io::IsTerminal;
use std::path::Path;
use std::sync::Arc;

use anyhow::{Context, bail};
use ctxbox_host::GuardedEngine;
use ctxbox_host::engines::registry::{EngineFactory, RegisterOptions};
use ctxbox_host::provider::ReplayScript;
use ctxbox_host::runtime::Runtime;
use indicatif::{ProgressBar, ProgressStyle};
use tokio_util::sync::CancellationToken;

use super::openclaw_source;

/// The conversation replayed when none is given: a real 23-turn session (a
/// Feishu assistant setting up SSH keys and git backups; see
/// `tests/fixtures/sessions/SOURCES.md`).
pub(crate) const SAMPLE: &[u8] = include_bytes!(
    "../../../tests/fixtures/sessions/qwen-minimax-feishu-zh-3-hook-compactions.jsonl"
);
/// The plugin name engines given by path on the command line register under.
const CLI_OWNER: &str = "cli";
/// Problems of the recording printed one per line; more are only counted.
const MAX_PROBLEM_LINES: usize = 5;

/// A recording ready to replay.
pub struct Loaded {
    /// Its turns.
    pub script: ReplayScript,
    /// How to name it: its file name.
    pub label: String,
    /// What was wrong with it (each naming the file and line); the rest was
    /// read all the same.
    pub problems: Vec<String>,
}

/// Reads what to replay: `transcript` (a JSONL file, or OpenClaw's SQLite
/// store with its `session`), else the built-in sample. Warns on stderr of
/// a damaged recording. `None` when the store's sessions were listed
/// instead (no `session` named).
pub fn load(
    runtime: &Runtime,
    transcript: Option<&Path>,
    session: Option<&str>,
) -> anyhow::Result<Option<Loaded>> {
    let transcript = match openclaw_source::resolve(runtime, transcript, session)? {
        openclaw_source::Recording::Transcript(path) => path,
        openclaw_source::Recording::Listed => return Ok(None),
    };
    let (recording, label) = recording(runtime, transcript.as_deref())?;
    let problems = recording.open_report().problems();
    for line in problem_lines(&problems) {
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
    Ok(Some(Loaded {
        script,
        label,
        problems,
    }))
}

/// The guarded engine `id` ([`engine_id`]; `None`: the configured slot).
/// An engine named that cannot be loaded is an error, unless `fallback`
/// asks to replay on `legacy` instead.
pub async fn select(
    runtime: &Runtime,
    id: Option<&str>,
    fallback: bool,
) -> anyhow::Result<Arc<GuardedEngine>> {
    let engine = runtime.select(id).await;
    if let Some(failure) = engine.resolution_failure()
        && id.is_some()
        && !fallback
    {
        bail!(
            "cannot load engine `{}`: {} (pass --fallback to replay on legacy instead)",
            engine.selected_id(),
            failure.message
        );
    }
    Ok(engine)
}

/// The engine to select: a registered id, or a component path registered
/// here under its file name. Unknown ids are an error, not a silent fallback.
pub fn engine_id(runtime: &Runtime, spec: Option<&str>) -> anyhow::Result<Option<String>> {
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
                    ..RegisterOptions::default()
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

/// Refuses a window no model has.
pub fn check_window(window: u64) -> anyhow::Result<()> {
    if window < 1_024 {
        bail!("--window {window} is too small: a model window has at least 1024 tokens");
    }
    Ok(())
}

/// A token cancelled by Ctrl-C: the replays stop after their current turn.
pub fn abort_on_ctrl_c() -> CancellationToken {
    let abort = CancellationToken::new();
    let cancel = abort.clone();
    tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            cancel.cancel();
        }
    });
    abort
}

/// The bar of replayed turns on stderr (hidden when `quiet` or stderr is
/// not a terminal).
pub fn progress_bar(turns: usize, quiet: bool) -> ProgressBar {
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

/// What is said on stderr about a damaged recording: one warning line per
/// problem (each naming the file and line), at most [`MAX_PROBLEM_LINES`]
/// of them and a count of the rest.
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

    #[test]
    fn many_problems_are_counted_not_listed() {
        let problems: Vec<String> = (0..8).map(|line| format!("line {line}")).collect();
        let lines = problem_lines(&problems);
        assert_eq!(lines.len(), MAX_PROBLEM_LINES + 1);
        assert!(lines[MAX_PROBLEM_LINES].contains("3 more"));
    }
}
