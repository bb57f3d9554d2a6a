//! The check's time scale: how long one compaction watchdog window lasts in
//! the check, and how long each summary takes during the progress and abort
//! checks.
//!
//! The check compresses the host's 180 s window to [`WATCHDOG_WINDOW`] so
//! that a compaction needing progress shows in seconds. That window fits an
//! engine running under the sandbox's call deadline. An operator who gives
//! an engine a longer deadline of its own (`plugins.entries.<id>.limits.
//! callTimeoutMs`) says its work takes that much longer than the defaults
//! assume (an OpenClaw plugin's JavaScript runs in the guest's
//! interpreter): the check then stretches its window, and the pace of its
//! slow summaries with it, by as much as that deadline exceeds the
//! sandbox's. Every judgement keeps its proportions (a compaction that
//! reports no progress still outlasts the window and fails), only on the
//! engine's own time scale; never past the host's own window.

use std::time::Duration;

use crate::sandbox::SandboxConfig;

/// One compaction watchdog window in the check, for an engine under the
/// sandbox's call deadline (180 s in production).
pub const WATCHDOG_WINDOW: Duration = Duration::from_secs(1);

/// How long each summary takes during the progress and abort checks, for an
/// engine under the sandbox's call deadline.
pub const PACE: Duration = Duration::from_millis(200);

/// The check's time scale for one engine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CheckClock {
    /// One compaction watchdog window: a compaction that reports no
    /// progress for this long is stopped.
    pub(crate) window: Duration,
    /// How long each summary takes during the progress and abort checks.
    pub(crate) pace: Duration,
    /// The engine's own call deadline and the sandbox's, when the first,
    /// being longer, stretched the window.
    stretched_by: Option<(Duration, Duration)>,
}

impl Default for CheckClock {
    fn default() -> Self {
        Self {
            window: WATCHDOG_WINDOW,
            pace: PACE,
            stretched_by: None,
        }
    }
}

impl CheckClock {
    /// The clock for an engine whose plain calls get `engine_deadline` where
    /// the sandbox gives `sandbox_deadline`: the default one, stretched by
    /// their ratio when the engine's is longer (never past the host's own
    /// window, 180 s).
    pub(crate) fn for_deadline(engine_deadline: Duration, sandbox_deadline: Duration) -> Self {
        if engine_deadline <= sandbox_deadline || sandbox_deadline.is_zero() {
            return Self::default();
        }
        let host_window = SandboxConfig::default().compaction_window();
        let stretch = |base: Duration| {
            let nanos = base.as_nanos() * engine_deadline.as_nanos() / sandbox_deadline.as_nanos();
            Duration::from_nanos(u64::try_from(nanos).unwrap_or(u64::MAX))
        };
        let window = stretch(WATCHDOG_WINDOW).min(host_window);
        // The pace keeps its share of the window, capped or not.
        let pace = Duration::from_nanos(
            u64::try_from(PACE.as_nanos() * window.as_nanos() / WATCHDOG_WINDOW.as_nanos())
                .unwrap_or(u64::MAX),
        );
        Self {
            window,
            pace,
            stretched_by: Some((engine_deadline, sandbox_deadline)),
        }
    }

    /// The window in words, for verdicts: how long it is in this check, and
    /// why, and what it is in production.
    pub(crate) fn window_words(&self) -> String {
        let window = self.window.as_millis();
        match self.stretched_by {
            None => format!("{window} ms in this check, 180 s by default"),
            Some((engine, sandbox)) => {
                let factor = format!("{:.1}", engine.as_secs_f64() / sandbox.as_secs_f64());
                format!(
                    "{window} ms in this check, its {} ms stretched by this engine's configured call deadline: callTimeoutMs {} ms, {}x the sandbox's {} ms; 180 s by default",
                    WATCHDOG_WINDOW.as_millis(),
                    engine.as_millis(),
                    factor.trim_end_matches(".0"),
                    sandbox.as_millis()
                )
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn an_engine_under_the_sandboxs_deadline_gets_the_default_clock() {
        let sandbox = 10_000 * MS;
        assert_eq!(
            CheckClock::for_deadline(sandbox, sandbox),
            CheckClock::default()
        );
        // A shorter deadline of its own says nothing about compaction.
        assert_eq!(
            CheckClock::for_deadline(2_000 * MS, sandbox),
            CheckClock::default()
        );
        let words = CheckClock::default().window_words();
        assert!(words.starts_with("1000 ms in this check"), "{words}");
        assert!(!words.contains("callTimeoutMs"), "{words}");
    }

    #[test]
    fn a_longer_deadline_stretches_the_window_and_the_pace_alike() {
        let clock = CheckClock::for_deadline(60_000 * MS, 10_000 * MS);
        assert_eq!(clock.window, 6_000 * MS);
        assert_eq!(clock.pace, 1_200 * MS);
        let words = clock.window_words();
        assert!(words.starts_with("6000 ms in this check"), "{words}");
        assert!(words.contains("callTimeoutMs 60000 ms"), "{words}");
        assert!(words.contains("6x the sandbox's 10000 ms"), "{words}");

        let uneven = CheckClock::for_deadline(15_000 * MS, 10_000 * MS);
        assert_eq!(uneven.window, 1_500 * MS);
        assert_eq!(uneven.pace, 300 * MS);
        let words = uneven.window_words();
        assert!(words.contains("1.5x the sandbox's"), "{words}");
    }

    #[test]
    fn the_window_never_outgrows_the_hosts() {
        let clock = CheckClock::for_deadline(Duration::from_secs(86_400), 10_000 * MS);
        assert_eq!(clock.window, Duration::from_secs(180));
        assert_eq!(clock.pace, 36_000 * MS);
    }
}
