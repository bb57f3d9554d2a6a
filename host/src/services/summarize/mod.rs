//! Summarizers (ARCHITECTURE.md §6): what turns history into a compaction summary, and
//! what the `summarize` host import offers engines.
//!
//! Two implementations sit behind [`Summarizer`]:
//! - [`ExtractiveSummarizer`] (the default): deterministic, offline, fast;
//! - [`OpenAiCompatibleSummarizer`]: a chat-completions HTTP API (OpenAI,
//!   vLLM, llama.cpp server, Ollama), given only the time left.
//!
//! Summaries are Markdown with the sections of [`REQUIRED_SECTIONS`];
//! [`SummaryDoc`] reads any summarizer's answer back into them.

mod extractive;
mod openai;
mod sections;

use std::sync::Arc;
use std::time::Instant;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

pub use self::extractive::{ExtractiveSummarizer, identifiers};
pub use self::openai::{OpenAiCompatibleConfig, OpenAiCompatibleSummarizer};
pub use self::sections::{ERRORS_SECTION, REQUIRED_SECTIONS, Rendered, SummaryDoc};

/// Characters a summary of `max_tokens` tokens may take (4 per token, the
/// estimator's rate for non-CJK text).
pub fn max_chars_for(max_tokens: u32) -> usize {
    (max_tokens as usize).saturating_mul(4)
}

/// One thing to summarize.
#[derive(Debug, Clone)]
pub struct SummaryRequest {
    /// The material (for compaction, a serialized conversation).
    pub text: String,
    /// What the summary should be (ignored by the extractive summarizer,
    /// which always writes the required sections).
    pub instructions: String,
    /// Most tokens the summary may take.
    pub max_tokens: u32,
    /// When the answer is needed by; work past it is abandoned.
    pub deadline: Instant,
}

/// Partial summaries to merge into one, oldest first.
#[derive(Debug, Clone)]
pub struct MergeRequest {
    /// The summary of everything before the parts (a previous compaction's).
    pub previous_summary: Option<String>,
    /// The partial summaries, in order.
    pub parts: Vec<String>,
    /// What the merged summary should be.
    pub instructions: String,
    /// Most tokens the merged summary may take.
    pub max_tokens: u32,
    /// When the answer is needed by.
    pub deadline: Instant,
}

impl MergeRequest {
    /// The parts as one labelled text, the previous summary first.
    pub fn labelled_text(&self) -> String {
        let mut text = String::new();
        if let Some(previous) = &self.previous_summary {
            text.push_str("<previous-summary>\n");
            text.push_str(previous);
            text.push_str("\n</previous-summary>\n\n");
        }
        let count = self.parts.len();
        for (index, part) in self.parts.iter().enumerate() {
            let label = match index {
                0 if count > 1 => "oldest messages".to_owned(),
                last if last + 1 == count && count > 1 => "most recent messages".to_owned(),
                _ => format!("{} of {count}", index + 1),
            };
            text.push_str(&format!("[Part {} — {label}]\n{part}\n\n", index + 1));
        }
        text
    }
}

/// Makes summaries. Implementations must be cheap to share across tasks.
#[async_trait]
pub trait Summarizer: Send + Sync {
    /// A short name for logs and compaction details, e.g. `extractive`.
    fn id(&self) -> &str;

    /// Summarizes `request.text`.
    async fn summarize(&self, request: SummaryRequest) -> Result<String, SummarizeError>;

    /// Merges partial summaries, oldest first, folding in the previous one.
    /// The default asks [`summarize`](Self::summarize) to do it from the
    /// labelled parts.
    async fn merge(&self, request: MergeRequest) -> Result<String, SummarizeError> {
        let text = request.labelled_text();
        self.summarize(SummaryRequest {
            text,
            instructions: request.instructions,
            max_tokens: request.max_tokens,
            deadline: request.deadline,
        })
        .await
    }
}

/// Which summarizer the host uses (`agents.defaults.compaction.summarizer`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case", deny_unknown_fields)]
pub enum SummarizerConfig {
    /// [`ExtractiveSummarizer`].
    #[default]
    Extractive,
    /// [`OpenAiCompatibleSummarizer`].
    OpenaiCompatible(OpenAiCompatibleConfig),
}

impl SummarizerConfig {
    /// The configured summarizer.
    pub fn build(&self) -> Result<Arc<dyn Summarizer>, SummarizeError> {
        Ok(match self {
            Self::Extractive => Arc::new(ExtractiveSummarizer),
            Self::OpenaiCompatible(config) => {
                Arc::new(OpenAiCompatibleSummarizer::new(config.clone())?)
            }
        })
    }
}

impl From<crate::provider::chat::ChatError> for SummarizeError {
    fn from(error: crate::provider::chat::ChatError) -> Self {
        use crate::provider::chat::ChatError;
        match error {
            ChatError::Timeout => Self::Timeout,
            ChatError::Config(message) => Self::Config(message),
            other => Self::Api(other),
        }
    }
}

/// Why a summary could not be made.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SummarizeError {
    /// The time budget ran out.
    #[error("the summarizer ran out of time")]
    Timeout,
    /// The summarizer is misconfigured (names the key).
    #[error("summarizer configuration: {0}")]
    Config(String),
    /// The chat-completions API failed.
    #[error(transparent)]
    Api(crate::provider::chat::ChatError),
    /// The summarizer itself failed.
    #[error("summarizer failure: {0}")]
    Internal(String),
}
