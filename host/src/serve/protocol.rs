//! The wire shapes of `ctxbox serve`: one JSON object per line in each
//! direction (see `integrations/openclaw/PROTOCOL.md`).
//!
//! A request is `{"id", "method", "params"}`; its answer is `{"id", "result"}`
//! or `{"id", "error": {"code", "message", "data"?}}`. Ids are whatever JSON
//! the client chose (a number or a string) and come back verbatim.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The newest protocol version this server speaks (`hello`'s `protocol`).
pub const PROTOCOL_VERSION: u64 = 2;

/// Every version this server speaks: 2 adds reverse calls and engine tools
/// to 1, changing nothing 1 had.
pub const SUPPORTED_PROTOCOLS: [u64; 2] = [1, 2];

/// Longest request line accepted, bytes (a whole session's history fits).
pub const MAX_LINE_BYTES: usize = 64 * 1024 * 1024;

/// One request line.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Request {
    /// The client's id for this request.
    pub id: Value,
    /// What to do.
    pub method: String,
    /// The method's parameters (an object; absent = `{}`).
    #[serde(default)]
    pub params: Value,
    /// Answer within this many milliseconds at the latest (default: the
    /// server's call deadline).
    #[serde(default, rename = "deadlineMs")]
    pub deadline_ms: Option<u64>,
}

/// Why a request was refused or failed: a stable code and words.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ProtocolError {
    /// Stable, kebab-case; clients branch on it.
    pub code: ErrorCode,
    /// What went wrong, naming the offending field or value.
    pub message: String,
    /// Extra machine-readable facts (e.g. the session's length on
    /// `history-mismatch`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub data: Option<Value>,
}

/// The error codes of the protocol.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ErrorCode {
    /// The line is not a JSON request object.
    ParseError,
    /// A method other than `hello` came before the handshake.
    HandshakeRequired,
    /// The client speaks a protocol version this server does not.
    UnsupportedProtocol,
    /// No such method.
    UnknownMethod,
    /// The parameters are missing, mistyped or contradictory.
    InvalidParams,
    /// No engine of that name (neither registered nor a `.wasm` file).
    UnknownEngine,
    /// The client's view of the session's history does not match the
    /// server's; resend from `data.length` or from 0.
    HistoryMismatch,
    /// Another request with this id is still running.
    DuplicateId,
    /// The request was cancelled by a `cancel`.
    Cancelled,
    /// The request did not finish within its deadline.
    DeadlineExceeded,
    /// The engine call failed and the guard reported it (strict mode,
    /// `compact`, subagent preparation).
    EngineFailed,
    /// The commit store could not be read or written.
    Storage,
    /// Another host is serving the session (its lease did not run out in
    /// time); retry, or route the session to that host.
    SessionBusy,
    /// `serve.maxInFlight` requests are running; retry when one answers.
    Overloaded,
    /// A bug in the server (a handler panicked); the server keeps running.
    Internal,
}

impl ProtocolError {
    /// An error with a code and a message.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
            data: None,
        }
    }

    /// `invalid-params` with a message.
    pub fn invalid(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::InvalidParams, message)
    }

    /// The same error carrying `data`.
    pub fn with_data(self, data: Value) -> Self {
        Self {
            data: Some(data),
            ..self
        }
    }
}

/// One response line.
#[derive(Debug, Serialize)]
pub struct Response {
    /// The request's id (`null` when the line had none that could be read).
    pub id: Value,
    /// The answer, on success.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub result: Option<Value>,
    /// The failure, otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<ProtocolError>,
}

impl Response {
    /// The answer to `id`: `outcome`'s value or error.
    pub fn to(id: Value, outcome: Result<Value, ProtocolError>) -> Self {
        match outcome {
            Ok(result) => Self {
                id,
                result: Some(result),
                error: None,
            },
            Err(error) => Self {
                id,
                result: None,
                error: Some(error),
            },
        }
    }

    /// The line to write (without the newline).
    pub fn to_line(&self) -> String {
        serde_json::to_string(self).unwrap_or_else(|error| {
            // Serializing plain JSON values cannot fail; say so if it ever does.
            format!(
                r#"{{"id":null,"error":{{"code":"internal","message":"cannot encode a response: {}"}}}}"#,
                error.to_string().replace('"', "'")
            )
        })
    }
}

/// Parses one request line, or answers what is wrong with it (with the
/// request's id when one could be read, so the client can match the error).
pub fn parse_request(line: &str) -> Result<Request, Box<Response>> {
    let refuse = |id: Value, error: ProtocolError| Box::new(Response::to(id, Err(error)));
    let value: Value = serde_json::from_str(line).map_err(|error| {
        refuse(
            Value::Null,
            ProtocolError::new(
                ErrorCode::ParseError,
                format!("the line is not JSON: {error}"),
            ),
        )
    })?;
    let id = value.get("id").cloned().unwrap_or(Value::Null);
    if !value.is_object() {
        return Err(refuse(
            Value::Null,
            ProtocolError::new(ErrorCode::ParseError, "a request must be a JSON object"),
        ));
    }
    if !(id.is_string() || id.is_number()) {
        return Err(refuse(
            Value::Null,
            ProtocolError::new(
                ErrorCode::ParseError,
                "the request has no `id` (a number or a string)",
            ),
        ));
    }
    let request: Request = serde_json::from_value(value).map_err(|error| {
        refuse(
            id.clone(),
            ProtocolError::new(
                ErrorCode::ParseError,
                format!("not a request ({{id, method, params, deadlineMs}}): {error}"),
            ),
        )
    })?;
    if !(request.params.is_object() || request.params.is_null()) {
        return Err(refuse(
            id,
            ProtocolError::invalid("`params` must be an object"),
        ));
    }
    Ok(request)
}

/// Reads a method's parameters into `T`, naming the field at fault.
pub fn params<T: serde::de::DeserializeOwned>(params: &Value) -> Result<T, ProtocolError> {
    let value = if params.is_null() {
        Value::Object(Default::default())
    } else {
        params.clone()
    };
    serde_json::from_value(value).map_err(|error| ProtocolError::invalid(error.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_a_request_and_refuses_bad_lines_by_name() {
        let request = parse_request(r#"{"id":3,"method":"health"}"#).expect("valid");
        assert_eq!(request.id, Value::from(3));
        assert_eq!(request.method, "health");

        let code = |answer: &Response| answer.error.as_ref().map(|error| error.code);
        let answer = parse_request("{nope").expect_err("not JSON");
        assert_eq!(
            (&answer.id, code(&answer)),
            (&Value::Null, Some(ErrorCode::ParseError))
        );
        let answer = parse_request(r#"{"method":"health"}"#).expect_err("no id");
        let message = &answer.error.as_ref().expect("an error").message;
        assert!(message.contains("`id`"), "{message}");
        let answer = parse_request(r#"{"id":"a","method":7}"#).expect_err("bad method");
        assert_eq!(answer.id, Value::from("a"));
        assert_eq!(code(&answer), Some(ErrorCode::ParseError));
        let answer =
            parse_request(r#"{"id":1,"method":"x","params":[1]}"#).expect_err("bad params");
        assert_eq!(code(&answer), Some(ErrorCode::InvalidParams));
    }
}
