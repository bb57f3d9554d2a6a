//! In-memory helpers beside the [`Provider`] and [`ToolExecutor`] traits: a
//! model that answers from a script and records every prompt it was sent,
//! and tools that answer every call with one text. For tests, examples and
//! hosts that want a turn without a live model.

use std::collections::VecDeque;
use std::sync::{Mutex, MutexGuard, PoisonError};

use async_trait::async_trait;
use tokio_util::sync::CancellationToken;

use super::{ModelReply, ModelRequest, Provider, ProviderError, ToolDefinition, ToolExecutor};
use crate::contract::types::{AgentMessage, ContentBlock};

/// A model answering from a script, in order; once the script is used up it
/// answers [`ProviderError::Exhausted`] (the turn runner ends the turn).
#[derive(Debug, Default)]
pub struct ScriptedProvider {
    answers: Mutex<VecDeque<Result<AgentMessage, ProviderError>>>,
    prompts: Mutex<Vec<Vec<AgentMessage>>>,
    tools: Mutex<Vec<Vec<ToolDefinition>>>,
}

impl ScriptedProvider {
    /// A model that gives `answers` (an answer or a failure per call).
    pub fn new(answers: impl IntoIterator<Item = Result<AgentMessage, ProviderError>>) -> Self {
        Self {
            answers: Mutex::new(answers.into_iter().collect()),
            prompts: Mutex::new(Vec::new()),
            tools: Mutex::new(Vec::new()),
        }
    }

    /// A model that answers each call with the next of `texts`.
    pub fn texts<T: Into<String>>(texts: impl IntoIterator<Item = T>) -> Self {
        Self::new(
            texts
                .into_iter()
                .map(|text| Ok(AgentMessage::assistant_text(text))),
        )
    }

    /// The messages of every prompt sent so far, oldest first.
    pub fn prompts(&self) -> Vec<Vec<AgentMessage>> {
        lock(&self.prompts).clone()
    }

    /// The tools each prompt offered the model, oldest first.
    pub fn tool_definitions(&self) -> Vec<Vec<ToolDefinition>> {
        lock(&self.tools).clone()
    }
}

#[async_trait]
impl Provider for ScriptedProvider {
    async fn complete(
        &self,
        request: ModelRequest<'_>,
        _abort: &CancellationToken,
    ) -> Result<ModelReply, ProviderError> {
        lock(&self.prompts).push(request.messages.to_vec());
        lock(&self.tools).push(request.tool_definitions.to_vec());
        let answer = lock(&self.answers)
            .pop_front()
            .unwrap_or(Err(ProviderError::Exhausted))?;
        Ok(ModelReply {
            message: answer,
            usage: None,
        })
    }
}

/// Tools that answer every call with the same text.
#[derive(Debug, Clone)]
pub struct FixedToolResults {
    text: String,
}

impl FixedToolResults {
    /// Tools answering `text` to every call.
    pub fn new(text: impl Into<String>) -> Self {
        Self { text: text.into() }
    }
}

#[async_trait]
impl ToolExecutor for FixedToolResults {
    async fn execute(
        &self,
        assistant: &AgentMessage,
        _abort: &CancellationToken,
    ) -> Vec<AgentMessage> {
        assistant
            .content()
            .iter()
            .filter_map(|block| match block {
                ContentBlock::ToolCall { id, name, .. } => {
                    Some(AgentMessage::tool_result(id, name, &self.text))
                }
                _ => None,
            })
            .collect()
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}
