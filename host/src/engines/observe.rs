//! Hearing of every guarded engine call: which engine, which operation, how
//! it ended and how long it took. The guard reports each call to the
//! observer installed on its host's [`Engines`](super::Engines) (`ctxbox
//! serve` counts them for its metrics); with none installed it does not
//! even read the clock.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use crate::contract::failure::Operation;

/// How a guarded call ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum CallOutcome {
    /// The selected engine answered (or `legacy`, selected on purpose).
    Served,
    /// `legacy` served it in place of the selected engine, which did not
    /// fail it: the engine was quarantined or could not be made, or no
    /// instance slot was free.
    FellBack,
    /// The engine failed it and was quarantined (`legacy` served the call,
    /// or it was reported as failed).
    Quarantined,
    /// The engine ran past its deadline and was quarantined.
    Deadline,
    /// The engine refused it (an `engine-error` from `compact` or a tool):
    /// an answer, nothing quarantined.
    Refused,
    /// The caller aborted it.
    Aborted,
    /// The host had no room for the engine (no free instance slot): refused
    /// for the caller to retry.
    Overloaded,
    /// Another host took the session's lease over: the call's writes were
    /// refused, for the caller to retry.
    LeaseLost,
}

impl CallOutcome {
    /// Every outcome, in order.
    pub const ALL: [Self; 8] = [
        Self::Served,
        Self::FellBack,
        Self::Quarantined,
        Self::Deadline,
        Self::Refused,
        Self::Aborted,
        Self::Overloaded,
        Self::LeaseLost,
    ];

    /// The snake_case name used in metrics.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Served => "served",
            Self::FellBack => "fell_back",
            Self::Quarantined => "quarantined",
            Self::Deadline => "deadline",
            Self::Refused => "refused",
            Self::Aborted => "aborted",
            Self::Overloaded => "overloaded",
            Self::LeaseLost => "lease_lost",
        }
    }
}

/// Hears of guarded engine calls as they end.
pub trait CallObserver: Send + Sync {
    /// Engine `engine` (the selected id) ended an `operation` call with
    /// `outcome` after `elapsed` (a fallback's time included).
    fn call_done(
        &self,
        engine: &str,
        operation: Operation,
        outcome: CallOutcome,
        elapsed: Duration,
    );
}

/// Where one host's guarded engines report their calls: empty until an
/// observer is installed, once.
#[derive(Default)]
pub struct CallObservers(OnceLock<Arc<dyn CallObserver>>);

impl CallObservers {
    /// Installs `observer` for every call from now on; `false` (and nothing
    /// changes) when one is installed already.
    pub fn install(&self, observer: Arc<dyn CallObserver>) -> bool {
        self.0.set(observer).is_ok()
    }

    /// The observer, if one is installed.
    pub fn get(&self) -> Option<&Arc<dyn CallObserver>> {
        self.0.get()
    }
}
