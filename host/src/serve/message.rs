//! OpenClaw's messages and the host's: the engine sees the host view of each
//! message (read the way session transcripts are read), while the server
//! keeps every message's original JSON, so whatever an engine keeps goes
//! back to OpenClaw exactly as it came (thinking signatures, provider replay
//! state, unknown fields and all). Only messages an engine makes up are
//! encoded from the host view.

use std::time::SystemTime;

use serde_json::{Map, Value};

use crate::contract::types::{AgentMessage, ContentBlock};
use crate::transcript::{WireMessage, encode_message_entry};

/// The host view of an OpenClaw message, or `None` when the message stays
/// out of the model's context (e.g. a `bashExecution` with
/// `excludeFromContext`) or out of engines' sight (a runtime-context
/// carrier, which OpenClaw itself puts back at the prompt's end). A role this host does not know is shown to the
/// engine as a hidden custom message holding the JSON, so it still counts
/// towards the budget. Fails, naming the problem, on a known role with the
/// wrong shape.
pub fn to_host(raw: &Value) -> Result<Option<AgentMessage>, String> {
    let Some(role) = raw.get("role").and_then(Value::as_str) else {
        return Err("a message needs a string `role`".into());
    };
    match serde_json::from_value::<WireMessage>(raw.clone()) {
        Ok(wire) => Ok(wire
            .into_message()
            .map(|(message, _)| message)
            .filter(|message| !message.is_runtime_context_carrier())),
        Err(_) if !KNOWN_ROLES.contains(&role) => Ok(Some(AgentMessage::Custom {
            custom_type: role.to_owned(),
            content: vec![ContentBlock::text(raw.to_string())],
            display: false,
            details: None,
        })),
        Err(error) => Err(format!("a `{role}` message: {error}")),
    }
}

/// The roles [`WireMessage`] reads.
const KNOWN_ROLES: &[&str] = &[
    "user",
    "assistant",
    "toolResult",
    "custom",
    "bashExecution",
    "branchSummary",
    "compactionSummary",
];

/// An engine-made message as OpenClaw writes messages, stamped `now`.
pub fn to_openclaw(message: &AgentMessage, now: SystemTime) -> Result<Value, String> {
    let millis = Value::from(crate::transcript::unix_millis(now));
    if let AgentMessage::CompactionSummary {
        summary,
        tokens_before,
    } = message
    {
        return Ok(object([
            ("role", "compactionSummary".into()),
            ("summary", summary.as_str().into()),
            ("tokensBefore", (*tokens_before).into()),
            ("timestamp", millis),
        ]));
    }
    let line = encode_message_entry("inserted", None, now, message).map_err(|error| error.0)?;
    let Value::Object(mut entry) =
        serde_json::from_str::<Value>(&line).map_err(|error| error.to_string())?
    else {
        return Err("the encoder wrote something other than an object".into());
    };
    let entry_type = entry
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    let mut fields = match entry_type.as_str() {
        "message" => match entry.remove("message") {
            Some(Value::Object(fields)) => fields,
            _ => return Err("the encoder wrote a message entry without a message".into()),
        },
        "custom_message" | "branch_summary" => {
            for key in ["type", "id", "parentId", "timestamp"] {
                entry.remove(key);
            }
            let role = if entry_type == "custom_message" {
                "custom"
            } else {
                "branchSummary"
            };
            entry.insert("role".into(), role.into());
            entry
        }
        other => return Err(format!("the encoder wrote an unexpected `{other}` entry")),
    };
    fields.insert("timestamp".into(), millis);
    if fields.get("role").and_then(Value::as_str) == Some("assistant") {
        complete_assistant(&mut fields);
    }
    Ok(Value::Object(fields))
}

/// OpenClaw's assistant messages always name their api, provider and model
/// and carry a usage with a cost; an engine's made-up ones say none of that.
fn complete_assistant(fields: &mut Map<String, Value>) {
    for key in ["api", "provider", "model"] {
        fields.entry(key).or_insert_with(|| "ctxbox".into());
    }
    let usage = fields.entry("usage").or_insert_with(|| {
        object([
            ("input", 0.into()),
            ("output", 0.into()),
            ("cacheRead", 0.into()),
            ("cacheWrite", 0.into()),
            ("totalTokens", 0.into()),
        ])
    });
    if let Value::Object(usage) = usage {
        usage.entry("cost").or_insert_with(|| {
            object([
                ("input", 0.into()),
                ("output", 0.into()),
                ("cacheRead", 0.into()),
                ("cacheWrite", 0.into()),
                ("total", 0.into()),
            ])
        });
    }
}

fn object<const N: usize>(fields: [(&str, Value); N]) -> Value {
    Value::Object(
        fields
            .into_iter()
            .map(|(key, value)| (key.to_owned(), value))
            .collect::<Map<String, Value>>(),
    )
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::contract::types::StopReason;

    #[test]
    fn reads_every_block_kind_of_an_openclaw_turn() {
        let assistant = json!({
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "hmm", "thinkingSignature": "sig"},
                {"type": "text", "text": "reading"},
                {"type": "toolCall", "id": "c1", "name": "read", "arguments": {"path": "a"}}
            ],
            "api": "openai-completions", "provider": "p", "model": "m",
            "usage": {"input": 5, "output": 2, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 7,
                      "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0}},
            "stopReason": "toolUse", "timestamp": 1, "providerReplay": {"v": 1}
        });
        let Some(AgentMessage::Assistant {
            content,
            stop_reason,
            ..
        }) = to_host(&assistant).expect("reads")
        else {
            panic!("an assistant message");
        };
        assert_eq!(stop_reason, StopReason::ToolUse);
        assert_eq!(
            content,
            vec![
                ContentBlock::Thinking {
                    text: "hmm".into(),
                    signature: Some("sig".into())
                },
                ContentBlock::text("reading"),
                ContentBlock::ToolCall {
                    id: "c1".into(),
                    name: "read".into(),
                    arguments_json: r#"{"path":"a"}"#.into()
                },
            ]
        );
        let image = json!({"role": "toolResult", "toolCallId": "c1", "toolName": "read",
            "content": [{"type": "image", "data": "AAAA", "mimeType": "image/png"}],
            "isError": false, "timestamp": 2});
        assert!(matches!(
            to_host(&image).expect("reads"),
            Some(AgentMessage::ToolResult { content, .. })
                if content == vec![ContentBlock::Image { mime_type: "image/png".into(), data: "AAAA".into() }]
        ));
    }

    #[test]
    fn unknown_roles_are_kept_visible_and_bad_shapes_named() {
        let odd = json!({"role": "futureThing", "payload": 1});
        assert!(matches!(
            to_host(&odd).expect("reads"),
            Some(AgentMessage::Custom { custom_type, .. }) if custom_type == "futureThing"
        ));
        let error = to_host(&json!({"role": "user"})).expect_err("no content");
        assert!(error.contains("`user`"), "{error}");
        assert!(to_host(&json!({"content": "x"})).is_err());
        let hidden = json!({"role": "bashExecution", "command": "ls", "output": "",
            "excludeFromContext": true, "timestamp": 3});
        assert_eq!(to_host(&hidden).expect("reads"), None);
    }

    #[test]
    fn runtime_context_carriers_are_kept_from_engines_unless_marked_otherwise() {
        let carrier = |details: Value| {
            json!({"role": "custom", "customType": "openclaw.runtime-context",
                "content": "cwd: /w", "display": false, "details": details, "timestamp": 1})
        };
        let hidden = carrier(json!({"source": "openclaw-runtime-context"}));
        assert_eq!(to_host(&hidden).expect("reads"), None);
        let shown = carrier(json!({"runtimeContextCarrier": false}));
        assert!(matches!(
            to_host(&shown).expect("reads"),
            Some(AgentMessage::Custom { .. })
        ));
    }

    #[test]
    fn engine_made_messages_come_out_as_openclaw_messages_that_read_back() {
        let now = SystemTime::UNIX_EPOCH + std::time::Duration::from_millis(1234);
        for message in [
            AgentMessage::user_text("note"),
            AgentMessage::Custom {
                custom_type: "recall".into(),
                content: vec![ContentBlock::text("memo")],
                display: false,
                details: Some(r#"{"k":1}"#.into()),
            },
            AgentMessage::BranchSummary {
                summary: "went left".into(),
                from_id: "e1".into(),
            },
            AgentMessage::CompactionSummary {
                summary: "earlier".into(),
                tokens_before: 900,
            },
        ] {
            let encoded = to_openclaw(&message, now).expect("encodes");
            assert_eq!(encoded["timestamp"], json!(1234), "{encoded}");
            assert_eq!(
                to_host(&encoded).expect("reads back"),
                Some(message),
                "{encoded}"
            );
        }
        let assistant = to_openclaw(&AgentMessage::assistant_text("x"), now).expect("encodes");
        assert_eq!(
            (&assistant["provider"], &assistant["usage"]["cost"]["total"]),
            (&json!("ctxbox"), &json!(0))
        );
        assert!(matches!(
            to_host(&assistant).expect("reads back"),
            Some(AgentMessage::Assistant { content, .. }) if content == vec![ContentBlock::text("x")]
        ));
    }
}
