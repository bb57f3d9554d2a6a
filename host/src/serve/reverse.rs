//! Reverse calls (protocol version 2): requests the server sends its client
//! while serving one of the client's own, for what only the client has —
//! the agent's own model, for an engine's `host.complete`
//! ([`ClientCompletions`]). Each has an id of the server's (`srv-N`), a
//! deadline, and is cancelled (`cancel`) when the server stops waiting; the
//! client answers by the same id (PROTOCOL.md, "Reverse calls").

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

use async_trait::async_trait;
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{Value, json};
use tokio::sync::{mpsc, oneshot};

use crate::contract::completion::{Completion, CompletionRequest, MAX_COMPLETION_ANSWER_BYTES};
use crate::contract::text::{MAX_ENGINE_TEXT_BYTES, untrusted_line};
use crate::contract::tokens;
use crate::provider::completion::{CompletionContext, CompletionError, ModelCompletions};

/// The prefix of the ids of the server's requests.
pub const REVERSE_ID_PREFIX: &str = "srv-";

/// What a client answered a reverse call with: its `result` (as the text it
/// came as, read by the caller into its own type), or its error's code and
/// message.
type Answer = Result<Box<RawValue>, (String, String)>;

/// The fields of a line that tell whether it answers a reverse call. Read
/// from a line that may be a large request: the fields it skips (`params`)
/// are never held, so a message that happens to contain
/// [`REVERSE_ID_PREFIX`] costs no copy of its request.
#[derive(Deserialize)]
struct AnswerLine {
    #[serde(default)]
    id: Option<Value>,
    #[serde(default)]
    method: Option<serde::de::IgnoredAny>,
    #[serde(default)]
    result: Option<Box<RawValue>>,
    #[serde(default)]
    error: Option<AnswerError>,
}

/// A reverse call's error answer.
#[derive(Deserialize)]
struct AnswerError {
    #[serde(default)]
    code: Option<Value>,
    #[serde(default)]
    message: Option<Value>,
}

/// The reverse calls in flight on one connection.
#[derive(Debug)]
pub struct ReverseCalls {
    /// The connection's answer lines; `None` once it is closing.
    outbox: Mutex<Option<mpsc::Sender<String>>>,
    next: AtomicU64,
    waiting: Mutex<HashMap<String, oneshot::Sender<Answer>>>,
}

impl ReverseCalls {
    /// Reverse calls written to `outbox` (the connection's answer lines).
    pub fn new(outbox: mpsc::Sender<String>) -> Self {
        Self {
            outbox: Mutex::new(Some(outbox)),
            next: AtomicU64::new(1),
            waiting: Mutex::new(HashMap::new()),
        }
    }

    /// The connection is closing: no more reverse calls (they answer
    /// `unavailable`), and the answer lines can end.
    pub fn close(&self) {
        self.outbox
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        self.waiting
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clear();
    }

    fn outbox(&self) -> Option<mpsc::Sender<String>> {
        self.outbox
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Writes `line` to the client, waiting (until `deadline`) while its
    /// answer queue is full; `false` once the connection is closing or the
    /// client reads nothing by then.
    async fn send(&self, line: String, deadline: Instant) -> bool {
        let Some(outbox) = self.outbox() else {
            return false;
        };
        matches!(
            tokio::time::timeout_at(deadline.into(), outbox.send(line)).await,
            Ok(Ok(()))
        )
    }

    /// Whether `line` (a line the client sent) answers a reverse call: an
    /// id of ours and no `method`. Hands it to its waiter (an
    /// answer nobody waits for any more is dropped) and answers `true`.
    pub fn take_answer(&self, line: &str) -> bool {
        if line.len() > MAX_COMPLETION_ANSWER_BYTES {
            return self.refuse_oversized(line);
        }
        let Ok(line) = serde_json::from_str::<AnswerLine>(line) else {
            return false;
        };
        let Some(id) = line.id.as_ref().and_then(Value::as_str) else {
            return false;
        };
        if !id.starts_with(REVERSE_ID_PREFIX) || line.method.is_some() {
            return false;
        }
        let waiter = self
            .waiting
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(id);
        let Some(waiter) = waiter else {
            tracing::debug!(id, "an answer to a reverse call nobody waits for");
            return true;
        };
        let text = |field: Option<Value>| match field {
            Some(Value::String(text)) => Some(text),
            _ => None,
        };
        let answer = match (line.result, line.error) {
            (Some(result), None) => Ok(result),
            (None, Some(error)) => Err((
                text(error.code).unwrap_or_else(|| "failed".to_owned()),
                text(error.message).unwrap_or_default(),
            )),
            _ => Err((
                "failed".to_owned(),
                "the answer has neither a result nor an error".to_owned(),
            )),
        };
        let _ = waiter.send(answer);
        true
    }

    /// `take_answer` of a line over [`MAX_COMPLETION_ANSWER_BYTES`]: when it
    /// answers a reverse call, its waiter is told it was too large, and
    /// nothing of it is kept (its fields are skipped, not copied).
    fn refuse_oversized(&self, line: &str) -> bool {
        #[derive(Deserialize)]
        struct Id {
            #[serde(default)]
            id: Option<Value>,
            #[serde(default)]
            method: Option<serde::de::IgnoredAny>,
        }
        let Ok(Id {
            id: Some(Value::String(id)),
            method: None,
        }) = serde_json::from_str::<Id>(line)
        else {
            return false;
        };
        if !id.starts_with(REVERSE_ID_PREFIX) {
            return false;
        }
        let waiter = self
            .waiting
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&id);
        if let Some(waiter) = waiter {
            let _ = waiter.send(Err((
                "too-large".to_owned(),
                format!(
                    "answer is {} bytes, over the {MAX_COMPLETION_ANSWER_BYTES} an answer may take",
                    line.len()
                ),
            )));
        }
        true
    }

    /// Sends the client `method` with `params`, answered by `deadline`; the
    /// client is told to cancel it when it is not.
    async fn call(
        &self,
        method: &str,
        params: Value,
        deadline: Instant,
        abort: &tokio_util::sync::CancellationToken,
    ) -> Result<Box<RawValue>, CompletionError> {
        let id = format!(
            "{REVERSE_ID_PREFIX}{}",
            self.next.fetch_add(1, Ordering::Relaxed)
        );
        let (sender, answer) = oneshot::channel();
        self.waiting
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(id.clone(), sender);
        let deadline_ms = deadline
            .saturating_duration_since(Instant::now())
            .as_millis() as u64;
        let line = json!({"id": id, "method": method, "deadlineMs": deadline_ms, "params": params});
        if !self.send(line.to_string(), deadline).await {
            self.forget(&id);
            return Err(CompletionError::Unavailable(
                "the client is gone or reads nothing".into(),
            ));
        }
        let outcome = tokio::select! {
            biased;
            answer = answer => answer.map_err(|_| CompletionError::Unavailable("the client is gone".into())),
            () = tokio::time::sleep_until(deadline.into()) => Err(CompletionError::Aborted(
                format!("the client did not answer `{method}` within {deadline_ms} ms"),
            )),
            () = abort.cancelled() => Err(CompletionError::Aborted("the caller cancelled the call".into())),
        };
        match outcome {
            Ok(answer) => answer.map_err(|(code, message)| {
                let message = untrusted_line(&message, MAX_ENGINE_TEXT_BYTES);
                match code.as_str() {
                    "unavailable" => CompletionError::Unavailable(message),
                    "cancelled" => CompletionError::Aborted(message),
                    "too-large" => CompletionError::Failed(format!("the client's {message}")),
                    _ => CompletionError::Failed(format!("the client's model failed: {message}")),
                }
            }),
            Err(error) => {
                self.forget(&id);
                // Best effort: a client that reads nothing misses it.
                if let Some(outbox) = self.outbox() {
                    let cancel =
                        json!({"id": Value::Null, "method": "cancel", "params": {"target": id}});
                    let _ = outbox.try_send(cancel.to_string());
                }
                Err(error)
            }
        }
    }

    fn forget(&self, id: &str) {
        self.waiting
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(id);
    }
}

/// Completions from the client's model (OpenClaw's own), by reverse call.
#[derive(Debug, Clone)]
pub struct ClientCompletions {
    calls: Arc<ReverseCalls>,
}

impl ClientCompletions {
    /// Completions asked of the client of `calls`.
    pub fn new(calls: Arc<ReverseCalls>) -> Self {
        Self { calls }
    }
}

/// What the client answers a `complete` with.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct ClientCompletion {
    text: String,
    output_tokens: Option<u64>,
    model: Option<String>,
}

#[async_trait]
impl ModelCompletions for ClientCompletions {
    fn id(&self) -> &str {
        "client"
    }

    async fn complete(
        &self,
        context: CompletionContext<'_>,
        request: &CompletionRequest,
    ) -> Result<Completion, CompletionError> {
        let params = json!({
            "sessionId": context.session.map(|session| session.session_id.as_str()),
            "sessionKey": context.session.and_then(|session| session.session_key.as_deref()),
            "engine": context.engine_id,
            "requestId": context.request_id.and_then(|id| serde_json::from_str::<Value>(id).ok()),
            "purpose": request.purpose,
            "systemPrompt": request.system,
            "messages": request
                .messages
                .iter()
                .map(|message| json!({"role": message.role.as_str(), "content": message.text}))
                .collect::<Vec<_>>(),
            "maxTokens": request.max_tokens,
        });
        let answer = self
            .calls
            .call("complete", params, context.deadline, context.abort)
            .await?;
        let answer: ClientCompletion = serde_json::from_str(answer.get()).map_err(|error| {
            CompletionError::Failed(format!("the client's answer is not a completion: {error}"))
        })?;
        if answer.text.trim().is_empty() {
            return Err(CompletionError::Failed(
                "the client's model answered no text".into(),
            ));
        }
        // The request is the host's own: measured by its estimator. The
        // answer's claim is held to the request's `maxTokens`
        // (`Completion::hold_to`) by whoever asked.
        Ok(Completion {
            input_tokens: tokens::estimate_text(&request.text()),
            output_tokens: answer
                .output_tokens
                .unwrap_or_else(|| tokens::estimate_text(&answer.text)),
            model: answer.model.map(|model| untrusted_line(&model, 256)),
            text: answer.text,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A `complete` of `calls` in flight (a minute to answer it), and the
    /// line it sent to `lines`.
    async fn one_call(
        calls: &Arc<ReverseCalls>,
        lines: &mut mpsc::Receiver<String>,
    ) -> (
        tokio::task::JoinHandle<Result<Box<RawValue>, CompletionError>>,
        Value,
    ) {
        let caller = calls.clone();
        let call = tokio::spawn(async move {
            let abort = tokio_util::sync::CancellationToken::new();
            let deadline = Instant::now() + std::time::Duration::from_secs(60);
            caller.call("complete", json!({}), deadline, &abort).await
        });
        let sent = lines.recv().await.expect("the call is sent");
        (call, serde_json::from_str(&sent).expect("JSON"))
    }

    #[tokio::test]
    async fn only_an_answer_to_a_call_of_ours_is_taken_and_its_result_is_kept_as_text() {
        let (outbox, mut lines) = mpsc::channel(4);
        let calls = Arc::new(ReverseCalls::new(outbox));
        // A request that merely mentions the prefix is not an answer.
        assert!(!calls.take_answer(
            r#"{"id":1,"method":"ingest","params":{"sessionId":"srv-1","messages":[]}}"#
        ));
        assert!(!calls.take_answer(r#"{"id":"srv-1","method":"complete"}"#));
        assert!(!calls.take_answer("not JSON srv-1"));

        let (call, sent) = one_call(&calls, &mut lines).await;
        let id = sent["id"].as_str().expect("a string id").to_owned();
        assert!(id.starts_with(REVERSE_ID_PREFIX), "{id}");
        let answer = format!(r#"{{"id":"{id}","result":{{"text": "a summary"}}}}"#);
        assert!(calls.take_answer(&answer));
        let result = call.await.expect("joins").expect("answered");
        assert_eq!(result.get(), r#"{"text": "a summary"}"#, "verbatim");
        // Answered once: the same answer again is for nobody, still taken.
        assert!(calls.take_answer(&answer));
    }

    #[tokio::test]
    async fn an_answer_over_the_byte_cap_is_refused_unread() {
        let (outbox, mut lines) = mpsc::channel(4);
        let calls = Arc::new(ReverseCalls::new(outbox));
        let (call, sent) = one_call(&calls, &mut lines).await;
        let text = "x".repeat(MAX_COMPLETION_ANSWER_BYTES);
        let answer = json!({"id": sent["id"], "result": {"text": text}}).to_string();
        assert!(calls.take_answer(&answer), "an answer of ours, taken");
        let error = call.await.expect("joins").expect_err("refused");
        let message = error.to_string();
        assert!(
            message.contains(&format!(
                "over the {MAX_COMPLETION_ANSWER_BYTES} an answer may take"
            )),
            "{message}"
        );
        // A large request that is no answer is left to the request path.
        let request = json!({"id": 3, "method": "ingest", "params": {"text": text}}).to_string();
        assert!(!calls.take_answer(&request));
    }
}
