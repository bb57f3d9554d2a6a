//! Shared helpers for ctxbox's end-to-end tests and benches: the guest
//! components the build script compiled, conversation builders, and a native
//! [`HistoryView`](ctxbox_guest::HistoryView) over the host's history.

use std::path::Path;
use std::sync::Arc;

pub use ctxbox_host::check::cases::{conversation, entry, tool_call, tool_result};
use ctxbox_host::contract::services::{HostServices, NoServices};
use ctxbox_host::contract::types::SessionRef;
use ctxbox_host::engines::guard::GuardPolicy;
use ctxbox_host::engines::quarantine::QuarantineStore;
use ctxbox_host::engines::selection::Engines;
use ctxbox_host::sandbox::{Sandbox, SandboxConfig, WasmEngine};

pub mod traces;
pub mod typescript;

/// Paths of the guest components the build script compiled.
pub mod guests {
    include!(concat!(env!("OUT_DIR"), "/guests.rs"));
}

/// How long tests let a large component (a TypeScript engine, about 14 MB;
/// a Python one, larger) compile: minutes in a debug build on a loaded
/// 2-core machine, far past the production default
/// (`sandbox.compileTimeoutMs`, 120 s). Given explicitly so no test depends
/// on the machine's speed; the production limit has tests of its own.
pub const LARGE_COMPONENT_COMPILE_TIMEOUT_MS: u64 = 30 * 60 * 1000;

/// A sandbox sized for tests (few instance slots, default limits otherwise).
pub fn sandbox() -> Sandbox {
    sandbox_with(SandboxConfig::default())
}

/// A sandbox with `config`, its pool shrunk to what tests need.
pub fn sandbox_with(config: SandboxConfig) -> Sandbox {
    let config = SandboxConfig {
        max_instances: config.max_instances.min(32),
        ..config
    };
    Sandbox::new(config).expect("the test sandbox configuration is valid")
}

/// Loads and instantiates the component at `path` with no host services.
pub async fn engine(sandbox: &Sandbox, path: &str) -> WasmEngine {
    engine_with(sandbox, path, Arc::new(NoServices)).await
}

/// Loads and instantiates the component at `path` with `services`.
pub async fn engine_with(
    sandbox: &Sandbox,
    path: &str,
    services: Arc<dyn HostServices>,
) -> WasmEngine {
    let component = sandbox
        .load_file(Path::new(path))
        .unwrap_or_else(|error| panic!("loading {path}: {error}"));
    sandbox
        .instantiate(&component, services)
        .await
        .unwrap_or_else(|error| panic!("instantiating {path}: {error}"))
}

/// Bytes of the files under `dir`, its folders included (a data
/// directory's footprint on disk).
pub fn bytes_under(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|entry| match entry.metadata() {
            Ok(meta) if meta.is_dir() => bytes_under(&entry.path()),
            Ok(meta) => meta.len(),
            Err(_) => 0,
        })
        .sum()
}

/// A session with a made-up transcript path.
pub fn session(id: &str) -> SessionRef {
    SessionRef::new(id, format!("/sessions/{id}.jsonl"))
}

/// A real session transcript from `tests/fixtures/sessions` (see its
/// SOURCES.md).
pub fn fixture(name: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures/sessions")
        .join(name)
}

/// Every real session of `tests/fixtures/sessions`, by file name.
pub const FIXTURE_SESSIONS: [&str; 6] = [
    "claude-opus46-bedrock-subagent-webdev-en.jsonl",
    "deepseek-chat-windows-ops-zh-3-compactions.jsonl",
    "kimi-k2-thinking-rust-coding-de-1-compaction.jsonl",
    "pi-termux-deepseek-v4-discord-bot-ar.jsonl",
    "qwen-minimax-feishu-zh-3-hook-compactions.jsonl",
    "qwen35-feishu-delivery-mirror-branching-zh.jsonl",
];

/// The replay script of fixture `name`: its active branch, as `ctxbox run`
/// replays it. The fixture is read as a snapshot, unlocked: tests replaying
/// the same fixture at once must not find it locked by each other.
pub fn fixture_script(
    transcripts: &ctxbox_host::TranscriptStore,
    name: &str,
) -> ctxbox_host::provider::ReplayScript {
    let recording = transcripts
        .open_read_only(&fixture(name))
        .unwrap_or_else(|error| panic!("fixture {name} opens: {error}"));
    ctxbox_host::provider::ReplayScript::from_messages(
        recording
            .active_branch()
            .into_iter()
            .map(|entry| entry.message),
    )
}

/// Runs `ctxbox check` on `component` and asserts it passes every rule and
/// reports itself as `id`.
pub async fn assert_check_passes(
    component: &Path,
    options: &ctxbox_host::check::CheckOptions,
    id: &str,
) {
    let report = ctxbox_host::check::check_file(component, options)
        .await
        .expect("checker");
    let failures: Vec<_> = report.failures().collect();
    assert!(failures.is_empty(), "{failures:#?}");
    assert_eq!(
        report.engine.as_ref().map(|info| info.id.as_str()),
        Some(id)
    );
}

/// An [`Engines`] in a fresh temporary data dir (kept alive by the
/// returned guard) with every test guest registered by plugin `zoo`.
pub fn zoo_host(config: SandboxConfig, policy: GuardPolicy) -> (tempfile::TempDir, Arc<Engines>) {
    let dir = tempfile::tempdir().expect("temp dir");
    let host = zoo_host_in(dir.path(), config, policy);
    (dir, host)
}

/// An [`Engines`] with its data in `dir`: native compaction with the
/// extractive summarizer, SQLite state and quarantine, and every test guest
/// registered by plugin `zoo` under its crate name.
pub fn zoo_host_in(dir: &Path, config: SandboxConfig, policy: GuardPolicy) -> Arc<Engines> {
    let quarantine =
        QuarantineStore::open(&dir.join("quarantine.sqlite3"), None).expect("quarantine store");
    zoo_host_with(dir, config, policy, quarantine)
}

/// [`zoo_host_in`] with its quarantine records in `quarantine` (e.g. one
/// with a back-off and a test clock).
pub fn zoo_host_with(
    dir: &Path,
    config: SandboxConfig,
    policy: GuardPolicy,
    quarantine: QuarantineStore,
) -> Arc<Engines> {
    zoo_host_storing(dir, config, policy, quarantine, &Default::default())
}

/// [`zoo_host_with`] holding each engine's state, index and SQL databases
/// to `state` (e.g. a small quota).
pub fn zoo_host_storing(
    dir: &Path,
    config: SandboxConfig,
    policy: GuardPolicy,
    quarantine: QuarantineStore,
    state: &ctxbox_host::services::state::StateConfig,
) -> Arc<Engines> {
    use ctxbox_host::engines::legacy::LegacyEngine;
    use ctxbox_host::engines::registry::{EngineFactory, RegisterOptions};
    use ctxbox_host::sandbox::SqlAccess;
    use ctxbox_host::services::compaction::{CompactionConfig, Compactor};
    use ctxbox_host::services::native::NativeServices;
    use ctxbox_host::services::sql::SqlService;
    use ctxbox_host::services::state::StateStore;
    use ctxbox_host::transcript::TranscriptStore;

    let compactor = Arc::new(
        Compactor::from_config(
            TranscriptStore::new(Default::default()),
            CompactionConfig::default(),
        )
        .expect("the extractive summarizer needs no setup"),
    );
    let state = Arc::new(StateStore::open_in(dir, state).expect("state store"));
    let sql = Arc::new(
        SqlService::open_in(dir, Default::default(), state.clone()).expect("SQL databases"),
    );
    let host = Engines::new(
        sandbox_with(config).with_sql(SqlAccess::Served(sql.clone())),
        Arc::new(quarantine),
        Arc::new(NativeServices::new(compactor.clone(), state).with_sql(sql)),
        Arc::new(LegacyEngine::new(compactor)),
        policy,
    )
    .expect("legacy registers");
    let plugin = host.registry().plugin("zoo");
    for (name, path) in guests::ALL {
        plugin
            .register(
                name,
                EngineFactory::WasmFile(path.into()),
                RegisterOptions::default(),
            )
            .expect("each guest registers once");
    }
    Arc::new(host)
}
