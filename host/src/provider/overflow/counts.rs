//! Token counts in context-overflow errors. APIs word them differently; the
//! prompt's size and the model's window are read from the wordings of the
//! servers below when present.
//!
//! | server | message |
//! |---|---|
//! | OpenAI | `maximum context length is 8192 tokens. However, your messages resulted in 9000 tokens` |
//! | vLLM | `maximum context length is 4096 tokens. However, you requested 5000 tokens (4000 in the messages, 1000 in the completion)` |
//! | llama.cpp server | `request (9000 tokens) exceeds the available context size (8192 tokens)` |
//! | Anthropic (compatible endpoint) | `prompt is too long: 210000 tokens > 200000 maximum` |

use std::sync::LazyLock;

use regex::Regex;

/// What an overflow message says.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stated {
    /// The prompt's tokens.
    pub prompt_tokens: Option<u64>,
    /// The model's window.
    pub window: Option<u64>,
}

/// A number as APIs print them (`8192`, `8,192`); `{n}` in a wording.
const NUMBER: &str = r"(\d[\d,]*)";

/// Wordings of the prompt's size, most specific first (vLLM's total includes
/// the completion it asked for; its messages' share is the prompt).
static PROMPT: LazyLock<Vec<Regex>> = LazyLock::new(|| {
    patterns(&[
        r"\({n} in the messages",
        r"resulted in {n} tokens",
        r"you requested {n} tokens",
        r"prompt is too long: {n} tokens",
        r"request \({n} tokens\) exceeds",
    ])
});

/// Wordings of the model's window.
static WINDOW: LazyLock<Vec<Regex>> = LazyLock::new(|| {
    patterns(&[
        r"maximum context length is {n} tokens",
        r"tokens > {n} maximum",
        r"context size \({n} tokens\)",
    ])
});

fn patterns(wordings: &[&str]) -> Vec<Regex> {
    wordings
        .iter()
        .map(|wording| {
            Regex::new(&format!("(?i){}", wording.replace("{n}", NUMBER)))
                .expect("the overflow wordings are valid patterns")
        })
        .collect()
}

/// The counts `message` states.
pub fn stated(message: &str) -> Stated {
    Stated {
        prompt_tokens: first_number(&PROMPT, message),
        window: first_number(&WINDOW, message),
    }
}

fn first_number(patterns: &[Regex], message: &str) -> Option<u64> {
    patterns.iter().find_map(|pattern| {
        let digits = pattern.captures(message)?.get(1)?.as_str().replace(',', "");
        digits.parse().ok()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counts(message: &str) -> (Option<u64>, Option<u64>) {
        let stated = stated(message);
        (stated.prompt_tokens, stated.window)
    }

    #[test]
    fn reads_the_counts_of_common_servers() {
        assert_eq!(
            counts(
                "This model's maximum context length is 8192 tokens. However, your messages \
                 resulted in 9000 tokens. Please reduce the length of the messages."
            ),
            (Some(9_000), Some(8_192))
        );
        assert_eq!(
            counts(
                "This model's maximum context length is 4096 tokens. However, you requested \
                 5000 tokens (4000 in the messages, 1000 in the completion)."
            ),
            (Some(4_000), Some(4_096))
        );
        assert_eq!(
            counts(
                "request (9000 tokens) exceeds the available context size (8192 tokens), try \
                 increasing it"
            ),
            (Some(9_000), Some(8_192))
        );
        assert_eq!(
            counts("prompt is too long: 210,000 tokens > 200,000 maximum"),
            (Some(210_000), Some(200_000))
        );
    }

    #[test]
    fn states_nothing_when_the_message_has_no_counts() {
        assert_eq!(
            stated("the request exceeds the available context size, try increasing it"),
            Stated::default()
        );
        assert_eq!(
            counts("Input is too long for requested model."),
            (None, None)
        );
    }
}
