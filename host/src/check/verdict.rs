//! The verdict `ctxbox check` prints: every check with pass, warn or fail
//! (for a warning or failure, what was expected and what came back), what
//! the engine used of its limits, and a summary line; or the same as JSON.

use std::fmt::Write as _;

use serde::Serialize;

use super::report::{CallTime, CheckReport, Outcome, Tally};

/// The report as text, one check a line (two more for a failure).
pub fn text(report: &CheckReport) -> String {
    let mut out = String::new();
    match &report.engine {
        Some(info) => {
            let version = info
                .version
                .as_deref()
                .map(|version| format!(" {version}"))
                .unwrap_or_default();
            let _ = writeln!(
                out,
                "ctxbox check {}: engine {} ({}){version}",
                report.source, info.id, info.name
            );
        }
        None => {
            let _ = writeln!(out, "ctxbox check {}", report.source);
        }
    }
    out.push('\n');
    let width = report
        .checks
        .iter()
        .map(|check| check.name.chars().count())
        .max()
        .unwrap_or(0);
    for check in &report.checks {
        let name = &check.name;
        match check.outcome {
            Outcome::Pass => {
                let _ = writeln!(out, "  pass  {name:<width$}  {}", check.got);
            }
            Outcome::Warn => {
                let _ = writeln!(out, "  WARN  {name:<width$}  {}", check.got);
            }
            Outcome::Fail => {
                let _ = writeln!(out, "  FAIL  {name}");
                let _ = writeln!(out, "          expected: {}", check.expected);
                let _ = writeln!(out, "          got:      {}", check.got);
            }
        }
    }
    if report.engine.is_some() {
        out.push('\n');
        limits(&mut out, report);
    }
    out.push('\n');
    out.push_str(&summary(report));
    out.push('\n');
    out
}

/// The summary line, e.g. `verdict: FAIL (40 checks: 36 passed, 1 warning,
/// 3 failed)`.
pub fn summary(report: &CheckReport) -> String {
    let Tally {
        passed,
        warned,
        failed,
    } = report.tally();
    let mut parts = vec![format!("{passed} passed")];
    if warned > 0 {
        parts.push(plural(warned, "warning"));
    }
    if failed > 0 {
        parts.push(format!("{failed} failed"));
    }
    format!(
        "verdict: {} ({}: {})",
        if report.passed() { "pass" } else { "FAIL" },
        plural(report.checks.len(), "check"),
        parts.join(", ")
    )
}

fn limits(out: &mut String, report: &CheckReport) {
    let limits = &report.limits;
    let time = |call: &Option<CallTime>, limit: &str| match call {
        Some(call) => format!(
            "{} ms in `{}` ({limit} {} ms)",
            call.millis, call.check, call.limit_millis
        ),
        None => "no call".to_owned(),
    };
    let rows = [
        ("slowest call", time(&limits.slowest_call, "deadline")),
        (
            "slowest compaction",
            time(
                &limits.slowest_compaction,
                "watchdog ceiling, with progress:",
            ),
        ),
        (
            "watchdog window",
            limits.watchdog_window.clone().unwrap_or_default(),
        ),
        (
            "largest answer",
            format!(
                "{} bytes as JSON (cap {} bytes)",
                limits.largest_answer_bytes, limits.answer_limit_bytes
            ),
        ),
    ];
    let _ = writeln!(out, "  limits probed");
    for (label, value) in rows {
        let _ = writeln!(out, "    {label:<19} {value}");
    }
    for missing in &limits.not_measured {
        let _ = writeln!(out, "    not measured:       {missing}");
    }
}

fn plural(count: usize, noun: &str) -> String {
    match count {
        1 => format!("1 {noun}"),
        _ => format!("{count} {noun}s"),
    }
}

/// The report as JSON: `verdict` (`pass` or `fail`), `tally`, and the
/// report's own fields.
pub fn json(report: &CheckReport) -> serde_json::Value {
    #[derive(Serialize)]
    struct Verdict<'a> {
        verdict: &'static str,
        tally: Tally,
        #[serde(flatten)]
        report: &'a CheckReport,
    }
    let verdict = Verdict {
        verdict: if report.passed() { "pass" } else { "fail" },
        tally: report.tally(),
        report,
    };
    serde_json::to_value(verdict).unwrap_or_else(
        |error| serde_json::json!({ "verdict": "fail", "error": error.to_string() }),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::check::{CheckResult, LimitsProbe};

    fn check(name: &str, outcome: Outcome, got: &str) -> CheckResult {
        CheckResult {
            name: name.into(),
            outcome,
            expected: format!("what {name} expects"),
            got: got.into(),
        }
    }

    fn report() -> CheckReport {
        CheckReport {
            source: "engine.wasm".into(),
            engine: None,
            checks: vec![
                check("load", Outcome::Pass, "loads"),
                check("assemble: zero budget", Outcome::Warn, "over budget"),
                check("compact: abort", Outcome::Fail, "interrupted"),
            ],
            limits: LimitsProbe::default(),
        }
    }

    #[test]
    fn the_text_shows_each_outcome_and_a_failures_expectation() {
        let text = text(&report());
        assert!(text.contains("  pass  load  "), "{text}");
        assert!(
            text.contains("  WARN  assemble: zero budget  over budget"),
            "{text}"
        );
        assert!(text.contains("  FAIL  compact: abort\n"), "{text}");
        assert!(
            text.contains("expected: what compact: abort expects"),
            "{text}"
        );
        assert!(text.contains("got:      interrupted"), "{text}");
        assert!(
            text.ends_with("verdict: FAIL (3 checks: 1 passed, 1 warning, 1 failed)\n"),
            "{text}"
        );
    }

    #[test]
    fn warnings_alone_pass() {
        let mut report = report();
        report.checks.pop();
        assert_eq!(
            summary(&report),
            "verdict: pass (2 checks: 1 passed, 1 warning)"
        );
        let json = json(&report);
        assert_eq!(json["verdict"], "pass");
        assert_eq!(json["tally"]["warned"], 1);
        assert_eq!(json["checks"][1]["outcome"], "warn");
        assert_eq!(json["source"], "engine.wasm");
    }
}
