//! [`ExtractiveCompletions`]: what answers completions when no live model
//! does (`ctxbox run` replays recorded answers, which are no answer to an
//! engine's new question): an extractive summary of the request, as the
//! extractive summarizer writes it, within the answer's token cap.

use async_trait::async_trait;

use crate::contract::completion::{Completion, CompletionRequest};
use crate::contract::tokens;
use crate::provider::completion::{CompletionContext, CompletionError, ModelCompletions};
use crate::services::summarize::{ExtractiveSummarizer, Summarizer, SummaryRequest};

/// Offline completions: an extractive summary of the request.
#[derive(Debug, Clone, Copy, Default)]
pub struct ExtractiveCompletions;

#[async_trait]
impl ModelCompletions for ExtractiveCompletions {
    fn id(&self) -> &str {
        "extractive"
    }

    async fn complete(
        &self,
        context: CompletionContext<'_>,
        request: &CompletionRequest,
    ) -> Result<Completion, CompletionError> {
        let text = request
            .messages
            .iter()
            .map(|message| message.text.as_str())
            .collect::<Vec<_>>()
            .join("\n\n");
        let summary = ExtractiveSummarizer
            .summarize(SummaryRequest {
                text,
                instructions: request.system.clone().unwrap_or_default(),
                max_tokens: request.max_tokens,
                deadline: context.deadline,
            })
            .await
            .map_err(|error| CompletionError::Failed(error.to_string()))?;
        Ok(Completion {
            input_tokens: tokens::estimate_text(&request.text()),
            output_tokens: tokens::estimate_text(&summary),
            model: Some("extractive".into()),
            text: summary,
        })
    }
}
