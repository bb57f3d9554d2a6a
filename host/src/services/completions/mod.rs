//! Model completions for engines (`host.complete`), bounded: [`Completions`]
//! holds the host's [`ModelCompletions`], and the one each client of the
//! embedding host chose (`ctxbox serve`: per connection, its client's own
//! model once the client says it can answer), which answers the engine
//! calls made for that client ([`ServiceCall::client`]); and the budgets
//! around them (`[completions]` in `ctxbox.toml`):
//! - per engine call: a number of completions and a number of tokens;
//! - per engine: tokens over any hour;
//! - per completion: an output cap, and the call's own deadline.
//!
//! A request past a budget is refused with `quota-exceeded` before the model
//! is asked. The hourly budget is held, not just checked: a request reserves
//! its worst case (the prompt's estimate and its output cap) before the model
//! is asked, so concurrent completions cannot each see the same tokens left;
//! the answer then settles it to the tokens measured, and a failed or
//! abandoned request gives it back ([`Reservation`]). Every completion is
//! logged with the engine, its purpose, tokens in and out and latency, and
//! counted per engine for reports.

mod extractive;

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, RwLock};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

pub use self::extractive::ExtractiveCompletions;
use crate::contract::completion::{Completion, CompletionRequest};
use crate::contract::services::{ServiceCall, ServiceError};
use crate::contract::tokens;
use crate::provider::completion::{CompletionContext, CompletionError, ModelCompletions};

/// The window of the per-engine token budget.
const HOUR: Duration = Duration::from_secs(3_600);

/// Budgets of engines' completions (`[completions]`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase", deny_unknown_fields)]
pub struct CompletionLimits {
    /// Completions one engine call may ask for.
    pub max_per_call: u32,
    /// Tokens (request and answer) one engine call's completions may take.
    pub max_tokens_per_call: u64,
    /// Tokens one engine's completions may take over any hour.
    pub max_tokens_per_hour: u64,
    /// Most tokens one answer may take (a request asking more is lowered).
    pub max_output_tokens: u32,
}

impl Default for CompletionLimits {
    fn default() -> Self {
        Self {
            max_per_call: 16,
            max_tokens_per_call: 200_000,
            max_tokens_per_hour: 2_000_000,
            max_output_tokens: 8_192,
        }
    }
}

/// What completions one engine has had.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CompletionTotals {
    /// Completions answered.
    pub completions: u64,
    /// Completions refused by a budget or failed.
    pub refused: u64,
    /// Tokens of the requests.
    pub input_tokens: u64,
    /// Tokens of the answers.
    pub output_tokens: u64,
}

impl CompletionTotals {
    /// What was had since `earlier` (a snapshot of the same totals).
    pub fn since(self, earlier: Self) -> Self {
        Self {
            completions: self.completions.saturating_sub(earlier.completions),
            refused: self.refused.saturating_sub(earlier.refused),
            input_tokens: self.input_tokens.saturating_sub(earlier.input_tokens),
            output_tokens: self.output_tokens.saturating_sub(earlier.output_tokens),
        }
    }
}

/// Engines' completions, bounded (share behind an `Arc`).
#[derive(Debug)]
pub struct Completions {
    model: RwLock<Arc<dyn ModelCompletions>>,
    /// The model of each client that chose one, by the embedding host's
    /// client id.
    client_models: RwLock<HashMap<u64, Arc<dyn ModelCompletions>>>,
    limits: CompletionLimits,
    /// Per engine: what its completions took in the last hour, and hold.
    hourly: Mutex<HashMap<String, HourLedger>>,
    totals: Mutex<HashMap<String, CompletionTotals>>,
}

impl Completions {
    /// Completions from `model` under `limits`.
    pub fn new(model: Arc<dyn ModelCompletions>, limits: CompletionLimits) -> Self {
        Self {
            model: RwLock::new(model),
            client_models: RwLock::new(HashMap::new()),
            limits,
            hourly: Mutex::new(HashMap::new()),
            totals: Mutex::new(HashMap::new()),
        }
    }

    /// Answers from `model` from now on.
    pub fn set_model(&self, model: Arc<dyn ModelCompletions>) {
        *self.model.write().unwrap_or_else(PoisonError::into_inner) = model;
    }

    /// The model answering calls made for no client, or for one that
    /// chose none.
    pub fn model(&self) -> Arc<dyn ModelCompletions> {
        self.model
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Answers the engine calls made for `client` from `model` (until
    /// [`forget_client`](Self::forget_client)); other clients keep theirs.
    pub fn set_client_model(&self, client: u64, model: Arc<dyn ModelCompletions>) {
        self.client_models
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(client, model);
    }

    /// `client` is gone: its model is dropped.
    pub fn forget_client(&self, client: u64) {
        self.client_models
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&client);
    }

    /// The model answering the engine calls made for `client`: the one it
    /// chose, else the host's.
    pub fn model_for(&self, client: Option<u64>) -> Arc<dyn ModelCompletions> {
        let chosen = client.and_then(|client| {
            self.client_models
                .read()
                .unwrap_or_else(PoisonError::into_inner)
                .get(&client)
                .cloned()
        });
        chosen.unwrap_or_else(|| self.model())
    }

    /// The budgets.
    pub fn limits(&self) -> &CompletionLimits {
        &self.limits
    }

    /// What each engine has had, by engine id.
    pub fn totals(&self) -> HashMap<String, CompletionTotals> {
        lock(&self.totals).clone()
    }

    /// What engine `engine` has had.
    pub fn totals_of(&self, engine: &str) -> CompletionTotals {
        lock(&self.totals).get(engine).copied().unwrap_or_default()
    }

    /// All engines' totals together.
    pub fn total(&self) -> CompletionTotals {
        lock(&self.totals)
            .values()
            .fold(CompletionTotals::default(), |sum, totals| {
                CompletionTotals {
                    completions: sum.completions + totals.completions,
                    refused: sum.refused + totals.refused,
                    input_tokens: sum.input_tokens + totals.input_tokens,
                    output_tokens: sum.output_tokens + totals.output_tokens,
                }
            })
    }

    /// Answers `request` for the engine call `call`, within its budgets.
    pub async fn complete(
        &self,
        call: ServiceCall<'_>,
        request: &CompletionRequest,
    ) -> Result<Completion, ServiceError> {
        let (request, reservation) = match self.admit(call, request) {
            Ok(admitted) => admitted,
            Err(error) => {
                self.count(call.engine_id, |totals| totals.refused += 1);
                return Err(error);
            }
        };
        let model = self.model_for(call.client);
        let started = Instant::now();
        // The model gets the call's time but a little: the engine must be
        // left time to answer after a model that ran out of it.
        let deadline = answer_by(call.deadline, started);
        let context = CompletionContext {
            engine_id: call.engine_id,
            session: call.session,
            request_id: call.request_id,
            deadline,
            abort: call.abort,
        };
        let answer = tokio::select! {
            biased;
            answer = model.complete(context, &request) => answer,
            () = tokio::time::sleep_until(deadline.into()) => Err(CompletionError::Aborted(
                "the model did not answer before the engine call's deadline".into(),
            )),
        };
        let latency = started.elapsed();
        match answer {
            Ok(mut completion) => {
                if completion.hold_to(request.max_tokens) {
                    tracing::warn!(
                        target: "ctxbox::completions",
                        engine = call.engine_id,
                        model = model.id(),
                        max_tokens = request.max_tokens,
                        "a completion longer than its max tokens was cut to them"
                    );
                }
                let spent = completion.input_tokens + completion.output_tokens;
                call.usage.add_completion_tokens(spent);
                reservation.settle(spent);
                self.count(call.engine_id, |totals| {
                    totals.completions += 1;
                    totals.input_tokens += completion.input_tokens;
                    totals.output_tokens += completion.output_tokens;
                });
                tracing::info!(
                    target: "ctxbox::completions",
                    engine = call.engine_id,
                    session = call.session.map_or("", |session| session.session_id.as_str()),
                    model = model.id(),
                    purpose = request.purpose.as_deref().unwrap_or(""),
                    input_tokens = completion.input_tokens,
                    output_tokens = completion.output_tokens,
                    latency_ms = latency.as_millis() as u64,
                    "engine completion"
                );
                Ok(completion)
            }
            Err(error) => {
                drop(reservation);
                self.count(call.engine_id, |totals| totals.refused += 1);
                tracing::warn!(
                    target: "ctxbox::completions",
                    engine = call.engine_id,
                    model = model.id(),
                    %error,
                    latency_ms = latency.as_millis() as u64,
                    "engine completion failed"
                );
                // The log above says why a model is unavailable.
                Err(match error {
                    CompletionError::Unavailable(_) => ServiceError::Unavailable("complete"),
                    CompletionError::Aborted(why) => ServiceError::Aborted(why),
                    CompletionError::Failed(why) => ServiceError::Failed(why),
                })
            }
        }
    }

    /// The request as it may be sent (its output lowered to the caps) and
    /// its worst case reserved of the engine's hour, or why it may not be: a
    /// per-call or per-hour budget is spent (or held by completions still
    /// running).
    fn admit(
        &self,
        call: ServiceCall<'_>,
        request: &CompletionRequest,
    ) -> Result<(CompletionRequest, Reservation<'_>), ServiceError> {
        request.check().map_err(ServiceError::InvalidArgument)?;
        let limits = &self.limits;
        let count = call.usage.count_completion();
        if count > limits.max_per_call {
            return Err(ServiceError::QuotaExceeded(format!(
                "{count} completions in one call, over completions.maxPerCall ({})",
                limits.max_per_call
            )));
        }
        let input = tokens::estimate_text(&request.text());
        let spent = call.usage.completion_tokens();
        let call_left = limits.max_tokens_per_call.saturating_sub(spent + input);
        // Checked and reserved under one lock: a concurrent request sees
        // this one's worst case as taken.
        let mut hourly = lock(&self.hourly);
        let ledger = hourly.entry(call.engine_id.to_owned()).or_default();
        let hour_left = limits
            .max_tokens_per_hour
            .saturating_sub(ledger.taken(Instant::now()) + input);
        let output = u64::from(request.max_tokens.min(limits.max_output_tokens))
            .min(call_left)
            .min(hour_left);
        if output == 0 {
            let (budget, key) = if call_left == 0 {
                (limits.max_tokens_per_call, "completions.maxTokensPerCall")
            } else {
                (limits.max_tokens_per_hour, "completions.maxTokensPerHour")
            };
            return Err(ServiceError::QuotaExceeded(format!(
                "a request of ~{input} tokens leaves nothing of the {budget}-token budget ({key})"
            )));
        }
        let held = input + output;
        ledger.reserved += held;
        drop(hourly);
        let admitted = CompletionRequest {
            max_tokens: u32::try_from(output).unwrap_or(u32::MAX),
            ..request.clone()
        };
        let reservation = Reservation {
            completions: self,
            engine: call.engine_id.to_owned(),
            held,
        };
        Ok((admitted, reservation))
    }

    fn count(&self, engine: &str, update: impl FnOnce(&mut CompletionTotals)) {
        update(lock(&self.totals).entry(engine.to_owned()).or_default());
    }
}

/// One engine's hour: the tokens its completions took, when, and the
/// worst cases of those still running.
#[derive(Debug, Default)]
struct HourLedger {
    /// (when, tokens) of its answered completions, oldest first.
    spent: VecDeque<(Instant, u64)>,
    /// Tokens reserved by completions not answered yet.
    reserved: u64,
}

impl HourLedger {
    /// Tokens taken of the hour ending at `now`: spent within it, and held.
    fn taken(&mut self, now: Instant) -> u64 {
        while self
            .spent
            .front()
            .is_some_and(|(at, _)| now.duration_since(*at) > HOUR)
        {
            self.spent.pop_front();
        }
        self.spent.iter().map(|(_, tokens)| tokens).sum::<u64>() + self.reserved
    }
}

/// A completion's worst case, held of its engine's hour while the model
/// answers: [`settle`](Self::settle)d to what the answer measured, or given
/// back when dropped unsettled (the model failed, or the call was dropped).
#[derive(Debug)]
struct Reservation<'a> {
    completions: &'a Completions,
    engine: String,
    held: u64,
}

impl Reservation<'_> {
    /// The completion took `tokens`: spent now, and the hold given back.
    fn settle(mut self, tokens: u64) {
        let mut hourly = lock(&self.completions.hourly);
        let ledger = hourly.entry(std::mem::take(&mut self.engine)).or_default();
        ledger.reserved = ledger.reserved.saturating_sub(self.held);
        ledger.spent.push_back((Instant::now(), tokens));
        self.held = 0;
    }
}

impl Drop for Reservation<'_> {
    fn drop(&mut self) {
        if self.held == 0 {
            return;
        }
        if let Some(ledger) = lock(&self.completions.hourly).get_mut(&self.engine) {
            ledger.reserved = ledger.reserved.saturating_sub(self.held);
        }
    }
}

/// Most of the time an engine call leaves the engine after its model's
/// deadline, to answer with what it has.
const ENGINE_GRACE: Duration = Duration::from_secs(1);

/// When a completion asked at `now` must be answered, for an engine call
/// due at `call_deadline`: a tenth of the time left (at most
/// [`ENGINE_GRACE`]) is kept for the engine.
fn answer_by(call_deadline: Instant, now: Instant) -> Instant {
    let left = call_deadline.saturating_duration_since(now);
    call_deadline - (left / 10).min(ENGINE_GRACE)
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

#[cfg(test)]
mod tests;
