//! `ctxbox.toml`: one file configures a host. Keys follow the reference's
//! where it has them (`plugins.slots.contextEngine`,
//! `agents.defaults.compaction.*`, `agents.defaults.contextTokens`); ctxbox's
//! own live under `sandbox.*`, `quarantine.*`, `transcripts.*`, `state.*`,
//! `sql.*` and `provider.*`.
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
//! [plugins.entries.my-engine]
//! enabled = true
//! config = { keepTurns = 8 }
//!
//! [agents.defaults]
//! contextTokens = 32000
//!
//! [agents.defaults.compaction]
//! reserveTokens = 16384
//! timeoutSeconds = 180
//!
//! [[agents.list]]
//! id = "research"
//! contextTokens = 128000
//!
//! [sandbox]
//! memoryLimitMib = 64
//!
//! [sql]
//! maxStatementBytes = 102400
//! maxStatementsPerCall = 10000
//! maxRows = 10000
//! maxAnswerBytes = 16777216
//! cacheKib = 2048
//! maxTempKib = 16384
//! maxDatabases = 64
//! maxHeapMib = 256
//!
//! [quarantine]
//! retryAfterSeconds = 600
//! strict = false
//!
//! [serve]
//! idleSessionSeconds = 900
//! maxSessions = 256
//! maxInFlight = 64
//!
//! [provider]
//! kind = "openai-compatible"
//! baseUrl = "https://api.openai.com/v1"
//! model = "gpt-4o-mini"
//! apiKeyEnv = "OPENAI_API_KEY"
//! ```

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;

use crate::provider::ProviderConfig;
use crate::provider::chat::ChatError;
use crate::sandbox::{EngineLimits, SandboxConfig};
use crate::services::compaction::CompactionConfig;
use crate::services::sql::SqlConfig;
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
    /// Limits of engines' SQL databases (`wit/sql.wit`).
    pub sql: SqlConfig,
    /// Where durable state lives: embedded (default) or a shared
    /// PostgreSQL database (`[store]`).
    pub store: crate::store::StoreConfig,
    /// The model that answers an embedding host's turns (default `replay`:
    /// none; `ctxbox run` replays recordings whatever this says).
    pub provider: ProviderConfig,
    /// Budgets of engines' model completions (`host.complete`).
    pub completions: crate::services::completions::CompletionLimits,
    /// What `ctxbox serve` holds in memory and runs at once.
    pub serve: ServeConfig,
}

/// `[serve]`: the bounds of a long-lived `ctxbox serve`. A session it gives
/// up is reloaded on its next request, so the bounds cost a reload, never a
/// message.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, rename_all = "camelCase", deny_unknown_fields)]
pub struct ServeConfig {
    /// A session untouched this long gives up its history and its engines'
    /// warm instances, seconds (`0`: never for age alone).
    pub idle_session_seconds: u64,
    /// The most sessions held at once; the least recently used is given up
    /// first.
    pub max_sessions: usize,
    /// The most requests running at once; the next request line is read
    /// when one ends.
    pub max_in_flight: usize,
}

impl Default for ServeConfig {
    fn default() -> Self {
        Self {
            idle_session_seconds: 15 * 60,
            max_sessions: 256,
            max_in_flight: 64,
        }
    }
}

impl ServeConfig {
    /// How long a session may stay untouched, if age alone gives it up.
    pub fn idle_limit(&self) -> Option<Duration> {
        (self.idle_session_seconds > 0).then(|| Duration::from_secs(self.idle_session_seconds))
    }

    fn validate(&self) -> Result<(), String> {
        if self.max_sessions == 0 {
            return Err("`serve.maxSessions` must be at least 1".into());
        }
        if self.max_in_flight == 0 {
            return Err("`serve.maxInFlight` must be at least 1".into());
        }
        Ok(())
    }
}

/// The most bytes one engine's `plugins.entries.<id>.config` may take as
/// JSON: it is copied into the engine on request, so it stays small.
pub const MAX_ENGINE_CONFIG_BYTES: usize = 64 * 1024;

/// `plugins.*`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, rename_all = "camelCase", deny_unknown_fields)]
pub struct PluginsConfig {
    /// `plugins.enabled`: `false` turns every plugin engine off (agents use
    /// `legacy`). Default `true`.
    pub enabled: Option<bool>,
    /// `plugins.deny`: engine ids or plugin names that must not be used.
    pub deny: Vec<String>,
    /// `plugins.entries.<id>`: per-engine (or per-plugin) switches and
    /// configuration.
    pub entries: BTreeMap<String, PluginEntry>,
    /// `plugins.slots.*`.
    pub slots: Slots,
    /// `plugins.engines.<id>`: wasm engines to register under `<id>`.
    pub engines: BTreeMap<String, EngineEntry>,
}

/// `plugins.entries.<id>`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, rename_all = "camelCase", deny_unknown_fields)]
pub struct PluginEntry {
    /// `false` turns this engine (or every engine of this plugin) off.
    pub enabled: Option<bool>,
    /// The engine's own settings, handed to it as JSON (at most
    /// [`MAX_ENGINE_CONFIG_BYTES`]).
    pub config: Option<toml::Table>,
    /// Call limits of this sandboxed engine in place of `sandbox.*`.
    pub limits: Option<EngineLimits>,
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
    /// `agents.list[]`: agents whose settings differ from the defaults.
    pub list: Vec<AgentEntry>,
}

/// `agents.defaults.*`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, rename_all = "camelCase", deny_unknown_fields)]
pub struct AgentDefaults {
    /// The model's context window, tokens.
    pub context_tokens: Option<u64>,
    /// The model to name in requests.
    pub model: Option<String>,
    /// The agent's own directory, handed to native engine factories.
    pub agent_dir: Option<PathBuf>,
    /// The agent's workspace, handed to native engine factories.
    pub workspace: Option<PathBuf>,
    /// `agents.defaults.compaction.*`.
    pub compaction: CompactionConfig,
}

/// One `agents.list[]` entry: each key set here overrides
/// `agents.defaults` for that agent.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, rename_all = "camelCase", deny_unknown_fields)]
pub struct AgentEntry {
    /// The agent's id (required, unique).
    pub id: String,
    /// The agent used when none is named (at most one; default: the first).
    pub default: bool,
    /// Overrides `agents.defaults.contextTokens`.
    pub context_tokens: Option<u64>,
    /// Overrides `agents.defaults.model`.
    pub model: Option<String>,
    /// Overrides `agents.defaults.agentDir`.
    pub agent_dir: Option<PathBuf>,
    /// Overrides `agents.defaults.workspace`.
    pub workspace: Option<PathBuf>,
    /// Overrides the turn-level compaction settings.
    pub compaction: AgentCompaction,
}

/// `agents.list[].compaction`: the settings a turn applies, per agent. The
/// compactor's own settings (summarizer, `keepRecentTokens`, …) are the
/// host's, so only `agents.defaults.compaction` sets them.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, rename_all = "camelCase", deny_unknown_fields)]
pub struct AgentCompaction {
    /// Overrides `agents.defaults.compaction.enabled`.
    pub enabled: Option<bool>,
    /// Overrides `agents.defaults.compaction.reserveTokens`.
    pub reserve_tokens: Option<u64>,
    /// Overrides `agents.defaults.compaction.timeoutSeconds` for this agent's
    /// compactions (the native compactor's window and an engine's `compact`
    /// and `after-turn` watchdog). Resolved as the defaults' key is; a value
    /// that means nothing leaves the defaults' window.
    #[serde(
        default,
        deserialize_with = "crate::services::compaction::agent_timeout_seconds"
    )]
    pub timeout_seconds: Option<u64>,
}

/// The settings of one agent: `agents.defaults` with its `agents.list[]`
/// entry's overrides applied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentSettings {
    /// The agent's id (`main` when the list is empty and none was named).
    pub id: String,
    /// The model window, tokens.
    pub context_tokens: u64,
    /// The model to name in requests.
    pub model: Option<String>,
    /// The agent's directory, if configured.
    pub agent_dir: Option<PathBuf>,
    /// The agent's workspace, if configured.
    pub workspace: Option<PathBuf>,
    /// Whether the host compacts before a prompt that would not fit.
    pub compaction_enabled: bool,
    /// Tokens kept free for the answer.
    pub reserve_tokens: u64,
    /// One compaction window, seconds.
    pub compaction_timeout_seconds: u64,
}

/// The agent id used when none is configured or named.
pub const DEFAULT_AGENT_ID: &str = "main";

/// `quarantine.*`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, rename_all = "camelCase", deny_unknown_fields)]
pub struct QuarantineConfig {
    /// Retry a quarantined engine after this long, doubling with each
    /// failure on retry up to six hours (unset: five minutes, so a
    /// transient failure does not end an engine's life); `0` keeps it
    /// quarantined until it is registered again.
    pub retry_after_seconds: Option<u64>,
    /// Fail the turn instead of falling back to `legacy`.
    pub strict: bool,
    /// Set by programs, never read from a file: the first retry's delay,
    /// over `retry_after_seconds`. `Duration::ZERO` retries a failed engine
    /// on its next call, what load benches use to keep a failing engine in
    /// play.
    #[serde(skip)]
    pub retry_after: Option<Duration>,
}

/// The first retry of a quarantined engine when `quarantine.retryAfterSeconds`
/// is unset.
pub const DEFAULT_RETRY_AFTER: Duration = Duration::from_secs(5 * 60);

impl QuarantineConfig {
    /// The back-off, if retries are on.
    pub fn backoff(&self) -> Option<Duration> {
        if let Some(delay) = self.retry_after {
            return Some(delay);
        }
        match self.retry_after_seconds {
            None => Some(DEFAULT_RETRY_AFTER),
            Some(0) => None,
            Some(seconds) => Some(Duration::from_secs(seconds)),
        }
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
        let agents = &mut config.agents;
        let dirs = [
            &mut agents.defaults.agent_dir,
            &mut agents.defaults.workspace,
        ]
        .into_iter()
        .chain(
            agents
                .list
                .iter_mut()
                .flat_map(|agent| [&mut agent.agent_dir, &mut agent.workspace]),
        );
        for dir in std::iter::once(&mut config.data_dir).chain(dirs) {
            if let Some(path) = dir
                && path.is_relative()
            {
                *path = base.join(&*path);
            }
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
        config
            .validate_agents()
            .map_err(|message| (None, message))?;
        config.engine_configs().map_err(|message| (None, message))?;
        config.engine_limits().map_err(|message| (None, message))?;
        config.serve.validate().map_err(|message| (None, message))?;
        config.sql.validate().map_err(|message| (None, message))?;
        Ok(config)
    }

    /// `agents.list[]`: ids present and unique, at most one default.
    fn validate_agents(&self) -> Result<(), String> {
        let mut seen = std::collections::BTreeSet::new();
        for (index, agent) in self.agents.list.iter().enumerate() {
            let id = agent.id.trim();
            if id.is_empty() {
                return Err(format!("`agents.list[{index}].id` is missing or empty"));
            }
            if !seen.insert(id) {
                return Err(format!(
                    "`agents.list[{index}].id`: agent `{id}` is listed twice"
                ));
            }
        }
        let defaults: Vec<&str> = self
            .agents
            .list
            .iter()
            .filter(|agent| agent.default)
            .map(|agent| agent.id.as_str())
            .collect();
        if defaults.len() > 1 {
            return Err(format!(
                "`agents.list`: only one agent may set `default = true` (found {})",
                defaults.join(", ")
            ));
        }
        Ok(())
    }

    /// Each engine's `plugins.entries.<id>.config` as JSON (shared by the
    /// engine's instances), refusing one over [`MAX_ENGINE_CONFIG_BYTES`].
    pub fn engine_configs(&self) -> Result<BTreeMap<String, Arc<str>>, String> {
        let mut configs = BTreeMap::new();
        for (id, entry) in &self.plugins.entries {
            let Some(table) = &entry.config else { continue };
            let json = serde_json::to_string(table)
                .map_err(|error| format!("`plugins.entries.{id}.config`: {error}"))?;
            if json.len() > MAX_ENGINE_CONFIG_BYTES {
                return Err(format!(
                    "`plugins.entries.{id}.config` is {} bytes as JSON, over the {MAX_ENGINE_CONFIG_BYTES} byte limit",
                    json.len()
                ));
            }
            configs.insert(id.clone(), json.into());
        }
        Ok(configs)
    }

    /// Each engine's `plugins.entries.<id>.limits`, refusing an unusable one
    /// with its key named.
    pub fn engine_limits(&self) -> Result<BTreeMap<String, EngineLimits>, String> {
        let mut all = BTreeMap::new();
        for (id, entry) in &self.plugins.entries {
            let Some(limits) = &entry.limits else {
                continue;
            };
            limits
                .validate()
                .map_err(|problem| format!("`plugins.entries.{id}.limits`: {problem}"))?;
            all.insert(id.clone(), limits.clone());
        }
        Ok(all)
    }

    /// The default agent's settings: the `agents.list[]` entry with
    /// `default = true`, else the first listed, else `main` with
    /// `agents.defaults`.
    pub fn default_agent(&self) -> AgentSettings {
        let list = &self.agents.list;
        self.agent_settings(list.iter().find(|agent| agent.default).or(list.first()))
    }

    /// The settings of agent `id`. An id that is not listed is an error
    /// naming the listed ones, except `main` while the list is empty.
    pub fn agent(&self, id: &str) -> Result<AgentSettings, String> {
        let id = id.trim();
        let list = &self.agents.list;
        match list.iter().find(|agent| agent.id.trim() == id) {
            Some(entry) => Ok(self.agent_settings(Some(entry))),
            None if list.is_empty() && id == DEFAULT_AGENT_ID => Ok(self.agent_settings(None)),
            None => {
                let listed: Vec<&str> = list.iter().map(|agent| agent.id.as_str()).collect();
                Err(format!(
                    "agent `{id}` is not in `agents.list` (listed: {})",
                    if listed.is_empty() {
                        "none".to_owned()
                    } else {
                        listed.join(", ")
                    }
                ))
            }
        }
    }

    /// `agents.defaults` with `entry`'s overrides applied.
    fn agent_settings(&self, entry: Option<&AgentEntry>) -> AgentSettings {
        let defaults = &self.agents.defaults;
        AgentSettings {
            id: entry
                .map_or(DEFAULT_AGENT_ID, |entry| entry.id.trim())
                .to_owned(),
            context_tokens: entry
                .and_then(|entry| entry.context_tokens)
                .or(defaults.context_tokens)
                .unwrap_or(DEFAULT_CONTEXT_TOKENS),
            model: entry
                .and_then(|entry| entry.model.clone())
                .or_else(|| defaults.model.clone()),
            agent_dir: entry
                .and_then(|entry| entry.agent_dir.clone())
                .or_else(|| defaults.agent_dir.clone()),
            workspace: entry
                .and_then(|entry| entry.workspace.clone())
                .or_else(|| defaults.workspace.clone()),
            compaction_enabled: entry
                .and_then(|entry| entry.compaction.enabled)
                .unwrap_or(defaults.compaction.enabled),
            reserve_tokens: entry
                .and_then(|entry| entry.compaction.reserve_tokens)
                .unwrap_or(defaults.compaction.reserve_tokens),
            compaction_timeout_seconds: entry
                .and_then(|entry| entry.compaction.timeout_seconds)
                .unwrap_or(defaults.compaction.timeout_seconds),
        }
    }

    /// The default agent's model window: its `contextTokens`, else
    /// `agents.defaults.contextTokens`, else the default.
    pub fn context_tokens(&self) -> u64 {
        self.default_agent().context_tokens
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
    use crate::services::compaction::MAX_TIMEOUT_SECONDS;

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
    fn serve_bounds_have_defaults_and_refuse_zero() {
        let config = Config::parse("[serve]\nidleSessionSeconds = 0\n").expect("valid");
        assert_eq!(config.serve.idle_limit(), None);
        assert_eq!(config.serve.max_sessions, 256);
        let (_, message) = Config::parse("[serve]\nmaxSessions = 0\n").expect_err("zero");
        assert!(message.contains("serve.maxSessions"), "{message}");
    }

    #[test]
    fn quarantine_forgives_by_default_and_zero_means_never() {
        let default = Config::parse("").expect("valid");
        assert_eq!(default.quarantine.backoff(), Some(DEFAULT_RETRY_AFTER));
        let never = Config::parse("[quarantine]\nretryAfterSeconds = 0\n").expect("valid");
        assert_eq!(never.quarantine.backoff(), None);
        let at_once = QuarantineConfig {
            retry_after: Some(Duration::ZERO),
            ..never.quarantine
        };
        assert_eq!(at_once.backoff(), Some(Duration::ZERO));
        let (_, message) =
            Config::parse("[quarantine]\nretryAfter = 1\n").expect_err("not a file key");
        assert!(message.contains("retryAfter"), "{message}");
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
    fn compaction_timeouts_resolve_as_the_reference_does() {
        // Floored to whole seconds; what leaves none means the default.
        for (value, seconds) in [
            ("0", 180),
            ("-5", 180),
            ("\"soon\"", 180),
            ("0.5", 180),
            ("-0.5", 180),
            ("1.5", 1),
            ("2.99", 2),
            ("30", 30),
            ("1e12", MAX_TIMEOUT_SECONDS),
        ] {
            let config = Config::parse(&format!(
                "[agents.defaults.compaction]\ntimeoutSeconds = {value}\n"
            ))
            .unwrap_or_else(|error| panic!("{value}: {error:?}"));
            assert_eq!(
                config.sandbox.compaction_timeout_seconds, seconds,
                "{value}"
            );
            assert_eq!(config.default_agent().compaction_timeout_seconds, seconds);
        }
    }

    #[test]
    fn an_agent_may_have_its_own_compaction_timeout() {
        let config = Config::parse(
            "[agents.defaults.compaction]\ntimeoutSeconds = 60\n\
             [[agents.list]]\nid = \"fast\"\ncompaction = { timeoutSeconds = 5.9 }\n\
             [[agents.list]]\nid = \"odd\"\ncompaction = { timeoutSeconds = -1 }\n\
             [[agents.list]]\nid = \"plain\"\n",
        )
        .expect("valid");
        let window = |id: &str| config.agent(id).expect(id).compaction_timeout_seconds;
        assert_eq!(window("fast"), 5);
        assert_eq!(
            window("odd"),
            60,
            "a value that means nothing keeps the defaults'"
        );
        assert_eq!(window("plain"), 60);
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

    #[test]
    fn agents_list_entries_override_the_defaults() {
        let config = Config::parse(
            r#"
            [agents.defaults]
            contextTokens = 32000
            model = "small"
            [agents.defaults.compaction]
            reserveTokens = 4000
            [[agents.list]]
            id = "main"
            [[agents.list]]
            id = "research"
            default = true
            contextTokens = 128000
            compaction = { reserveTokens = 9000, enabled = false }
            "#,
        )
        .expect("valid");
        let research = config.default_agent();
        assert_eq!(research.id, "research", "the entry marked default");
        assert_eq!(research.context_tokens, 128_000);
        assert_eq!(research.model.as_deref(), Some("small"), "inherited");
        assert_eq!(research.reserve_tokens, 9_000);
        assert!(!research.compaction_enabled);
        let main = config.agent("main").expect("listed");
        assert_eq!(main.context_tokens, 32_000);
        assert_eq!(main.reserve_tokens, 4_000);
        assert!(main.compaction_enabled);
        assert_eq!(
            config.context_tokens(),
            128_000,
            "the default agent's window"
        );
        let unknown = config.agent("ghost").expect_err("not listed");
        assert!(unknown.contains("main, research"), "{unknown}");
    }

    #[test]
    fn without_a_list_the_main_agent_is_the_defaults() {
        let config = Config::parse("[agents.defaults]\ncontextTokens = 20000\n").expect("valid");
        assert_eq!(config.default_agent().id, DEFAULT_AGENT_ID);
        assert_eq!(config.agent("main").expect("main").context_tokens, 20_000);
        assert!(config.agent("other").is_err());
    }

    #[test]
    fn a_bad_agents_list_is_named() {
        let (_, twice) =
            Config::parse("[[agents.list]]\nid = \"a\"\n[[agents.list]]\nid = \"a\"\n")
                .expect_err("duplicate");
        assert!(twice.contains("listed twice"), "{twice}");
        let (_, empty) = Config::parse("[[agents.list]]\ncontextTokens = 5\n").expect_err("no id");
        assert!(empty.contains("agents.list[0].id"), "{empty}");
        let (_, defaults) = Config::parse(
            "[[agents.list]]\nid = \"a\"\ndefault = true\n[[agents.list]]\nid = \"b\"\ndefault = true\n",
        )
        .expect_err("two defaults");
        assert!(defaults.contains("a, b"), "{defaults}");
        let (line, compactor_key) =
            Config::parse("[[agents.list]]\nid = \"a\"\ncompaction = { keepRecentTokens = 5 }\n")
                .expect_err("compactor settings are host-wide");
        assert!(line.is_some(), "{compactor_key}");
        assert!(
            compactor_key.contains("keepRecentTokens"),
            "{compactor_key}"
        );
    }

    #[test]
    fn plugin_entries_carry_switches_and_engine_settings() {
        let config = Config::parse(
            r#"
            [plugins]
            enabled = true
            deny = ["shady"]
            [plugins.entries.lossless]
            enabled = false
            [plugins.entries.mine]
            config = { keepTurns = 8, label = "x" }
            "#,
        )
        .expect("valid");
        assert_eq!(config.plugins.enabled, Some(true));
        assert_eq!(config.plugins.deny, vec!["shady".to_owned()]);
        assert_eq!(config.plugins.entries["lossless"].enabled, Some(false));
        let configs = config.engine_configs().expect("small");
        let mine: serde_json::Value = serde_json::from_str(&configs["mine"]).expect("json");
        assert_eq!(mine, serde_json::json!({"keepTurns": 8, "label": "x"}));
        assert!(!configs.contains_key("lossless"), "no config given");
    }

    #[test]
    fn an_oversized_engine_config_is_refused_naming_the_entry() {
        let big = "x".repeat(MAX_ENGINE_CONFIG_BYTES);
        let (_, message) =
            Config::parse(&format!("[plugins.entries.big.config]\nblob = \"{big}\"\n"))
                .expect_err("too large");
        assert!(message.contains("plugins.entries.big.config"), "{message}");
        assert!(message.contains("65536"), "{message}");
    }

    #[test]
    fn an_engines_own_limits_are_read_and_a_zero_is_refused_naming_the_key() {
        let config = Config::parse(
            "[plugins.entries.heavy]\nlimits = { fuelPerCall = 40000000000, callTimeoutMs = 30000 }\n",
        )
        .expect("valid");
        let limits = config.engine_limits().expect("usable");
        assert_eq!(limits["heavy"].fuel_per_call, Some(40_000_000_000));
        assert_eq!(limits["heavy"].call_timeout_ms, Some(30_000));
        assert_eq!(limits["heavy"].fuel_per_compaction, None);
        let (_, zero) =
            Config::parse("[plugins.entries.heavy]\nlimits = { fuelPerCompaction = 0 }\n")
                .expect_err("zero fuel");
        assert!(
            zero.contains("plugins.entries.heavy.limits") && zero.contains("fuelPerCompaction"),
            "{zero}"
        );
        let memory = Config::parse("[plugins.entries.heavy]\nlimits = { memoryLimitMib = 512 }\n")
            .expect("an engine's own memory");
        assert_eq!(
            memory.engine_limits().expect("usable")["heavy"].memory_limit_mib,
            Some(512)
        );
        let (_, huge) =
            Config::parse("[plugins.entries.heavy]\nlimits = { memoryLimitMib = 5000 }\n")
                .expect_err("over what a 32-bit memory holds");
        assert!(
            huge.contains("plugins.entries.heavy.limits") && huge.contains("memoryLimitMib"),
            "{huge}"
        );
        let (_, unknown) =
            Config::parse("[plugins.entries.heavy]\nlimits = { maxInstances = 4 }\n")
                .expect_err("the pool is the sandbox's");
        assert!(unknown.contains("maxInstances"), "{unknown}");
    }
}
