//! Engine tools over the sidecar (protocol 2): `tools` lists what the
//! engine offers the model, `callTool` answers the model's call. A tool
//! that fails — the engine reports an error, traps, hangs, or is
//! quarantined — is answered with `isError: true` and the reason, never
//! with a protocol error: the client's model is told, and its turn goes on.

use serde::Deserialize;
use serde_json::{Value, json};

use super::methods::Service;
use super::protocol::ProtocolError;
use crate::contract::engine::{CallOptions, ContextEngine};
use crate::contract::text::{MAX_ENGINE_TEXT_BYTES, untrusted_line};
use crate::contract::tools::model_view;
use crate::contract::types::SessionRef;

/// `callTool`'s parameters.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(super) struct CallToolArgs {
    session_id: String,
    #[serde(default)]
    session_key: Option<String>,
    #[serde(default)]
    session_file: Option<String>,
    #[serde(default)]
    engine: Option<String>,
    name: String,
    #[serde(default)]
    arguments: Option<Value>,
}

impl Service {
    /// The tools of the engine `spec` names (or the default one).
    pub(super) async fn tools(
        &self,
        call: &CallOptions,
        spec: Option<&str>,
    ) -> Result<Value, ProtocolError> {
        let engine = self.engine(spec).await?;
        // A failure was the guard's to handle: the engine offers none now.
        let tools = engine.tools(call).await.unwrap_or_default();
        let tools: Vec<Value> = tools.iter().map(model_view).collect();
        Ok(json!({ "tools": tools, "servedBy": engine.serving_id() }))
    }

    /// The model's call to one of the engine's tools.
    pub(super) async fn call_tool(
        &self,
        call: &CallOptions,
        args: CallToolArgs,
    ) -> Result<Value, ProtocolError> {
        if args.session_id.trim().is_empty() {
            return Err(ProtocolError::invalid("`sessionId` is empty"));
        }
        let arguments = match args.arguments {
            None => "{}".to_owned(),
            Some(Value::Object(object)) => Value::Object(object).to_string(),
            Some(_) => return Err(ProtocolError::invalid("`arguments` must be a JSON object")),
        };
        let engine = self.engine(args.engine.as_deref()).await?;
        let session = SessionRef {
            session_id: args.session_id,
            session_key: args.session_key,
            session_file: args.session_file.unwrap_or_default(),
        };
        let answer = engine
            .call_tool(call, &session, &args.name, &arguments)
            .await;
        Ok(match answer {
            Ok(content) => json!({
                "content": content,
                "isError": false,
                "servedBy": engine.serving_id(),
            }),
            Err(failure) => json!({
                "content": format!(
                    "the tool failed: {}",
                    untrusted_line(&failure.message, MAX_ENGINE_TEXT_BYTES)
                ),
                "isError": true,
                "servedBy": engine.serving_id(),
            }),
        })
    }
}
