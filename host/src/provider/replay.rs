//! Replaying a recorded conversation as if a model were answering: each user
//! turn is answered with the assistant messages that followed it in the
//! recording, and their tool calls with the recorded results. Like a real
//! API, it refuses a prompt larger than its window with a context-overflow
//! error carrying the prompt's token count.

use std::collections::{HashSet, VecDeque};
use std::sync::{Mutex, PoisonError};

use async_trait::async_trait;
use tokio_util::sync::CancellationToken;

use super::{
    ModelReply, ModelRequest, Provider, ProviderError, ToolExecutor, prompt_tokens, recorded,
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
    /// Every message is kept, in order: extension messages and branch
    /// summaries before a user message, and those right after it (before
    /// any answer, e.g. OpenClaw's runtime context), are the turn's inputs;
    /// everything after the first answer is its responses. Compaction
    /// summaries are left out: the replayed session makes its own.
    pub fn from_messages(messages: impl IntoIterator<Item = AgentMessage>) -> Self {
        let mut script = Self::default();
        let mut inputs: Vec<AgentMessage> = Vec::new();
        for message in messages {
            match message {
                AgentMessage::CompactionSummary { .. } => {}
                AgentMessage::Custom { .. } | AgentMessage::BranchSummary { .. } => {
                    inputs.push(message)
                }
                AgentMessage::User { .. } => {
                    inputs.push(message);
                    script.turns.push(ScriptTurn {
                        inputs: std::mem::take(&mut inputs),
                        responses: Vec::new(),
                    });
                }
                response => {
                    // Extension messages no response followed yet stay where
                    // they were: before this response (among the inputs when
                    // it is the turn's first).
                    let Some(turn) = script.turns.last_mut() else {
                        script.preamble.append(&mut inputs);
                        script.preamble.push(response);
                        continue;
                    };
                    if turn.responses.is_empty() {
                        turn.inputs.append(&mut inputs);
                    } else {
                        turn.responses.append(&mut inputs);
                    }
                    turn.responses.push(response);
                }
            }
        }
        match script.turns.last_mut() {
            // Trailing extension messages with no user message after them.
            Some(turn) => turn.responses.append(&mut inputs),
            None => script.preamble.append(&mut inputs),
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

    /// Number of model calls the recording holds (its model answers;
    /// OpenClaw's own copies of delivered messages are none).
    pub fn model_calls(&self) -> usize {
        self.turns
            .iter()
            .flat_map(|turn| &turn.responses)
            .filter(|message| recorded::is_model_answer(message))
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
    /// The turn's recorded responses not given yet, in order: the model's
    /// answers, the results of the calls it ran, and what else arrived.
    pending: VecDeque<AgentMessage>,
}

impl TurnState {
    /// Position of the next model answer still to give.
    fn next_answer(&self) -> Option<usize> {
        self.pending.iter().position(recorded::is_model_answer)
    }
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

    fn state(&self) -> std::sync::MutexGuard<'_, TurnState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Loads the recorded responses of `turn`.
    pub fn begin_turn(&self, turn: &ScriptTurn) {
        self.state().pending = turn.responses.iter().cloned().collect();
    }

    /// Recorded answers of the current turn not given yet.
    pub fn answers_left(&self) -> usize {
        self.state()
            .pending
            .iter()
            .filter(|message| recorded::is_model_answer(message))
            .count()
    }

    /// Everything of the current turn's recording not given yet, in order,
    /// and forgets it: what a replay writes as it is when the turn cannot go
    /// on (its answers are then no model calls).
    pub fn take_rest(&self) -> Vec<AgentMessage> {
        self.state().pending.drain(..).collect()
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
        let recorded = {
            let mut state = self.state();
            let next = state.next_answer().ok_or(ProviderError::Exhausted)?;
            state.pending.remove(next).ok_or(ProviderError::Exhausted)?
        };
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
        self.state().next_answer().is_some()
    }

    /// The recorded entries before the next answer: extension messages,
    /// OpenClaw's copies of delivered messages, results no call of this
    /// replay asked for.
    fn arrived(&self) -> Vec<AgentMessage> {
        let mut state = self.state();
        let end = state.next_answer().unwrap_or(state.pending.len());
        state.pending.drain(..end).collect()
    }
}

#[async_trait]
impl ToolExecutor for Replay {
    /// The recorded results of the calls, in the recording's order, taken
    /// from before the next answer. A call the recording has no result for
    /// gets none here (a prompt shows it as unavailable); the calls of an
    /// answer that failed or was aborted were never run.
    async fn execute(
        &self,
        assistant: &AgentMessage,
        _abort: &CancellationToken,
    ) -> Vec<AgentMessage> {
        if !recorded::runs_its_tool_calls(assistant) {
            return Vec::new();
        }
        let calls: HashSet<&str> = assistant.tool_call_ids().collect();
        let mut state = self.state();
        let end = state.next_answer().unwrap_or(state.pending.len());
        let mut results = Vec::new();
        let mut rest = VecDeque::with_capacity(state.pending.len());
        for (index, message) in state.pending.drain(..).enumerate() {
            match &message {
                AgentMessage::ToolResult { tool_call_id, .. }
                    if index < end && calls.contains(tool_call_id.as_str()) =>
                {
                    results.push(message)
                }
                _ => rest.push_back(message),
            }
        }
        state.pending = rest;
        results
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

    #[test]
    fn extension_messages_keep_their_place_in_the_turn() {
        let script = ReplayScript::from_messages([
            AgentMessage::user_text("hi"),
            note(),
            call("c1"),
            result("c1"),
            note(),
            AgentMessage::assistant_text("done"),
            note(),
        ]);
        assert_eq!(
            script.turns[0].inputs,
            vec![AgentMessage::user_text("hi"), note()],
            "what came before the first answer is input"
        );
        assert_eq!(
            script.turns[0].responses,
            vec![
                call("c1"),
                result("c1"),
                note(),
                AgentMessage::assistant_text("done"),
                note()
            ]
        );
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
        // A call the recording never answered gets no invented result.
        assert!(replay.execute(&call("c9"), &abort).await.is_empty());
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
    async fn what_is_no_answer_arrives_in_its_place() {
        let replay = Replay::new(10_000);
        replay.begin_turn(&ScriptTurn {
            inputs: vec![AgentMessage::user_text("hi")],
            responses: vec![
                note(),
                call("c1"),
                result("c1"),
                result("nobody-called-me"),
                AgentMessage::assistant_text("done"),
                note(),
            ],
        });
        let abort = CancellationToken::new();
        let prompt = [AgentMessage::user_text("hi")];
        let request = ModelRequest {
            system_prompt: "",
            messages: &prompt,
            model: None,
            tools: &[],
            tool_definitions: &[],
        };
        assert_eq!(replay.arrived(), vec![note()]);
        let first = replay.complete(request, &abort).await.expect("answer");
        assert_eq!(
            replay.execute(&first.message, &abort).await,
            vec![result("c1")]
        );
        assert_eq!(replay.arrived(), vec![result("nobody-called-me")]);
        assert_eq!(replay.answers_left(), 1);
        replay.complete(request, &abort).await.expect("answer");
        assert_eq!(replay.arrived(), vec![note()]);
        assert!(replay.take_rest().is_empty());
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
