//! Options every subcommand that needs a host shares: the config file, the
//! data directory and the shared store.

use std::path::PathBuf;

use anyhow::Context;
use ctxbox_host::runtime::Runtime;
use ctxbox_host::runtime::config::Config;

/// The default config file, used when it exists in the working directory.
const DEFAULT_CONFIG: &str = "ctxbox.toml";

/// `--config`, `--data-dir` and `--store`.
#[derive(Debug, Clone, clap::Args)]
pub struct HostArgs {
    /// Configuration file (default: ./ctxbox.toml if it exists).
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Where sessions, caches and databases live (overrides `dataDir`).
    #[arg(long, value_name = "DIR")]
    pub data_dir: Option<PathBuf>,
    /// Keep transcripts, engine state, quarantines and turn commits in this
    /// PostgreSQL database, shared with other hosts (`postgres://…`;
    /// overrides `[store]`).
    #[arg(long, value_name = "URL")]
    pub store: Option<String>,
}

impl HostArgs {
    /// The configuration, with the command line's overrides.
    pub fn config(&self) -> anyhow::Result<Config> {
        let path = match &self.config {
            Some(path) => Some(path.clone()),
            None => Some(PathBuf::from(DEFAULT_CONFIG)).filter(|path| path.exists()),
        };
        let mut config = match path {
            Some(path) => Config::load(&path)?,
            None => Config::default(),
        };
        if let Some(dir) = &self.data_dir {
            config.data_dir = Some(dir.clone());
        }
        if let Some(url) = &self.store {
            config.store = config.store.with_url(url.clone());
        }
        Ok(config)
    }

    /// The host the configuration describes.
    pub fn runtime(&self) -> anyhow::Result<Runtime> {
        let config = self.config()?;
        let data_dir = config.data_dir();
        Runtime::new(config)
            .with_context(|| format!("cannot set up the host in `{}`", data_dir.display()))
    }
}
