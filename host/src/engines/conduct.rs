//! An engine's recent conduct, kept in memory beside its quarantine record
//! (ARCHITECTURE.md §5, "Slow rules"): what the guard's two rules that look
//! at more than one call need.
//!
//! - **Stops at the deadline notice in a row.** An engine that stops with an
//!   error once `host.aborted()` turned true did as it was asked — once. The
//!   first stop is forgiven; [`STOPS_THAT_QUARANTINE`] in a row (no answer in
//!   time between them) are a failure like a timeout: each cost a full
//!   deadline, and the engine would cost one on every call.
//! - **Probation after a back-off.** A quarantined engine whose retry is due
//!   serves again, but its record stays until it has answered
//!   [`PROBATION_CALLS`] calls in a row over at least its last back-off; a
//!   failure meanwhile counts on the same record, so its back-off keeps
//!   doubling instead of starting over.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};

/// Stops at the deadline notice in a row that quarantine the engine.
pub const STOPS_THAT_QUARANTINE: u32 = 2;
/// Good answers in a row a retried engine gives before its record clears
/// (spanning its last back-off at least).
pub const PROBATION_CALLS: u32 = 3;

/// A run of good answers since a retried engine's back-off ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GoodRun {
    /// Answers in the run.
    pub calls: u32,
    /// Milliseconds from its first answer to its latest.
    pub span_ms: i64,
}

/// What one engine did lately.
#[derive(Debug, Default)]
struct Recent {
    stops_in_a_row: u32,
    /// When the current good run began, and its answers.
    run: Option<(i64, u32)>,
}

/// Every engine's recent conduct on this host.
#[derive(Debug, Default)]
pub(crate) struct Conduct {
    engines: Mutex<HashMap<String, Recent>>,
}

impl Conduct {
    /// `engine_id` stopped at its deadline notice: answers its stops in a
    /// row, this one included. A stop also ends a good run.
    pub(crate) fn stopped(&self, engine_id: &str) -> u32 {
        let mut engines = self.engines.lock().unwrap_or_else(PoisonError::into_inner);
        let recent = engines.entry(engine_id.to_owned()).or_default();
        recent.stops_in_a_row = recent.stops_in_a_row.saturating_add(1);
        recent.run = None;
        recent.stops_in_a_row
    }

    /// `engine_id` answered in time at `now_ms`: its stops in a row end, and
    /// when `on_probation`, the answer extends its good run, which is
    /// answered.
    pub(crate) fn answered(&self, engine_id: &str, now_ms: i64, on_probation: bool) -> GoodRun {
        let mut engines = self.engines.lock().unwrap_or_else(PoisonError::into_inner);
        if !on_probation {
            engines.remove(engine_id);
            return GoodRun {
                calls: 0,
                span_ms: 0,
            };
        }
        let recent = engines.entry(engine_id.to_owned()).or_default();
        recent.stops_in_a_row = 0;
        let (since, calls) = recent.run.get_or_insert((now_ms, 0));
        *calls = calls.saturating_add(1);
        GoodRun {
            calls: *calls,
            span_ms: now_ms.saturating_sub(*since),
        }
    }

    /// `engine_id` failed (or its record was cleared): its good run, if
    /// any, is over.
    pub(crate) fn forget_run(&self, engine_id: &str) {
        if let Some(recent) = self
            .engines
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get_mut(engine_id)
        {
            recent.run = None;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stops_count_in_a_row_until_an_answer() {
        let conduct = Conduct::default();
        assert_eq!(conduct.stopped("x"), 1);
        assert_eq!(conduct.stopped("x"), 2);
        conduct.answered("x", 0, false);
        assert_eq!(conduct.stopped("x"), 1, "an answer in time ends the row");
        assert_eq!(conduct.stopped("y"), 1, "per engine");
    }

    #[test]
    fn a_good_run_spans_its_answers_and_a_failure_ends_it() {
        let conduct = Conduct::default();
        assert_eq!(
            conduct.answered("x", 1_000, true),
            GoodRun {
                calls: 1,
                span_ms: 0
            }
        );
        assert_eq!(
            conduct.answered("x", 61_000, true),
            GoodRun {
                calls: 2,
                span_ms: 60_000
            }
        );
        conduct.forget_run("x");
        assert_eq!(conduct.answered("x", 70_000, true).calls, 1);
        conduct.stopped("x");
        assert_eq!(
            conduct.answered("x", 80_000, true).calls,
            1,
            "a stop ends it too"
        );
    }
}
