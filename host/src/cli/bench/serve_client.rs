//! The benches' side of a `ctxbox serve` pipe: one connection, many
//! requests in flight, answers matched to their requests by id. The
//! server's reverse `complete` requests (an engine asking the host's model)
//! are answered at once with a short fixed text, so what a bench measures
//! is the bridge, never a model.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, DuplexStream, WriteHalf};
use tokio::sync::oneshot;

/// What a reverse `complete` is answered with.
const COMPLETION: &str = "a summary from the bench's model";

/// A client connection to an in-process server (cheap to clone).
#[derive(Clone)]
pub(super) struct Connection {
    writer: Arc<tokio::sync::Mutex<WriteHalf<DuplexStream>>>,
    waiting: Arc<Mutex<HashMap<u64, oneshot::Sender<Value>>>>,
    next: Arc<AtomicU64>,
    reverse_answered: Arc<AtomicU64>,
}

impl Connection {
    /// Reads the server's lines from `stream` on a task of its own.
    pub(super) fn open(stream: DuplexStream) -> Self {
        let (read, write) = tokio::io::split(stream);
        let connection = Self {
            writer: Arc::new(tokio::sync::Mutex::new(write)),
            waiting: Arc::default(),
            next: Arc::default(),
            reverse_answered: Arc::default(),
        };
        let reader = connection.clone();
        tokio::spawn(async move {
            let mut lines = BufReader::new(read).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                let Ok(message) = serde_json::from_str::<Value>(&line) else {
                    continue;
                };
                if message.get("method").is_some() {
                    reader.answer_reverse(&message).await;
                } else {
                    reader.deliver(message);
                }
            }
        });
        connection
    }

    /// The whole answer to `method` with `params`.
    pub(super) async fn call(&self, method: &str, params: Value) -> anyhow::Result<Value> {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let (sender, answer) = oneshot::channel();
        self.lock_waiting().insert(id, sender);
        self.write(&json!({"id": id, "method": method, "params": params}))
            .await?;
        Ok(answer.await?)
    }

    /// How many reverse `complete` requests were answered.
    pub(super) fn reverse_answered(&self) -> u64 {
        self.reverse_answered.load(Ordering::Relaxed)
    }

    /// Ends the input, so the server finishes.
    pub(super) async fn close(&self) {
        let _ = self.writer.lock().await.shutdown().await;
    }

    fn lock_waiting(&self) -> std::sync::MutexGuard<'_, HashMap<u64, oneshot::Sender<Value>>> {
        self.waiting.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn deliver(&self, answer: Value) {
        let waiter = answer["id"]
            .as_u64()
            .and_then(|id| self.lock_waiting().remove(&id));
        if let Some(waiter) = waiter {
            let _ = waiter.send(answer);
        }
    }

    /// Answers a reverse request: `complete` with [`COMPLETION`], anything
    /// else (`cancel` needs no answer) ignored.
    async fn answer_reverse(&self, request: &Value) {
        if request["method"] != "complete" {
            return;
        }
        let answer = json!({"id": request["id"], "result": {
            "text": COMPLETION, "inputTokens": 100, "outputTokens": 8, "model": "bench/none"}});
        if self.write(&answer).await.is_ok() {
            self.reverse_answered.fetch_add(1, Ordering::Relaxed);
        }
    }

    async fn write(&self, message: &Value) -> std::io::Result<()> {
        self.write_line(&message.to_string()).await
    }

    async fn write_line(&self, line: &str) -> std::io::Result<()> {
        let mut writer = self.writer.lock().await;
        writer.write_all(line.as_bytes()).await?;
        writer.write_all(b"\n").await
    }
}
