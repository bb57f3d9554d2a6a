//! How large a prompt is before the model says (ARCHITECTURE.md §8): the
//! reference's weighted estimate ([`tokens::pressure_message`]: tool results
//! at two characters a token, JSON at three, prose at four), calibrated
//! against what the model reports.
//!
//! The weights are a prior: real tokenizers count logs, code and JSON
//! denser than prose, so the weighted estimate errs high where the plain one
//! errs low, and the pre-prompt check compacts before the provider refuses.
//! Each answer's reported prompt size then says how this model really
//! counts: the [`Calibration`] keeps a running ratio of reported to
//! estimated tokens and scales later estimates by it, so the figure follows
//! the model (a replayed model counts with the plain estimate, a real one
//! with its tokenizer) instead of compacting for tokens that are not there.
//!
//! A caller that counts its prompts itself (its own tokenizer, a rendered
//! request) hands that figure in as a [`PromptPressure`]; the next
//! pre-prompt check weighs it instead, as the reference lets a rendered
//! boundary's pressure win over its transcript estimate.

use crate::contract::tokens;
use crate::contract::types::{AgentMessage, Usage};

/// The smallest ratio of reported to estimated tokens believed.
const MIN_FACTOR: f64 = 0.25;
/// The largest ratio of reported to estimated tokens believed.
const MAX_FACTOR: f64 = 4.0;
/// Weight of the newest observation in the running ratio.
const LEARNING_RATE: f64 = 0.5;

/// A caller's own count of its next prompt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PromptPressure {
    /// The prompt's size, tokens, as the model will count it: compared
    /// with the prompt budget as given, without the estimate's safety
    /// factor.
    pub tokens: u64,
    /// Who counted it (a tokenizer's name, `provider_context_usage`, …),
    /// named in the turn report's pre-prompt checks.
    pub source: String,
}

impl PromptPressure {
    /// The source named in reports: the caller's, trimmed; `caller` when
    /// it gave none.
    pub(super) fn source_name(&self) -> String {
        match self.source.trim() {
            "" => "caller".to_owned(),
            source => source.to_owned(),
        }
    }
}

/// What the model's reports say of the weighted estimate.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(super) struct Calibration {
    /// Reported tokens per estimated token; `None` before any report.
    factor: Option<f64>,
}

impl Calibration {
    /// Learns from a prompt estimated at `estimated` weighted tokens that
    /// the model reported as `usage`. Reports of nothing are ignored, and
    /// a ratio outside 0.25–4 is taken at that bound.
    pub(super) fn learn(&mut self, estimated: u64, usage: &Usage) {
        let reported = usage.input + usage.cache_read + usage.cache_write;
        if estimated == 0 || reported == 0 {
            return;
        }
        let observed = (reported as f64 / estimated as f64).clamp(MIN_FACTOR, MAX_FACTOR);
        self.factor = Some(match self.factor {
            None => observed,
            Some(factor) => factor + (observed - factor) * LEARNING_RATE,
        });
    }

    /// What an estimate scaled by [`Self::apply`] is, in the turn report's
    /// words: `calibrated_estimate` once the model has reported a prompt's
    /// size, `transcript_estimate` before.
    pub(super) fn source(&self) -> &'static str {
        if self.factor.is_some() {
            "calibrated_estimate"
        } else {
            "transcript_estimate"
        }
    }

    /// `weighted` tokens as this model counts them.
    pub(super) fn apply(&self, weighted: u64) -> u64 {
        (weighted as f64 * self.factor.unwrap_or(1.0)).ceil() as u64
    }
}

/// The weighted estimate of a prompt: its system prompt, its messages and
/// the tokens of the tool definitions it carries.
pub(super) fn weighted<'a>(
    system_prompt: &str,
    messages: impl IntoIterator<Item = &'a AgentMessage>,
    tool_definition_tokens: u64,
) -> u64 {
    let system = if system_prompt.is_empty() {
        0
    } else {
        tokens::MESSAGE_OVERHEAD_TOKENS + tokens::estimate_text(system_prompt)
    };
    system
        + tool_definition_tokens
        + messages
            .into_iter()
            .map(tokens::pressure_message)
            .sum::<u64>()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn usage(input: u64, cache_read: u64) -> Usage {
        Usage {
            input,
            cache_read,
            ..Usage::default()
        }
    }

    #[test]
    fn uncalibrated_is_the_weighted_estimate() {
        assert_eq!(Calibration::default().apply(1_000), 1_000);
        assert_eq!(Calibration::default().source(), "transcript_estimate");
    }

    #[test]
    fn a_calibrated_estimate_says_so() {
        let mut calibration = Calibration::default();
        calibration.learn(1_000, &usage(500, 0));
        assert_eq!(calibration.source(), "calibrated_estimate");
    }

    #[test]
    fn a_caller_figure_without_a_source_is_the_callers() {
        let pressure = |source: &str| PromptPressure {
            tokens: 1,
            source: source.into(),
        };
        assert_eq!(pressure("  ").source_name(), "caller");
        assert_eq!(pressure(" tiktoken ").source_name(), "tiktoken");
    }

    #[test]
    fn follows_what_the_model_reports_cached_tokens_included() {
        let mut calibration = Calibration::default();
        calibration.learn(1_000, &usage(400, 100));
        assert_eq!(calibration.apply(1_000), 500);
        calibration.learn(1_000, &usage(700, 0));
        assert_eq!(calibration.apply(1_000), 600, "a running ratio");
    }

    #[test]
    fn ignores_empty_reports_and_bounds_wild_ones() {
        let mut calibration = Calibration::default();
        calibration.learn(1_000, &usage(0, 0));
        calibration.learn(0, &usage(500, 0));
        assert_eq!(calibration, Calibration::default());
        calibration.learn(1_000, &usage(1_000_000, 0));
        assert_eq!(calibration.apply(100), 400);
        let mut low = Calibration::default();
        low.learn(1_000_000, &usage(1, 0));
        assert_eq!(low.apply(100), 25);
    }

    #[test]
    fn weighs_the_system_prompt_tools_and_messages() {
        let messages = [AgentMessage::tool_result("c", "", "x".repeat(40))];
        assert_eq!(
            weighted("abcd", &messages, 7),
            tokens::MESSAGE_OVERHEAD_TOKENS + 1 + 7 + tokens::pressure_message(&messages[0])
        );
        assert_eq!(weighted("", [], 0), 0);
    }
}
