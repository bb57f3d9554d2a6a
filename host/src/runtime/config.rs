//! `ctxbox.toml`: one file configures a host. Keys follow the reference's
//! where it has them (`plugins.slots.contextEngine`,
//! `agents.defaults.compaction.*`, `agents.defaults.contextTokens`); ctxbox's
//! own live under `sandbox.*`, `quarantine.*`, `transcripts.*`, `state.*` and
//! `provider.*`.
//!
//! ```toml
//! dataDir = "/var/lib/ctxbox"
//!
//! [plugins.slots]
//! contextEngine = "lossless"
//!
//! [plugins.engines.my-engine]
//! path = "engines/my_engine.wasm"
//!
//! [agents.defaults]
//! contextTokens = 32000
//!
//! [agents.defaults.compaction]
//! reserveTokens = 16384
//! timeoutSeconds = 180
//!
//! [sandbox]
//! memoryLimitMib = 64
//!
//! [quarantine]
//! retryAfterSeconds = 600
//! strict = false
//!
//! [provider]
//! kind = "openai-compatible"
//! baseUrl = "https://api.openai.com/v1"
//! model = "gpt-4o-mini"
//! apiKeyEnv = "OPENAI_API_KEY"
//! ```

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

use crate::provider::ProviderConfig;
use crate::provider::chat::ChatError;
use crate::sandbox::SandboxConfig;
use crate::services::compaction::CompactionConfig;
use crate::services::state::StateConfig;
use crate::transcript::TranscriptConfig;

/// The default model window of `ctxbox run`, tokens.
pub const DEFAULT_CONTEXT_TOKENS: u64 = 16_384;

/// Everything a host is configured with.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, rename_all = "camelCase", deny_unknown_fields)]
pub struct Config {
    /// Where sessions, caches and databases live (default: the platform's
    /// data directory, e.g. `~/.local/share/ctxbox`).
    pub data_dir: Option<PathBuf>,
    /// Engine selection and registration.
    pub plugins: PluginsConfig,
    /// Agent defaults.
    pub agents: AgentsConfig,
    /// Sandbox limits.
    pub sandbox: SandboxConfig,
    /// What happens to misbehaving engines.
    pub quarantine: QuarantineConfig,
    /// Transcript storage.
    pub transcripts: TranscriptConfig,
    /// Engines' key-value store.
    pub state: StateConfig,
    /// Where durable state lives: embedded (default) or a shared
    /// PostgreSQL database (`[store]`).
    pub store: crate::store::StoreConfig,
    /// The model that answers an embedding host's turns (default `replay`:
    /// none; `ctxbox run` replays recordings whatever this says).
    pub provider: ProviderConfig,
}

/// `plugins.*`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, rename_all = "camelCase", deny_unknown_fields)]
pub struct PluginsConfig {
    /// `plugins.slots.*`.
    pub slots: Slots,
    /// `plugins.engines.<id>`: wasm engines to register under `<id>`.
    pub engines: BTreeMap<String, EngineEntry>,
}

/// `plugins.slots.*`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, rename_all = "camelCase", deny_unknown_fields)]
pub struct Slots {
    /// The engine agents use (unset, `""` or `legacy`: the built-in one).
    pub context_engine: Option<String>,
}

/// `plugins.engines.<id>`.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct EngineEntry {
    /// The component, relative to the config file.
    pub path: PathBuf,
}

/// `agents.*`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, rename_all = "camelCase", deny_unknown_fields)]
pub struct AgentsConfig {
    /// `agents.defaults.*`.
    pub defaults: AgentDefaults,
}

/// `agents.defaults.*`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, rename_all = "camelCase", deny_unknown_fields)]
pub struct AgentDefaults {
    /// The model's context window, tokens.
    pub context_tokens: Option<u64>,
    /// The model to name in requests.
    pub model: Option<String>,
    /// `agents.defaults.compaction.*`.
    pub compaction: CompactionConfig,
}

/// `quarantine.*`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, rename_all = "camelCase", deny_unknown_fields)]
pub struct QuarantineConfig {
    /// Retry a quarantined engine after this long (doubling with each new
    /// failure) instead of keeping it quarantined until re-registered.
    pub retry_after_seconds: Option<u64>,
    /// Fail the turn instead of falling back to `legacy`.
    pub strict: bool,
}

impl QuarantineConfig {
    /// The back-off, if retries are on.
    pub fn backoff(&self) -> Option<Duration> {
        self.retry_after_seconds.map(Duration::from_secs)
    }
}

/// Why a configuration file was refused: one line naming the file, the line
/// and the key.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("cannot read `{}`: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The file is not valid TOML or has a wrong key or value.
    #[error("`{}`{}: {message}", path.display(), line.map(|line| format!(" line {line}")).unwrap_or_default())]
    Invalid {
        /// The file.
        path: PathBuf,
        /// The line, when known.
        line: Option<usize>,
        /// What is wrong, naming the key.
        message: String,
    },
}

impl Config {
    /// Reads `path`. Relative engine paths are resolved against the file's
    /// directory.
    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_owned(),
            source,
        })?;
        let mut config = Self::parse(&text).map_err(|(line, message)| ConfigError::Invalid {
            path: path.to_owned(),
            line,
            message,
        })?;
        let base = path.parent().unwrap_or(Path::new("."));
        for entry in config.plugins.engines.values_mut() {
            if entry.path.is_relative() {
                entry.path = base.join(&entry.path);
            }
        }
        if let Some(dir) = &config.data_dir
            && dir.is_relative()
        {
            config.data_dir = Some(base.join(dir));
        }
        Ok(config)
    }

    /// Parses TOML text; an error is (line, message).
    pub fn parse(text: &str) -> Result<Self, (Option<usize>, String)> {
        let mut config: Self = toml::from_str(text).map_err(|error| {
            let line = error
                .span()
                .map(|span| text[..span.start.min(text.len())].matches('\n').count() + 1);
            (line, error.message().trim().to_owned())
        })?;
        config.sandbox.compaction_timeout_seconds =
            config.agents.defaults.compaction.timeout_seconds;
        config
            .sandbox
            .validate()
            .map_err(|error| (None, error.to_string()))?;
        config.provider.validate().map_err(|error| match error {
            ChatError::Config(message) => (None, message),
            other => (None, other.to_string()),
        })?;
        Ok(config)
    }

    /// The model window: `agents.defaults.contextTokens`, or the default.
    pub fn context_tokens(&self) -> u64 {
        self.agents
            .defaults
            .context_tokens
            .unwrap_or(DEFAULT_CONTEXT_TOKENS)
    }

    /// The data directory: configured, else `$XDG_DATA_HOME/ctxbox`, else
    /// `~/.local/share/ctxbox`, else `.ctxbox` here.
    pub fn data_dir(&self) -> PathBuf {
        if let Some(dir) = &self.data_dir {
            return dir.clone();
        }
        if let Some(data_home) = std::env::var_os("XDG_DATA_HOME").filter(|dir| !dir.is_empty()) {
            return PathBuf::from(data_home).join("ctxbox");
        }
        match std::env::var_os("HOME").filter(|home| !home.is_empty()) {
            Some(home) => PathBuf::from(home).join(".local/share/ctxbox"),
            None => PathBuf::from(".ctxbox"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_reference_keys() {
        let config = Config::parse(
            r#"
            dataDir = "/tmp/ctxbox"
            [plugins.slots]
            contextEngine = "lossless"
            [plugins.engines.mine]
            path = "mine.wasm"
            [agents.defaults]
            contextTokens = 32000
            [agents.defaults.compaction]
            reserveTokens = 4096
            timeoutSeconds = 30
            [sandbox]
            memoryLimitMib = 32
            [quarantine]
            retryAfterSeconds = 60
            strict = true
            "#,
        )
        .expect("valid");
        assert_eq!(
            config.plugins.slots.context_engine.as_deref(),
            Some("lossless")
        );
        assert_eq!(
            config.plugins.engines["mine"].path,
            PathBuf::from("mine.wasm")
        );
        assert_eq!(config.context_tokens(), 32_000);
        assert_eq!(config.agents.defaults.compaction.reserve_tokens, 4_096);
        assert_eq!(config.sandbox.memory_limit_mib, 32);
        assert_eq!(
            config.sandbox.compaction_timeout_seconds, 30,
            "one window for both"
        );
        assert_eq!(config.quarantine.backoff(), Some(Duration::from_secs(60)));
        assert!(config.quarantine.strict);
        assert_eq!(config.data_dir(), PathBuf::from("/tmp/ctxbox"));
    }

    #[test]
    fn an_empty_file_is_all_defaults() {
        let config = Config::parse("").expect("valid");
        assert_eq!(config.context_tokens(), DEFAULT_CONTEXT_TOKENS);
        assert_eq!(config.plugins.slots.context_engine, None);
        assert_eq!(config.sandbox.compaction_timeout_seconds, 180);
    }

    #[test]
    fn an_unknown_key_is_named_with_its_line() {
        let (line, message) = Config::parse("[sandbox]\nmemoryLimitMib = 8\nmemoryLimit = 5\n")
            .expect_err("unknown key");
        assert_eq!(line, Some(3));
        assert!(message.contains("memoryLimit"), "{message}");
    }

    #[test]
    fn a_wrong_type_is_named_with_its_line() {
        let (line, message) =
            Config::parse("[agents.defaults]\ncontextTokens = \"big\"\n").expect_err("wrong type");
        assert_eq!(line, Some(2));
        assert!(message.contains("invalid type"), "{message}");
    }

    #[test]
    fn invalid_compaction_timeouts_fall_back_to_the_default() {
        for value in ["0", "-5", "\"soon\"", "1.5"] {
            let config = Config::parse(&format!(
                "[agents.defaults.compaction]\ntimeoutSeconds = {value}\n"
            ))
            .unwrap_or_else(|error| panic!("{value}: {error:?}"));
            assert_eq!(config.sandbox.compaction_timeout_seconds, 180, "{value}");
        }
    }

    #[test]
    fn a_bad_sandbox_limit_is_named() {
        let (_, message) = Config::parse("[sandbox]\ncallTimeoutMs = 0\n").expect_err("zero");
        assert!(message.contains("sandbox.callTimeoutMs"), "{message}");
    }

    #[test]
    fn reads_the_provider_section() {
        use crate::provider::chat::OpenAiCompatibleConfig;

        assert_eq!(
            Config::parse("").expect("valid").provider,
            ProviderConfig::Replay
        );
        let config = Config::parse(
            "[provider]\nkind = \"openai-compatible\"\nbaseUrl = \"http://localhost:11434/v1\"\n\
             model = \"qwen3:8b\"\napiKeyEnv = \"OLLAMA_KEY\"\n",
        )
        .expect("valid");
        assert_eq!(
            config.provider,
            ProviderConfig::OpenaiCompatible(OpenAiCompatibleConfig {
                base_url: "http://localhost:11434/v1".into(),
                model: "qwen3:8b".into(),
                api_key_env: Some("OLLAMA_KEY".into()),
            })
        );
    }

    #[test]
    fn a_bad_provider_section_is_named() {
        let (line, message) =
            Config::parse("[provider]\nkind = \"gpt\"\n").expect_err("unknown kind");
        assert_eq!(line, Some(2));
        assert!(message.contains("gpt"), "{message}");

        let (_, message) =
            Config::parse("[provider]\nkind = \"openai-compatible\"\nbaseUrl = \"http://x\"\n")
                .expect_err("no model");
        assert!(message.contains("model"), "{message}");

        let (_, message) = Config::parse(
            "[provider]\nkind = \"openai-compatible\"\nbaseUrl = \"localhost:8080\"\nmodel = \"m\"\n",
        )
        .expect_err("not a URL");
        assert!(message.contains("`provider.baseUrl`"), "{message}");
        assert!(!message.contains('\n'), "one line: {message}");

        let (line, message) = Config::parse(
            "[provider]\nkind = \"openai-compatible\"\nbaseUrl = \"http://x\"\nmodel = \"m\"\napiKey = \"sk\"\n",
        )
        .expect_err("unknown key");
        assert!(line.is_some(), "{message}");
        assert!(message.contains("apiKey"), "{message}");
    }

    #[test]
    fn load_names_the_file_and_resolves_paths_next_to_it() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("ctxbox.toml");
        std::fs::write(&path, "[plugins.engines.mine]\npath = \"e/mine.wasm\"\n").expect("write");
        let config = Config::load(&path).expect("loads");
        assert_eq!(
            config.plugins.engines["mine"].path,
            dir.path().join("e/mine.wasm")
        );

        std::fs::write(&path, "[plugins]\nslot = 1\n").expect("write");
        let error = Config::load(&path).expect_err("bad key").to_string();
        assert!(error.contains("ctxbox.toml` line 2"), "{error}");
        assert!(!error.contains('\n'), "one line: {error}");

        let missing = Config::load(&dir.path().join("nope.toml"))
            .expect_err("missing")
            .to_string();
        assert!(missing.contains("nope.toml"), "{missing}");
    }
}
