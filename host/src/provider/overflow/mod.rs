//! Context-overflow errors: telling one from the other errors a model call
//! can end with, wherever it is reported — an HTTP error's message, or the
//! `errorMessage` of an assistant message that stopped with
//! `stopReason: "error"` (how streaming APIs and OpenClaw's recordings report
//! it) — and the token counts it states ([`counts`]).
//!
//! The rules follow the reference's classifier (`failover/classify`,
//! `utils/overflow`): an explicit overflow wording is an overflow unless the
//! message is about rate limiting ("tokens per minute", "too many requests")
//! or a reasoning constraint; and an overflow wording inside a report of a
//! failed *compaction* ("summarization failed: request_too_large") is not an
//! overflow of the model's prompt: the summarizer's own request was too
//! large, and compacting again to recover from it would only repeat it.

mod counts;

use std::sync::LazyLock;

use regex::Regex;

pub use self::counts::{Stated, stated};
use crate::contract::types::{AgentMessage, StopReason};

/// Wordings APIs use for a prompt over the model's window (OpenAI, vLLM,
/// llama.cpp, Anthropic, Gemini, Mistral, Groq, xAI, Together, LM Studio,
/// Kimi, z.ai, Ollama, Bedrock, Chinese-language gateways).
static OVERFLOW_WORDINGS: LazyLock<Regex> = LazyLock::new(|| {
    any_of(&[
        r"request_too_large",
        r"context[_ ]overflow",
        r"context[_ ]length[_ ]exceeded",
        r"context[_ ]window[_ ]exceeded",
        r"model_context_window_exceeded",
        r"maximum context length",
        r"prompt is too long",
        r"prompt too long",
        r"prompt exceeds max(imum)? length",
        r"maximum prompt length is \d+",
        r"request exceeds the maximum size",
        r"request size exceeds[\s\S]*context window",
        r"exceeds (the )?(model'?s )?context window",
        r"context window exceeds limit",
        r"exceeds the model'?s maximum context",
        r"exceeds? (the )?available context size",
        r"context size has been exceeded",
        r"greater than the context length",
        r"longer than (the )?model'?s context length",
        r"input (is )?too long for (the |this |requested )?model",
        r"input token count[\s\S]*exceeds the maximum",
        r"input exceeds[\s\S]*maximum number of tokens",
        r"input length[\s\S]*exceeds? (the )?(context|model limit)",
        r"max_tokens`?[\s\S]*exceed[\s\S]*context",
        r"exceed context limit",
        r"reduce the length of the messages",
        r"too large for model with \d+ maximum context length",
        r"model token limit",
        r"token limit exceeded",
        r"tokens? in request more than max tokens? allowed",
        r"too many tokens",
        r"prompt has [\d,]+ tokens?, but the configured context size is",
        r"^413\b[\s\S]*(too large|no body)",
        r"上下文过长|上下文超出|上下文长度超|超出最大上下文|请压缩上下文",
    ])
});

/// Messages that mention tokens or size but are not about the window: rate
/// limits (Bedrock's throttling says "Too many tokens, please wait"),
/// per-minute token quotas, reasoning that cannot be turned off, and a window
/// too small to run in at all.
static NOT_OVERFLOW: LazyLock<Regex> = LazyLock::new(|| {
    any_of(&[
        r"rate limit",
        r"too many requests",
        r"\btpm\b",
        r"tokens per (minute|day)",
        r"requests per (minute|hour|day)",
        r"throttl",
        r"reasoning is (mandatory|required)",
        r"requires reasoning",
        r"context window[\s\S]*(too small|minimum is)",
    ])
});

/// Words naming a compaction of the conversation (the summarizer's work).
static COMPACTION: LazyLock<Regex> =
    LazyLock::new(|| any_of(&[r"summari[sz]ation failed", r"compaction"]));

fn any_of(wordings: &[&str]) -> Regex {
    Regex::new(&format!("(?i)(?:{})", wordings.join("|")))
        .expect("the overflow wordings are valid patterns")
}

/// Whether `message` says the prompt was larger than the model's window.
/// A failed compaction's report is not ([`is_compaction_failure`]).
pub fn is_context_overflow(message: &str) -> bool {
    names_an_overflow(message) && !is_compaction_failure(message)
}

/// Whether `message` reports a compaction that failed because its own
/// request overflowed (the reference's `isCompactionFailureError`): it names
/// a compaction and an overflow.
pub fn is_compaction_failure(message: &str) -> bool {
    COMPACTION.is_match(message) && names_an_overflow(message)
}

fn names_an_overflow(message: &str) -> bool {
    OVERFLOW_WORDINGS.is_match(message) && !NOT_OVERFLOW.is_match(message)
}

/// The overflow an assistant message reports: its `errorMessage` when it
/// stopped with an error and that error is a context overflow.
pub fn reported_by(message: &AgentMessage) -> Option<&str> {
    error_of(message).filter(|error| is_context_overflow(error))
}

/// The compaction failure an assistant message reports: its
/// `errorMessage` when it stopped with an error and that error is a
/// compaction's own overflow ([`is_compaction_failure`]).
pub fn compaction_failure_reported_by(message: &AgentMessage) -> Option<&str> {
    error_of(message).filter(|error| is_compaction_failure(error))
}

fn error_of(message: &AgentMessage) -> Option<&str> {
    match message {
        AgentMessage::Assistant {
            stop_reason: StopReason::Error,
            error_message: Some(error),
            ..
        } => Some(error),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_wordings_of_common_apis_are_overflows() {
        for message in [
            "400 This model's maximum context length is 131072 tokens. However, you requested 170072 tokens (170072 in the messages, 0 in the completion).",
            "prompt is too long: 210000 tokens > 200000 maximum",
            "request_too_large",
            "Error: request_too_large occurred",
            "request (9000 tokens) exceeds the available context size (8192 tokens), try increasing it",
            "The input token count (1200000) exceeds the maximum number of tokens allowed (1048576).",
            "Prompt contains 140000 tokens and 0 draft tokens, too large for model with 131072 maximum context length",
            "Please reduce the length of the messages or completion.",
            "The input (140000 tokens) is longer than the model's context length (131072 tokens).",
            "exceeded model token limit: 262144 (requested: 270000)",
            "413 (no body)",
            "上下文长度超过限制",
        ] {
            assert!(is_context_overflow(message), "{message}");
        }
    }

    #[test]
    fn rate_limits_and_other_errors_are_not_overflows() {
        for message in [
            "ThrottlingException: Too many tokens, please wait before trying again.",
            "Rate limit reached for tokens per minute (TPM): limit 30000, requested 42000",
            "429 Too Many Requests",
            "unknown model gpt-9",
            "Reasoning is mandatory for this endpoint and cannot be disabled",
            "context window too small: minimum is 16000 tokens",
            "the chat API did not answer in time",
        ] {
            assert!(!is_context_overflow(message), "{message}");
        }
    }

    #[test]
    fn a_summarization_request_too_large_is_a_compaction_failure_not_an_overflow() {
        for message in [
            "Summarization failed: request_too_large",
            "auto-compaction failed: prompt is too long: 250000 tokens > 200000 maximum",
            "Compaction failed: context overflow: the summary request exceeds the context window",
        ] {
            assert!(is_compaction_failure(message), "{message}");
            assert!(!is_context_overflow(message), "{message}");
        }
        assert!(!is_compaction_failure("compaction failed: disk full"));
    }

    #[test]
    fn an_assistant_error_message_reports_an_overflow_only_when_it_stopped_with_one() {
        let failed = |stop_reason, error: &str| AgentMessage::Assistant {
            content: Vec::new(),
            model: None,
            provider: None,
            usage: None,
            stop_reason,
            error_message: Some(error.to_owned()),
        };
        let overflow = "400 This model's maximum context length is 8192 tokens.";
        assert_eq!(
            reported_by(&failed(StopReason::Error, overflow)),
            Some(overflow)
        );
        assert_eq!(
            reported_by(&failed(StopReason::Error, "Request was aborted.")),
            None
        );
        assert_eq!(reported_by(&failed(StopReason::Stop, overflow)), None);
        assert_eq!(
            reported_by(&failed(
                StopReason::Error,
                "Summarization failed: request_too_large"
            )),
            None
        );
        assert_eq!(reported_by(&AgentMessage::assistant_text("fine")), None);
    }
}
