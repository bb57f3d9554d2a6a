//! Comparing engines on one conversation (`ctxbox compare`): the recording is
//! replayed through each engine under each window exactly as `ctxbox run`
//! replays it ([`Runtime::replay`]), several replays at once, and the
//! reports are kept side by side with each replay's wall time. [`html`]
//! makes the self-contained page of charts ([`charts`]) from them; the
//! [`Comparison`] itself serializes to the same data as JSON.
//!
//! A guarded engine keeps its fallback count and its guard decisions for
//! whoever replays through it, so one engine's replays (one per window) run
//! one after another; different engines run at once, at most `parallel` of
//! them.

pub mod charts;
pub mod html;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use serde::Serialize;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

use crate::engines::guard::GuardedEngine;
use crate::provider::ReplayScript;
use crate::runner::{RunReport, TurnReport};
use crate::runtime::Runtime;
use crate::transcript::TranscriptError;

/// One engine to compare, with every window to replay it under.
pub struct Contender {
    /// The engine, selected and behind its guard.
    pub engine: Arc<GuardedEngine>,
    /// The model windows, tokens.
    pub windows: Vec<u64>,
}

/// How a comparison runs.
pub struct CompareOptions {
    /// Where the replayed sessions are written, one file per replay.
    pub output_dir: PathBuf,
    /// Engines replayed at once, at most (at least one).
    pub parallel: usize,
    /// Stops every replay after its current turn.
    pub abort: CancellationToken,
    /// Hears of every turn any replay completes or fails.
    pub on_turn: Arc<dyn Fn() + Send + Sync>,
}

/// Why a comparison could not be made.
#[derive(Debug, thiserror::Error)]
pub enum CompareError {
    /// A replayed session could not be written.
    #[error("cannot write the replayed session `{}`: {source}", path.display())]
    Session {
        /// The session file.
        path: PathBuf,
        /// Why.
        source: TranscriptError,
    },
    /// The output directory could not be created.
    #[error("cannot create `{}`: {source}", path.display())]
    OutputDir {
        /// The directory.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A replay's task ended without a report (it panicked).
    #[error("the replay of engine `{engine}` stopped: {reason}")]
    Replay {
        /// The engine.
        engine: String,
        /// Why.
        reason: String,
    },
}

/// Several replays of one conversation, side by side.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Comparison {
    /// The recording's name.
    pub transcript: String,
    /// Its user turns.
    pub turns: usize,
    /// Engines that were replayed at once.
    pub parallel: usize,
    /// Every replay: the engines in the order given, each under its windows
    /// in the order given.
    pub runs: Vec<ComparedRun>,
}

/// One replay of a comparison.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ComparedRun {
    /// The engine selected.
    pub engine: String,
    /// The model's window, tokens.
    pub window: u64,
    /// The replayed session.
    pub session: PathBuf,
    /// How long the replay took, milliseconds (with the others running
    /// beside it).
    pub wall_ms: u64,
    /// [`RunReport::share_kept`].
    pub share_kept: f64,
    /// What the replay did, turn by turn.
    pub report: RunReport,
}

impl ComparedRun {
    /// Every turn, completed or failed, in order.
    pub fn all_turns(&self) -> Vec<&TurnReport> {
        let mut turns: Vec<&TurnReport> = self
            .report
            .turns
            .iter()
            .chain(self.report.failed_turns.iter().map(|failed| &failed.done))
            .collect();
        turns.sort_by_key(|turn| turn.index);
        turns
    }
}

/// Replays `script` (the recording `transcript`) through every contender
/// under each of its windows, `options.parallel` engines at once, each
/// replay into a new session file under `options.output_dir`.
pub async fn compare(
    runtime: Arc<Runtime>,
    script: Arc<ReplayScript>,
    transcript: &str,
    contenders: Vec<Contender>,
    options: CompareOptions,
) -> Result<Comparison, CompareError> {
    std::fs::create_dir_all(&options.output_dir).map_err(|source| CompareError::OutputDir {
        path: options.output_dir.clone(),
        source,
    })?;
    let parallel = options.parallel.max(1);
    let slots = Arc::new(Semaphore::new(parallel));
    let mut tasks = Vec::new();
    for (index, contender) in contenders.into_iter().enumerate() {
        let runtime = runtime.clone();
        let script = script.clone();
        let slots = slots.clone();
        let abort = options.abort.clone();
        let on_turn = options.on_turn.clone();
        let output_dir = options.output_dir.clone();
        let engine = contender.engine.selected_id().to_owned();
        let task = tokio::spawn(async move {
            // The semaphore is never closed.
            let _slot = slots.acquire_owned().await.ok();
            let mut runs = Vec::new();
            for window in contender.windows {
                let session = output_dir.join(session_file_name(index, &contender.engine, window));
                runs.push(
                    replay_one(
                        &runtime,
                        &script,
                        &contender.engine,
                        window,
                        &session,
                        &abort,
                        &on_turn,
                    )
                    .await?,
                );
            }
            Ok::<_, CompareError>(runs)
        });
        tasks.push((engine, task));
    }
    let mut runs = Vec::new();
    for (engine, task) in tasks {
        let replayed = task.await.map_err(|error| CompareError::Replay {
            engine,
            reason: error.to_string(),
        })??;
        runs.extend(replayed);
    }
    Ok(Comparison {
        transcript: transcript.to_owned(),
        turns: script.turns.len(),
        parallel,
        runs,
    })
}

async fn replay_one(
    runtime: &Runtime,
    script: &ReplayScript,
    engine: &Arc<GuardedEngine>,
    window: u64,
    session: &Path,
    abort: &CancellationToken,
    on_turn: &Arc<dyn Fn() + Send + Sync>,
) -> Result<ComparedRun, CompareError> {
    let started = Instant::now();
    let report = runtime
        .replay(
            script,
            engine.clone(),
            window,
            session,
            abort,
            &mut |_, _| on_turn(),
        )
        .await
        .map_err(|source| CompareError::Session {
            path: session.to_owned(),
            source,
        })?;
    Ok(ComparedRun {
        engine: engine.selected_id().to_owned(),
        window,
        session: session.to_owned(),
        wall_ms: started.elapsed().as_millis() as u64,
        share_kept: report.share_kept(),
        report,
    })
}

/// `NN-engine-WINDOW.jsonl`, the engine id reduced to characters safe in a
/// file name.
fn session_file_name(index: usize, engine: &GuardedEngine, window: u64) -> String {
    let id: String = engine
        .selected_id()
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    format!("{index:02}-{id}-{window}.jsonl")
}
