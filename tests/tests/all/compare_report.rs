//! `ctxbox compare`'s report in a real browser: a shared fixture replayed
//! through three engines (and a hostile one the guard takes calls from),
//! the page opened from `file://` in headless Chromium (Debian's
//! `chromium`), which must run its script without an error and draw each
//! replay's series with one point per model call; then a screenshot.
//!
//! Without Chromium the browser half prints a skip line — or fails, when
//! `CTXBOX_REQUIRE_CHROMIUM=1` (CI, which installs it with `.ci/chromium.sh`).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ctxbox_host::compare::{self, CompareOptions, Comparison, Contender};
use ctxbox_host::engines::registry::{EngineFactory, RegisterOptions};
use ctxbox_host::runtime::Runtime;
use ctxbox_host::runtime::config::Config;
use ctxbox_tests::{fixture_script, guests};
use tokio_util::sync::CancellationToken;

const FIXTURE: &str = "qwen-minimax-feishu-zh-3-hook-compactions.jsonl";
const WINDOW: u64 = 16_384;
/// The longest any Chromium run may take (it takes a second or two).
const BROWSER_DEADLINE: Duration = Duration::from_secs(120);

/// The Chromium binary, or why there is none.
fn chromium() -> Result<PathBuf, String> {
    if let Ok(path) = std::env::var("CTXBOX_CHROMIUM") {
        return Ok(PathBuf::from(path));
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .flat_map(|dir| ["chromium", "chromium-browser"].map(|name| dir.join(name)))
        .find(|candidate| candidate.is_file())
        .ok_or_else(|| "no `chromium` on PATH".to_owned())
}

/// Runs Chromium headless on `page` with `arguments`; its stdout and
/// stderr. A run past [`BROWSER_DEADLINE`] is killed and fails the test.
fn run_chromium(
    binary: &Path,
    profile: &Path,
    arguments: &[String],
    page: &Path,
) -> (String, String) {
    let mut child = Command::new(binary)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--disable-extensions",
            "--enable-logging=stderr",
            "--v=0",
            "--hide-scrollbars",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(arguments)
        .arg(format!("file://{}", page.display()))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|error| panic!("cannot start {}: {error}", binary.display()));
    let stdout = child.stdout.take().expect("piped");
    let stderr = child.stderr.take().expect("piped");
    let out = std::thread::spawn(move || std::io::read_to_string(stdout).unwrap_or_default());
    let err = std::thread::spawn(move || std::io::read_to_string(stderr).unwrap_or_default());
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break status;
        }
        if started.elapsed() > BROWSER_DEADLINE {
            let _ = child.kill();
            let _ = child.wait();
            panic!("Chromium did not finish within {BROWSER_DEADLINE:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let (out, err) = (out.join().expect("stdout"), err.join().expect("stderr"));
    assert!(status.success(), "Chromium failed ({status}): {err}");
    (out, err)
}

/// The fixture replayed through legacy, keep-recent, lossless and
/// pair-breaker (which breaks tool pairs: quarantined, served by legacy).
async fn comparison(data: &Path) -> Comparison {
    let runtime = Arc::new(
        Runtime::new(Config {
            data_dir: Some(data.to_owned()),
            ..Config::default()
        })
        .expect("host"),
    );
    runtime
        .engines()
        .registry()
        .plugin("test")
        .register(
            "pair-breaker",
            EngineFactory::WasmFile(guests::PAIR_BREAKER.into()),
            RegisterOptions::default(),
        )
        .expect("registers");
    let script = fixture_script(runtime.transcripts(), FIXTURE);
    let mut contenders = Vec::new();
    for id in ["legacy", "keep-recent", "lossless", "pair-breaker"] {
        let engine = runtime.select(Some(id)).await;
        assert!(engine.resolution_failure().is_none(), "{id} loads");
        contenders.push(Contender {
            engine,
            windows: vec![WINDOW],
        });
    }
    compare::compare(
        runtime.clone(),
        Arc::new(script),
        FIXTURE,
        contenders,
        CompareOptions {
            output_dir: data.join("compare"),
            parallel: 2,
            abort: CancellationToken::new(),
            on_turn: Arc::new(|| {}),
        },
    )
    .await
    .expect("compares")
}

/// The `<figure class="run">` elements of `dom`: each one's opening tag and
/// its content.
fn run_figures(dom: &str) -> Vec<(&str, &str)> {
    dom.split("<figure class=\"run\"")
        .skip(1)
        .map(|rest| {
            let (tag, body) = rest.split_once('>').expect("a whole tag");
            let body = body.split("</figure>").next().expect("closed");
            (tag, body)
        })
        .collect()
}

fn attribute<'a>(tag: &'a str, name: &str) -> &'a str {
    let start = tag
        .find(&format!("{name}=\""))
        .unwrap_or_else(|| panic!("no {name} in {tag}"))
        + name.len()
        + 2;
    let end = tag[start..].find('"').expect("closed") + start;
    &tag[start..end]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_report_renders_in_chromium_with_one_point_per_model_call() {
    let dir = tempfile::tempdir().expect("temp dir");
    let comparison = comparison(&dir.path().join("data")).await;
    assert_eq!(comparison.runs.len(), 4);
    let breaker = &comparison.runs[3];
    assert!(
        breaker.report.fallbacks > 0 && breaker.report.quarantined == ["pair-breaker"],
        "the guard served pair-breaker's calls: {:?}",
        breaker.report.quarantined
    );
    for run in &comparison.runs {
        assert!(run.report.model_calls > 0, "{} answered", run.engine);
        assert!(run.report.failed_turns.is_empty(), "{}", run.engine);
    }
    let page = dir.path().join("report.html");
    std::fs::write(&page, compare::html::page(&comparison).expect("draws")).expect("write");

    let binary = match chromium() {
        Ok(binary) => binary,
        Err(why) => {
            if std::env::var("CTXBOX_REQUIRE_CHROMIUM").as_deref() == Ok("1") {
                panic!("CTXBOX_REQUIRE_CHROMIUM=1 but Chromium is unavailable: {why}");
            }
            eprintln!("SKIP the browser half: {why}; install chromium (.ci/chromium.sh) to run it");
            return;
        }
    };
    let profile = dir.path().join("profile");
    let (dom, log) = run_chromium(&binary, &profile, &["--dump-dom".into()], &page);
    let errors: Vec<&str> = log
        .lines()
        .filter(|line| line.contains("CONSOLE") || line.contains("Uncaught"))
        .collect();
    assert!(errors.is_empty(), "the page logged: {errors:#?}");
    assert!(
        dom.contains("data-ready=\"true\""),
        "the page's script ran to its end"
    );

    let figures = run_figures(&dom);
    assert_eq!(figures.len(), comparison.runs.len(), "one chart per replay");
    for ((tag, body), run) in figures.iter().zip(&comparison.runs) {
        assert_eq!(attribute(tag, "data-engine"), run.engine);
        let calls = run.report.model_calls as usize;
        assert_eq!(attribute(tag, "data-calls"), calls.to_string());
        assert_eq!(
            body.matches("<circle").count(),
            calls,
            "{}: one point per model call",
            run.engine
        );
        assert_eq!(
            body.matches("<title>call ").count(),
            calls,
            "{}: every point has its tooltip",
            run.engine
        );
        assert_eq!(
            body.matches("<polygon").count(),
            attribute(tag, "data-compactions")
                .parse::<usize>()
                .expect("a number"),
            "{}: one triangle per compaction",
            run.engine
        );
    }
    assert!(
        attribute(figures[3].0, "data-fallback-turns") != "0",
        "pair-breaker's fallback is drawn"
    );
    assert!(
        dom.contains("assemble fell-back (invalid-output)"),
        "the guard's reason is listed"
    );

    let screenshot = std::env::var_os("CTXBOX_COMPARE_SCREENSHOT")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_TARGET_TMPDIR")).join("compare-report.png"));
    let _ = std::fs::remove_file(&screenshot);
    run_chromium(
        &binary,
        &profile,
        &[
            format!("--screenshot={}", screenshot.display()),
            "--window-size=1100,2900".into(),
        ],
        &page,
    );
    let png = std::fs::read(&screenshot).expect("the screenshot is written");
    assert!(
        png.starts_with(b"\x89PNG\r\n\x1a\n") && png.len() > 20_000,
        "a real picture: {} bytes",
        png.len()
    );
    eprintln!("screenshot: {}", screenshot.display());
}
