//! The checker's judgements that need more than one rule: a prompt against
//! its budget, a compaction against the progress watchdog, and a compaction
//! the caller aborted. Pure functions of what was observed, so each verdict
//! is tested without an engine.

use std::time::{Duration, Instant};

use super::clock::CheckClock;
use super::report::Outcome;
use crate::contract::engine::EngineResult;
use crate::contract::failure::FailureKind;
use crate::contract::text::untrusted_line;
use crate::contract::types::CompactResult;

/// A check's outcome with its explanation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Finding {
    pub(crate) outcome: Outcome,
    pub(crate) text: String,
}

impl Finding {
    pub(crate) fn pass(text: impl Into<String>) -> Self {
        Self::new(Outcome::Pass, text)
    }

    pub(crate) fn warn(text: impl Into<String>) -> Self {
        Self::new(Outcome::Warn, text)
    }

    pub(crate) fn fail(text: impl Into<String>) -> Self {
        Self::new(Outcome::Fail, text)
    }

    fn new(outcome: Outcome, text: impl Into<String>) -> Self {
        Self {
            outcome,
            text: text.into(),
        }
    }
}

impl From<Result<String, String>> for Finding {
    fn from(result: Result<String, String>) -> Self {
        match result {
            Ok(text) => Self::pass(text),
            Err(text) => Self::fail(text),
        }
    }
}

/// Why an over-budget prompt is only a warning.
pub(crate) const OVER_BUDGET_ALLOWED: &str = "over it, allowed only because the host compacts for an engine that does not own compaction (the model would refuse the prompt otherwise)";

/// A prompt of `tokens` against `budget`. Over budget is a failure for an
/// engine that owns compaction (the host does not compact for it), and a
/// warning for any other engine: allowed, since the host compacts for it
/// (`assemble-params.token-budget`), but never silent. `minimal` says the
/// prompt holds only the newest message (or tool pair), with at most the
/// user turn before it, which may alone be over.
pub(crate) fn budget(
    tokens: u64,
    budget: Option<u64>,
    minimal: bool,
    owns_compaction: bool,
) -> Finding {
    match budget {
        Some(budget) if tokens > budget && minimal => Finding::pass(format!(
            "{tokens} tokens: only the newest message (and at most the user turn before it), which alone is over the budget of {budget}"
        )),
        Some(budget) if tokens > budget && owns_compaction => Finding::fail(format!(
            "a prompt of {tokens} tokens for a budget of {budget}, from an engine that owns compaction (the host does not compact for it)"
        )),
        Some(budget) if tokens > budget => Finding::warn(format!(
            "{tokens} tokens for a budget of {budget}: {OVER_BUDGET_ALLOWED}"
        )),
        _ => Finding::pass(format!("{tokens} tokens")),
    }
}

/// A compaction against the progress watchdog: `clock` gives one watchdog
/// window of the check (every progress report re-arms it), and `reports`
/// the moments progress was reported between `started` and `ended`.
pub(crate) fn progress(
    result: &EngineResult<CompactResult>,
    started: Instant,
    reports: &[Instant],
    ended: Instant,
    clock: &CheckClock,
) -> Finding {
    let window = clock.window;
    let took = ended.saturating_duration_since(started);
    let silence = longest_silence(started, reports, ended);
    let (took_ms, silence_ms) = (millis(took), millis(silence));
    let window_words = clock.window_words();
    let count = reports.len();
    match result {
        Err(failure) if failure.kind == FailureKind::Timeout => Finding::fail(match count {
            0 => format!(
                "no progress report in {took_ms} ms: the watchdog stopped the compaction (its window is {window_words}, and each host.report-progress re-arms it)"
            ),
            _ => format!(
                "the watchdog stopped the compaction after {took_ms} ms: {count} progress reports, but {silence_ms} ms without one (the window is {window_words})"
            ),
        }),
        Err(_) => Finding::fail(format!(
            "the compaction failed after {took_ms} ms ({count} progress reports), so its progress cannot be judged"
        )),
        // Stopped by itself, typically when `host.aborted()` said the
        // watchdog's window was nearly over: it never gets to finish.
        Ok(result) if !result.ok => Finding::fail(format!(
            "{} in {took_ms} ms, so the compaction gave up (\"{}\") as the watchdog's window neared its end (the window is {window_words}, and each host.report-progress re-arms it)",
            match count {
                0 => "no progress report".to_owned(),
                _ => format!("{count} progress reports but {silence_ms} ms without one"),
            },
            untrusted_line(result.reason.as_deref().unwrap_or("no reason"), 200),
        )),
        Ok(_) if silence > window => Finding::fail(format!(
            "{silence_ms} ms without a progress report, over the watchdog window ({window_words}; it answered before the watchdog caught it)"
        )),
        Ok(_) if took > window => Finding::pass(format!(
            "{took_ms} ms, longer than one watchdog window ({window_words}), kept alive by {count} progress reports (longest stretch without one: {silence_ms} ms)"
        )),
        Ok(_) => Finding::pass(format!(
            "finished in {took_ms} ms, within one watchdog window ({window_words}; {count} progress reports)"
        )),
    }
}

/// The longest stretch between `started`, the reports and `ended`.
fn longest_silence(started: Instant, reports: &[Instant], ended: Instant) -> Duration {
    let mut last = started;
    let mut longest = Duration::ZERO;
    for &moment in reports.iter().chain([&ended]) {
        longest = longest.max(moment.saturating_duration_since(last));
        last = last.max(moment);
    }
    longest
}

/// How a compaction the caller aborted ended: `since_abort` is how long it
/// ran after the abort (`None`: it finished before the abort came), `grace`
/// how long the sandbox lets an aborted call return by itself, `took` the
/// whole call. `rules` is the answer checked against the contract.
pub(crate) fn abort(
    result: &EngineResult<CompactResult>,
    rules: Result<(), String>,
    since_abort: Option<Duration>,
    took: Duration,
    grace: Duration,
) -> Finding {
    let Some(since) = since_abort else {
        return Finding::warn(format!(
            "finished in {} ms, before the abort came: honouring it was not exercised",
            millis(took)
        ));
    };
    let (since_ms, grace_ms) = (millis(since), millis(grace));
    let late = since > grace;
    match result {
        Err(failure) if failure.kind == FailureKind::Aborted => Finding::fail(format!(
            "did not return by itself: the host interrupted it {since_ms} ms after the abort, when its {grace_ms} ms grace ran out (it never checked host.aborted(), or kept working once it was true)"
        )),
        Err(failure) if failure.kind != FailureKind::EngineError => Finding::fail(format!(
            "{} {since_ms} ms after the abort instead of returning: {}",
            failure.kind, failure.message
        )),
        _ if late => Finding::fail(format!(
            "returned {since_ms} ms after the abort, past the {grace_ms} ms the host allows"
        )),
        Err(failure) => Finding::pass(format!(
            "returned by itself {since_ms} ms after the abort, with an error: {}",
            failure.message
        )),
        Ok(answer) => match rules {
            Ok(()) => Finding::pass(format!(
                "returned by itself {since_ms} ms after the abort: {}",
                describe_compaction(answer)
            )),
            Err(violation) => Finding::fail(format!(
                "returned {since_ms} ms after the abort, but the answer breaks the rules: {violation}"
            )),
        },
    }
}

/// A compaction answer in a few words.
pub(crate) fn describe_compaction(result: &CompactResult) -> String {
    match (result.ok, result.compacted) {
        (true, true) => format!(
            "compacted {} -> {} tokens",
            result.tokens_before,
            result.tokens_after.unwrap_or_default()
        ),
        (true, false) => format!(
            "nothing compacted: {}",
            result.reason.as_deref().unwrap_or("no reason given")
        ),
        _ => format!(
            "failed: {}",
            result.reason.as_deref().unwrap_or("no reason given")
        ),
    }
}

fn millis(duration: Duration) -> u128 {
    duration.as_millis()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::contract::failure::{EngineFailure, Operation};

    fn failed(kind: FailureKind, message: &str) -> EngineResult<CompactResult> {
        Err(EngineFailure::new("e", Operation::Compact, kind, message))
    }

    fn compacted() -> EngineResult<CompactResult> {
        Ok(CompactResult {
            ok: true,
            compacted: true,
            tokens_before: 100,
            tokens_after: Some(40),
            ..CompactResult::default()
        })
    }

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn over_budget_fails_only_an_engine_that_owns_compaction() {
        assert_eq!(budget(90, Some(100), false, true).outcome, Outcome::Pass);
        assert_eq!(budget(90, None, false, true).outcome, Outcome::Pass);
        assert_eq!(budget(120, Some(100), false, true).outcome, Outcome::Fail);
        let relaxed = budget(120, Some(100), false, false);
        assert_eq!(relaxed.outcome, Outcome::Warn);
        assert!(relaxed.text.contains("host compacts"), "{}", relaxed.text);
        assert_eq!(budget(120, Some(0), true, true).outcome, Outcome::Pass);
    }

    #[test]
    fn progress_is_judged_by_the_longest_silence() {
        let start = Instant::now();
        let clock = &CheckClock::default();
        let steady: Vec<Instant> = (1..=5).map(|i| start + i * 250 * MS).collect();
        let kept = progress(&compacted(), start, &steady, start + 1_400 * MS, clock);
        assert_eq!(kept.outcome, Outcome::Pass, "{}", kept.text);
        assert!(kept.text.contains("kept alive by 5"), "{}", kept.text);

        let quick = progress(&compacted(), start, &[], start + 30 * MS, clock);
        assert_eq!(quick.outcome, Outcome::Pass, "{}", quick.text);

        let killed = failed(FailureKind::Timeout, "deadline");
        let silent = progress(&killed, start, &[], start + 1_010 * MS, clock);
        assert_eq!(silent.outcome, Outcome::Fail);
        assert!(
            silent.text.contains("no progress report"),
            "{}",
            silent.text
        );

        // Stopped in time by itself (the deadline notice), without having
        // reported progress: it never finishes a long compaction.
        let gave_up = Ok(CompactResult {
            ok: false,
            reason: Some("stopped: time is nearly up".into()),
            ..CompactResult::default()
        });
        let stopped = progress(&gave_up, start, &[], start + 760 * MS, clock);
        assert_eq!(stopped.outcome, Outcome::Fail);
        assert!(
            stopped.text.contains("no progress report"),
            "{}",
            stopped.text
        );
        assert!(
            stopped.text.contains("time is nearly up"),
            "{}",
            stopped.text
        );

        let lapsed = progress(
            &compacted(),
            start,
            &[start + 10 * MS],
            start + 1_200 * MS,
            clock,
        );
        assert_eq!(lapsed.outcome, Outcome::Fail);
        assert!(
            lapsed.text.starts_with("1190 ms without"),
            "{}",
            lapsed.text
        );
    }

    #[test]
    fn a_stretched_window_judges_by_the_engines_own_deadline_and_says_so() {
        let start = Instant::now();
        let clock = &CheckClock::for_deadline(60_000 * MS, 10_000 * MS);
        // Silent for 3 s: over the default window, within the stretched one.
        let slow = progress(&compacted(), start, &[], start + 3_000 * MS, clock);
        assert_eq!(slow.outcome, Outcome::Pass, "{}", slow.text);
        assert!(
            slow.text.contains("callTimeoutMs 60000 ms"),
            "{}",
            slow.text
        );
        let default = progress(
            &compacted(),
            start,
            &[],
            start + 3_000 * MS,
            &CheckClock::default(),
        );
        assert_eq!(default.outcome, Outcome::Fail, "{}", default.text);

        // Silent past the stretched window: still stopped, still failed.
        let killed = failed(FailureKind::Timeout, "deadline");
        let silent = progress(&killed, start, &[], start + 6_010 * MS, clock);
        assert_eq!(silent.outcome, Outcome::Fail);
        assert!(
            silent.text.contains("no progress report"),
            "{}",
            silent.text
        );
        assert!(
            silent.text.contains("6000 ms in this check"),
            "{}",
            silent.text
        );
        let lapsed = progress(&compacted(), start, &[], start + 6_500 * MS, clock);
        assert_eq!(lapsed.outcome, Outcome::Fail, "{}", lapsed.text);
    }

    #[test]
    fn an_aborted_compaction_must_return_by_itself_within_the_grace() {
        let grace = 100 * MS;
        let took = 200 * MS;
        let interrupted = abort(
            &failed(FailureKind::Aborted, "interrupted"),
            Ok(()),
            Some(105 * MS),
            took,
            grace,
        );
        assert_eq!(interrupted.outcome, Outcome::Fail);
        assert!(
            interrupted.text.contains("did not return by itself"),
            "{}",
            interrupted.text
        );

        let said_so = abort(
            &failed(FailureKind::EngineError, "aborted: compaction aborted"),
            Ok(()),
            Some(3 * MS),
            took,
            grace,
        );
        assert_eq!(said_so.outcome, Outcome::Pass, "{}", said_so.text);
        let stopped = abort(&compacted(), Ok(()), Some(2 * MS), took, grace);
        assert_eq!(stopped.outcome, Outcome::Pass, "{}", stopped.text);

        let late = abort(&compacted(), Ok(()), Some(400 * MS), took, grace);
        assert_eq!(late.outcome, Outcome::Fail);
        let trapped = abort(
            &failed(FailureKind::Panic, "boom"),
            Ok(()),
            Some(MS),
            took,
            grace,
        );
        assert_eq!(trapped.outcome, Outcome::Fail);
        let lying = abort(&compacted(), Err("bad".into()), Some(MS), took, grace);
        assert_eq!(lying.outcome, Outcome::Fail);
        let early = abort(&compacted(), Ok(()), None, 3 * MS, grace);
        assert_eq!(early.outcome, Outcome::Warn);
    }
}
