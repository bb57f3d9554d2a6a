//! `[store]` in `ctxbox.toml`, and `--store URL` on the command line.

use serde::{Deserialize, Serialize};

use super::error::StoreError;

/// Which store a host keeps its state in.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum StoreKind {
    /// Files and SQLite databases in the data directory: one machine.
    #[default]
    Embedded,
    /// One PostgreSQL database shared by every host.
    Postgres,
}

/// The `[store]` table.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase", deny_unknown_fields)]
pub struct StoreConfig {
    /// `embedded` (default) or `postgres`.
    pub kind: StoreKind,
    /// The PostgreSQL connection URL (`postgres://user:password@host:port/db`,
    /// or key-value form `host=… dbname=…`).
    pub url: Option<String>,
    /// The environment variable holding the URL instead (keeps passwords out
    /// of the file).
    pub url_env: Option<String>,
    /// Connections each host keeps open at most.
    pub pool_size: usize,
    /// How long a session's lease lasts without renewal: a host that dies
    /// mid-turn blocks its sessions this long at most.
    pub lease_ms: u64,
    /// How long a request waits for a session another host is serving before
    /// it is answered "session busy" (default 5 s: within a request's own
    /// deadline, so the client hears why).
    pub lease_wait_ms: u64,
}

impl Default for StoreConfig {
    fn default() -> Self {
        Self {
            kind: StoreKind::Embedded,
            url: None,
            url_env: None,
            pool_size: 8,
            lease_ms: 10_000,
            lease_wait_ms: 5_000,
        }
    }
}

impl StoreConfig {
    /// The configuration `--store URL` asks for: PostgreSQL at `url`, the
    /// rest as configured.
    pub fn with_url(mut self, url: String) -> Self {
        self.kind = StoreKind::Postgres;
        self.url = Some(url);
        self.url_env = None;
        self
    }

    /// The PostgreSQL URL: `url`, else the value of `urlEnv`. An error names
    /// what is missing.
    pub fn postgres_url(&self) -> Result<String, StoreError> {
        match (&self.url, &self.url_env) {
            (Some(url), _) if !url.trim().is_empty() => Ok(url.clone()),
            (_, Some(variable)) => std::env::var(variable)
                .ok()
                .filter(|url| !url.trim().is_empty())
                .ok_or_else(|| StoreError::Config(format!(
                    "`store.urlEnv` names the environment variable `{variable}`, which is not set"
                ))),
            _ => Err(StoreError::Config(
                "`store.kind = \"postgres\"` needs `store.url` or `store.urlEnv`".to_owned(),
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_reads_and_a_missing_url_is_named() {
        let config: StoreConfig =
            toml::from_str("kind = \"postgres\"\nurl = \"postgres://db/ctxbox\"\nleaseMs = 2000")
                .expect("parses");
        assert_eq!(config.kind, StoreKind::Postgres);
        assert_eq!(config.lease_ms, 2_000);
        assert_eq!(
            config.postgres_url().expect("a URL"),
            "postgres://db/ctxbox"
        );

        let from_env: StoreConfig =
            toml::from_str("kind = \"postgres\"\nurlEnv = \"CTXBOX_TEST_UNSET_STORE_URL\"")
                .expect("parses");
        let error = from_env.postgres_url().unwrap_err().to_string();
        assert!(
            error.contains("`CTXBOX_TEST_UNSET_STORE_URL`, which is not set"),
            "{error}"
        );
        let none = StoreConfig {
            kind: StoreKind::Postgres,
            ..StoreConfig::default()
        };
        assert!(
            none.postgres_url()
                .unwrap_err()
                .to_string()
                .contains("needs `store.url`")
        );
        assert!(toml::from_str::<StoreConfig>("kind = \"mysql\"").is_err());

        let overridden = StoreConfig::default().with_url("postgres://other/db".to_owned());
        assert_eq!(overridden.kind, StoreKind::Postgres);
    }
}
