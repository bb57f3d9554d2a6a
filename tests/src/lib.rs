//! Shared helpers for ctxbox's end-to-end tests and benches: the guest
//! components the build script compiled, conversation builders, and a native
//! [`HistoryView`](ctxbox_guest::HistoryView) over the host's history.

use std::ops::Range;
use std::path::Path;
use std::sync::Arc;

use ctxbox_host::engine_host::EngineHost;
use ctxbox_host::guard::GuardPolicy;
use ctxbox_host::history::{History, ToolPairing};
use ctxbox_host::sandbox::{Sandbox, SandboxConfig, WasmEngine};
use ctxbox_host::services::{HostServices, NoServices};
use ctxbox_host::types::{AgentMessage, ContentBlock, MessageEntry, SessionRef, StopReason};

/// Paths of the guest components the build script compiled.
pub mod guests {
    include!(concat!(env!("OUT_DIR"), "/guests.rs"));
}

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

/// A session with a made-up transcript path.
pub fn session(id: &str) -> SessionRef {
    SessionRef::new(id, format!("/sessions/{id}.jsonl"))
}

/// An entry with id `id` holding `message`.
pub fn entry(id: impl Into<String>, message: AgentMessage) -> MessageEntry {
    MessageEntry {
        id: id.into(),
        parent_id: None,
        timestamp_ms: 1_772_501_268_324,
        message,
    }
}

/// An assistant message calling tool `call_id`.
pub fn tool_call(call_id: &str) -> AgentMessage {
    AgentMessage::Assistant {
        content: vec![
            ContentBlock::text("Let me look."),
            ContentBlock::ToolCall {
                id: call_id.into(),
                name: "exec".into(),
                arguments_json: format!(r#"{{"command":"cat notes-{call_id}.md"}}"#),
            },
        ],
        model: Some("test-model".into()),
        provider: Some("test".into()),
        usage: None,
        stop_reason: StopReason::ToolUse,
        error_message: None,
    }
}

/// The result of tool call `call_id`, with `text` as output.
pub fn tool_result(call_id: &str, text: impl Into<String>) -> AgentMessage {
    AgentMessage::ToolResult {
        tool_call_id: call_id.into(),
        tool_name: "exec".into(),
        content: vec![ContentBlock::text(text)],
        is_error: false,
        details: None,
    }
}

/// A conversation of `turns` turns, each: a user ask, an assistant tool call,
/// its result, and an assistant answer (4 entries per turn, ids `e0`, `e1`…).
/// Every third turn is in Chinese, so token estimates mix scripts.
pub fn conversation(turns: usize) -> Vec<MessageEntry> {
    let mut entries = Vec::with_capacity(turns * 4);
    for turn in 0..turns {
        let call_id = format!("call-{turn}");
        let ask = if turn % 3 == 2 {
            format!("请检查第 {turn} 个配置文件并告诉我哪里出错了。")
        } else {
            format!("Please check config file number {turn} and tell me what is wrong with it.")
        };
        let output = format!(
            "[server]\nport = {}\nhost = \"0.0.0.0\"\n# turn {turn}\n",
            8000 + turn
        );
        for message in [
            AgentMessage::user_text(ask),
            tool_call(&call_id),
            tool_result(&call_id, output.repeat(1 + turn % 4)),
            AgentMessage::assistant_text(format!(
                "Turn {turn}: the port is fine; the host binding is too open."
            )),
        ] {
            let id = format!("e{}", entries.len());
            entries.push(entry(id, message));
        }
    }
    entries
}

/// The host's history seen through the guest SDK's [`HistoryView`], for
/// running an engine's logic natively on exactly what the wasm build sees.
///
/// [`HistoryView`]: ctxbox_guest::HistoryView
pub struct NativeView<'a>(pub &'a History);

impl ctxbox_guest::HistoryView for NativeView<'_> {
    fn len(&self) -> u32 {
        self.0.len() as u32
    }

    fn entry(&self, _index: u32) -> Option<ctxbox_guest::MessageEntry> {
        // Engines benchmarked natively decide from kinds, pairing and tokens.
        None
    }

    fn kind(&self, index: u32) -> Option<ctxbox_guest::MessageKind> {
        use ctxbox_guest::MessageKind as Guest;
        use ctxbox_host::types::MessageKind as Host;
        self.0.kind(index as usize).map(|kind| match kind {
            Host::User => Guest::User,
            Host::Assistant => Guest::Assistant,
            Host::ToolResult => Guest::ToolResult,
            Host::Custom => Guest::Custom,
            Host::CompactionSummary => Guest::CompactionSummary,
            Host::BranchSummary => Guest::BranchSummary,
        })
    }

    fn tool_pairing(&self, index: u32) -> Option<ctxbox_guest::ToolPairing> {
        self.0
            .tool_pairing(index as usize)
            .map(|pairing| match pairing {
                ToolPairing::None => ctxbox_guest::ToolPairing::None,
                ToolPairing::ToolCalls { last_result } => {
                    ctxbox_guest::ToolPairing::ToolCalls(last_result)
                }
                ToolPairing::ToolResult { call } => ctxbox_guest::ToolPairing::ToolResult(call),
            })
    }

    fn tokens(&self, range: Range<u32>) -> u64 {
        self.0.tokens(range.start as usize..range.end as usize)
    }
}

/// A real transcript from the shared fixtures (`../shared/fixtures/sessions`).
pub fn fixture(name: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../shared/fixtures/sessions")
        .join(name)
}

/// An [`EngineHost`] in a fresh temporary data dir (kept alive by the
/// returned guard) with every test guest registered by plugin `zoo`.
pub fn zoo_host(
    config: SandboxConfig,
    policy: GuardPolicy,
) -> (tempfile::TempDir, Arc<EngineHost>) {
    let dir = tempfile::tempdir().expect("temp dir");
    let host = zoo_host_in(dir.path(), config, policy);
    (dir, host)
}

/// An [`EngineHost`] with its data in `dir`: native compaction with the
/// extractive summarizer, SQLite state and quarantine, and every test guest
/// registered by plugin `zoo` under its crate name.
pub fn zoo_host_in(dir: &Path, config: SandboxConfig, policy: GuardPolicy) -> Arc<EngineHost> {
    use ctxbox_host::compaction::{CompactionConfig, Compactor};
    use ctxbox_host::legacy::LegacyEngine;
    use ctxbox_host::native_services::NativeServices;
    use ctxbox_host::quarantine::QuarantineStore;
    use ctxbox_host::registry::{EngineFactory, RegisterOptions};
    use ctxbox_host::state_store::{StateConfig, StateStore};
    use ctxbox_host::transcript::TranscriptStore;

    let compactor = Arc::new(
        Compactor::from_config(
            TranscriptStore::new(Default::default()),
            CompactionConfig::default(),
        )
        .expect("the extractive summarizer needs no setup"),
    );
    let state = Arc::new(StateStore::open_in(dir, &StateConfig::default()).expect("state store"));
    let quarantine = Arc::new(
        QuarantineStore::open(&dir.join("quarantine.sqlite3"), None).expect("quarantine store"),
    );
    let host = EngineHost::new(
        sandbox_with(config),
        quarantine,
        Arc::new(NativeServices::new(compactor.clone(), state)),
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
