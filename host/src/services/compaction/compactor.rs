//! [`Compactor`]: native compaction of a session transcript, the one path
//! behind both the `legacy` engine's `compact` and the `delegate-compaction`
//! host import.

use std::collections::HashSet;
use std::ops::Range;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use serde_json::json;
use tokio_util::sync::CancellationToken;

use super::CompactionError;
use super::accounting;
use super::config::{CompactionConfig, effective_reserve};
use super::cut::{self, Cut, SUMMARY_OVERHEAD_TOKENS};
use super::files;
use super::finalize;
use super::progress;
use super::prompts;
use super::serialize;
use super::target::Aim;
use super::watchdog::Watchdog;
use crate::contract::services::ProgressSink;
use crate::contract::tokens;
use crate::contract::types::{
    AgentMessage, CompactParams, CompactResult, CompactionTarget, ContentBlock, RotatedSession,
    SessionRef,
};
use crate::services::summarize::{
    ExtractiveSummarizer, MergeRequest, SummarizeError, Summarizer, SummaryRequest,
    identifiers as identifiers_of,
};
use crate::transcript::{
    ActiveContext, CompactionFigures, Transcript, TranscriptError, TranscriptStore,
};

/// When no token budget is given, chunks are sized for a window this large
/// (the reference's default context window).
const DEFAULT_WINDOW_TOKENS: u64 = 200_000;
/// Chunks are about 40% of the window minus this (ARCHITECTURE.md §6, step 4).
const CHUNK_MARGIN_TOKENS: u64 = 4_096;
/// Smallest chunk, whatever the window.
const MIN_CHUNK_TOKENS: u64 = 1_024;
/// What the summary says when nothing precedes the cut turn.
const NO_PRIOR_HISTORY: &str = "No prior history.";

/// Compacts session transcripts (cheap to share behind an `Arc`).
pub struct Compactor {
    transcripts: TranscriptStore,
    summarizer: Arc<dyn Summarizer>,
    config: CompactionConfig,
}

/// The texts a compaction summarizes.
struct Material {
    /// The history before the cut (or before the cut turn), in chunks of
    /// entry positions.
    chunks: Vec<Range<usize>>,
    /// The beginning of the cut turn, when the cut is inside one.
    turn_prefix: Option<Range<usize>>,
}

/// What summarizing the material gave.
struct Summaries {
    /// The chunks' summaries merged, with the previous summary folded in.
    history: String,
    /// The cut turn's beginning, summarized.
    turn_prefix: Option<String>,
    /// The summarized history's exact identifiers, in order of first
    /// appearance.
    identifiers: Vec<String>,
}

impl Compactor {
    /// A compactor over the transcripts of `transcripts`, writing summaries
    /// with `summarizer`.
    pub fn new(
        transcripts: TranscriptStore,
        summarizer: Arc<dyn Summarizer>,
        config: CompactionConfig,
    ) -> Self {
        Self {
            transcripts,
            summarizer,
            config,
        }
    }

    /// A compactor with the summarizer `config` names.
    pub fn from_config(
        transcripts: TranscriptStore,
        config: CompactionConfig,
    ) -> Result<Self, SummarizeError> {
        let summarizer = config.summarizer.clone().unwrap_or_default().build()?;
        Ok(Self::new(transcripts, summarizer, config))
    }

    /// The transcript store it works on.
    pub fn transcripts(&self) -> &TranscriptStore {
        &self.transcripts
    }

    /// The summarizer it writes summaries with.
    pub fn summarizer(&self) -> &Arc<dyn Summarizer> {
        &self.summarizer
    }

    /// Its configuration.
    pub fn config(&self) -> &CompactionConfig {
        &self.config
    }

    /// Compacts the session whose transcript is `session.session_file`, in
    /// windows of `window` (`None`: the configured `timeoutSeconds`; an
    /// agent's own comes from `agents.list[].compaction.timeoutSeconds`).
    pub async fn compact_session(
        &self,
        session: &SessionRef,
        params: &CompactParams,
        progress: &dyn ProgressSink,
        abort: &CancellationToken,
        window: Option<Duration>,
    ) -> Result<CompactResult, CompactionError> {
        let store = self.transcripts.clone();
        let path = PathBuf::from(&session.session_file);
        let transcript = blocking(move || store.open(&path)).await?;
        let window = window.unwrap_or_else(|| self.window());
        self.compact_within(&transcript, params, progress, abort, window)
            .await
    }

    /// The configured compaction window (`timeoutSeconds`).
    fn window(&self) -> Duration {
        Duration::from_secs(self.config.timeout_seconds)
    }

    /// [`compact_within`](Self::compact_within) the configured window.
    pub async fn compact(
        &self,
        transcript: &Transcript,
        params: &CompactParams,
        progress: &dyn ProgressSink,
        abort: &CancellationToken,
    ) -> Result<CompactResult, CompactionError> {
        self.compact_within(transcript, params, progress, abort, self.window())
            .await
    }

    /// Compacts `transcript` (ARCHITECTURE.md §6): decides whether it is needed, cuts
    /// the history, summarizes what lies before the cut in parallel chunks,
    /// appends a `compaction` entry, and rotates the file if configured.
    ///
    /// With a target (`budget`, or `threshold` with a budget given) the
    /// rebuilt context fits it unless the newest turn alone is larger than
    /// the kept-history budget: the cut never separates a tool call from its
    /// result, so the result is `compacted` with `tokens-after` over the
    /// target and a `reason` saying why. This does not converge by
    /// compacting again; callers that must fit truncate instead.
    /// `progress` hears of every stage; `abort` stops it between stages (and
    /// during summarization) without writing anything; summarization that
    /// makes no progress for `window` fails it.
    pub async fn compact_within(
        &self,
        transcript: &Transcript,
        params: &CompactParams,
        progress: &dyn ProgressSink,
        abort: &CancellationToken,
        window: Duration,
    ) -> Result<CompactResult, CompactionError> {
        let _exclusive = transcript.lock_compaction().await;
        let watchdog = Watchdog::new(window);
        progress.progress();
        let context = {
            let transcript = transcript.clone();
            blocking(move || Ok(transcript.context())).await?
        };
        let history = &context.history;
        let tokens_before = accounting::tokens_before(&context, params.observed_token_count());
        let threshold = params
            .token_budget
            .map(|window| window - effective_reserve(window, self.config.reserve_tokens));
        if !params.force {
            let skip = if !self.config.enabled {
                Some("compaction is disabled (agents.defaults.compaction.enabled)".to_owned())
            } else {
                match threshold {
                    None => {
                        Some("no token budget was given to compare the context with".to_owned())
                    }
                    Some(threshold) if tokens_before <= threshold => Some(format!(
                        "{tokens_before} tokens are within the compaction threshold of {threshold}"
                    )),
                    Some(_) => None,
                }
            };
            if let Some(reason) = skip {
                return Ok(not_compacted(reason, tokens_before));
            }
        }
        let target = match params.compaction_target {
            CompactionTarget::Budget => params.token_budget,
            CompactionTarget::Threshold => threshold,
        };
        let current = history.total_tokens();
        let aim = Aim::new(target, self.config.target_share, tokens_before, current);
        let start = usize::from(context.starts_with_summary);
        let Some(cut) = cut::choose(
            history,
            start,
            aim.tokens,
            self.config.reserve_tokens,
            self.config.keep_recent_tokens,
        ) else {
            return Ok(not_compacted(
                "nothing before the newest turn can be compacted".to_owned(),
                tokens_before,
            ));
        };
        // Before paying for a summary: when what the cut would replace is
        // under the no-progress share of the context, no summary can make
        // progress (the newest turn is nearly all of it).
        let kept = history.tokens(cut.first_kept..history.len());
        if !progress::made_progress(current, kept + SUMMARY_OVERHEAD_TOKENS) {
            return Ok(not_compacted(
                format!(
                    "no progress possible: the newest turn, which is never split between a tool call and its result, holds {kept} of the context's {current} tokens"
                ),
                tokens_before,
            ));
        }
        progress.progress();

        let window = params.token_budget.unwrap_or(DEFAULT_WINDOW_TOKENS);
        let material = material(&context, start, &cut, window);
        let chunk_count = material.chunks.len();
        let custom = params
            .custom_instructions
            .as_deref()
            .or(self.config.custom_instructions.as_deref());
        let summary_tokens = u32::try_from(cut.summary_tokens).unwrap_or(u32::MAX);
        let summaries = self
            .summarize(
                &context,
                material,
                window,
                summary_tokens,
                custom,
                &watchdog,
                progress,
                abort,
            )
            .await?;
        let entries = history.entries();
        let files = files::collect(
            &entries[start..cut.first_kept],
            context.previous_compaction.as_ref(),
        );
        // A cut inside a turn (its tool loop) keeps the turn's ask verbatim.
        let pending_ask =
            cut.turn_start
                .and_then(|turn_start| match &entries[turn_start].message {
                    AgentMessage::User { content } => {
                        finalize::pending_ask(&ContentBlock::joined_text(content))
                    }
                    _ => None,
                });
        let finalized = finalize::summary(
            &summaries.history,
            summaries.turn_prefix.as_deref(),
            pending_ask.as_deref(),
            &summaries.identifiers,
            &files,
            cut.summary_tokens,
        );
        if abort.is_cancelled() {
            return Err(CompactionError::Aborted);
        }

        let summary = finalized.text;
        let first_kept = entries[cut.first_kept].id.clone();
        // The rebuilt context: the summary, then the kept entries, counted
        // as the transcript will count them.
        let rebuilt = tokens::count_message(
            &AgentMessage::CompactionSummary {
                summary: summary.clone(),
                tokens_before,
            },
            transcript.tokenizer(),
        ) + kept;
        // A summary that makes no progress would only cost detail: nothing
        // is written then.
        if !progress::made_progress(current, rebuilt) {
            return Ok(not_compacted(
                format!(
                    "no progress: a summary would leave {rebuilt} tokens of the context's {current}"
                ),
                tokens_before,
            ));
        }
        let tokens_after = aim.in_caller_units(rebuilt).min(tokens_before);
        let mut details = json!({
            "readFiles": files.read,
            "modifiedFiles": files.modified,
            "ctxbox": {
                "summarizer": self.summarizer.id(),
                "chunks": chunk_count,
                "splitTurn": cut.turn_start.is_some(),
                "truncated": finalized.truncated,
                "target": target,
                "aimTokens": aim.tokens.map(|tokens| aim.in_caller_units(tokens)),
                "unitScale": aim.scale,
            },
        });
        if let Some(ask) = &pending_ask {
            details["latestUnresolvedUserRequest"] = json!(ask);
        }
        {
            let transcript = transcript.clone();
            let (summary, first_kept, details) =
                (summary.clone(), first_kept.clone(), details.clone());
            blocking(move || {
                transcript.append_compaction(&CompactionFigures {
                    summary: &summary,
                    first_kept_entry_id: &first_kept,
                    tokens_before,
                    tokens_after,
                    details: &details,
                })?;
                Ok(())
            })
            .await?;
        }
        progress.progress();

        let rotated_session = if self.config.truncate_after_compaction {
            let store = self.transcripts.clone();
            let transcript = transcript.clone();
            let first_kept = first_kept.clone();
            let successor = blocking(move || store.rotate(&transcript, &first_kept)).await?;
            progress.progress();
            Some(RotatedSession {
                session_id: successor.session_id(),
                session_file: successor.path().to_string_lossy().into_owned(),
            })
        } else {
            None
        };

        // Over the target only when the newest turn alone is too large (see
        // the doc comment): said, not retried.
        let reason = target.filter(|&target| tokens_after > target).map(|target| {
            format!(
                "compacted to {tokens_after} tokens, over the target of {target}: the newest turn alone is larger than the {} tokens left for kept history",
                aim.in_caller_units(cut.keep_budget)
            )
        });
        Ok(CompactResult {
            ok: true,
            compacted: true,
            reason,
            summary: Some(summary),
            first_kept_entry_id: Some(first_kept),
            tokens_before,
            tokens_after: Some(tokens_after),
            rotated_session,
            details: Some(details.to_string()),
        })
    }

    /// The history summary (chunks summarized in parallel, merged in order
    /// with the previous summary), the turn-prefix summary, and the
    /// identifiers of everything summarized. Each chunk is serialized and
    /// scanned for identifiers on the blocking pool before it is summarized,
    /// so with `summary_concurrency` chunks in flight all of that work runs
    /// in parallel too.
    #[allow(clippy::too_many_arguments)]
    async fn summarize(
        &self,
        context: &ActiveContext,
        material: Material,
        window_tokens: u64,
        max_tokens: u32,
        custom: Option<&str>,
        watchdog: &Watchdog,
        progress: &dyn ProgressSink,
        abort: &CancellationToken,
    ) -> Result<Summaries, CompactionError> {
        let Material {
            chunks,
            turn_prefix,
        } = material;
        let chunk_instructions = prompts::chunk(custom);
        // (entries, instructions, answer cap, whether it is the turn prefix)
        let mut jobs: Vec<(Range<usize>, String, u32, bool)> = chunks
            .into_iter()
            .map(|range| (range, chunk_instructions.clone(), max_tokens, false))
            .collect();
        if let Some(range) = turn_prefix {
            jobs.push((range, prompts::turn_prefix(), (max_tokens / 2).max(1), true));
        }
        let concurrency = self.config.summary_concurrency.max(1);
        let max_part_chars = serialize::max_part_chars(window_tokens);
        let (mut summaries, turn_prefix, identifiers) = watchdog
            .bound(
                async {
                    let mut done = Vec::with_capacity(jobs.len());
                    let mut turn_prefix = None;
                    let mut identifiers = Vec::new();
                    let mut seen = HashSet::new();
                    let mut stream = futures_util::stream::iter(jobs)
                        .map(|(range, instructions, max_tokens, is_prefix)| async move {
                            let history = context.history.clone();
                            let (text, found) = tokio::task::spawn_blocking(move || {
                                let text = serialize::conversation(
                                    &history.entries()[range],
                                    max_part_chars,
                                );
                                let found = identifiers_of(&text);
                                (text, found)
                            })
                            .await
                            .map_err(|error| {
                                CompactionError::Internal(format!(
                                    "serializing a chunk failed: {error}"
                                ))
                            })?;
                            // Messages with nothing to read (empty text,
                            // only images) cost no model call.
                            if text.trim().is_empty() {
                                return Ok((is_prefix, None, found));
                            }
                            let job = SummaryRequest {
                                text,
                                instructions,
                                max_tokens,
                                deadline: watchdog.request_deadline(),
                            };
                            let summary = self.summarize_one(job).await?;
                            Ok::<_, CompactionError>((is_prefix, Some(summary), found))
                        })
                        .buffered(concurrency);
                    while let Some(summary) = stream.next().await {
                        watchdog.progress();
                        progress.progress();
                        let (is_prefix, summary, found) = summary?;
                        identifiers.extend(found.into_iter().filter(|id| seen.insert(id.clone())));
                        match (is_prefix, summary) {
                            (true, summary) => turn_prefix = summary,
                            (false, Some(summary)) => done.push(summary),
                            (false, None) => {}
                        }
                    }
                    Ok((done, turn_prefix, identifiers))
                },
                abort,
            )
            .await?;

        let previous = context
            .previous_compaction
            .as_ref()
            .map(|previous| previous.summary.clone());
        let history_summary = match (previous, summaries.len()) {
            (None, 0) => NO_PRIOR_HISTORY.to_owned(),
            (Some(previous), 0) => previous,
            (None, 1) => summaries.remove(0),
            (previous_summary, _) => {
                let request = MergeRequest {
                    previous_summary,
                    parts: summaries,
                    instructions: prompts::merge(custom),
                    max_tokens,
                    deadline: watchdog.request_deadline(),
                };
                let merged = watchdog.bound(self.merge(request), abort).await?;
                progress.progress();
                merged
            }
        };
        Ok(Summaries {
            history: history_summary,
            turn_prefix,
            identifiers,
        })
    }

    /// One summary; when the configured summarizer fails, the extractive one
    /// stands in (the failure is logged), so a provider outage does not stop
    /// compaction.
    async fn summarize_one(&self, job: SummaryRequest) -> Result<String, CompactionError> {
        match self.summarizer.summarize(job.clone()).await {
            Ok(summary) => Ok(summary),
            Err(error) => {
                self.fall_back("chunk", &error)?;
                ExtractiveSummarizer.summarize(job).await.map_err(|source| {
                    CompactionError::Summarize {
                        stage: "chunk",
                        source,
                    }
                })
            }
        }
    }

    async fn merge(&self, request: MergeRequest) -> Result<String, CompactionError> {
        match self.summarizer.merge(request.clone()).await {
            Ok(summary) => Ok(summary),
            Err(error) => {
                self.fall_back("merge", &error)?;
                ExtractiveSummarizer.merge(request).await.map_err(|source| {
                    CompactionError::Summarize {
                        stage: "merge",
                        source,
                    }
                })
            }
        }
    }

    /// Logs a summarizer failure that the extractive summarizer will make up
    /// for, or fails when the extractive summarizer itself failed.
    fn fall_back(
        &self,
        stage: &'static str,
        error: &SummarizeError,
    ) -> Result<(), CompactionError> {
        if self.summarizer.id() == ExtractiveSummarizer.id() {
            return Err(CompactionError::Summarize {
                stage,
                source: error.clone(),
            });
        }
        tracing::warn!(
            summarizer = self.summarizer.id(),
            stage,
            %error,
            "summarizer failed; the extractive summarizer stands in"
        );
        Ok(())
    }
}

impl std::fmt::Debug for Compactor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Compactor")
            .field("summarizer", &self.summarizer.id())
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

/// The texts to summarize: the history from `start` to the cut in chunks of
/// about 40% of the window minus 4,096 tokens, and the cut turn's beginning.
fn material(context: &ActiveContext, start: usize, cut: &Cut, window: u64) -> Material {
    let history = &context.history;
    let chunk_tokens = (window * 2 / 5)
        .saturating_sub(CHUNK_MARGIN_TOKENS)
        .max(MIN_CHUNK_TOKENS);
    Material {
        chunks: super::chunks::split(history, start..cut.history_end(), chunk_tokens),
        turn_prefix: cut.turn_start.map(|turn_start| turn_start..cut.first_kept),
    }
}

fn not_compacted(reason: String, tokens_before: u64) -> CompactResult {
    CompactResult {
        ok: true,
        compacted: false,
        reason: Some(reason),
        tokens_before,
        ..CompactResult::default()
    }
}

/// Runs transcript file work on the blocking pool.
async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, TranscriptError> + Send + 'static,
) -> Result<T, CompactionError> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|error| CompactionError::Internal(format!("transcript task failed: {error}")))?
        .map_err(CompactionError::from)
}
