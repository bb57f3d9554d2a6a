//! The budgets around engines' completions.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::*;
use crate::contract::services::CallScratch;
use crate::provider::completion::NoModel;
use async_trait::async_trait;

/// Answers `ok` at once, counting 100 tokens in and `max_tokens` out.
#[derive(Debug)]
struct Echo;

#[async_trait]
impl ModelCompletions for Echo {
    fn id(&self) -> &str {
        "echo"
    }

    async fn complete(
        &self,
        _context: CompletionContext<'_>,
        request: &CompletionRequest,
    ) -> Result<Completion, CompletionError> {
        Ok(Completion {
            text: "ok".into(),
            input_tokens: 100,
            output_tokens: u64::from(request.max_tokens),
            model: None,
        })
    }
}

/// Never answers.
#[derive(Debug)]
struct Silent;

#[async_trait]
impl ModelCompletions for Silent {
    fn id(&self) -> &str {
        "silent"
    }

    async fn complete(
        &self,
        _context: CompletionContext<'_>,
        _request: &CompletionRequest,
    ) -> Result<Completion, CompletionError> {
        std::future::pending().await
    }
}

struct Call {
    scratch: CallScratch,
    deadline: Instant,
}

impl Call {
    fn new(deadline: Duration) -> Self {
        Self {
            scratch: CallScratch::default(),
            deadline: Instant::now() + deadline,
        }
    }

    fn service_call<'a>(&'a self, engine: &'a str) -> ServiceCall<'a> {
        self.scratch.call(engine, None, self.deadline)
    }
}

fn limits() -> CompletionLimits {
    CompletionLimits {
        max_per_call: 2,
        max_tokens_per_call: 1_000,
        max_tokens_per_hour: 1_500,
        max_output_tokens: 300,
    }
}

#[tokio::test]
async fn a_call_gets_its_count_and_the_answer_its_output_cap() {
    let completions = Completions::new(Arc::new(Echo), limits());
    let call = Call::new(Duration::from_secs(5));
    let first = completions
        .complete(
            call.service_call("e"),
            &CompletionRequest::prompt("hi", 10_000),
        )
        .await
        .expect("answered");
    assert_eq!(first.output_tokens, 300, "lowered to maxOutputTokens");
    completions
        .complete(call.service_call("e"), &CompletionRequest::prompt("hi", 10))
        .await
        .expect("answered");
    let third = completions
        .complete(call.service_call("e"), &CompletionRequest::prompt("hi", 10))
        .await
        .expect_err("over the count");
    assert!(matches!(third, ServiceError::QuotaExceeded(_)), "{third}");
    assert!(third.to_string().contains("completions.maxPerCall"));
    let totals = completions.totals()["e"];
    assert_eq!((totals.completions, totals.refused), (2, 1));
    assert_eq!(totals.output_tokens, 310);
}

#[tokio::test]
async fn the_hourly_budget_is_per_engine() {
    let completions = Completions::new(Arc::new(Echo), limits());
    // Each call spends about 400 of the engine's 1,500 tokens an hour.
    let mut refused = None;
    for attempt in 0..6 {
        let call = Call::new(Duration::from_secs(5));
        if let Err(error) = completions
            .complete(
                call.service_call("greedy"),
                &CompletionRequest::prompt("hi", 300),
            )
            .await
        {
            refused = Some((attempt, error));
            break;
        }
    }
    let (attempt, error) = refused.expect("the hour's tokens run out");
    assert!((3..6).contains(&attempt), "refused at attempt {attempt}");
    assert!(error.to_string().contains("maxTokensPerHour"), "{error}");
    let call = Call::new(Duration::from_secs(5));
    completions
        .complete(
            call.service_call("other"),
            &CompletionRequest::prompt("hi", 300),
        )
        .await
        .expect("another engine has its own budget");
}

#[tokio::test]
async fn a_silent_model_ends_at_the_calls_deadline_and_a_missing_one_is_unavailable() {
    let completions = Completions::new(Arc::new(Silent), limits());
    let call = Call::new(Duration::from_millis(50));
    let error = completions
        .complete(call.service_call("e"), &CompletionRequest::prompt("hi", 10))
        .await
        .expect_err("timed out");
    assert!(matches!(error, ServiceError::Aborted(_)), "{error}");

    completions.set_model(Arc::new(NoModel("no client model".into())));
    let call = Call::new(Duration::from_secs(5));
    let error = completions
        .complete(call.service_call("e"), &CompletionRequest::prompt("hi", 10))
        .await
        .expect_err("unavailable");
    assert!(matches!(error, ServiceError::Unavailable(_)), "{error}");
}

#[tokio::test]
async fn offline_completions_summarize_the_request() {
    let completions =
        Completions::new(Arc::new(ExtractiveCompletions), CompletionLimits::default());
    let call = Call::new(Duration::from_secs(5));
    let request = CompletionRequest::prompt(
        "The user asked to keep every test. We decided to use SQLite for the cache.",
        200,
    );
    let completion = completions
        .complete(call.service_call("e"), &request)
        .await
        .expect("answered");
    assert!(completion.text.contains("SQLite"), "{}", completion.text);
    assert!(completion.output_tokens <= 200);
}

/// Answers as [`Echo`] does, after a while: completions overlap.
#[derive(Debug)]
struct SlowEcho;

#[async_trait]
impl ModelCompletions for SlowEcho {
    fn id(&self) -> &str {
        "slow-echo"
    }

    async fn complete(
        &self,
        context: CompletionContext<'_>,
        request: &CompletionRequest,
    ) -> Result<Completion, CompletionError> {
        tokio::time::sleep(Duration::from_millis(300)).await;
        Echo.complete(context, request).await
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_completions_reserve_the_hour_before_the_model_is_asked() {
    let completions = Arc::new(Completions::new(Arc::new(SlowEcho), limits()));
    let mut running = tokio::task::JoinSet::new();
    for _ in 0..30 {
        let completions = completions.clone();
        running.spawn(async move {
            let call = Call::new(Duration::from_secs(30));
            completions
                .complete(
                    call.service_call("e"),
                    &CompletionRequest::prompt("hi", 300),
                )
                .await
                .is_ok()
        });
    }
    let answered = running
        .join_all()
        .await
        .into_iter()
        .filter(|answered| *answered)
        .count();
    // 1,500 tokens an hour hold five worst cases of ~301 tokens at most
    // (the fifth lowered to what is left); without reservations all 30
    // saw the hour untouched.
    assert!((1..=5).contains(&answered), "{answered} answered");
    let totals = completions.totals()["e"];
    assert_eq!(totals.refused as usize, 30 - answered);
}

#[tokio::test]
async fn a_failed_completion_gives_its_reservation_back() {
    let completions = Completions::new(Arc::new(Silent), limits());
    // Each times out: nothing was spent, so nothing stays held.
    for _ in 0..8 {
        let call = Call::new(Duration::from_millis(20));
        let error = completions
            .complete(
                call.service_call("e"),
                &CompletionRequest::prompt("hi", 300),
            )
            .await
            .expect_err("timed out");
        assert!(matches!(error, ServiceError::Aborted(_)), "{error}");
    }
    completions.set_model(Arc::new(Echo));
    let call = Call::new(Duration::from_secs(5));
    let answer = completions
        .complete(
            call.service_call("e"),
            &CompletionRequest::prompt("hi", 300),
        )
        .await
        .expect("the hour is untouched");
    assert_eq!(answer.output_tokens, 300, "the whole output cap was left");
}
