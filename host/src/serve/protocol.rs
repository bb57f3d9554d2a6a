//! The wire shapes of `ctxbox serve`: one JSON object per line in each
//! direction (see `integrations/openclaw/PROTOCOL.md`).
//!
//! A request is `{"id", "method", "params"}`; its answer is `{"id", "result"}`
//! or `{"id", "error": {"code", "message", "data"?}}`. Ids are whatever JSON
//! the client chose (a number or a string) and come back verbatim.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use serde_json::value::RawValue;

/// The newest protocol version this server speaks (`hello`'s `protocol`).
pub const PROTOCOL_VERSION: u64 = 2;

/// Every version this server speaks: 2 adds reverse calls and engine tools
/// to 1, changing nothing 1 had.
pub const SUPPORTED_PROTOCOLS: [u64; 2] = [1, 2];

/// Longest request line accepted, bytes (a whole session's history fits).
pub const MAX_LINE_BYTES: usize = 64 * 1024 * 1024;

/// One request line.
#[derive(Debug)]
pub struct Request {
    /// The client's id for this request.
    pub id: Value,
    /// What to do.
    pub method: String,
    /// The method's parameters, as the JSON text the client sent (an object;
    /// absent or `null` = `{}`): each method reads them straight into its
    /// own arguments, so a request never exists as a generic JSON tree.
    pub params: Box<RawValue>,
    /// Answer within this many milliseconds at the latest (default: the
    /// server's call deadline).
    pub deadline_ms: Option<u64>,
}

/// A request line's fields, before their types are checked.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RequestLine {
    #[serde(default)]
    id: Option<Value>,
    method: Value,
    #[serde(default)]
    params: Option<Box<RawValue>>,
    #[serde(default, rename = "deadlineMs")]
    deadline_ms: Option<Value>,
}

impl Request {
    /// Its parameters, leaving `{}` in their place.
    pub fn take_params(&mut self) -> Box<RawValue> {
        std::mem::replace(&mut self.params, empty_params())
    }

    /// The engine the request names in `params.engine`, if any (a string).
    pub fn engine(&self) -> Option<String> {
        #[derive(Deserialize)]
        struct Named {
            #[serde(default)]
            engine: Option<Value>,
        }
        serde_json::from_str::<Named>(self.params.get())
            .ok()?
            .engine?
            .as_str()
            .map(str::to_owned)
    }
}

/// The `{}` of a request without parameters.
fn empty_params() -> Box<RawValue> {
    RawValue::from_string("{}".to_owned()).expect("`{}` is JSON")
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
    /// A `commitTurn` for a session this server does not hold (never sent,
    /// given up idle or over `serve.maxSessions`, or the server restarted):
    /// nothing was committed; resend the session in full with a `sync`
    /// and commit again.
    SessionUnknown,
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

/// A method's answer: its fields, and at most one list kept as the JSON text
/// its items already are (a prompt can be most of a long session: it goes
/// out as the text it came in as, never as a JSON tree).
#[derive(Debug, Clone)]
pub struct Answer {
    fields: Value,
    list: Option<(&'static str, Vec<Box<RawValue>>)>,
}

impl Answer {
    /// `fields` (an object) with `key` holding `items`.
    pub fn with_list(fields: Value, key: &'static str, items: Vec<Box<RawValue>>) -> Self {
        Self {
            fields,
            list: Some((key, items)),
        }
    }

    /// The field `key`, if it is one of the answer's fields (not its list).
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.fields.get(key)
    }
}

impl From<Value> for Answer {
    fn from(fields: Value) -> Self {
        Self { fields, list: None }
    }
}

impl Serialize for Answer {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let (Some((key, items)), Value::Object(fields)) = (&self.list, &self.fields) else {
            return self.fields.serialize(serializer);
        };
        let mut map = serializer.serialize_map(Some(fields.len() + 1))?;
        for (name, value) in fields.iter().filter(|(name, _)| name != key) {
            map.serialize_entry(name, value)?;
        }
        map.serialize_entry(key, items)?;
        map.end()
    }
}

/// One response line.
#[derive(Debug, Serialize)]
pub struct Response {
    /// The request's id (`null` when the line had none that could be read).
    pub id: Value,
    /// The answer, on success.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub result: Option<Answer>,
    /// The failure, otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<ProtocolError>,
}

impl Response {
    /// The answer to `id`: `outcome`'s value or error.
    pub fn to(id: Value, outcome: Result<impl Into<Answer>, ProtocolError>) -> Self {
        match outcome {
            Ok(result) => Self {
                id,
                result: Some(result.into()),
                error: None,
            },
            Err(error) => Self::error(id, error),
        }
    }

    /// The error answer to `id`.
    pub fn error(id: Value, error: ProtocolError) -> Self {
        Self {
            id,
            result: None,
            error: Some(error),
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
/// `params` stays the text it was; nothing else of the line is kept.
pub fn parse_request(line: &str) -> Result<Request, Box<Response>> {
    let fields: RequestLine =
        serde_json::from_str(line).map_err(|error| refuse_line(line, &error))?;
    let id = fields.id.unwrap_or(Value::Null);
    if !(id.is_string() || id.is_number()) {
        return Err(refusal(
            Value::Null,
            ProtocolError::new(
                ErrorCode::ParseError,
                "the request has no `id` (a number or a string)",
            ),
        ));
    }
    let not_a_request = |id: Value, problem: &str| {
        refusal(
            id,
            ProtocolError::new(
                ErrorCode::ParseError,
                format!("not a request ({{id, method, params, deadlineMs}}): {problem}"),
            ),
        )
    };
    let Value::String(method) = fields.method else {
        return Err(not_a_request(id, "`method` must be a string"));
    };
    let deadline_ms = match fields.deadline_ms {
        None | Some(Value::Null) => None,
        Some(ms) => match ms.as_u64() {
            Some(ms) => Some(ms),
            None => {
                return Err(not_a_request(
                    id,
                    "`deadlineMs` must be a whole number of milliseconds",
                ));
            }
        },
    };
    let params = match fields.params {
        None => empty_params(),
        Some(raw) if raw.get().trim() == "null" => empty_params(),
        Some(raw) if raw.get().trim_start().starts_with('{') => raw,
        Some(_) => {
            return Err(refusal(
                id,
                ProtocolError::invalid("`params` must be an object"),
            ));
        }
    };
    Ok(Request {
        id,
        method,
        params,
        deadline_ms,
    })
}

/// An error answer to the request with `id`.
fn refusal(id: Value, error: ProtocolError) -> Box<Response> {
    Box::new(Response::error(id, error))
}

/// What is wrong with a line that is not a request (`error`: why it did not
/// read as one), with its id when it has one.
fn refuse_line(line: &str, error: &serde_json::Error) -> Box<Response> {
    let value: Value = match serde_json::from_str(line) {
        Ok(value) => value,
        Err(error) => {
            return refusal(
                Value::Null,
                ProtocolError::new(
                    ErrorCode::ParseError,
                    format!("the line is not JSON: {error}"),
                ),
            );
        }
    };
    if !value.is_object() {
        return refusal(
            Value::Null,
            ProtocolError::new(ErrorCode::ParseError, "a request must be a JSON object"),
        );
    }
    let id = value.get("id").cloned().unwrap_or(Value::Null);
    let id = if id.is_string() || id.is_number() {
        id
    } else {
        Value::Null
    };
    refusal(
        id,
        ProtocolError::new(
            ErrorCode::ParseError,
            format!("not a request ({{id, method, params, deadlineMs}}): {error}"),
        ),
    )
}

/// Reads a method's parameters into `T`, naming the field at fault.
pub fn params<T: serde::de::DeserializeOwned>(params: &RawValue) -> Result<T, ProtocolError> {
    serde_json::from_str(params.get()).map_err(|error| ProtocolError::invalid(error.to_string()))
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

    #[test]
    fn an_answer_with_a_list_writes_its_items_verbatim_after_its_fields() {
        let items = vec![
            RawValue::from_string(r#"{"role": "user",  "content":"a"}"#.to_owned()).expect("JSON"),
            RawValue::from_string("[1,2]".to_owned()).expect("JSON"),
        ];
        let answer = Answer::with_list(
            serde_json::json!({"length": 2, "messages": "replaced"}),
            "messages",
            items,
        );
        assert_eq!(answer.get("length"), Some(&Value::from(2)));
        let line = Response::to(Value::from(7), Ok::<_, ProtocolError>(answer)).to_line();
        assert_eq!(
            line,
            r#"{"id":7,"result":{"length":2,"messages":[{"role": "user",  "content":"a"},[1,2]]}}"#
        );
        let plain = Response::to(
            Value::from(8),
            Ok::<_, ProtocolError>(serde_json::json!({"ok": true})),
        );
        assert_eq!(plain.to_line(), r#"{"id":8,"result":{"ok":true}}"#);
    }
}
