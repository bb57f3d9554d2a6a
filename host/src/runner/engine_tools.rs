//! The engine's tools in a turn (`wit/tools.wit`): offered to the model
//! beside the host's own, and the model's calls to them answered by the
//! engine, under the guard. A name a host tool already has is not offered
//! (an engine cannot shadow a host tool); a call that fails — the engine
//! reports an error, traps, hangs or is quarantined — answers the model
//! with an error result and the turn goes on.

use std::collections::HashSet;

use tokio_util::sync::CancellationToken;

use super::{Session, TurnReport, TurnRunner};
use crate::contract::engine::{CallOptions, ContextEngine};
use crate::contract::text::{MAX_ENGINE_TEXT_BYTES, untrusted_line};
use crate::contract::types::{AgentMessage, ContentBlock};
use crate::provider::ToolDefinition;

/// The tools one turn offers the model.
#[derive(Debug, Clone, Default)]
pub(super) struct TurnTools {
    /// Every tool's definition: the host's, then the engine's.
    pub(super) definitions: Vec<ToolDefinition>,
    /// Every tool's name, in the same order.
    pub(super) names: Vec<String>,
    /// The engine's tools among them.
    engine: HashSet<String>,
}

impl TurnTools {
    /// Whether `name` is one of the engine's tools.
    fn is_engine_tool(&self, name: &str) -> bool {
        self.engine.contains(name)
    }
}

impl TurnRunner {
    /// The tools of a turn: the host's, and the engine's that do not shadow
    /// one of them (asked each turn: a quarantined engine's are withdrawn).
    pub(super) async fn turn_tools(&self, call: &CallOptions) -> TurnTools {
        let mut tools = TurnTools {
            definitions: self.tool_definitions.clone(),
            names: self.config.tools.clone(),
            engine: HashSet::new(),
        };
        let host: HashSet<String> = tools
            .names
            .iter()
            .cloned()
            .chain(tools.definitions.iter().map(|tool| tool.name.clone()))
            .collect();
        // A failure was the guard's to handle: the engine offers none now.
        let offered = self.engine.tools(call).await.unwrap_or_default();
        for tool in offered {
            if host.contains(&tool.name) {
                tracing::warn!(
                    engine = self.engine.serving_id(),
                    tool = %tool.name,
                    "engine tool not offered: a host tool has its name"
                );
                continue;
            }
            let parameters =
                serde_json::from_str(&tool.parameters_json).unwrap_or(serde_json::Value::Null);
            tools.names.push(tool.name.clone());
            tools.engine.insert(tool.name.clone());
            tools.definitions.push(ToolDefinition {
                name: tool.name,
                description: tool.description,
                parameters,
            });
        }
        tools
    }

    /// One result for every tool call of `reply`, in order: the engine's
    /// tools answered by the engine, the rest by the host's executor.
    pub(super) async fn run_tool_calls(
        &self,
        session: &Session,
        call: &CallOptions,
        tools: &TurnTools,
        reply: &AgentMessage,
        report: &mut TurnReport,
        abort: &CancellationToken,
    ) -> Vec<AgentMessage> {
        let AgentMessage::Assistant { content, .. } = reply else {
            return Vec::new();
        };
        let engine_calls: Vec<(&str, &str, &str)> = content
            .iter()
            .filter_map(|block| match block {
                ContentBlock::ToolCall {
                    id,
                    name,
                    arguments_json,
                } if tools.is_engine_tool(name) => {
                    Some((id.as_str(), name.as_str(), arguments_json.as_str()))
                }
                _ => None,
            })
            .collect();
        if engine_calls.is_empty() {
            return self.tools.execute(reply, abort).await;
        }
        let host_reply = without_calls(reply, &engine_calls);
        let mut host_results = if host_reply.tool_call_ids().next().is_some() {
            self.tools.execute(&host_reply, abort).await
        } else {
            Vec::new()
        };
        let mut results = Vec::with_capacity(engine_calls.len() + host_results.len());
        for id in reply.tool_call_ids() {
            if let Some(&(_, name, arguments)) =
                engine_calls.iter().find(|(call_id, ..)| *call_id == id)
            {
                report.engine_tool_calls += 1;
                let answer = self
                    .engine
                    .call_tool(call, session.session_ref(), name, arguments)
                    .await;
                results.push(match answer {
                    Ok(text) => AgentMessage::tool_result(id, name, text),
                    Err(failure) => {
                        report.engine_tool_errors += 1;
                        error_result(id, name, &failure.message)
                    }
                });
            } else if let Some(position) = host_results.iter().position(|result| {
                matches!(result, AgentMessage::ToolResult { tool_call_id, .. } if tool_call_id == id)
            }) {
                results.push(host_results.remove(position));
            }
        }
        results
    }
}

/// `reply` with the calls in `removed` left out.
fn without_calls(reply: &AgentMessage, removed: &[(&str, &str, &str)]) -> AgentMessage {
    let mut reply = reply.clone();
    if let AgentMessage::Assistant { content, .. } = &mut reply {
        content.retain(|block| match block {
            ContentBlock::ToolCall { id, .. } => !removed.iter().any(|(call_id, ..)| call_id == id),
            _ => true,
        });
    }
    reply
}

/// A failed tool's result, as the model reads it.
fn error_result(id: &str, name: &str, why: &str) -> AgentMessage {
    let mut result = AgentMessage::tool_result(
        id,
        name,
        format!(
            "error: the tool failed: {}",
            untrusted_line(why, MAX_ENGINE_TEXT_BYTES)
        ),
    );
    if let AgentMessage::ToolResult { is_error, .. } = &mut result {
        *is_error = true;
    }
    result
}
