//! A whole host built from a [`Config`]: the transcript store, native
//! compaction and the legacy engine, the state store and host services, the
//! sandbox, the quarantine database, and the engine registry with the
//! bundled example engines and the configured ones registered.

pub mod config;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use tokio_util::sync::CancellationToken;

pub use self::config::{AgentSettings, Config};
use crate::engines::PostgresQuarantine;
use crate::engines::bundled;
use crate::engines::guard::{GuardPolicy, GuardedEngine};
use crate::engines::legacy::LegacyEngine;
use crate::engines::plugins::PluginSettings;
use crate::engines::quarantine::{QuarantineError, QuarantineStore};
use crate::engines::registry::{EngineFactory, RegisterError, RegisterOptions};
use crate::engines::selection::Engines;
use crate::provider::chat::ChatError;
use crate::provider::{Provider, Replay, ReplayScript, ToolExecutor};
use crate::runner::{RunReport, RunnerConfig, Session, TurnReport, TurnRunner};
use crate::sandbox::SandboxError;
use crate::sandbox::{Sandbox, SandboxConfig, SqlAccess};
use crate::services::PostgresState;
use crate::services::compaction::Compactor;
use crate::services::completions::{Completions, ExtractiveCompletions};
use crate::services::native::NativeServices;
use crate::services::sql::SqlService;
use crate::services::state::{EngineState, StateError, StateStore};
use crate::services::summarize::SummarizeError;
use crate::store::{Postgres, StoreError, StoreKind};
use crate::transcript::{NewSession, PostgresLogs, TranscriptError, TranscriptStore};

/// The system prompt replayed conversations are sent with.
pub const REPLAY_SYSTEM_PROMPT: &str = "You are a helpful assistant with access to tools.";
/// The plugin name bundled example engines are registered under.
pub const BUNDLED_OWNER: &str = "bundled";
/// The plugin name engines from `plugins.engines` are registered under.
pub const CONFIG_OWNER: &str = "config";

/// Why a host on the shared store answers an engine's `database.open` with
/// `unavailable` (ARCHITECTURE.md §14).
pub const SQL_ON_SHARED_STORE: &str = "with `[store] kind = \"postgres\"` engines' SQL databases are not kept yet: \
a SQL database lives on one host's disk, and a session that moves to another host would not see it \
(run this engine on the embedded store, or keep its data with host.state-set and host.index-put)";

/// Why a host could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    /// The sandbox configuration is unusable.
    #[error(transparent)]
    Sandbox(#[from] SandboxError),
    /// The quarantine database could not be opened.
    #[error(transparent)]
    Quarantine(#[from] QuarantineError),
    /// The state database could not be opened.
    #[error(transparent)]
    State(#[from] StateError),
    /// The shared store (`[store]`, `--store`) could not be used.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The summarizer configuration is unusable.
    #[error("agents.defaults.compaction.summarizer: {0}")]
    Summarizer(#[from] SummarizeError),
    /// The provider configuration is unusable (e.g. its API key variable is
    /// not set).
    #[error("provider: {0}")]
    Provider(#[from] ChatError),
    /// An engine could not be registered.
    #[error(transparent)]
    Register(#[from] RegisterError),
    /// The configuration is inconsistent (e.g. an engine's settings are too
    /// large, or an agent is not listed).
    #[error("{0}")]
    Config(String),
    /// The data directory could not be created.
    #[error("cannot create the data directory `{}`: {source}", path.display())]
    DataDir {
        /// The directory.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
}

/// A configured host.
pub struct Runtime {
    config: Config,
    data_dir: PathBuf,
    transcripts: TranscriptStore,
    engines: Engines,
    shared: Option<Arc<Postgres>>,
    completions: Arc<Completions>,
}

impl Runtime {
    /// Builds the host `config` describes, with its data under
    /// [`Config::data_dir`].
    pub fn new(config: Config) -> Result<Self, RuntimeError> {
        let data_dir = config.data_dir();
        std::fs::create_dir_all(&data_dir).map_err(|source| RuntimeError::DataDir {
            path: data_dir.clone(),
            source,
        })?;
        let shared = match config.store.kind {
            StoreKind::Embedded => None,
            StoreKind::Postgres => Some(Postgres::connect(
                &config.store.postgres_url()?,
                config.store.pool_size,
            )?),
        };
        let transcripts = match &shared {
            None => TranscriptStore::new(config.transcripts.clone()),
            Some(postgres) => TranscriptStore::with_logs(
                config.transcripts.clone(),
                Arc::new(PostgresLogs::new(postgres.clone())),
            ),
        };
        let compactor = Arc::new(Compactor::from_config(
            transcripts.clone(),
            config.agents.defaults.compaction.clone(),
        )?);
        let (state, quarantine): (Arc<dyn EngineState>, QuarantineStore) = match &shared {
            None => (
                Arc::new(StateStore::open_in(&data_dir, &config.state)?),
                QuarantineStore::open(
                    &data_dir.join("quarantine.sqlite3"),
                    config.quarantine.backoff(),
                )?,
            ),
            Some(postgres) => (
                Arc::new(PostgresState::new(postgres.clone(), &config.state)),
                QuarantineStore::with_backend(
                    Box::new(PostgresQuarantine::new(postgres.clone())),
                    config.quarantine.backoff(),
                )?,
            ),
        };
        let quarantine = Arc::new(quarantine);
        let sql_service = match &shared {
            None => Some(Arc::new(
                SqlService::open_in(&data_dir, config.sql.clone(), state.clone())
                    .map_err(RuntimeError::Config)?,
            )),
            Some(_) => None,
        };
        let sql = match &sql_service {
            Some(service) => SqlAccess::Served(service.clone()),
            None => SqlAccess::Refused(SQL_ON_SHARED_STORE.into()),
        };
        let settings = plugin_settings(&config)?;
        let sandbox = Sandbox::new(SandboxConfig {
            cache_dir: config
                .sandbox
                .cache_dir
                .clone()
                .or_else(|| Some(data_dir.join("cache"))),
            ..config.sandbox.with_room_for(settings.limits.values())
        })?
        .with_sql(sql);
        // Engines' completions: the configured provider's model, else (a
        // replayed model answers only from its recording) offline extractive
        // answers; `ctxbox serve` adds each client's own model, for the
        // calls made for that client (`Completions::set_client_model`).
        let completions = Arc::new(Completions::new(
            config
                .provider
                .completions()
                .unwrap_or_else(|| Arc::new(ExtractiveCompletions)),
            config.completions.clone(),
        ));
        let engines = Engines::new(
            sandbox,
            quarantine,
            Arc::new({
                let services = NativeServices::new(compactor.clone(), state)
                    .with_completions(completions.clone());
                let services = match sql_service {
                    Some(sql) => services.with_sql(sql),
                    None => services,
                };
                if config.agents.defaults.compaction.summarizer.is_none() {
                    services.summarizing_with_model()
                } else {
                    services
                }
            }),
            Arc::new(LegacyEngine::new(compactor)),
            GuardPolicy {
                strict: config.quarantine.strict,
            },
        )?;

        engines.set_plugin_settings(settings);

        let bundled_plugin = engines.registry().plugin(BUNDLED_OWNER);
        for (name, bytes) in bundled::ENGINES {
            let factory = EngineFactory::WasmBytes {
                label: format!("bundled:{name}"),
                bytes: Arc::from(*bytes),
            };
            bundled_plugin.register(name, factory, RegisterOptions::default())?;
        }
        let config_plugin = engines.registry().plugin(CONFIG_OWNER);
        for (id, entry) in &config.plugins.engines {
            let factory = EngineFactory::WasmFile(entry.path.clone());
            config_plugin.register(id, factory, RegisterOptions::default())?;
        }
        Ok(Self {
            config,
            data_dir,
            transcripts,
            engines,
            shared,
            completions,
        })
    }

    /// Engines' model completions: their budgets, totals, and the model
    /// answering them (which an embedding host may swap).
    pub fn completions(&self) -> &Arc<Completions> {
        &self.completions
    }

    /// The shared PostgreSQL store, when `[store]` names one (`None`: the
    /// embedded store in the data directory).
    pub fn shared_store(&self) -> Option<&Arc<Postgres>> {
        self.shared.as_ref()
    }

    /// The configuration.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// Where the host keeps its data.
    pub fn data_dir(&self) -> &std::path::Path {
        &self.data_dir
    }

    /// The transcript store.
    pub fn transcripts(&self) -> &TranscriptStore {
        &self.transcripts
    }

    /// The engines: registry, quarantine, selection.
    pub fn engines(&self) -> &Engines {
        &self.engines
    }

    /// The live model `[provider]` configures, for a host's own turns (pass
    /// it to [`runner`](Self::runner)); `None` for `replay`, the default,
    /// which answers only from recordings ([`replay`](Self::replay)). An
    /// overflow error that does not state the model's window reports
    /// `agents.defaults.contextTokens`. Reads the API key now.
    pub fn provider(&self) -> Result<Option<Arc<dyn Provider>>, RuntimeError> {
        Ok(self.config.provider.build(self.config.context_tokens())?)
    }

    /// The guarded engine of the configured slot
    /// (`plugins.slots.contextEngine`), or of `override_id` when given.
    pub async fn select(&self, override_id: Option<&str>) -> Arc<GuardedEngine> {
        let slot = override_id.or(self.config.plugins.slots.context_engine.as_deref());
        self.engines.select(slot).await
    }

    /// A turn runner for `engine` with this host's transcripts and the
    /// default agent's settings (reserve, proactive compaction, model), for
    /// a model with a `window`-token context that may call `tools`.
    pub fn runner(
        &self,
        engine: Arc<GuardedEngine>,
        provider: Arc<dyn Provider>,
        tool_executor: Arc<dyn ToolExecutor>,
        window: u64,
        tools: Vec<String>,
    ) -> TurnRunner {
        let agent = self.config.default_agent();
        self.agent_runner(&agent, engine, provider, tool_executor, window, tools)
    }

    /// [`runner`](Self::runner) with the settings of `agent` (from
    /// [`Config::agent`]: `agents.defaults` with its `agents.list[]`
    /// overrides).
    pub fn agent_runner(
        &self,
        agent: &AgentSettings,
        engine: Arc<GuardedEngine>,
        provider: Arc<dyn Provider>,
        tool_executor: Arc<dyn ToolExecutor>,
        window: u64,
        tools: Vec<String>,
    ) -> TurnRunner {
        TurnRunner::new(
            engine,
            provider,
            tool_executor,
            self.transcripts.clone(),
            RunnerConfig {
                window,
                reserve_tokens: agent.reserve_tokens,
                proactive_compaction: agent.compaction_enabled,
                system_prompt: REPLAY_SYSTEM_PROMPT.to_owned(),
                model: agent.model.clone(),
                tools,
                compaction_window: Some(std::time::Duration::from_secs(
                    agent.compaction_timeout_seconds,
                )),
                agent: crate::runner::AgentIdentity {
                    id: Some(agent.id.clone()),
                    workspace_dir: agent.workspace.clone(),
                    agent_dir: agent.agent_dir.clone(),
                },
            },
        )
        .with_completion_totals(self.completions.clone())
    }

    /// Replays `script` through `engine` under a `window`-token model into a
    /// new session file at `output` (what `ctxbox run` does). `on_turn`
    /// hears of each turn as it ends.
    pub async fn replay(
        &self,
        script: &ReplayScript,
        engine: Arc<GuardedEngine>,
        window: u64,
        output: &Path,
        abort: &CancellationToken,
        on_turn: &mut (dyn FnMut(usize, Option<&TurnReport>) + Send),
    ) -> Result<RunReport, TranscriptError> {
        let transcript = self.transcripts.create(
            output,
            NewSession {
                session_id: None,
                cwd: ".".into(),
                parent_session: None,
            },
        )?;
        let replay = Arc::new(Replay::new(window));
        let runner = self.runner(
            engine,
            replay.clone(),
            replay.clone(),
            window,
            script.tool_names(),
        );
        let mut session = Session::new(transcript, None);
        let engine_id = runner.engine().selected_id().to_owned();
        let before = self.completions.totals_of(&engine_id);
        let mut report = runner
            .run_script(&mut session, &replay, script, abort, on_turn)
            .await?;
        report.completions = self.completions.totals_of(&engine_id).since(before);
        Ok(report)
    }
}

/// What `config` says about plugins, for the default agent.
fn plugin_settings(config: &Config) -> Result<PluginSettings, RuntimeError> {
    let plugins = &config.plugins;
    let agent = config.default_agent();
    Ok(PluginSettings {
        enabled: plugins.enabled.unwrap_or(true),
        deny: plugins
            .deny
            .iter()
            .map(|name| name.trim().to_owned())
            .collect(),
        disabled: plugins
            .entries
            .iter()
            .filter(|(_, entry)| entry.enabled == Some(false))
            .map(|(name, _)| name.clone())
            .collect(),
        configs: config.engine_configs().map_err(RuntimeError::Config)?,
        limits: config.engine_limits().map_err(RuntimeError::Config)?,
        agent_dir: agent.agent_dir,
        workspace_dir: agent.workspace,
    })
}
