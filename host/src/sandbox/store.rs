//! What each engine instance's wasmtime `Store` holds: its WASI context, its
//! resource table, its memory budget, and the state of the call in progress.

use std::collections::HashMap;
use std::sync::Arc;

use wasmtime::ResourceLimiter;
use wasmtime::component::ResourceTable;
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

use super::call::CallState;
use super::config::SandboxConfig;
use super::pool::DisposalFailures;
use super::sql::SqlAccess;
use super::stdio::OutputTail;
use crate::contract::failure::FailureKind;
use crate::contract::services::HostServices;
use crate::services::sql::Database;

/// Largest table (funcref/externref) an instance may grow to, in elements.
const MAX_TABLE_ELEMENTS: usize = 100_000;

/// The data of one engine instance's store.
pub(crate) struct StoreState {
    pub(crate) wasi: WasiCtx,
    pub(crate) table: ResourceTable,
    pub(crate) memory: MemoryBudget,
    pub(crate) call: CallState,
    pub(crate) engine_id: Arc<str>,
    pub(crate) config: Arc<SandboxConfig>,
    pub(crate) services: Arc<dyn HostServices>,
    pub(crate) stderr: OutputTail,
    /// Where a failed `dispose` of this instance is kept for its engine.
    pub(crate) disposals: Arc<DisposalFailures>,
    /// What `host.engine-config` answers (`plugins.entries.<id>.config`).
    pub(crate) engine_config: Option<Arc<str>>,
    /// Whether and by what the engine's SQL databases are served.
    pub(crate) sql: SqlAccess,
    /// The instance's connections, by database name (`None`: the main one).
    pub(crate) sql_databases: HashMap<Option<String>, Arc<Database>>,
}

impl StoreState {
    pub(crate) fn new(
        engine_id: Arc<str>,
        config: Arc<SandboxConfig>,
        services: Arc<dyn HostServices>,
        disposals: Arc<DisposalFailures>,
    ) -> Self {
        let stdout = OutputTail::new(config.stdio_tail_bytes as usize);
        let stderr = OutputTail::new(config.stdio_tail_bytes as usize);
        // No stdin, env, args, preopens or network: the builder's defaults,
        // spelled out so a change of defaults upstream cannot widen the grant.
        let wasi = WasiCtx::builder()
            .stdout(stdout)
            .stderr(stderr.clone())
            .allow_tcp(false)
            .allow_udp(false)
            .allow_ip_name_lookup(false)
            .build();
        let mut table = ResourceTable::new();
        table.set_max_capacity(config.max_handles as usize);
        Self {
            wasi,
            table,
            memory: MemoryBudget::new(config.memory_limit_bytes()),
            call: CallState::instantiation(&config),
            engine_id,
            config,
            services,
            stderr,
            disposals,
            engine_config: None,
            sql: SqlAccess::default(),
            sql_databases: HashMap::new(),
        }
    }

    /// The state with `sql` serving the engine's SQL databases.
    pub(crate) fn with_sql(self, sql: SqlAccess) -> Self {
        Self { sql, ..self }
    }

    /// The state with `engine_config` as the engine's configuration.
    pub(crate) fn with_engine_config(self, engine_config: Option<Arc<str>>) -> Self {
        Self {
            engine_config,
            ..self
        }
    }
}

impl WasiView for StoreState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

/// A trap the host raised on purpose, carrying its classification.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{message}")]
pub(crate) struct HostTrap {
    pub(crate) kind: FailureKind,
    pub(crate) message: String,
}

impl HostTrap {
    /// The trap as the error a host import returns to stop the call.
    pub(crate) fn error(kind: FailureKind, message: impl Into<String>) -> wasmtime::Error {
        wasmtime::Error::new(Self {
            kind,
            message: message.into(),
        })
    }
}

/// One byte budget shared by all of an instance's linear memories. Growth
/// past it traps at the offending `memory.grow` (or at instantiation).
pub(crate) struct MemoryBudget {
    limit: usize,
    used: usize,
}

impl MemoryBudget {
    fn new(limit: usize) -> Self {
        Self { limit, used: 0 }
    }

    /// Bytes of linear memory the instance holds.
    pub(crate) fn used(&self) -> usize {
        self.used
    }
}

impl ResourceLimiter for MemoryBudget {
    fn memory_growing(
        &mut self,
        current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        let growth = desired.saturating_sub(current);
        if self.used.saturating_add(growth) > self.limit {
            return Err(HostTrap::error(
                FailureKind::Memory,
                format!(
                    "memory budget exceeded: growing to {} bytes would make {} in all, over the {} byte limit",
                    desired,
                    self.used + growth,
                    self.limit
                ),
            ));
        }
        self.used += growth;
        Ok(true)
    }

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        Ok(desired <= MAX_TABLE_ELEMENTS)
    }
}
