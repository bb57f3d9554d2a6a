//! The wasm sandbox (ARCHITECTURE.md §5): one shared wasmtime engine for every plugin,
//! loading and checking components, and running engine calls under limits.
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use std::sync::Arc;
//! use ctxbox_host::sandbox::{Sandbox, SandboxConfig};
//! use ctxbox_host::contract::services::NoServices;
//! use ctxbox_host::contract::engine::ContextEngine;
//!
//! let sandbox = Sandbox::new(SandboxConfig::default())?;
//! let component = sandbox.load_file("keep_recent.wasm".as_ref())?;
//! let engine = sandbox.instantiate(&component, Arc::new(NoServices)).await?;
//! println!("loaded {}", engine.info().name);
//! # Ok(()) }
//! ```

mod bindings;
mod call;
mod capabilities;
mod classify;
pub mod config;
mod convert;
mod error;
mod history_resource;
mod imports;
mod instance;
mod load;
mod pool;
mod powers;
mod sql;
mod stdio;
mod store;
mod wasm_engine;
mod wire_size;

use std::hash::{Hash, Hasher};
use std::sync::Arc;

use sha2::{Digest, Sha256};
use wasmtime::component::{HasSelf, Linker};
use wasmtime::{InstanceAllocationStrategy, PoolingAllocationConfig, ProfilingStrategy};

pub use self::config::{EngineLimits, SandboxConfig};
pub use self::error::{LoadError, RefusedImport, SandboxError};
pub use self::load::{LoadedComponent, WIT_PACKAGE, WIT_VERSION, check_component};
use self::pool::InstancePool;
pub use self::sql::SqlAccess;
use self::store::StoreState;
pub use self::wasm_engine::{EngineIdentity, WasmEngine};

/// Core wasm instances one component may create (a Rust `wasm32-wasip2`
/// engine uses a handful: its module plus adapter shims).
const MAX_CORE_INSTANCES_PER_COMPONENT: u32 = 32;
/// Linear memories one component may define.
const MAX_MEMORIES_PER_COMPONENT: u32 = 2;
/// Tables one component may define.
const MAX_TABLES_PER_COMPONENT: u32 = 8;
/// Extra native stack for host code on top of the wasm stack of a call.
const HOST_STACK_HEADROOM: usize = 1024 * 1024;

/// The sandbox: cheap to clone, shared by every wasm engine of a host.
#[derive(Clone)]
pub struct Sandbox {
    inner: Arc<Inner>,
    /// Whether engines' SQL databases are served ([`Sandbox::with_sql`]).
    sql: SqlAccess,
}

struct Inner {
    engine: wasmtime::Engine,
    linker: Linker<StoreState>,
    config: Arc<SandboxConfig>,
    pool: Arc<InstancePool>,
    /// Hex SHA-256 of the engine's precompile-compatibility hash: part of
    /// every cache file name.
    compatibility_hash: String,
}

impl Sandbox {
    /// Builds the shared engine and the linker.
    pub fn new(config: SandboxConfig) -> Result<Self, SandboxError> {
        config.validate()?;
        let engine = wasmtime::Engine::new(&engine_config(&config)?)
            .map_err(|error| SandboxError::Engine(format!("{error:#}")))?;

        let mut linker = Linker::new(&engine);
        wasmtime_wasi::p2::add_to_linker_async(&mut linker).map_err(|error| {
            SandboxError::Link {
                what: "WASI",
                reason: format!("{error:#}"),
            }
        })?;
        bindings::ImportsWorld::add_to_linker::<StoreState, HasSelf<StoreState>>(
            &mut linker,
            |state| state,
        )
        .map_err(|error| SandboxError::Link {
            what: "the host interface",
            reason: format!("{error:#}"),
        })?;

        let compatibility_hash = {
            let mut hasher = Sha256Hasher(Sha256::new());
            engine.precompile_compatibility_hash().hash(&mut hasher);
            hex::encode(hasher.0.finalize())
        };
        let pool = InstancePool::new(config.max_instances);
        Ok(Self {
            inner: Arc::new(Inner {
                engine,
                linker,
                config: Arc::new(config),
                pool,
                compatibility_hash,
            }),
            sql: SqlAccess::default(),
        })
    }

    /// This sandbox serving the `sql` import with `sql` (by default every
    /// `database.open` answers `unavailable`). Engines loaded afterwards
    /// get it.
    pub fn with_sql(self, sql: SqlAccess) -> Self {
        Self { sql, ..self }
    }

    /// The limits in force.
    pub fn config(&self) -> &SandboxConfig {
        &self.inner.config
    }

    /// Engine instances alive now, across all engines.
    pub fn live_instances(&self) -> u32 {
        self.inner.pool.live()
    }
}

/// Set (to anything) to write `/tmp/perf-<pid>.map` for the compiled engine
/// code, so `perf record`/`perf report` name the engine's functions.
pub const PERF_MAP_VARIABLE: &str = "CTXBOX_PERF_MAP";

/// The wasmtime configuration of ARCHITECTURE.md §5.
fn engine_config(config: &SandboxConfig) -> Result<wasmtime::Config, SandboxError> {
    let stack = config.max_wasm_stack_kib as usize * 1024;
    let instances = config.max_instances;
    let mut pooling = PoolingAllocationConfig::default();
    pooling
        .total_component_instances(instances)
        // Only a counter in wasmtime's pool (nothing is reserved per core
        // instance), so every engine may use its per-component maximum: a
        // Python engine uses more than a handful.
        .total_core_instances(instances.saturating_mul(MAX_CORE_INSTANCES_PER_COMPONENT))
        .total_memories(instances.saturating_mul(MAX_MEMORIES_PER_COMPONENT))
        .total_tables(instances.saturating_mul(MAX_TABLES_PER_COMPONENT / 2))
        .total_stacks(instances)
        .max_core_instances_per_component(MAX_CORE_INSTANCES_PER_COMPONENT)
        .max_memories_per_component(MAX_MEMORIES_PER_COMPONENT)
        .max_tables_per_component(MAX_TABLES_PER_COMPONENT)
        .max_memory_size(config.pool_memory_limit_bytes());

    let mut wasm = wasmtime::Config::new();
    wasm.wasm_component_model(true)
        .consume_fuel(config.guards)
        .concurrency_support(false)
        .max_wasm_stack(stack)
        .async_stack_size(stack + HOST_STACK_HEADROOM)
        .allocation_strategy(InstanceAllocationStrategy::Pooling(pooling));
    if std::env::var_os(PERF_MAP_VARIABLE).is_some() {
        // Engine code shows by function name in `perf report`.
        wasm.profiler(ProfilingStrategy::PerfMap);
    }
    Ok(wasm)
}

/// Feeds `Hash` output into SHA-256, for a stable cache key.
struct Sha256Hasher(Sha256);

impl Hasher for Sha256Hasher {
    fn finish(&self) -> u64 {
        // Only the SHA-256 digest is used; `Hasher` requires this method.
        0
    }

    fn write(&mut self, bytes: &[u8]) {
        self.0.update(bytes);
    }
}
