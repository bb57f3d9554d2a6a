//! `agents.defaults.compaction.*`: the reference's keys and defaults, plus the
//! summarizer choice and how many chunks are summarized at once.

use serde::{Deserialize, Serialize};

use crate::services::summarize::SummarizerConfig;

/// How native compaction behaves. Keys are the reference's (camelCase);
/// keys of the reference this host does not use are accepted and ignored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct CompactionConfig {
    /// Whether the turn runner compacts on its own; forced and overflow
    /// compactions run either way.
    pub enabled: bool,
    /// Tokens kept free for the model's answer (16,384): compaction
    /// triggers above `window - reserve`, the reserve being this raised to
    /// 20,000 and capped at a quarter of the window ([`effective_reserve`]).
    pub reserve_tokens: u64,
    /// Recent history kept verbatim, in tokens (20,000), at most: a
    /// compaction keeps less when its target needs it.
    pub keep_recent_tokens: u64,
    /// Share of its target (the prompt budget or the trigger threshold) a
    /// compacted context takes at most (ctxbox; 0.5): compaction frees room
    /// for many turns instead of just getting under the trigger
    /// (ARCHITECTURE.md §6, step 5).
    pub target_share: TargetShare,
    /// One compaction window, seconds (180): summarization stops when it runs
    /// out. Resolved as the reference does ([`resolve_timeout_seconds`]):
    /// fractions are floored, and what leaves no whole second means the
    /// default.
    #[serde(deserialize_with = "positive_seconds_or_default")]
    pub timeout_seconds: u64,
    /// Continue the session in a new transcript file after compacting
    /// (the old one stays, archived).
    pub truncate_after_compaction: bool,
    /// Extra instructions for every compaction summary.
    pub custom_instructions: Option<String>,
    /// Chunks summarized at the same time (ctxbox; the reference does one
    /// after another).
    pub summary_concurrency: usize,
    /// Which summarizer writes the summaries (ctxbox). Unset: native
    /// compaction uses the extractive summarizer, and an engine's
    /// `host.summarize` the host's model (`host.complete`'s).
    pub summarizer: Option<SummarizerConfig>,
}

/// The least answer reserve the reference keeps, whatever is configured
/// (`DEFAULT_AGENT_COMPACTION_RESERVE_TOKENS_FLOOR`).
pub const RESERVE_TOKENS_FLOOR: u64 = 20_000;

/// The reserve a `window`-token model really gets for `reserve_tokens`
/// configured, as the reference computes it: raised to
/// [`RESERVE_TOKENS_FLOOR`], then capped at a quarter of the window so
/// prompts keep at least three quarters of it.
pub fn effective_reserve(window: u64, reserve_tokens: u64) -> u64 {
    reserve_tokens.max(RESERVE_TOKENS_FLOOR).min(window / 4)
}

/// Share of its target a compacted context aims at: a number from 0.1 to
/// 0.9 (`agents.defaults.compaction.targetShare`); anything else is refused
/// with the range.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
#[serde(try_from = "f64", into = "f64")]
pub struct TargetShare(f64);

impl TargetShare {
    /// The default: a compacted context takes at most half of its target,
    /// so each compaction frees about half of the prompt budget
    /// (`BENCHMARKS.md`, "Compaction that converges", measures 0.25–0.6).
    pub const DEFAULT: Self = Self(0.5);
    /// The least share accepted.
    pub const MIN: f64 = 0.1;
    /// The largest share accepted.
    pub const MAX: f64 = 0.9;

    /// The share, as a fraction.
    pub fn get(self) -> f64 {
        self.0
    }

    /// `tokens` times the share, rounded down.
    pub fn of(self, tokens: u64) -> u64 {
        (tokens as f64 * self.0) as u64
    }
}

impl TryFrom<f64> for TargetShare {
    type Error = String;

    fn try_from(share: f64) -> Result<Self, Self::Error> {
        if (Self::MIN..=Self::MAX).contains(&share) {
            Ok(Self(share))
        } else {
            Err(format!(
                "targetShare {share} is out of range: a share from {} to {} of the target",
                Self::MIN,
                Self::MAX
            ))
        }
    }
}

impl From<TargetShare> for f64 {
    fn from(share: TargetShare) -> Self {
        share.0
    }
}

impl PartialEq for TargetShare {
    fn eq(&self, other: &Self) -> bool {
        self.0.to_bits() == other.0.to_bits()
    }
}

impl Eq for TargetShare {}

impl Default for TargetShare {
    fn default() -> Self {
        Self::DEFAULT
    }
}

/// The default compaction window, seconds.
pub const DEFAULT_TIMEOUT_SECONDS: u64 = 180;

/// The longest window the reference accepts, seconds: its timers' safe
/// ceiling (2,147,000,000 ms); longer values are capped to it.
pub const MAX_TIMEOUT_SECONDS: u64 = 2_147_000;

/// `timeoutSeconds` as the reference resolves it: a finite number of seconds
/// is floored to whole seconds and capped at [`MAX_TIMEOUT_SECONDS`];
/// anything that leaves no whole second (zero, negative, under one, not a
/// number) means "not configured" (`None`). Never an error: a bad value
/// must not stop the host.
pub fn resolve_timeout_seconds(raw: &serde_json::Value) -> Option<u64> {
    let seconds = raw.as_f64().filter(|seconds| seconds.is_finite())?.floor();
    (seconds >= 1.0).then(|| (seconds as u64).min(MAX_TIMEOUT_SECONDS))
}

/// Reads `timeoutSeconds` with [`resolve_timeout_seconds`], warning when a
/// value was given but means nothing.
fn read_timeout_seconds<'de, D: serde::Deserializer<'de>>(
    deserializer: D,
    key: &'static str,
) -> Result<Option<u64>, D::Error> {
    let raw = serde_json::Value::deserialize(deserializer)?;
    let seconds = resolve_timeout_seconds(&raw);
    if seconds.is_none() {
        tracing::warn!(
            key,
            value = %raw,
            "not a number of seconds of at least one; using the default"
        );
    }
    Ok(seconds)
}

/// `agents.defaults.compaction.timeoutSeconds`, or the default.
fn positive_seconds_or_default<'de, D: serde::Deserializer<'de>>(
    deserializer: D,
) -> Result<u64, D::Error> {
    Ok(
        read_timeout_seconds(deserializer, "agents.defaults.compaction.timeoutSeconds")?
            .unwrap_or(DEFAULT_TIMEOUT_SECONDS),
    )
}

/// `agents.list[].compaction.timeoutSeconds`: `None` (the defaults' window)
/// when it means nothing.
pub fn agent_timeout_seconds<'de, D: serde::Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<u64>, D::Error> {
    read_timeout_seconds(deserializer, "agents.list[].compaction.timeoutSeconds")
}

impl Default for CompactionConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            reserve_tokens: 16_384,
            keep_recent_tokens: 20_000,
            target_share: TargetShare::DEFAULT,
            timeout_seconds: DEFAULT_TIMEOUT_SECONDS,
            truncate_after_compaction: false,
            custom_instructions: None,
            summary_concurrency: 4,
            summarizer: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_reserve_is_raised_to_the_floor_then_capped_at_a_quarter_of_the_window() {
        assert_eq!(effective_reserve(200_000, 16_384), 20_000);
        assert_eq!(effective_reserve(200_000, 30_000), 30_000);
        assert_eq!(effective_reserve(200_000, 80_000), 50_000);
        assert_eq!(effective_reserve(16_384, 16_384), 4_096);
        assert_eq!(effective_reserve(64_000, 1_024), 16_000);
    }

    #[test]
    fn reads_the_reference_keys_with_defaults() {
        let config: CompactionConfig = serde_json::from_str(
            r#"{"reserveTokens": 8000, "truncateAfterCompaction": true, "mode": "safeguard",
                "summarizer": {"kind": "openai-compatible", "baseUrl": "http://localhost:11434/v1", "model": "llama3"}}"#,
        )
        .expect("valid config");
        assert_eq!(config.reserve_tokens, 8_000);
        assert!(config.truncate_after_compaction);
        assert_eq!(config.keep_recent_tokens, 20_000);
        assert_eq!(config.target_share, TargetShare::DEFAULT);
        assert_eq!(config.timeout_seconds, 180);
        assert!(matches!(
            config.summarizer,
            Some(SummarizerConfig::OpenaiCompatible(_))
        ));
        assert_eq!(
            serde_json::from_str::<CompactionConfig>("{}").expect("empty config"),
            CompactionConfig::default()
        );
    }

    #[test]
    fn the_target_share_is_a_fraction_in_range() {
        let config: CompactionConfig =
            serde_json::from_str(r#"{"targetShare": 0.5}"#).expect("in range");
        assert_eq!(config.target_share.get(), 0.5);
        assert_eq!(config.target_share.of(12_288), 6_144);
        for wrong in ["0", "0.95", "-1", "2"] {
            let error =
                serde_json::from_str::<CompactionConfig>(&format!(r#"{{"targetShare": {wrong}}}"#))
                    .expect_err("out of range");
            assert!(error.to_string().contains("out of range"), "{error}");
        }
    }
}
