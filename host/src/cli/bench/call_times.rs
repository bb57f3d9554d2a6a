//! Where an engine's replay time goes: the guarded calls' time summed by
//! engine and operation, heard through the guard's call observer.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::Duration;

use ctxbox_host::contract::failure::Operation;
use ctxbox_host::engines::observe::{CallObserver, CallOutcome};

/// An engine id and one of its operations.
type EngineOperation = (String, &'static str);

/// Calls and their summed time, by engine id and operation.
#[derive(Default)]
pub(super) struct CallTimes(Mutex<BTreeMap<EngineOperation, (u64, Duration)>>);

impl CallObserver for CallTimes {
    fn call_done(
        &self,
        engine: &str,
        operation: Operation,
        _outcome: CallOutcome,
        elapsed: Duration,
    ) {
        let mut totals = self
            .0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let entry = totals
            .entry((engine.to_owned(), operation.as_str()))
            .or_default();
        entry.0 += 1;
        entry.1 += elapsed;
    }
}

impl CallTimes {
    /// `engine`'s operations, most time first, each as calls and time per
    /// replay (the totals divided by `replays`): "assemble 280 × 1.2 ms =
    /// 336 ms, …".
    pub(super) fn summary(&self, engine: &str, replays: u32) -> String {
        let totals = self
            .0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let mut operations: Vec<_> = totals
            .iter()
            .filter(|((id, _), _)| id == engine)
            .map(|((_, operation), (calls, time))| (*operation, *calls, *time))
            .collect();
        operations.sort_by_key(|&(_, _, time)| std::cmp::Reverse(time));
        let replays = replays.max(1);
        operations
            .iter()
            .map(|(operation, calls, time)| {
                let each = time.as_secs_f64() * 1e3 / (*calls).max(1) as f64;
                format!(
                    "{operation} {} × {each:.2} ms = {:.0} ms",
                    calls / u64::from(replays),
                    time.as_secs_f64() * 1e3 / f64::from(replays)
                )
            })
            .collect::<Vec<_>>()
            .join(", ")
    }
}
