//! What in a conversation the model did: which assistant messages were
//! answers to a model call, and which of their tool calls were run.
//!
//! OpenClaw writes assistant messages of its own that no model produced: a
//! copy of a message delivered to a channel (`provider: "openclaw"`,
//! `model: "delivery-mirror"`) and a message injected through the gateway
//! (`model: "gateway-injected"`). They are transcript entries, not model
//! calls. An answer that stopped with an error or was aborted may hold tool
//! calls (often cut off mid-stream) that were never run; the reference leaves
//! them unanswered and keeps them and any result recorded for them out of
//! later prompts (`session-transcript-repair.ts`, and pi-ai's message
//! transform).

use crate::contract::types::{AgentMessage, StopReason};

/// `provider` of the assistant messages OpenClaw itself writes.
const OPENCLAW_PROVIDER: &str = "openclaw";
/// `model`s of those messages: a copy of a delivered message, and a message
/// injected through the gateway.
const OPENCLAW_WRITTEN: [&str; 2] = ["delivery-mirror", "gateway-injected"];

/// Whether `message` is a model's answer: an assistant message that a model
/// call produced (OpenClaw's own copies and injections are not).
pub fn is_model_answer(message: &AgentMessage) -> bool {
    match message {
        AgentMessage::Assistant {
            provider, model, ..
        } => {
            !(provider.as_deref() == Some(OPENCLAW_PROVIDER)
                && model
                    .as_deref()
                    .is_some_and(|model| OPENCLAW_WRITTEN.contains(&model)))
        }
        _ => false,
    }
}

/// Whether the tool calls of `message` are run (and answered): those of an
/// assistant message that neither failed nor was aborted.
pub fn runs_its_tool_calls(message: &AgentMessage) -> bool {
    match message {
        AgentMessage::Assistant { stop_reason, .. } => {
            !matches!(stop_reason, StopReason::Error | StopReason::Aborted)
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn assistant(provider: &str, model: &str, stop_reason: StopReason) -> AgentMessage {
        AgentMessage::Assistant {
            content: Vec::new(),
            model: Some(model.into()),
            provider: Some(provider.into()),
            usage: None,
            stop_reason,
            error_message: None,
        }
    }

    #[test]
    fn openclaws_own_copies_are_no_model_answers() {
        assert!(!is_model_answer(&assistant(
            "openclaw",
            "delivery-mirror",
            StopReason::Stop
        )));
        assert!(!is_model_answer(&assistant(
            "openclaw",
            "gateway-injected",
            StopReason::Stop
        )));
        assert!(is_model_answer(&assistant(
            "bailian",
            "delivery-mirror",
            StopReason::Stop
        )));
        assert!(is_model_answer(&assistant(
            "openclaw",
            "gpt-5",
            StopReason::Stop
        )));
        assert!(is_model_answer(&AgentMessage::assistant_text("hi")));
        assert!(!is_model_answer(&AgentMessage::user_text("hi")));
    }

    #[test]
    fn failed_and_aborted_answers_run_no_tools() {
        assert!(runs_its_tool_calls(&assistant(
            "p",
            "m",
            StopReason::ToolUse
        )));
        assert!(!runs_its_tool_calls(&assistant(
            "p",
            "m",
            StopReason::Error
        )));
        assert!(!runs_its_tool_calls(&assistant(
            "p",
            "m",
            StopReason::Aborted
        )));
    }
}
