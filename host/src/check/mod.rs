//! The conformance checker behind `ctxbox check` (ARCHITECTURE.md §9): loads an
//! engine in the sandbox with the host's real services, calls every export
//! with valid and edge-case input, and checks each answer against the
//! contract's rules. Each check passes, warns (allowed, but the host has to
//! make up for it, or the check could not exercise what it meant to) or
//! fails; a warning or failure says what was expected and what came back.
//!
//! Tools are listed and each called with `{}` arguments; the model an
//! engine asks for completions is an offline one (extractive answers), and
//! what it asked is reported against the budgets.
//!
//! The checker's host differs from a production one in three ways, each so
//! that a check can see what it looks for: one compaction watchdog window
//! is [`WATCHDOG_WINDOW`] instead of 180 s; during the progress and abort
//! checks every summary takes [`PACE`], so compactions last long enough to
//! need progress and an abort lands mid-compaction; and the `summarize`
//! service returns at once when the caller aborts. An engine configured
//! with a longer call deadline of its own (`plugins.entries.<id>.limits`)
//! gets the window and the pace stretched alike, as much as its deadline
//! exceeds the sandbox's: it is judged on its own time scale.

mod assemble;
pub mod cases;
mod clock;
mod compaction;
mod host;
mod judge;
mod lifecycle;
mod powers;
mod report;
pub mod verdict;

use std::collections::BTreeMap;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use serde::Serialize;

use self::clock::CheckClock;
pub use self::clock::{PACE, WATCHDOG_WINDOW};
use self::host::{CheckServices, Pace, PacedCompletions, PacedSummarizer};
use self::judge::Finding;
pub use self::report::{CallTime, CheckReport, CheckResult, LimitsProbe, Outcome, Tally};
use crate::contract::engine::{CallOptions, ContextEngine};
use crate::contract::failure::{EngineFailure, FailureKind, Operation};
use crate::contract::history::History;
use crate::contract::types::{AgentMessage, MessageEntry, SessionRef};
use crate::sandbox::{
    EngineIdentity, EngineLimits, LoadedComponent, Sandbox, SandboxConfig, SqlAccess, WasmEngine,
};
use crate::services::compaction::{CompactionConfig, Compactor};
use crate::services::completions::{CompletionLimits, Completions};
use crate::services::native::NativeServices;
use crate::services::sql::{SqlConfig, SqlService};
use crate::services::state::{StateConfig, StateStore};
use crate::transcript::{NewSession, Transcript, TranscriptStore};

/// Why the checker itself could not run (not the engine's fault).
#[derive(Debug, thiserror::Error)]
#[error("cannot set up the checker: {0}")]
pub struct CheckSetupError(String);

/// How the checker runs.
#[derive(Debug, Clone, Default)]
pub struct CheckOptions {
    /// Where compiled engines are cached, so checking the same build again
    /// skips compilation (large components take seconds to compile).
    pub cache_dir: Option<PathBuf>,
    /// How long compiling the component may take (`None`: the sandbox's
    /// default, `sandbox.compileTimeoutMs`).
    pub compile_timeout_ms: Option<u64>,
    /// Engines' `plugins.entries.<id>.config` (as JSON) by id: the engine is
    /// checked with the settings its id is given, as a host would run it.
    pub engine_configs: BTreeMap<String, Arc<str>>,
    /// Engines' `plugins.entries.<id>.limits` by id, likewise.
    pub engine_limits: BTreeMap<String, EngineLimits>,
}

/// Checks the component at `path`.
pub async fn check_file(
    path: &Path,
    options: &CheckOptions,
) -> Result<CheckReport, CheckSetupError> {
    // A file over the sandbox's size cap is refused by its size, unread.
    let limit = SandboxConfig::default()
        .max_component_kib
        .saturating_mul(1024);
    let size = std::fs::metadata(path)
        .map_err(|error| CheckSetupError(format!("cannot read `{}`: {error}", path.display())))?
        .len();
    let bytes = if size > limit {
        Vec::new()
    } else {
        std::fs::read(path).map_err(|error| {
            CheckSetupError(format!("cannot read `{}`: {error}", path.display()))
        })?
    };
    let mut checker = Checker::new(&path.display().to_string(), options)?;
    if size > limit {
        checker.record(
            "load",
            "a ctxbox:engine@0.1.0 component with only granted imports",
            Finding::fail(format!(
                "`{}` is {size} bytes, over the {limit}-byte limit (sandbox.maxComponentKib): refused unread",
                path.display()
            )),
        );
    } else {
        checker.run(&bytes).await;
    }
    Ok(checker.finish())
}

/// Checks a component given as bytes, labelled `source`.
pub async fn check_bytes(
    source: &str,
    bytes: &[u8],
    options: &CheckOptions,
) -> Result<CheckReport, CheckSetupError> {
    let mut checker = Checker::new(source, options)?;
    checker.run(bytes).await;
    Ok(checker.finish())
}

/// The checker's state while it runs one engine.
struct Checker {
    report: CheckReport,
    scratch: tempfile::TempDir,
    transcripts: TranscriptStore,
    sandbox: Sandbox,
    services: Arc<CheckServices>,
    /// The checker's model (offline), to report what the engine asked.
    completions: Arc<Completions>,
    pace: Arc<Pace>,
    /// Settings and limits by engine id (see [`CheckOptions`]).
    engine_configs: BTreeMap<String, Arc<str>>,
    engine_limits: BTreeMap<String, EngineLimits>,
    /// The limits the engine's calls run under: the sandbox's, with the
    /// engine's own in place when configuration gives it some.
    in_force: SandboxConfig,
    /// The check's time scale for the engine, stretched when its own call
    /// deadline is longer than the sandbox's.
    clock: CheckClock,
}

impl Checker {
    fn new(source: &str, options: &CheckOptions) -> Result<Self, CheckSetupError> {
        let setup = |error: &dyn std::fmt::Display| CheckSetupError(error.to_string());
        let scratch = tempfile::tempdir().map_err(|error| setup(&error))?;
        let transcripts = TranscriptStore::new(Default::default());
        let pace = Arc::new(Pace::default());
        let compactor = Arc::new(Compactor::new(
            transcripts.clone(),
            Arc::new(PacedSummarizer::new(pace.clone())),
            CompactionConfig {
                // One summary after another, so a paced compaction takes
                // as long as its summaries together.
                summary_concurrency: 1,
                ..CompactionConfig::default()
            },
        ));
        let state = Arc::new(
            StateStore::open_in(scratch.path(), &StateConfig::default())
                .map_err(|error| setup(&error))?,
        );
        let sql = SqlService::open_in(scratch.path(), SqlConfig::default(), state.clone())
            .map_err(|error| setup(&error))?;
        let sandbox = Sandbox::new(SandboxConfig {
            max_instances: 16,
            cache_dir: options.cache_dir.clone(),
            compaction_timeout_seconds: WATCHDOG_WINDOW.as_secs(),
            compile_timeout_ms: options
                .compile_timeout_ms
                .unwrap_or(SandboxConfig::default().compile_timeout_ms),
            ..SandboxConfig::default().with_room_for(options.engine_limits.values())
        })
        .map_err(|error| setup(&error))?
        .with_sql(SqlAccess::Served(Arc::new(sql)));
        let answer_limit_bytes = sandbox.config().max_output_kib.saturating_mul(1024);
        let sandbox_limits = sandbox.config().clone();
        // The checker's model: offline extractive answers, paced like the
        // summarizer, under the default budgets.
        let completions = Arc::new(Completions::new(
            Arc::new(PacedCompletions::new(pace.clone())),
            CompletionLimits::default(),
        ));
        Ok(Self {
            report: CheckReport {
                source: source.to_owned(),
                engine: None,
                checks: Vec::new(),
                limits: LimitsProbe {
                    answer_limit_bytes,
                    ..LimitsProbe::default()
                },
            },
            scratch,
            transcripts,
            sandbox,
            services: Arc::new(CheckServices::new(
                NativeServices::new(compactor, state).with_completions(completions.clone()),
            )),
            completions,
            pace,
            engine_configs: options.engine_configs.clone(),
            engine_limits: options.engine_limits.clone(),
            in_force: sandbox_limits,
            clock: CheckClock::default(),
        })
    }

    /// The report, with what the sandbox cannot tell said so.
    fn finish(mut self) -> CheckReport {
        self.report.limits.watchdog_window = Some(self.clock.window_words());
        let config = &self.in_force;
        self.report.limits.not_measured = vec![
            format!(
                "fuel: the sandbox refuels every call and does not report what a call burned (budgets: {} per call, {} per compaction)",
                config.fuel_per_call, config.fuel_per_compaction
            ),
            format!(
                "memory: the sandbox does not report an instance's memory (budget: {} MiB per instance)",
                config.memory_limit_mib
            ),
        ];
        self.report
    }

    /// `engine` made again as the id its `info` declares is configured, when
    /// configuration gives that id settings or limits of its own (a host
    /// would run it with them); otherwise `engine` itself.
    async fn as_configured(
        &mut self,
        component: &LoadedComponent,
        engine: WasmEngine,
    ) -> Result<WasmEngine, EngineFailure> {
        let Some(identity) = EngineIdentity::configured(
            &engine.info().id,
            "check",
            &self.engine_configs,
            &self.engine_limits,
        ) else {
            return Ok(engine);
        };
        // Its first instance goes; its disposal is checked on the one kept.
        let _ = engine.dispose().await;
        self.in_force = self.sandbox.config().with_engine_limits(&identity.limits);
        self.clock = CheckClock::for_deadline(
            self.in_force.call_timeout(),
            self.sandbox.config().call_timeout(),
        );
        self.sandbox
            .instantiate_as(component, identity, self.services.clone())
            .await
    }

    /// Options for a call that may compact (`compact`, `after-turn`): the
    /// check's watchdog window ([`CheckClock::window`]) is its window.
    fn compacting(&self) -> CallOptions {
        CallOptions::default().compacting_within(Some(self.clock.window))
    }

    fn record(&mut self, name: &str, expected: &str, finding: impl Into<Finding>) {
        let finding = finding.into();
        self.report.checks.push(CheckResult {
            name: name.to_owned(),
            outcome: finding.outcome,
            expected: expected.to_owned(),
            got: finding.text,
        });
    }

    /// Runs one engine call for the check `check`, noting how long it took
    /// against the limit it ran under.
    async fn timed<T>(
        &mut self,
        check: &str,
        operation: Operation,
        call: impl Future<Output = T>,
    ) -> T {
        let started = Instant::now();
        let value = call.await;
        let millis = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
        let config = &self.in_force;
        let (slot, limit) = if operation.may_compact() {
            let ceiling = self
                .clock
                .window
                .saturating_mul(config.compaction_max_windows);
            (&mut self.report.limits.slowest_compaction, ceiling)
        } else {
            (&mut self.report.limits.slowest_call, config.call_timeout())
        };
        if slot.as_ref().is_none_or(|slowest| millis > slowest.millis) {
            *slot = Some(CallTime {
                check: check.to_owned(),
                millis,
                limit_millis: u64::try_from(limit.as_millis()).unwrap_or(u64::MAX),
            });
        }
        value
    }

    /// Notes the size of an answer (for the limits probe).
    fn note_answer(&mut self, answer: &impl Serialize) {
        let bytes = serde_json::to_vec(answer).map_or(0, |json| json.len() as u64);
        let largest = &mut self.report.limits.largest_answer_bytes;
        *largest = (*largest).max(bytes);
    }

    /// A new session whose transcript holds `messages`.
    fn session(
        &self,
        name: &str,
        messages: Vec<AgentMessage>,
    ) -> Result<(SessionRef, History, Transcript), String> {
        let path = self.scratch.path().join(format!("{name}.jsonl"));
        let transcript = self
            .transcripts
            .create(
                &path,
                NewSession {
                    session_id: None,
                    cwd: "/check".into(),
                    parent_session: None,
                },
            )
            .map_err(|error| error.to_string())?;
        if !messages.is_empty() {
            transcript
                .append(&messages)
                .map_err(|error| error.to_string())?;
        }
        Ok((transcript.session_ref(), transcript.history(), transcript))
    }

    async fn run(&mut self, bytes: &[u8]) {
        const LOADS: &str = "a ctxbox:engine@0.1.0 component with only granted imports";
        const INFO: &str = "an info with a non-empty id and name";
        let component = match self.sandbox.load_bytes(&self.report.source, bytes) {
            Ok(component) if component.imports_sql() => {
                self.record(
                    "load",
                    LOADS,
                    Finding::pass(format!(
                        "loads; {} imports allowed, `sql` among them",
                        component.imports().len()
                    )),
                );
                component
            }
            Ok(component) => {
                let imports = component.imports().len();
                self.record(
                    "load",
                    LOADS,
                    Finding::pass(format!("loads; {imports} imports allowed")),
                );
                component
            }
            Err(error) => return self.record("load", LOADS, Finding::fail(error.to_string())),
        };
        let engine = match self
            .sandbox
            .instantiate(&component, self.services.clone())
            .await
        {
            Ok(engine) => self.as_configured(&component, engine).await,
            Err(failure) => Err(failure),
        };
        let engine = match engine {
            Ok(engine) => engine,
            Err(failure) => return self.record("info", INFO, Finding::fail(failure_text(failure))),
        };
        let info = engine.info().clone();
        self.record(
            "info",
            INFO,
            Finding::pass(format!("{} ({})", info.id, info.name)),
        );
        self.report.engine = Some(info);

        let (session, history, _transcript) = match self.session("main", messages(12)) {
            Ok(session) => session,
            Err(error) => return self.record("setup", "a scratch session", Finding::fail(error)),
        };
        self.lifecycle(&engine, &session, &history).await;
        self.assemble_cases(&engine, &session, &history).await;
        self.tools(&engine, &session).await;
        // Each session is closed when its checks are done, so few instances
        // live at once: a component made of many core instances (the Python
        // engine) would otherwise exhaust the sandbox's pool.
        engine.close_session(&session.session_id).await;
        self.compaction(&engine).await;
        self.subagents(&engine).await;
        let disposed = engine
            .dispose()
            .await
            .map(|()| "disposed".to_owned())
            .map_err(failure_text);
        self.record("dispose", "the instance disposes cleanly", disposed);
        self.completions();
        if component.imports_sql() {
            self.sql(&engine.info().id);
        }
    }
}

/// The messages of [`cases::conversation`]`(turns)`.
fn messages(turns: usize) -> Vec<AgentMessage> {
    entries_to_messages(cases::conversation(turns))
}

fn entries_to_messages(entries: Vec<MessageEntry>) -> Vec<AgentMessage> {
    entries.into_iter().map(|entry| entry.message).collect()
}

/// A failure in one line: its kind, message and the gist of the guest's
/// stderr.
fn failure_text(failure: EngineFailure) -> String {
    let mut text = format!("{}: {}", failure.kind, failure.message);
    if let Some(gist) = stderr_gist(&failure.stderr_tail) {
        text.push_str(&format!(" (stderr: {gist})"));
    }
    if failure.kind == FailureKind::Timeout {
        text.push_str(DEADLINE_HINT);
    }
    text
}

/// What a timed-out engine could have done: the cooperative deadline.
const DEADLINE_HINT: &str = " (hint: `host.aborted()` turns true `sandbox.deadlineNoticeMs` before the deadline; an engine that checks it during long work and returns then is never quarantined for it)";

/// The telling part of a guest's stderr: a Rust panic's location and
/// message, else its last line (Rust's backtrace hint left out).
fn stderr_gist(tail: &str) -> Option<String> {
    let lines: Vec<&str> = tail
        .lines()
        .map(str::trim)
        .filter(|line| !line.is_empty() && !line.starts_with("note: run with `RUST_BACKTRACE"))
        .collect();
    match lines.iter().rposition(|line| line.contains("panicked at")) {
        Some(start) => Some(
            lines[start..]
                .iter()
                .take(2)
                .copied()
                .collect::<Vec<_>>()
                .join(" "),
        ),
        None => lines.last().map(|line| (*line).to_owned()),
    }
}

#[cfg(test)]
mod tests {
    use crate::contract::failure::{EngineFailure, FailureKind, Operation};

    #[test]
    fn a_timeout_tells_the_author_about_the_deadline_notice() {
        let timeout = EngineFailure::new("x", Operation::Assemble, FailureKind::Timeout, "slow");
        assert!(super::failure_text(timeout).contains("host.aborted()"));
        let panic = EngineFailure::new("x", Operation::Assemble, FailureKind::Panic, "boom");
        assert!(!super::failure_text(panic).contains("host.aborted()"));
    }

    #[test]
    fn the_stderr_gist_is_the_panic_and_its_message() {
        let tail = "starting\nthread '<unnamed>' panicked at src/lib.rs:19:13:\nfifth call\nnote: run with `RUST_BACKTRACE=1` environment variable to display a backtrace\n";
        assert_eq!(
            super::stderr_gist(tail).as_deref(),
            Some("thread '<unnamed>' panicked at src/lib.rs:19:13: fifth call")
        );
        assert_eq!(super::stderr_gist("one\ntwo\n").as_deref(), Some("two"));
        assert_eq!(super::stderr_gist("  \n"), None);
    }
}
