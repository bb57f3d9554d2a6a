//! `ctxbox check` on real engines: the example engines pass every check, and
//! deliberately broken engines fail the checks they break, with explanations.

use std::path::Path;

use ctxbox_host::check::{self, CheckReport, Outcome, verdict};
use ctxbox_host::sandbox::EngineLimits;
use ctxbox_tests::guests;

async fn check(path: &str) -> CheckReport {
    check_with(path, check::CheckOptions::default()).await
}

/// Checks `path` with `options`, its compile cache and timeout set.
async fn check_with(path: &str, options: check::CheckOptions) -> CheckReport {
    // Cached next to the component: big components compile slowly in debug.
    let cache_dir = Path::new(path).with_extension("check-cache");
    let options = check::CheckOptions {
        cache_dir: Some(cache_dir),
        compile_timeout_ms: Some(ctxbox_tests::LARGE_COMPONENT_COMPILE_TIMEOUT_MS),
        ..options
    };
    check::check_file(Path::new(path), &options)
        .await
        .expect("the checker runs")
}

/// Options that give engine `id` a call deadline of its own, as
/// `plugins.entries.<id>.limits.callTimeoutMs` does.
fn with_call_deadline(id: &str, call_timeout_ms: u64) -> check::CheckOptions {
    let limits = EngineLimits {
        call_timeout_ms: Some(call_timeout_ms),
        ..EngineLimits::default()
    };
    check::CheckOptions {
        engine_limits: [(id.to_owned(), limits)].into(),
        ..check::CheckOptions::default()
    }
}

fn assert_passes(report: &CheckReport) {
    let failures: Vec<_> = report.failures().collect();
    assert!(failures.is_empty(), "{}", verdict::text(report));
    assert!(report.checks.len() >= 40, "{}", verdict::text(report));
    // Every compaction rule was exercised, not skipped.
    for name in ["compact: progress", "compact: abort"] {
        assert_eq!(
            outcome(report, name),
            Outcome::Pass,
            "{}",
            verdict::text(report)
        );
    }
}

fn outcome(report: &CheckReport, name: &str) -> Outcome {
    report
        .get(name)
        .unwrap_or_else(|| panic!("no check `{name}`: {}", verdict::text(report)))
        .outcome
}

fn failed<'a>(report: &'a CheckReport, name: &str) -> &'a check::CheckResult {
    report
        .checks
        .iter()
        .find(|check| check.name == name && check.outcome == Outcome::Fail)
        .unwrap_or_else(|| panic!("`{name}` should fail: {}", verdict::text(report)))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keep_recent_passes_every_check() {
    let report = check(guests::KEEP_RECENT).await;
    assert_passes(&report);
    assert_eq!(
        report.engine.as_ref().map(|info| info.id.as_str()),
        Some("keep-recent")
    );
    // Its omission note does not fit a 20-token budget: reported, and said
    // to be the caller's budget, not a failure of the engine.
    let tiny = report.get("assemble: tiny budget").expect("probed");
    assert_eq!(tiny.outcome, Outcome::Warn, "{}", verdict::text(&report));
    assert!(tiny.got.contains("the caller's budget"), "{}", tiny.got);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_engine_whose_additions_no_budget_holds_fails_the_check() {
    let report = check(guests::PROMPT_STUFFER).await;
    assert!(!report.passed());
    let half = failed(&report, "assemble: half the history");
    assert!(half.got.contains("system-prompt addition"), "{}", half.got);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lossless_passes_every_check() {
    let report = check(guests::LOSSLESS).await;
    assert_passes(&report);
    assert_eq!(
        report.engine.as_ref().map(|info| info.owns_compaction),
        Some(true)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delegating_passes_every_check() {
    let report = check(guests::DELEGATING).await;
    assert_passes(&report);
    // Its prompts go over budget, which the host makes up for by compacting:
    // allowed, but never silent, in the text and in the JSON.
    let half = report
        .get("assemble: half the history")
        .expect("the check ran");
    assert_eq!(half.outcome, Outcome::Warn, "{}", verdict::text(&report));
    assert!(half.got.contains("host compacts"), "{}", half.got);
    let text = verdict::text(&report);
    assert!(
        text.contains("  WARN  assemble: half the history"),
        "{text}"
    );
    assert!(text.contains("warnings)"), "{text}");
    let json = verdict::json(&report);
    assert_eq!(json["verdict"], "pass");
    assert!(json["tally"]["warned"].as_u64() >= Some(1), "{json}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_python_engine_passes_every_check() {
    match guests::KEEP_RECENT_PY {
        Ok(path) => assert_passes(&check(path).await),
        Err(why) if std::env::var_os("CTXBOX_REQUIRE_PYTHON_ENGINE").is_some() => {
            panic!("CTXBOX_REQUIRE_PYTHON_ENGINE is set but {why}")
        }
        Err(why) => eprintln!("skipping: {why}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_engine_that_splits_tool_pairs_fails_with_the_reason() {
    let report = check(guests::PAIR_BREAKER).await;
    assert!(!report.passed());
    let straddle = failed(&report, "assemble: tool pairs straddling the budget");
    assert!(
        straddle.got.contains("but not the call before it"),
        "{}",
        straddle.got
    );
    assert!(
        straddle.expected.contains("no tool call separated"),
        "{}",
        straddle.expected
    );
    let estimate = failed(&report, "assemble: estimated-tokens");
    assert!(
        estimate.got.contains("estimated 1 tokens"),
        "{}",
        estimate.got
    );
    // What it does right still passes.
    assert!(
        report
            .checks
            .iter()
            .any(|check| check.name == "compact" && check.passed())
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lying_compaction_fails_the_compact_check() {
    let report = check(guests::LIAR).await;
    let compact = failed(&report, "compact");
    assert!(compact.got.contains("no-such-entry"), "{}", compact.got);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panic_fails_its_check_with_the_guests_message() {
    // flaky panics on its fifth assemble; the checker goes on past it.
    let report = check(guests::FLAKY).await;
    let panicked: Vec<_> = report
        .failures()
        .filter(|check| check.got.starts_with("panic"))
        .collect();
    assert_eq!(panicked.len(), 1, "{:#?}", report.checks);
    assert!(
        panicked[0].got.contains("fifth call"),
        "the stderr tail: {}",
        panicked[0].got
    );
    assert!(
        report
            .checks
            .iter()
            .any(|check| check.name == "dispose" && check.passed())
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_engine_without_an_id_stops_at_info() {
    let report = check(guests::NAMELESS).await;
    let info = failed(&report, "info");
    assert!(info.got.contains("empty id"), "{}", info.got);
    assert_eq!(
        report.checks.len(),
        2,
        "nothing is checked past a broken info"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_component_fails_the_load_check() {
    let report = check(guests::PHONE_HOME).await;
    let load = failed(&report, "load");
    assert!(load.got.contains("wasi:sockets"), "{}", load.got);
    assert_eq!(report.checks.len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_engine_that_ignores_abort_fails_the_abort_check() {
    let report = check(guests::ABORT_IGNORER).await;
    let abort = failed(&report, "compact: abort");
    assert!(
        abort.got.contains("did not return by itself"),
        "{}",
        abort.got
    );
    assert!(abort.got.contains("host.aborted()"), "{}", abort.got);
    assert!(
        abort.expected.contains("returns by itself"),
        "{}",
        abort.expected
    );

    let text = verdict::text(&report);
    assert!(text.contains("  FAIL  compact: abort\n"), "{text}");
    assert!(
        text.contains("          expected: returns by itself"),
        "{text}"
    );
    assert!(
        text.contains("          got:      did not return by itself"),
        "{text}"
    );
    assert!(
        text.trim_end().ends_with(&verdict::summary(&report)),
        "{text}"
    );
    assert!(
        verdict::summary(&report).starts_with("verdict: FAIL ("),
        "{text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_compaction_without_progress_fails_the_progress_check() {
    let report = check(guests::CHECK_SILENT_COMPACTOR).await;
    let progress = failed(&report, "compact: progress");
    assert!(
        progress.got.contains("no progress report"),
        "{}",
        progress.got
    );
    assert!(progress.got.contains("watchdog"), "{}", progress.got);
    // Everything else it does right: quick compactions, and the abort.
    for name in ["compact", "compact: abort", "compact: CJK text"] {
        assert_eq!(
            outcome(&report, name),
            Outcome::Pass,
            "{}",
            verdict::text(&report)
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_configured_engine_is_judged_on_its_own_time_scale_and_told_so() {
    // Twice the sandbox's call deadline: a 2 s window, 400 ms summaries.
    let options = with_call_deadline("delegating", 20_000);
    let report = check_with(guests::DELEGATING, options).await;
    assert_passes(&report);
    let window = report.limits.watchdog_window.as_deref().unwrap_or_default();
    assert!(window.starts_with("2000 ms in this check"), "{window}");
    assert!(window.contains("callTimeoutMs 20000 ms"), "{window}");
    // The slow compaction still outlasts the stretched window: progress
    // was needed, and reported.
    let progress = report.get("compact: progress").expect("the check ran");
    assert!(progress.got.contains("kept alive by"), "{}", progress.got);
    assert!(
        progress.expected.contains("each summary takes 400 ms"),
        "{}",
        progress.expected
    );
    let text = verdict::text(&report);
    assert!(
        text.contains("    watchdog window     2000 ms in this check"),
        "{text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_configured_engine_silent_past_its_stretched_window_still_fails() {
    let options = with_call_deadline("check-silent-compactor", 20_000);
    let report = check_with(guests::CHECK_SILENT_COMPACTOR, options).await;
    let progress = failed(&report, "compact: progress");
    assert!(
        progress.got.contains("no progress report"),
        "{}",
        progress.got
    );
    assert!(
        progress.got.contains("2000 ms in this check"),
        "{}",
        progress.got
    );
    assert!(
        progress.got.contains("callTimeoutMs 20000 ms"),
        "{}",
        progress.got
    );
    assert_eq!(
        outcome(&report, "compact"),
        Outcome::Pass,
        "{}",
        verdict::text(&report)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_engine_owning_compaction_fails_over_budget() {
    let report = check(guests::CHECK_GREEDY_OWNER).await;
    let half = failed(&report, "assemble: half the history");
    assert!(half.got.contains("owns compaction"), "{}", half.got);
    failed(&report, "assemble: tool pairs straddling the budget");
    // Compacting nothing, truthfully, is fine.
    assert_eq!(outcome(&report, "compact"), Outcome::Pass);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_dispose_fails_its_check_without_stalling_the_checker() {
    let started = std::time::Instant::now();
    let report = check(guests::SLOW_DISPOSER).await;
    let dispose = failed(&report, "dispose");
    assert!(
        dispose.got.contains("timeout"),
        "{}",
        verdict::text(&report)
    );
    assert!(
        started.elapsed() < std::time::Duration::from_secs(60),
        "{:?}",
        started.elapsed()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_check_of_an_engine_using_sql_reports_its_database() {
    let report = check(guests::SQL_NOTES).await;
    let load = report.get("load").expect("loaded");
    assert_eq!(load.outcome, Outcome::Pass, "{}", verdict::text(&report));
    assert!(load.got.contains("`sql` among them"), "{}", load.got);
    let sql = report.get("sql").expect("the sql check ran");
    assert_eq!(sql.outcome, Outcome::Pass, "{}", verdict::text(&report));
    assert!(sql.got.starts_with("integrity ok"), "{}", sql.got);
    assert!(sql.got.contains("notes"), "{}", sql.got);
}
