//! What the checker found: one [`CheckResult`] per check, with an outcome of
//! pass, warn or fail, and what it measured of the engine's resource use.

use serde::Serialize;

use crate::contract::types::EngineInfo;

/// How one check came out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Outcome {
    /// The engine did what the contract asks.
    Pass,
    /// Allowed by the contract, but worth knowing: the host has to make up
    /// for it (e.g. a prompt over budget from an engine the host compacts
    /// for), or the check could not exercise what it meant to.
    Warn,
    /// The engine broke a rule.
    Fail,
}

impl Outcome {
    /// The lowercase name (`pass`, `warn`, `fail`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pass => "pass",
            Self::Warn => "warn",
            Self::Fail => "fail",
        }
    }
}

/// One check.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CheckResult {
    /// What was checked.
    pub name: String,
    /// How it came out.
    pub outcome: Outcome,
    /// What the contract expects.
    pub expected: String,
    /// What the engine did (for a warning or failure: why).
    pub got: String,
}

impl CheckResult {
    /// Whether the check did not fail (a warning is not a failure).
    pub fn passed(&self) -> bool {
        self.outcome != Outcome::Fail
    }
}

/// The longest call of one kind and the limit it ran under.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CallTime {
    /// The check the call belonged to.
    pub check: String,
    /// How long it took, milliseconds.
    pub millis: u64,
    /// The most the sandbox lets such a call take, milliseconds.
    pub limit_millis: u64,
}

/// What the engine used of its limits, as far as the checker can tell
/// (informational: nothing here fails an engine).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LimitsProbe {
    /// The slowest call under the plain call deadline.
    pub slowest_call: Option<CallTime>,
    /// The slowest call under the compaction watchdog (`compact`,
    /// `after-turn`); its limit is the watchdog's ceiling.
    pub slowest_compaction: Option<CallTime>,
    /// The compaction watchdog window the checks ran under, in words: the
    /// check's own, or stretched by the engine's configured call deadline.
    pub watchdog_window: Option<String>,
    /// The largest answer (`assemble` or `compact`), bytes as JSON.
    pub largest_answer_bytes: u64,
    /// The sandbox's cap on an answer, bytes.
    pub answer_limit_bytes: u64,
    /// What could not be measured, and why.
    pub not_measured: Vec<String>,
}

/// Every check run on one engine.
#[derive(Debug, Clone, Serialize)]
pub struct CheckReport {
    /// What was checked (a path or label).
    pub source: String,
    /// The engine's info, once it loaded.
    pub engine: Option<EngineInfo>,
    /// The checks, in the order run.
    pub checks: Vec<CheckResult>,
    /// Resource use seen across the checks.
    pub limits: LimitsProbe,
}

/// How many checks came out each way.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Tally {
    /// Checks passed.
    pub passed: usize,
    /// Checks passed with a warning.
    pub warned: usize,
    /// Checks failed.
    pub failed: usize,
}

impl CheckReport {
    /// Whether no check failed (warnings allowed).
    pub fn passed(&self) -> bool {
        self.checks.iter().all(CheckResult::passed)
    }

    /// The failed checks.
    pub fn failures(&self) -> impl Iterator<Item = &CheckResult> {
        self.with_outcome(Outcome::Fail)
    }

    /// The checks that passed with a warning.
    pub fn warnings(&self) -> impl Iterator<Item = &CheckResult> {
        self.with_outcome(Outcome::Warn)
    }

    /// The check named `name`, if it ran.
    pub fn get(&self, name: &str) -> Option<&CheckResult> {
        self.checks.iter().find(|check| check.name == name)
    }

    /// How many checks came out each way.
    pub fn tally(&self) -> Tally {
        let count = |outcome| self.with_outcome(outcome).count();
        Tally {
            passed: count(Outcome::Pass),
            warned: count(Outcome::Warn),
            failed: count(Outcome::Fail),
        }
    }

    fn with_outcome(&self, outcome: Outcome) -> impl Iterator<Item = &CheckResult> {
        self.checks
            .iter()
            .filter(move |check| check.outcome == outcome)
    }
}
