//! Overflow recovery as the reference's runner does it (issue 12), each test
//! named after the behaviour of `openclaw/openclaw` it ports:
//! `run.overflow-compaction*.test.ts` (attempt cap, truncation only with
//! oversized tool results, compaction failures, overflows reported in an
//! assistant message), `run.timeout-triggered-compaction.test.ts` and
//! `preemptive-compaction.test.ts`; the reserve rule of
//! `agent-compaction-constants`/`agent-settings`. Uses the runner module's
//! scripted provider and spying engine.

use std::sync::Arc;

use async_trait::async_trait;
use ctxbox_host::contract::tokens;
use ctxbox_host::contract::types::{AgentMessage, CompactResult, CompactionTarget, StopReason};
use ctxbox_host::provider::chat::ChatError;
use ctxbox_host::provider::{ProviderError, ToolExecutor};
use ctxbox_host::runner::{PromptPressure, Route, RunnerConfig, TurnError};
use tokio_util::sync::CancellationToken;

use crate::runner::{
    Echo, Harness, Spy, WINDOW, answer, compacted, harness, harness_sized, harness_with_tools,
    nothing_to_compact, overflow, scripted, tool_call,
};

/// Tools answering every call with `chars` characters of output.
struct LargeOutput(usize);

#[async_trait]
impl ToolExecutor for LargeOutput {
    async fn execute(&self, assistant: &AgentMessage, _: &CancellationToken) -> Vec<AgentMessage> {
        assistant
            .tool_call_ids()
            .map(|id| AgentMessage::tool_result(id, "exec", "x".repeat(self.0)))
            .collect()
    }
}

/// A harness whose tool results are `chars` characters long. For an
/// 8,192-token window one result may hold 9,828 characters.
fn with_results(
    spy: Arc<Spy>,
    provider: Arc<ctxbox_host::provider::ScriptedProvider>,
    proactive: bool,
    chars: usize,
) -> Harness {
    harness_with_tools(spy, provider, proactive, Arc::new(LargeOutput(chars)))
}

/// An answer that stopped with `error`, as streaming APIs report failures.
fn failed_answer(error: &str) -> Result<AgentMessage, ProviderError> {
    Ok(AgentMessage::Assistant {
        content: Vec::new(),
        model: Some("m".into()),
        provider: Some("p".into()),
        usage: None,
        stop_reason: StopReason::Error,
        error_message: Some(error.into()),
    })
}

fn timeout() -> Result<AgentMessage, ProviderError> {
    Err(ProviderError::Api(ChatError::Timeout))
}

fn compactions(spy: &Spy) -> Vec<ctxbox_host::contract::types::CompactParams> {
    spy.compactions.lock().expect("lock").clone()
}

/// The runtime context a compaction was given, as JSON.
fn runtime_context(params: &ctxbox_host::contract::types::CompactParams) -> serde_json::Value {
    serde_json::from_str(
        params
            .runtime_context
            .as_deref()
            .expect("a runtime context"),
    )
    .expect("JSON")
}

/// Over 65% of the 8,192-token window by the host's estimate.
fn nearly_full() -> String {
    "word ".repeat(5_000)
}

// --- run.overflow-compaction*.test.ts ---------------------------------------

#[tokio::test]
async fn failed_and_noop_compactions_count_toward_the_three_attempts() {
    // A failed compaction, then truncation (there is an oversized result),
    // then two that compact (the first really shrinks the prompt, the
    // second frees nothing and stops the progress guard): the fourth
    // overflow finds no attempt left. Truncation fits tool results to the
    // budget, giving back part of what a compaction frees, so the padding
    // goes in halves.
    let spy = Spy::padded_in_steps(
        true,
        vec![
            CompactResult::failed("summarizer unreachable"),
            compacted(),
            compacted(),
            compacted(),
        ],
        12_000,
    );
    let provider = scripted(vec![
        Ok(tool_call("c1")),
        overflow(),
        overflow(),
        overflow(),
        overflow(),
        answer(),
    ]);
    let mut harness = with_results(spy.clone(), provider.clone(), false, 20_000);
    let error = harness.turn("hi").await.expect_err("out of attempts");
    assert!(
        matches!(error, TurnError::ContextOverflow { .. }),
        "{error}"
    );
    assert_eq!(
        compactions(&spy).len(),
        3,
        "the failed one counted: {error}"
    );
    assert_eq!(provider.prompts().len(), 5);
}

#[tokio::test]
async fn a_noop_compaction_without_oversized_tool_results_ends_the_turn_without_truncating() {
    let spy = Spy::new(false, vec![nothing_to_compact(), compacted()]);
    let provider = scripted(vec![overflow(), answer()]);
    let mut harness = harness(spy.clone(), provider.clone(), false);
    let error = harness.turn("hi").await.expect_err("nothing can make room");
    assert!(
        matches!(error, TurnError::ContextOverflow { .. }),
        "{error}"
    );
    assert_eq!(compactions(&spy).len(), 1);
    assert_eq!(provider.prompts().len(), 1, "no blind truncation pass");
}

#[tokio::test]
async fn a_noop_compaction_falls_through_to_truncation_when_a_tool_result_is_oversized() {
    let spy = Spy::new(false, vec![nothing_to_compact()]);
    let provider = scripted(vec![Ok(tool_call("c1")), overflow(), answer()]);
    let mut harness = with_results(spy.clone(), provider.clone(), false, 20_000);
    let report = harness.turn("hi").await.expect("truncation makes it fit");
    assert!(report.truncated_tool_traffic);
    assert_eq!(report.compactions, 0);
    let prompts = provider.prompts();
    assert_eq!(prompts.len(), 3);
    let result_text = |prompt: &[AgentMessage]| -> usize {
        prompt
            .iter()
            .filter(|message| matches!(message, AgentMessage::ToolResult { .. }))
            .flat_map(AgentMessage::content)
            .map(|block| format!("{block:?}").len())
            .sum()
    };
    assert!(
        result_text(&prompts[2]) < result_text(&prompts[1]),
        "the retried prompt carries the result cut down"
    );
}

#[tokio::test]
async fn an_overflow_reported_in_an_assistant_error_message_is_recovered() {
    let spy = Spy::new(false, vec![compacted()]);
    let provider = scripted(vec![
        failed_answer("400 prompt is too long: 9500 tokens > 8192 maximum"),
        answer(),
    ]);
    let mut harness = harness(spy.clone(), provider.clone(), false);
    let report = harness.turn("hi").await.expect("recovers");
    assert_eq!(report.overflow_retries, 1);
    assert_eq!(report.model_calls, 2);
    let params = compactions(&spy);
    assert_eq!(params.len(), 1);
    assert!(params[0].force);
    assert_eq!(
        params[0].current_token_count,
        Some(9_500),
        "the stated count"
    );
    let prompts = provider.prompts();
    assert_eq!(prompts.len(), 2);
    assert!(
        prompts[1]
            .iter()
            .all(|message| !matches!(message, AgentMessage::Assistant { .. })),
        "the failed answer stays out of the retried prompt"
    );
    let branch = harness.session.transcript().active_branch();
    assert_eq!(branch.len(), 3, "user, the failed answer, the answer");
    assert!(matches!(
        &branch[1].message,
        AgentMessage::Assistant {
            stop_reason: StopReason::Error,
            ..
        }
    ));
}

#[tokio::test]
async fn an_assistant_overflow_nothing_can_fix_ends_the_turn_with_that_answer() {
    let spy = Spy::new(false, vec![nothing_to_compact()]);
    let provider = scripted(vec![failed_answer("maximum context length is 8192 tokens")]);
    let mut harness = harness(spy.clone(), provider.clone(), false);
    let report = harness.turn("hi").await.expect("surfaced, not an error");
    assert_eq!(report.overflow_retries, 1);
    assert_eq!(compactions(&spy).len(), 1);
    assert_eq!(provider.prompts().len(), 1, "not asked again");
    let branch = harness.session.transcript().active_branch();
    assert!(matches!(
        &branch.last().expect("entries").message,
        AgentMessage::Assistant {
            stop_reason: StopReason::Error,
            ..
        }
    ));
}

#[tokio::test]
async fn an_assistant_overflow_without_a_count_is_taken_as_one_over_the_window() {
    let spy = Spy::new(false, vec![compacted()]);
    let provider = scripted(vec![failed_answer("request_too_large"), answer()]);
    let mut harness = harness(spy.clone(), provider, false);
    harness.turn("hi").await.expect("recovers");
    assert_eq!(compactions(&spy)[0].current_token_count, Some(WINDOW + 1));
}

#[tokio::test]
async fn a_summarization_request_too_large_answer_ends_the_turn_as_a_compaction_failure() {
    let spy = Spy::new(false, vec![compacted()]);
    let provider = scripted(vec![
        failed_answer("Summarization failed: request_too_large"),
        answer(),
    ]);
    let mut harness = harness(spy.clone(), provider.clone(), false);
    let error = harness.turn("hi").await.expect_err("a compaction failure");
    assert!(
        matches!(error, TurnError::CompactionFailed { .. }),
        "{error}"
    );
    assert_eq!(error.kind(), "compaction_failure");
    assert_eq!(error.liveness(), Some("blocked"));
    assert!(error.to_string().contains("request_too_large"), "{error}");
    assert!(
        compactions(&spy).is_empty(),
        "no compaction: compacting is what failed"
    );
    assert_eq!(provider.prompts().len(), 1, "not asked again");
    let branch = harness.session.transcript().active_branch();
    assert!(
        matches!(
            &branch.last().expect("entries").message,
            AgentMessage::Assistant {
                stop_reason: StopReason::Error,
                ..
            }
        ),
        "the failed answer is kept"
    );
}

#[tokio::test]
async fn a_summarization_request_too_large_error_truncates_oversized_results_once_then_is_a_compaction_failure()
 {
    let spy = Spy::new(false, vec![compacted()]);
    let too_large = || {
        Err(ProviderError::Api(ChatError::Rejected {
            status: 400,
            message: "summarization failed: 400 request_too_large".into(),
        }))
    };
    let provider = scripted(vec![
        Ok(tool_call("c1")),
        too_large(),
        too_large(),
        answer(),
    ]);
    let mut harness = with_results(spy.clone(), provider.clone(), false, 20_000);
    let error = harness.turn("hi").await.expect_err("a compaction failure");
    assert_eq!(error.kind(), "compaction_failure", "{error}");
    assert!(compactions(&spy).is_empty(), "no compaction");
    assert_eq!(
        provider.prompts().len(),
        3,
        "asked again once, with the oversized result truncated"
    );
}

// --- run.timeout-triggered-compaction.test.ts -------------------------------

#[tokio::test]
async fn a_timeout_on_a_nearly_full_prompt_compacts_and_retries() {
    let spy = Spy::new(false, vec![compacted()]);
    let provider = scripted(vec![timeout(), answer()]);
    let mut harness = harness(spy.clone(), provider.clone(), false);
    let report = harness.turn(&nearly_full()).await.expect("retried");
    assert_eq!(report.compactions, 1);
    assert_eq!(report.overflow_retries, 0, "a timeout is no overflow");
    let params = compactions(&spy);
    assert_eq!(params.len(), 1);
    assert!(params[0].force);
    assert_eq!(params[0].compaction_target, CompactionTarget::Budget);
    let context = runtime_context(&params[0]);
    assert_eq!(context["trigger"], "timeout_recovery");
    assert_eq!(
        (context["attempt"].as_u64(), context["maxAttempts"].as_u64()),
        (Some(1), Some(2))
    );
    assert_eq!(provider.prompts().len(), 2);
}

#[tokio::test]
async fn a_timeout_on_a_small_prompt_is_not_compacted() {
    let spy = Spy::new(false, vec![compacted()]);
    let provider = scripted(vec![timeout(), answer()]);
    let mut harness = harness(spy.clone(), provider.clone(), false);
    let error = harness.turn("hi").await.expect_err("the timeout ends it");
    assert!(
        matches!(error, TurnError::Provider(ref e) if e.is_timeout()),
        "{error}"
    );
    assert!(compactions(&spy).is_empty());
}

#[tokio::test]
async fn a_timeout_compaction_that_changes_nothing_falls_through_to_the_timeout() {
    let spy = Spy::new(false, vec![nothing_to_compact()]);
    let provider = scripted(vec![timeout(), answer()]);
    let mut harness = harness(spy.clone(), provider.clone(), false);
    let error = harness.turn(&nearly_full()).await.expect_err("timeout");
    assert!(matches!(error, TurnError::Provider(ref e) if e.is_timeout()));
    assert_eq!(compactions(&spy).len(), 1);
    assert_eq!(provider.prompts().len(), 1);
}

#[tokio::test]
async fn at_most_two_timeout_compactions_a_turn() {
    let spy = Spy::padded(true, vec![compacted(), compacted(), compacted()]);
    let provider = scripted(vec![timeout(), timeout(), timeout(), answer()]);
    let mut harness = harness(spy.clone(), provider.clone(), false);
    let error = harness.turn(&nearly_full()).await.expect_err("timeout");
    assert!(matches!(error, TurnError::Provider(ref e) if e.is_timeout()));
    assert_eq!(compactions(&spy).len(), 2);
    assert_eq!(provider.prompts().len(), 3);
}

#[tokio::test]
async fn a_failed_timeout_compaction_uses_its_attempt_and_the_timeout_ends_the_turn() {
    let spy = Spy::new(false, vec![CompactResult::failed("summarizer unreachable")]);
    let provider = scripted(vec![timeout(), answer()]);
    let mut harness = harness(spy.clone(), provider.clone(), false);
    let error = harness.turn(&nearly_full()).await.expect_err("timeout");
    assert!(
        matches!(error, TurnError::Provider(ref e) if e.is_timeout()),
        "{error}"
    );
    let params = compactions(&spy);
    assert_eq!(params.len(), 1, "asked once");
    let context = runtime_context(&params[0]);
    assert_eq!(
        (context["trigger"].as_str(), context["attempt"].as_u64()),
        (Some("timeout_recovery"), Some(1)),
        "the failed compaction was the turn's first timeout attempt"
    );
    assert_eq!(provider.prompts().len(), 1, "not asked again");
}

// --- preemptive-compaction.test.ts ------------------------------------------

#[tokio::test]
async fn the_pre_prompt_check_compacts_only_when_no_tool_result_is_oversized() {
    let spy = Spy::new(false, vec![compacted()]);
    let provider = scripted(vec![answer()]);
    let mut harness = harness(spy.clone(), provider, true);
    let report = harness.turn(&"word ".repeat(8_000)).await.expect("turn");
    assert_eq!(compactions(&spy).len(), 1);
    assert!(!report.truncated_tool_traffic);
}

#[tokio::test]
async fn the_pre_prompt_check_truncates_only_when_that_clears_the_excess() {
    // A 32k window: a 24,576-token budget, one result may hold 16,000
    // characters. A prose history, then a tool result sized so the
    // pre-prompt estimate (weighted: the result at two characters a token;
    // × 1.2) is about 60 tokens over the budget, with more than 2,288
    // characters over the one-result cap: the excess at four characters a
    // token plus 512 tokens, and more than 1.5 times it.
    let history: Vec<AgentMessage> = (0..7)
        .flat_map(|turn| {
            [
                AgentMessage::user_text(format!("{turn} {}", "words ".repeat(1_000))),
                AgentMessage::assistant_text("noted"),
            ]
        })
        .collect();
    let budget = 32_768 - 8_192;
    let estimate = |chars: usize| -> u64 {
        let mut prompt = history.clone();
        prompt.push(AgentMessage::user_text("hi"));
        prompt.push(tool_call("c1"));
        prompt.push(AgentMessage::tool_result("c1", "exec", "x".repeat(chars)));
        let weighted = tokens::MESSAGE_OVERHEAD_TOKENS
            + tokens::estimate_text("be brief")
            + prompt.iter().map(tokens::pressure_message).sum::<u64>();
        (weighted as f64 * tokens::PRE_PROMPT_SAFETY_FACTOR).ceil() as u64
    };
    let chars = (16_000..40_000)
        .step_by(2)
        .find(|&chars| estimate(chars) >= budget + 60)
        .expect("a size just over the budget");
    assert!(
        chars >= 16_000 + 2_288,
        "{chars} characters leave too little to cut"
    );

    let spy = Spy::new(false, vec![compacted()]);
    let provider = scripted(vec![Ok(tool_call("c1")), answer()]);
    let mut harness = harness_sized(
        spy.clone(),
        provider.clone(),
        true,
        Arc::new(LargeOutput(chars)),
        32_768,
    );
    for pair in history.chunks(2) {
        harness.session.transcript().append(pair).expect("history");
    }
    let report = harness.turn("hi").await.expect("turn");
    assert!(compactions(&spy).is_empty(), "no compaction");
    assert!(report.truncated_tool_traffic);
    assert_eq!(report.overflow_retries, 0);
}

#[tokio::test]
async fn the_pre_prompt_check_compacts_then_truncates_when_truncation_alone_falls_short() {
    let spy = Spy::new(false, vec![compacted()]);
    let provider = scripted(vec![Ok(tool_call("c1")), answer()]);
    let mut harness = with_results(spy.clone(), provider.clone(), true, 60_000);
    let report = harness.turn("hi").await.expect("turn");
    assert_eq!(compactions(&spy).len(), 1);
    assert!(report.truncated_tool_traffic);
}

/// A harness on a `window`-token model whose history is `turns` turns of
/// about 1,350 weighted tokens each, and no compaction to give.
fn with_prose_history(spy: &Arc<Spy>, window: u64, turns: usize) -> Harness {
    let mut harness = harness_sized(
        spy.clone(),
        scripted(vec![answer()]),
        true,
        Arc::new(Echo),
        window,
    );
    for turn in 0..turns {
        harness
            .append_turn(&format!("{turn} {}", "words ".repeat(900)))
            .expect("history");
    }
    harness
}

#[tokio::test]
async fn the_pre_prompt_budget_on_16k_and_32k_windows_with_a_20k_reserve_is_three_quarters() {
    // OpenClaw 2026.9.6 holds the precheck to the window minus the reserve
    // capped at a quarter of the window (`resolveEffectiveCompactionReserveTokens`).
    // An earlier revision kept only min(8,000, half the window) for the
    // prompt (8,000 on both windows here, 12,768 on 32k): these prompts,
    // over those, fit.
    for (window, turns, budget, earlier_budget) in
        [(16_384, 6, 12_288, 8_000), (32_768, 14, 24_576, 12_768)]
    {
        let spy = Spy::new(false, Vec::new());
        let mut harness = with_prose_history(&spy, window, turns);
        let report = harness.turn("hi").await.expect("turn");
        let check = &report.pre_prompt_checks[0];
        assert_eq!(check.prompt_budget, budget, "{window}");
        assert!(
            (earlier_budget..budget).contains(&check.estimated_prompt_tokens),
            "{window}: {check:?}"
        );
        assert_eq!((check.route, check.overflow_tokens), (Route::Fits, 0));
        assert!(compactions(&spy).is_empty(), "{window}");
    }
}

#[tokio::test]
async fn a_callers_own_prompt_count_decides_the_check_and_is_named() {
    // Over the 6,144-token budget by the caller's count, though the host's
    // estimate of "hi" is tiny: compacted, the caller's figure as the
    // current token count.
    let spy = Spy::new(false, vec![compacted()]);
    let mut short = harness(spy.clone(), scripted(vec![answer()]), true);
    short.session.set_prompt_pressure(PromptPressure {
        tokens: 7_000,
        source: "tiktoken".into(),
    });
    let report = short.turn("hi").await.expect("turn");
    let check = &report.pre_prompt_checks[0];
    assert_eq!(
        (check.route, check.pressure_source.as_str()),
        (Route::CompactOnly, "tiktoken")
    );
    assert_eq!(
        (check.estimated_prompt_tokens, check.overflow_tokens),
        (7_000, 856)
    );
    assert_eq!(compactions(&spy)[0].current_token_count, Some(7_000));

    // Under it by the caller's count, though the host estimates it over:
    // not compacted.
    let spy = Spy::new(false, vec![compacted()]);
    let mut full = harness(spy.clone(), scripted(vec![answer()]), true);
    full.session.set_prompt_pressure(PromptPressure {
        tokens: 3_000,
        source: String::new(),
    });
    let report = full.turn(&nearly_full()).await.expect("turn");
    let check = &report.pre_prompt_checks[0];
    assert_eq!(
        (check.route, check.pressure_source.as_str()),
        (Route::Fits, "caller")
    );
    assert!(compactions(&spy).is_empty());
}

#[tokio::test]
async fn a_callers_prompt_count_weighs_one_check_only() {
    let spy = Spy::new(false, Vec::new());
    let provider = scripted(vec![Ok(tool_call("c1")), answer(), answer()]);
    let mut harness = harness(spy.clone(), provider, true);
    harness.session.set_prompt_pressure(PromptPressure {
        tokens: 100,
        source: "tiktoken".into(),
    });
    let report = harness.turn("hi").await.expect("turn");
    let sources: Vec<&str> = report
        .pre_prompt_checks
        .iter()
        .map(|check| check.pressure_source.as_str())
        .collect();
    assert_eq!(sources.len(), 2, "one check before each model call");
    assert_eq!(sources[0], "tiktoken");
    assert!(sources[1].ends_with("_estimate"), "{sources:?}");
    let next = harness.turn("again").await.expect("turn");
    assert!(
        next.pre_prompt_checks[0]
            .pressure_source
            .ends_with("_estimate")
    );
}

#[tokio::test]
async fn pre_prompt_compactions_count_toward_the_three_attempts() {
    // The pre-prompt compaction (native, of a long history) is the first
    // attempt: the overflow after it is the second. That one frees little
    // (the first left little worth compacting), so the progress guard
    // stops there and the turn ends saying so.
    let spy = Spy::new(false, Vec::new());
    let provider = scripted(vec![overflow(), overflow(), overflow(), answer()]);
    let mut harness = harness(spy.clone(), provider.clone(), true);
    spy.compact_natively(harness.store());
    for turn in 0..30 {
        harness
            .append_turn(&format!("{turn} {}", "words ".repeat(200)))
            .expect("history");
    }
    let error = harness.turn("hi").await.expect_err("out of room");
    assert!(
        matches!(error, TurnError::ContextOverflow { .. }),
        "{error}"
    );
    let params = compactions(&spy);
    assert_eq!(params.len(), 2, "{error}");
    let attempt = |index: usize| -> serde_json::Value {
        serde_json::from_str::<serde_json::Value>(
            params[index].runtime_context.as_deref().expect("context"),
        )
        .expect("JSON")["attempt"]
            .clone()
    };
    assert_eq!((attempt(0), attempt(1)), (1.into(), 2.into()));
    assert!(error.to_string().contains("compaction stopped"), "{error}");
    // The second frees too little to be worth a third: asked once more,
    // refused, and the guard has stopped.
    assert_eq!(provider.prompts().len(), 2);
}

// --- agent-compaction-constants / agent-settings ----------------------------

#[test]
fn the_reserve_is_at_least_twenty_thousand_tokens_and_at_most_a_quarter_of_the_window() {
    let config = |window, reserve_tokens| RunnerConfig {
        window,
        reserve_tokens,
        proactive_compaction: true,
        system_prompt: String::new(),
        model: None,
        tools: Vec::new(),
        compaction_window: None,
        agent: Default::default(),
    };
    assert_eq!(config(200_000, 16_384).reserve(), 20_000);
    assert_eq!(config(200_000, 16_384).prompt_budget(), 180_000);
    assert_eq!(config(128_000, 40_000).reserve(), 32_000);
    assert_eq!(config(16_384, 16_384).reserve(), 4_096);
    // A 20,000-token reserve on the small windows the issue names.
    assert_eq!(
        (
            config(16_384, 20_000).reserve(),
            config(16_384, 20_000).prompt_budget()
        ),
        (4_096, 12_288)
    );
    assert_eq!(
        (
            config(32_768, 20_000).reserve(),
            config(32_768, 20_000).prompt_budget()
        ),
        (8_192, 24_576)
    );
}
