//! A chat completion as the assistant message it answers: text, reasoning
//! (as thinking), tool calls, usage and the stop reason.

use serde_json::{Value, json};

use super::PROVIDER_ID;
use crate::contract::types::{AgentMessage, ContentBlock, StopReason, Usage};
use crate::provider::ModelReply;
use crate::provider::chat::ChatError;

/// The error message of an answer the content filter stopped.
const CONTENT_FILTERED: &str = "the provider's content filter stopped the answer";

/// The reply `completion` (to a request that asked `requested_model`) holds.
pub(super) fn reply(completion: &Value, requested_model: &str) -> Result<ModelReply, ChatError> {
    let choice = completion
        .pointer("/choices/0")
        .ok_or_else(|| invalid("the completion has no choices"))?;
    let message = choice
        .get("message")
        .filter(|message| message.is_object())
        .ok_or_else(|| invalid("the completion's choice has no message"))?;

    let mut content = Vec::new();
    let reasoning = ["reasoning_content", "reasoning"]
        .iter()
        .find_map(|key| message.get(*key).and_then(Value::as_str))
        .filter(|text| !text.is_empty());
    if let Some(reasoning) = reasoning {
        content.push(ContentBlock::Thinking {
            text: reasoning.to_owned(),
            signature: None,
        });
    }
    let text = text_of(message.get("content"));
    if !text.is_empty() {
        content.push(ContentBlock::text(text));
    }
    let calls = match message.get("tool_calls") {
        None | Some(Value::Null) => &[][..],
        Some(Value::Array(calls)) => calls.as_slice(),
        Some(_) => return Err(invalid("`tool_calls` is not a list")),
    };
    for call in calls {
        content.push(tool_call(call)?);
    }

    let calls_tools = !calls.is_empty();
    let finish_reason = choice.get("finish_reason").and_then(Value::as_str);
    let (stop_reason, error_message) = stop_reason(finish_reason, calls_tools);
    let usage = completion.get("usage").and_then(usage);
    let model = completion
        .get("model")
        .and_then(Value::as_str)
        .filter(|model| !model.is_empty())
        .unwrap_or(requested_model);
    Ok(ModelReply {
        message: AgentMessage::Assistant {
            content,
            model: Some(model.to_owned()),
            provider: Some(PROVIDER_ID.to_owned()),
            usage,
            stop_reason,
            error_message,
        },
        usage,
    })
}

fn invalid(what: &str) -> ChatError {
    ChatError::InvalidResponse(what.to_owned())
}

/// `content` as text: a string, or the text parts of a list (some servers
/// answer parts), or nothing.
fn text_of(content: Option<&Value>) -> String {
    match content {
        Some(Value::String(text)) => text.clone(),
        Some(Value::Array(parts)) => parts
            .iter()
            .filter_map(|part| part.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join(""),
        _ => String::new(),
    }
}

/// One entry of `tool_calls`. A call without an id gets a fresh one (some
/// local servers send none); arguments that are not a JSON object are kept,
/// as text, inside one (`{"unparsedArguments": …}`), so the transcript
/// stays valid and the tool can say what is wrong.
fn tool_call(call: &Value) -> Result<ContentBlock, ChatError> {
    let function = call
        .get("function")
        .ok_or_else(|| invalid("a tool call has no `function`"))?;
    let name = function
        .get("name")
        .and_then(Value::as_str)
        .filter(|name| !name.is_empty())
        .ok_or_else(|| invalid("a tool call has no function name"))?;
    let id = call
        .get("id")
        .and_then(Value::as_str)
        .filter(|id| !id.is_empty())
        .map_or_else(
            || format!("call_{}", uuid::Uuid::new_v4().simple()),
            str::to_owned,
        );
    let arguments_json = match function.get("arguments") {
        None | Some(Value::Null) => "{}".to_owned(),
        Some(Value::String(raw)) if raw.trim().is_empty() => "{}".to_owned(),
        Some(Value::String(raw)) => match serde_json::from_str::<Value>(raw) {
            Ok(Value::Object(_)) => raw.clone(),
            _ => json!({ "unparsedArguments": raw }).to_string(),
        },
        Some(object @ Value::Object(_)) => object.to_string(),
        Some(other) => json!({ "unparsedArguments": other }).to_string(),
    };
    Ok(ContentBlock::ToolCall {
        id,
        name: name.to_owned(),
        arguments_json,
    })
}

/// The stop reason of a `finish_reason`; an answer that calls tools stopped
/// to use them whatever the server says (some say `stop`), unless it ran
/// out of room.
fn stop_reason(finish_reason: Option<&str>, calls_tools: bool) -> (StopReason, Option<String>) {
    match finish_reason {
        Some("length" | "max_tokens") => (StopReason::Length, None),
        Some("content_filter") => (StopReason::Error, Some(CONTENT_FILTERED.to_owned())),
        _ if calls_tools => (StopReason::ToolUse, None),
        _ => (StopReason::Stop, None),
    }
}

/// The completion's `usage`: prompt tokens read from the provider's cache
/// count as `cache_read`, the rest as `input`.
fn usage(usage: &Value) -> Option<Usage> {
    let count = |pointer: &str| usage.pointer(pointer).and_then(Value::as_u64);
    let prompt = count("/prompt_tokens");
    let completion = count("/completion_tokens");
    if prompt.is_none() && completion.is_none() {
        return None;
    }
    let prompt = prompt.unwrap_or(0);
    let output = completion.unwrap_or(0);
    let cached = count("/prompt_tokens_details/cached_tokens")
        .unwrap_or(0)
        .min(prompt);
    Some(Usage {
        input: prompt - cached,
        output,
        cache_read: cached,
        cache_write: 0,
        total: count("/total_tokens").unwrap_or(prompt + output),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(completion: Value) -> ModelReply {
        reply(&completion, "asked").expect("a reply")
    }

    #[test]
    fn reads_text_tool_calls_usage_and_the_stop_reason() {
        let reply = parsed(json!({
            "model": "qwen3:8b",
            "choices": [{
                "message": {
                    "role": "assistant",
                    "content": "Let me look.",
                    "reasoning_content": "ls first",
                    "tool_calls": [{
                        "id": "call_9",
                        "type": "function",
                        "function": {"name": "exec", "arguments": "{\"cmd\":\"ls\"}"},
                    }],
                },
                "finish_reason": "tool_calls",
            }],
            "usage": {
                "prompt_tokens": 120,
                "completion_tokens": 30,
                "total_tokens": 150,
                "prompt_tokens_details": {"cached_tokens": 100},
            },
        }));
        let usage = Usage {
            input: 20,
            output: 30,
            cache_read: 100,
            cache_write: 0,
            total: 150,
        };
        assert_eq!(reply.usage, Some(usage));
        assert_eq!(
            reply.message,
            AgentMessage::Assistant {
                content: vec![
                    ContentBlock::Thinking {
                        text: "ls first".into(),
                        signature: None,
                    },
                    ContentBlock::text("Let me look."),
                    ContentBlock::ToolCall {
                        id: "call_9".into(),
                        name: "exec".into(),
                        arguments_json: r#"{"cmd":"ls"}"#.into(),
                    },
                ],
                model: Some("qwen3:8b".into()),
                provider: Some("openai-compatible".into()),
                usage: Some(usage),
                stop_reason: StopReason::ToolUse,
                error_message: None,
            }
        );
    }

    #[test]
    fn maps_finish_reasons() {
        let answer = |finish: Value, tool_calls: Value| {
            let reply = parsed(json!({"choices": [{
                "message": {"content": "x", "tool_calls": tool_calls},
                "finish_reason": finish,
            }]}));
            match reply.message {
                AgentMessage::Assistant {
                    stop_reason,
                    error_message,
                    ..
                } => (stop_reason, error_message),
                other => panic!("{other:?}"),
            }
        };
        let call = json!([{"id": "c", "function": {"name": "exec", "arguments": "{}"}}]);
        assert_eq!(answer(json!("stop"), Value::Null), (StopReason::Stop, None));
        assert_eq!(
            answer(json!("length"), Value::Null),
            (StopReason::Length, None)
        );
        assert_eq!(answer(Value::Null, Value::Null), (StopReason::Stop, None));
        assert_eq!(
            answer(json!("stop"), call.clone()),
            (StopReason::ToolUse, None)
        );
        assert_eq!(
            answer(json!("tool_calls"), call),
            (StopReason::ToolUse, None)
        );
        assert_eq!(
            answer(json!("content_filter"), Value::Null),
            (StopReason::Error, Some(CONTENT_FILTERED.to_owned()))
        );
    }

    #[test]
    fn repairs_what_local_servers_get_wrong() {
        let reply = parsed(json!({"choices": [{"message": {
            "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}],
            "tool_calls": [
                {"function": {"name": "exec", "arguments": {"cmd": "ls"}}},
                {"id": "c2", "function": {"name": "exec", "arguments": "not json"}},
                {"id": "c3", "function": {"name": "exec", "arguments": ""}},
            ],
        }}]}));
        let AgentMessage::Assistant {
            content,
            model,
            usage,
            ..
        } = reply.message
        else {
            panic!("an assistant message");
        };
        assert_eq!(model.as_deref(), Some("asked"), "the model asked");
        assert_eq!(usage, None);
        assert_eq!(content[0], ContentBlock::text("ab"));
        let ContentBlock::ToolCall {
            id, arguments_json, ..
        } = &content[1]
        else {
            panic!("a tool call");
        };
        assert!(id.starts_with("call_") && id.len() > 10, "{id}");
        assert_eq!(arguments_json, r#"{"cmd":"ls"}"#);
        assert!(matches!(
            &content[2],
            ContentBlock::ToolCall { arguments_json, .. } if arguments_json == r#"{"unparsedArguments":"not json"}"#
        ));
        assert!(matches!(
            &content[3],
            ContentBlock::ToolCall { arguments_json, .. } if arguments_json == "{}"
        ));
    }

    #[test]
    fn refuses_what_is_no_completion() {
        for completion in [
            json!({}),
            json!({"choices": []}),
            json!({"choices": [{"message": "hi"}]}),
            json!({"choices": [{"message": {"tool_calls": {}}}]}),
            json!({"choices": [{"message": {"tool_calls": [{"function": {}}]}}]}),
        ] {
            assert!(
                matches!(reply(&completion, "m"), Err(ChatError::InvalidResponse(_))),
                "{completion}"
            );
        }
    }
}
