//! `ctxbox check` on real engines: the example engines pass every check, and
//! deliberately broken engines fail the checks they break, with explanations.

use std::path::Path;

use ctxbox_host::check::{self, CheckReport};
use ctxbox_tests::guests;

async fn check(path: &str) -> CheckReport {
    // Cached next to the component: big components compile slowly in debug.
    let cache_dir = Path::new(path).with_extension("check-cache");
    let options = check::CheckOptions {
        cache_dir: Some(cache_dir),
    };
    check::check_file(Path::new(path), &options)
        .await
        .expect("the checker runs")
}

fn assert_passes(report: &CheckReport) {
    let failures: Vec<_> = report.failures().collect();
    assert!(failures.is_empty(), "{}: {failures:#?}", report.source);
    assert!(report.checks.len() >= 25, "{} checks", report.checks.len());
}

fn failed<'a>(report: &'a CheckReport, name: &str) -> &'a check::CheckResult {
    report
        .checks
        .iter()
        .find(|check| check.name == name && !check.passed)
        .unwrap_or_else(|| panic!("`{name}` should fail: {:#?}", report.checks))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keep_recent_passes_every_check() {
    let report = check(guests::KEEP_RECENT).await;
    assert_passes(&report);
    assert_eq!(
        report.engine.as_ref().map(|info| info.id.as_str()),
        Some("keep-recent")
    );
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
    assert_passes(&check(guests::DELEGATING).await);
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
            .any(|check| check.name == "compact" && check.passed)
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
            .any(|check| check.name == "dispose" && check.passed)
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
