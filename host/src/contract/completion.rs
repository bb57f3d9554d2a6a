//! Model completions an engine asks the host for (`host.complete` in
//! `wit/host.wit`): the request and the answer, and the rules a request
//! must keep before the host spends anything on it.

use serde::{Deserialize, Serialize};

/// Most messages one request may carry.
pub const MAX_COMPLETION_MESSAGES: usize = 256;
/// Most bytes of text (messages and system prompt) one request may carry.
pub const MAX_COMPLETION_REQUEST_BYTES: usize = 1024 * 1024;
/// Most bytes an answer from outside the host (the sidecar's client) may
/// take, as it comes: a larger one is refused before it is read.
pub const MAX_COMPLETION_ANSWER_BYTES: usize = 1024 * 1024;

/// Who speaks a message of a completion request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CompletionRole {
    /// Instructions.
    System,
    /// The asker.
    User,
    /// The model, earlier.
    Assistant,
}

impl CompletionRole {
    /// Its name in chat APIs.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::System => "system",
            Self::User => "user",
            Self::Assistant => "assistant",
        }
    }
}

/// One message of a completion request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CompletionMessage {
    /// Who says it.
    pub role: CompletionRole,
    /// What is said.
    pub text: String,
}

/// What an engine asks the host's model.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CompletionRequest {
    /// The conversation to complete, oldest first.
    pub messages: Vec<CompletionMessage>,
    /// Instructions before the messages.
    pub system: Option<String>,
    /// Most tokens the answer may take.
    pub max_tokens: u32,
    /// What the completion is for, in a few words.
    pub purpose: Option<String>,
}

impl CompletionRequest {
    /// A request of one user message.
    pub fn prompt(text: impl Into<String>, max_tokens: u32) -> Self {
        Self {
            messages: vec![CompletionMessage {
                role: CompletionRole::User,
                text: text.into(),
            }],
            system: None,
            max_tokens,
            purpose: None,
        }
    }

    /// Bytes of text it carries.
    pub fn text_bytes(&self) -> usize {
        self.system.as_ref().map_or(0, String::len)
            + self
                .messages
                .iter()
                .map(|message| message.text.len())
                .sum::<usize>()
    }

    /// All of its text, for estimates and offline answers: the system
    /// prompt, then each message on its own paragraph.
    pub fn text(&self) -> String {
        let mut text = String::with_capacity(self.text_bytes() + 2 * self.messages.len());
        for part in self
            .system
            .iter()
            .chain(self.messages.iter().map(|message| &message.text))
        {
            if !text.is_empty() {
                text.push_str("\n\n");
            }
            text.push_str(part);
        }
        text
    }

    /// Why the request cannot be sent, if it cannot.
    pub fn check(&self) -> Result<(), String> {
        if self.messages.is_empty() {
            return Err("a completion request needs at least one message".into());
        }
        if self.messages.len() > MAX_COMPLETION_MESSAGES {
            return Err(format!(
                "{} messages, more than the {MAX_COMPLETION_MESSAGES} a request may carry",
                self.messages.len()
            ));
        }
        if self.max_tokens == 0 {
            return Err("max-tokens must be at least 1".into());
        }
        let bytes = self.text_bytes();
        if bytes > MAX_COMPLETION_REQUEST_BYTES {
            return Err(format!(
                "the request carries {bytes} bytes of text, more than {MAX_COMPLETION_REQUEST_BYTES}"
            ));
        }
        Ok(())
    }
}

/// The model's answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Completion {
    /// The answer's text.
    pub text: String,
    /// Tokens of the request.
    pub input_tokens: u64,
    /// Tokens of the answer.
    pub output_tokens: u64,
    /// The model that answered, when known.
    pub model: Option<String>,
}

impl Completion {
    /// Holds the answer to `max_tokens` as the host's estimator counts them,
    /// whatever the model claims: text past them is cut, and the output is
    /// counted as at least the estimate of what is kept, at most
    /// `max_tokens`. Answers whether text was cut.
    pub fn hold_to(&mut self, max_tokens: u32) -> bool {
        let max_tokens = u64::from(max_tokens);
        let kept = crate::contract::tokens::estimated_prefix(&self.text, max_tokens).len();
        let cut = kept < self.text.len();
        self.text.truncate(kept);
        let estimate = crate::contract::tokens::estimate_text(&self.text);
        self.output_tokens = self.output_tokens.min(max_tokens).max(estimate);
        cut
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_answer_is_held_to_its_max_tokens_by_the_hosts_estimate() {
        let answer = |text: &str, output_tokens| Completion {
            text: text.into(),
            input_tokens: 10,
            output_tokens,
            model: None,
        };
        let mut long = answer(&"word ".repeat(1_000), 3);
        assert!(long.hold_to(50));
        assert_eq!(long.text.len(), 200, "50 tokens of 4 characters");
        assert_eq!(long.output_tokens, 50, "measured, not the claimed 3");
        let mut inflated = answer("short", 1_000_000);
        assert!(!inflated.hold_to(50));
        assert_eq!(
            (inflated.text.as_str(), inflated.output_tokens),
            ("short", 50)
        );
        let mut cjk = answer(&"漢".repeat(100), 0);
        assert!(cjk.hold_to(10));
        assert_eq!(cjk.text.chars().count(), 10, "a CJK character is a token");
    }

    #[test]
    fn checks_what_a_request_may_carry() {
        let ok = CompletionRequest::prompt("hello", 10);
        ok.check().expect("valid");
        let empty = CompletionRequest {
            messages: Vec::new(),
            ..ok.clone()
        };
        assert!(empty.check().is_err());
        let zero = CompletionRequest {
            max_tokens: 0,
            ..ok.clone()
        };
        assert!(zero.check().is_err());
        let huge = CompletionRequest::prompt("x".repeat(MAX_COMPLETION_REQUEST_BYTES + 1), 10);
        assert!(huge.check().is_err());
    }

    #[test]
    fn its_text_is_the_system_prompt_then_the_messages() {
        let request = CompletionRequest {
            system: Some("be brief".into()),
            ..CompletionRequest::prompt("hello", 10)
        };
        assert_eq!(request.text(), "be brief\n\nhello");
        assert_eq!(request.text_bytes(), 13);
    }
}
