//! A load run: many concurrent sessions on one host, each running turns
//! through the same guarded engine with scripted answers, every transcript
//! read back from disk afterwards to check that no acknowledged entry was
//! lost. The soak test checks with it; `ctxbox bench --only soak` measures
//! with it.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

use super::{RunnerConfig, Session, TurnError, TurnRunner};
use crate::contract::types::{AgentMessage, ContentBlock, MessageKind};
use crate::engines::guard::{GuardEvent, GuardedEngine};
use crate::provider::{FixedToolResults, ScriptedProvider};
use crate::transcript::{NewSession, TranscriptError, TranscriptStore};

/// What a load run does.
#[derive(Debug, Clone)]
pub struct LoadPlan {
    /// Sessions, each with its own transcript file.
    pub sessions: usize,
    /// Turns per session (a user message and one answer each).
    pub turns: usize,
    /// Sessions running turns at the same time.
    pub concurrent: usize,
    /// The model window.
    pub window: u64,
}

/// What a load run saw.
#[derive(Debug)]
pub struct LoadReport {
    /// Turns completed.
    pub turns: usize,
    /// Model calls made.
    pub model_calls: u64,
    /// From the first turn to the last answer (the read-back not counted).
    pub elapsed: Duration,
    /// Every decision of the guard, from all sessions.
    pub events: Vec<GuardEvent>,
    /// Sessions whose transcript on disk is not exactly their turns, each
    /// with what differs; empty when nothing acknowledged was lost.
    pub lost: Vec<String>,
}

/// Why a load run stopped.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// A turn failed: the host did not serve it.
    #[error("session {session}, turn {turn}: {error}")]
    Turn {
        /// The session's number.
        session: usize,
        /// The turn's number.
        turn: usize,
        /// Why.
        error: TurnError,
    },
    /// A transcript could not be created or read back.
    #[error(transparent)]
    Transcript(#[from] TranscriptError),
    /// A session's task ended without an answer (it panicked).
    #[error("a session's task ended early: {0}")]
    Task(String),
}

/// Runs `plan` with `engine`, writing `session-N.jsonl` files into `dir`.
/// `finished` is called with the number of sessions done after each one.
pub async fn run_load(
    engine: Arc<GuardedEngine>,
    transcripts: TranscriptStore,
    dir: &Path,
    plan: &LoadPlan,
    finished: impl Fn(usize) + Send + Sync + 'static,
) -> Result<LoadReport, LoadError> {
    let slots = Arc::new(Semaphore::new(plan.concurrent.max(1)));
    let done = Arc::new(AtomicUsize::new(0));
    let finished = Arc::new(finished);
    let config = RunnerConfig {
        window: plan.window,
        reserve_tokens: plan.window / 8,
        proactive_compaction: true,
        system_prompt: "load".into(),
        model: None,
        tools: Vec::new(),
        compaction_window: None,
        agent: Default::default(),
    };
    let started = Instant::now();
    let mut tasks = Vec::with_capacity(plan.sessions);
    for number in 0..plan.sessions {
        let (engine, transcripts, slots) = (engine.clone(), transcripts.clone(), slots.clone());
        let (done, finished, config) = (done.clone(), finished.clone(), config.clone());
        let path = dir.join(format!("session-{number}.jsonl"));
        let turns = plan.turns;
        tasks.push(tokio::spawn(async move {
            let _slot = slots
                .acquire_owned()
                .await
                .map_err(|e| LoadError::Task(e.to_string()))?;
            let answers = (0..turns).map(|turn| answer(number, turn));
            let runner = TurnRunner::new(
                engine,
                Arc::new(ScriptedProvider::texts(answers)),
                Arc::new(FixedToolResults::new("ok")),
                transcripts.clone(),
                config,
            );
            let mut session = Session::new(transcripts.create(&path, NewSession::default())?, None);
            let (mut model_calls, mut events) = (0, Vec::new());
            for turn in 0..turns {
                let ask = AgentMessage::user_text(question(number, turn));
                let report = runner
                    .run_turn(&mut session, vec![ask], &CancellationToken::new())
                    .await
                    .map_err(|error| LoadError::Turn {
                        session: number,
                        turn,
                        error,
                    })?;
                model_calls += u64::from(report.model_calls);
                events.extend(report.guard_events);
            }
            finished(done.fetch_add(1, Ordering::SeqCst) + 1);
            Ok::<_, LoadError>((model_calls, events))
        }));
    }
    let mut report = LoadReport {
        turns: 0,
        model_calls: 0,
        elapsed: Duration::ZERO,
        events: engine.take_events(),
        lost: Vec::new(),
    };
    for task in tasks {
        let (model_calls, events) = task.await.map_err(|e| LoadError::Task(e.to_string()))??;
        report.model_calls += model_calls;
        report.events.extend(events);
        report.turns += plan.turns;
    }
    report.elapsed = started.elapsed();
    report.events.extend(engine.take_events());

    // A store of its own: what is read back is what reached the disk.
    let reader = TranscriptStore::new(transcripts.config().clone());
    for number in 0..plan.sessions {
        let path = dir.join(format!("session-{number}.jsonl"));
        let kept: Vec<(MessageKind, String)> = reader
            .open_read_only(&path)?
            .history()
            .entries()
            .iter()
            .map(|entry| (entry.message.kind(), text_of(&entry.message)))
            .collect();
        let expected: Vec<(MessageKind, String)> = (0..plan.turns)
            .flat_map(|turn| {
                [
                    (MessageKind::User, question(number, turn)),
                    (MessageKind::Assistant, answer(number, turn)),
                ]
            })
            .collect();
        if kept != expected {
            let first = kept.iter().zip(&expected).position(|(a, b)| a != b);
            report.lost.push(format!(
                "{}: {} entries, {} expected; first difference at {first:?}",
                path.display(),
                kept.len(),
                expected.len()
            ));
        }
    }
    Ok(report)
}

fn question(session: usize, turn: usize) -> String {
    format!("question {turn} of {session}")
}

fn answer(session: usize, turn: usize) -> String {
    format!("answer {turn} of {session}")
}

fn text_of(message: &AgentMessage) -> String {
    message
        .content()
        .iter()
        .filter_map(|block| match block {
            ContentBlock::Text { text } => Some(text.as_str()),
            _ => None,
        })
        .collect()
}
