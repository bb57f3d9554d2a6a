//! Replaying a recorded conversation as if a model were answering: each user
//! turn is answered with the assistant messages that followed it in the
//! recording, and their tool calls with the recorded results. Like a real
//! API, it refuses a prompt larger than its window with a context-overflow
//! error carrying the prompt's token count.

use std::collections::{HashMap, VecDeque};
use std::sync::{Mutex, PoisonError};

use async_trait::async_trait;
use tokio_util::sync::CancellationToken;

use super::{
    ModelReply, ModelRequest, Provider, ProviderError, ToolExecutor, prompt_tokens,
    unavailable_tool_result,
};
use crate::contract::tokens;
use crate::contract::types::{AgentMessage, ContentBlock, Usage};

/// One user turn of a recording.
#[derive(Debug, Clone, PartialEq)]
pub struct ScriptTurn {
    /// What arrives before the model is asked: extension messages, then the
    /// user's message.
    pub inputs: Vec<AgentMessage>,
    /// What followed in the recording: assistant messages and tool results.
    pub responses: Vec<AgentMessage>,
}

/// A recorded conversation, cut into user turns.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ReplayScript {
    /// Messages before the first user message (e.g. a greeting), appended to
    /// the session as they are.
    pub preamble: Vec<AgentMessage>,
    /// The turns, in order.
    pub turns: Vec<ScriptTurn>,
}

impl ReplayScript {
    /// Cuts `messages` (a recording's branch, oldest first) into turns.
    /// Compaction and branch summaries are left out: the replayed session
    /// makes its own.
    pub fn from_messages(messages: impl IntoIterator<Item = AgentMessage>) -> Self {
        let mut script = Self::default();
        let mut inputs: Vec<AgentMessage> = Vec::new();
        for message in messages {
            match message {
                AgentMessage::CompactionSummary { .. } | AgentMessage::BranchSummary { .. } => {}
                AgentMessage::Custom { .. } => inputs.push(message),
                AgentMessage::User { .. } => {
                    inputs.push(message);
                    script.turns.push(ScriptTurn {
                        inputs: std::mem::take(&mut inputs),
                        responses: Vec::new(),
                    });
                }
                response => {
                    // Extension messages no user message followed yet stay
                    // where they were: before this response.
                    let target = match script.turns.last_mut() {
                        Some(turn) => &mut turn.responses,
                        None => &mut script.preamble,
                    };
                    target.append(&mut inputs);
                    target.push(response);
                }
            }
        }
        if let Some(turn) = script.turns.last_mut() {
            // Trailing extension messages with no user message after them.
            turn.responses.append(&mut inputs);
        }
        script
    }

    /// Every tool the recording calls, sorted: the model's tool list.
    pub fn tool_names(&self) -> Vec<String> {
        let mut names: Vec<String> = self
            .turns
            .iter()
            .flat_map(|turn| &turn.responses)
            .flat_map(AgentMessage::content)
            .filter_map(|block| match block {
                ContentBlock::ToolCall { name, .. } => Some(name.clone()),
                _ => None,
            })
            .collect();
        names.sort();
        names.dedup();
        names
    }

    /// Number of model calls the recording holds (its assistant messages).
    pub fn model_calls(&self) -> usize {
        self.turns
            .iter()
            .flat_map(|turn| &turn.responses)
            .filter(|message| matches!(message, AgentMessage::Assistant { .. }))
            .count()
    }
}

/// The replaying model and its tools (one turn at a time).
pub struct Replay {
    window: u64,
    state: Mutex<TurnState>,
}

#[derive(Default)]
struct TurnState {
    /// Recorded assistant messages still to give, in order.
    answers: VecDeque<AgentMessage>,
    /// Recorded tool results of the turn, by call id.
    results: HashMap<String, AgentMessage>,
}

impl Replay {
    /// A replaying model with a context window of `window` tokens.
    pub fn new(window: u64) -> Self {
        Self {
            window,
            state: Mutex::new(TurnState::default()),
        }
    }

    /// The model's window.
    pub fn window(&self) -> u64 {
        self.window
    }

    /// Loads the recorded answers of `turn`.
    pub fn begin_turn(&self, turn: &ScriptTurn) {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        state.answers.clear();
        state.results.clear();
        for response in &turn.responses {
            match response {
                AgentMessage::Assistant { .. } => state.answers.push_back(response.clone()),
                AgentMessage::ToolResult { tool_call_id, .. } => {
                    state.results.insert(tool_call_id.clone(), response.clone());
                }
                // Extension messages between answers are not the model's.
                _ => {}
            }
        }
    }

    /// Recorded answers of the current turn not given yet.
    pub fn answers_left(&self) -> usize {
        self.state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .answers
            .len()
    }
}

#[async_trait]
impl Provider for Replay {
    async fn complete(
        &self,
        request: ModelRequest<'_>,
        abort: &CancellationToken,
    ) -> Result<ModelReply, ProviderError> {
        if abort.is_cancelled() {
            return Err(ProviderError::Aborted);
        }
        let prompt = prompt_tokens(&request);
        if prompt > self.window {
            return Err(ProviderError::ContextOverflow {
                prompt_tokens: prompt,
                window: self.window,
            });
        }
        let recorded = self
            .state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .answers
            .pop_front()
            .ok_or(ProviderError::Exhausted)?;
        // Report what this prompt cost, not what the recording's model saw.
        let output = tokens::estimate_message(&recorded);
        let usage = Usage {
            input: prompt,
            output,
            cache_read: 0,
            cache_write: 0,
            total: prompt + output,
        };
        let message = match recorded {
            AgentMessage::Assistant {
                content,
                model,
                provider,
                stop_reason,
                error_message,
                ..
            } => AgentMessage::Assistant {
                content,
                model,
                provider,
                usage: Some(usage),
                stop_reason,
                error_message,
            },
            other => other,
        };
        Ok(ModelReply {
            message,
            usage: Some(usage),
        })
    }

    fn continues_turn(&self) -> bool {
        self.answers_left() > 0
    }
}

#[async_trait]
impl ToolExecutor for Replay {
    async fn execute(
        &self,
        assistant: &AgentMessage,
        _abort: &CancellationToken,
    ) -> Vec<AgentMessage> {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        assistant
            .content()
            .iter()
            .filter_map(|block| match block {
                ContentBlock::ToolCall { id, name, .. } => {
                    Some(state.results.remove(id).unwrap_or_else(|| {
                        unavailable_tool_result(
                            id,
                            name,
                            "the recording has no result for this call",
                        )
                    }))
                }
                _ => None,
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::contract::types::StopReason;

    fn call(id: &str) -> AgentMessage {
        AgentMessage::Assistant {
            content: vec![ContentBlock::ToolCall {
                id: id.into(),
                name: "exec".into(),
                arguments_json: "{}".into(),
            }],
            model: None,
            provider: None,
            usage: Some(Usage {
                total: 99_999,
                ..Usage::default()
            }),
            stop_reason: StopReason::ToolUse,
            error_message: None,
        }
    }

    fn result(id: &str) -> AgentMessage {
        AgentMessage::tool_result(id, "exec", "ok")
    }

    fn note() -> AgentMessage {
        AgentMessage::Custom {
            custom_type: "hook".into(),
            content: vec![ContentBlock::text("memory")],
            display: false,
            details: None,
        }
    }

    #[test]
    fn cuts_a_recording_into_turns() {
        let greeting = AgentMessage::assistant_text("New session started");
        let script = ReplayScript::from_messages([
            greeting.clone(),
            AgentMessage::user_text("hi"),
            call("c1"),
            result("c1"),
            AgentMessage::assistant_text("done"),
            AgentMessage::CompactionSummary {
                summary: "old".into(),
                tokens_before: 10,
            },
            note(),
            AgentMessage::user_text("again"),
            AgentMessage::assistant_text("sure"),
        ]);
        assert_eq!(script.preamble, vec![greeting]);
        assert_eq!(script.turns.len(), 2);
        assert_eq!(script.turns[0].inputs, vec![AgentMessage::user_text("hi")]);
        assert_eq!(script.turns[0].responses.len(), 3);
        assert_eq!(
            script.turns[1].inputs,
            vec![note(), AgentMessage::user_text("again")]
        );
        assert_eq!(script.model_calls(), 3);
    }

    #[tokio::test]
    async fn answers_in_order_with_recorded_tool_results_and_fresh_usage() {
        let replay = Replay::new(10_000);
        let turn = ScriptTurn {
            inputs: vec![AgentMessage::user_text("hi")],
            responses: vec![
                call("c1"),
                result("c1"),
                AgentMessage::assistant_text("done"),
            ],
        };
        replay.begin_turn(&turn);
        let abort = CancellationToken::new();
        let prompt = [AgentMessage::user_text("hi")];
        let request = ModelRequest {
            system_prompt: "be brief",
            messages: &prompt,
            model: None,
            tools: &[],
            tool_definitions: &[],
        };
        let first = replay
            .complete(request, &abort)
            .await
            .expect("first answer");
        assert!(replay.continues_turn());
        let usage = first.usage.expect("usage");
        assert_eq!(usage.input, prompt_tokens(&request));
        assert!(
            matches!(&first.message, AgentMessage::Assistant { usage: Some(u), .. } if u.total < 99_999)
        );
        assert_eq!(
            replay.execute(&first.message, &abort).await,
            vec![result("c1")]
        );
        // A call the recording never answered still gets a result.
        let missing = replay.execute(&call("c9"), &abort).await;
        assert!(
            matches!(&missing[0], AgentMessage::ToolResult { is_error: true, tool_call_id, .. } if tool_call_id == "c9")
        );
        let second = replay
            .complete(request, &abort)
            .await
            .expect("second answer");
        assert_eq!(
            second.message.content(),
            AgentMessage::assistant_text("done").content()
        );
        assert!(!replay.continues_turn());
        assert_eq!(
            replay.complete(request, &abort).await,
            Err(ProviderError::Exhausted)
        );
    }

    #[tokio::test]
    async fn refuses_a_prompt_over_its_window_without_using_an_answer() {
        let replay = Replay::new(20);
        replay.begin_turn(&ScriptTurn {
            inputs: vec![],
            responses: vec![AgentMessage::assistant_text("done")],
        });
        let big = [AgentMessage::user_text("x".repeat(400))];
        let request = ModelRequest {
            system_prompt: "",
            messages: &big,
            model: None,
            tools: &[],
            tool_definitions: &[],
        };
        let error = replay
            .complete(request, &CancellationToken::new())
            .await
            .expect_err("too big");
        assert_eq!(
            error,
            ProviderError::ContextOverflow {
                prompt_tokens: prompt_tokens(&request),
                window: 20
            }
        );
        assert_eq!(replay.answers_left(), 1);
    }
}
