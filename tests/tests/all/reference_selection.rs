//! Engine selection as the reference does it (its `registry.selection`,
//! `registry.factory-admission` and registry tests): configuration turning
//! engines off, the slot values that mean the default, admission failures,
//! re-registration, discovery-only registrations, a refreshed `legacy`,
//! cancelled resolutions, engines whose `info` is unusable, and the settings
//! each engine is made with.

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use ctxbox_host::contract::engine::{CallOptions, ContextEngine, EngineResult};
use ctxbox_host::contract::failure::{EngineFailure, FailureKind, Operation};
use ctxbox_host::contract::history::History;
use ctxbox_host::contract::types::{
    AfterTurnParams, AssembleParams, AssembleResult, BootstrapResult, CompactParams, CompactResult,
    EngineInfo, IngestBatchResult, IngestResult, MaintainReason, MaintainResult, MessageEntry,
    SessionRef, SubagentEndReason, SubagentSpawn,
};
use ctxbox_host::engines::guard::{GuardAction, GuardPolicy};
use ctxbox_host::engines::plugins::{FactoryContext, PluginSettings};
use ctxbox_host::engines::registry::{EngineFactory, Lifecycle, RegisterOptions};
use ctxbox_host::engines::selection::Engines;
use ctxbox_host::runtime::{Config, Runtime};
use ctxbox_host::sandbox::{Sandbox, SandboxConfig};
use ctxbox_tests::traces::Capture;
use ctxbox_tests::{conversation, guests, session, zoo_host};
use tokio_util::sync::CancellationToken;
use tracing::Level;

/// Registers a native engine `id` for plugin `owner` whose factory counts
/// its calls and keeps the context it was given.
async fn counted_native(
    host: &Engines,
    owner: &str,
    id: &str,
) -> (
    Arc<AtomicUsize>,
    Arc<std::sync::Mutex<Option<FactoryContext>>>,
) {
    counted_native_with(host, owner, id, RegisterOptions::default()).await
}

/// [`counted_native`], registered with `options`.
async fn counted_native_with(
    host: &Engines,
    owner: &str,
    id: &str,
    options: RegisterOptions,
) -> (
    Arc<AtomicUsize>,
    Arc<std::sync::Mutex<Option<FactoryContext>>>,
) {
    let made = Arc::new(AtomicUsize::new(0));
    let seen = Arc::new(std::sync::Mutex::new(None));
    let legacy = host.select(None).await;
    let (counter, context) = (made.clone(), seen.clone());
    host.registry()
        .plugin(owner)
        .register(
            id,
            EngineFactory::Native(Arc::new(move |given: &FactoryContext| {
                counter.fetch_add(1, Ordering::SeqCst);
                *context.lock().expect("lock") = Some(given.clone());
                legacy.clone() as Arc<dyn ContextEngine>
            })),
            options,
        )
        .expect("registers");
    (made, seen)
}

/// One `assemble` over a short conversation, which must succeed.
async fn assemble_once(engine: &dyn ContextEngine) -> ctxbox_host::contract::types::AssembleResult {
    let history = History::new(conversation(2));
    engine
        .assemble(
            &CallOptions::default(),
            &session("s"),
            &history,
            &AssembleParams::default(),
        )
        .await
        .expect("assembles")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_engine_configuration_turns_off_uses_legacy_without_quarantine_or_making_it() {
    let set = |names: &[&str]| names.iter().map(|name| name.to_string()).collect();
    let disabled = |names| PluginSettings {
        disabled: set(names),
        ..PluginSettings::default()
    };
    let denied = |names| PluginSettings {
        deny: set(names),
        ..PluginSettings::default()
    };
    let off = PluginSettings {
        enabled: false,
        ..PluginSettings::default()
    };
    let cases: Vec<(&str, bool, PluginSettings)> = vec![
        ("disabled by id", true, disabled(&["made"])),
        ("disabled, not registered", false, disabled(&["made"])),
        ("plugins turned off", true, off.clone()),
        ("plugins turned off, not registered", false, off),
        ("denied by id", true, denied(&["made"])),
        ("denied, not registered", false, denied(&["made"])),
        ("its plugin disabled", true, disabled(&["vendor"])),
        ("its plugin denied", true, denied(&["vendor"])),
    ];
    for (name, registered, settings) in cases {
        let (_dir, host) = zoo_host(SandboxConfig::default(), GuardPolicy::default());
        let made = if registered {
            Some(counted_native(&host, "vendor", "made").await.0)
        } else {
            None
        };
        host.set_plugin_settings(settings);
        let engine = host.select(Some("made")).await;
        assert_eq!(engine.selected_id(), "legacy", "{name}");
        assert_eq!(engine.serving_id(), "legacy", "{name}");
        assert!(
            engine.resolution_failure().is_none(),
            "{name}: not a failure"
        );
        assemble_once(engine.as_ref()).await;
        // Compaction is legacy's too, on purpose: no "quarantined" reason.
        let transcript = _dir.path().join("session.jsonl");
        std::fs::copy(
            ctxbox_tests::fixture("qwen35-feishu-delivery-mirror-branching-zh.jsonl"),
            &transcript,
        )
        .expect("copy fixture");
        let (reference, history) = {
            // Closed again before legacy opens it for writing.
            let opened = ctxbox_host::TranscriptStore::new(Default::default())
                .open(&transcript)
                .expect("open fixture");
            (opened.session_ref(), opened.history())
        };
        let compacted = engine
            .compact(
                &CallOptions::default(),
                &reference,
                &history,
                &CompactParams {
                    force: true,
                    token_budget: Some(8_000),
                    ..CompactParams::default()
                },
            )
            .await
            .expect("legacy compacts");
        assert!(compacted.ok && compacted.compacted, "{name}: {compacted:?}");
        assert!(
            !compacted.reason.unwrap_or_default().contains("quarantined"),
            "{name}: legacy on purpose, not in anyone's place"
        );
        assert!(
            engine.take_events().is_empty(),
            "{name}: no fallback reported"
        );
        assert_eq!(
            engine.calls_served_by_legacy(),
            0,
            "{name}: legacy on purpose"
        );
        assert!(
            host.quarantine().list().is_empty(),
            "{name}: nothing quarantined"
        );
        if let Some(made) = made {
            assert_eq!(
                made.load(Ordering::SeqCst),
                0,
                "{name}: factory never called"
            );
        }
        let reason = host.refusal(Some("made")).expect("a reason");
        assert!(
            reason.contains("plugins."),
            "{name}: names the key: {reason}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_default_slot_values_use_legacy_without_quarantine() {
    let (_dir, host) = zoo_host(SandboxConfig::default(), GuardPolicy::default());
    // With plugins on (so no switch can explain the answer) and, as the
    // reference's test has it, off.
    for settings in [
        PluginSettings::default(),
        PluginSettings {
            enabled: false,
            ..PluginSettings::default()
        },
    ] {
        host.set_plugin_settings(settings);
        for slot in [None, Some(""), Some("legacy"), Some("none"), Some(" none ")] {
            let engine = host.select(slot).await;
            assert_eq!(engine.selected_id(), "legacy", "{slot:?}");
            assert!(engine.serving_selected(), "{slot:?}");
            assert!(engine.resolution_failure().is_none(), "{slot:?}");
        }
    }
    assert!(host.quarantine().list().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_enabled_entry_of_the_owner_keeps_the_engine_in_use() {
    let (_dir, host) = zoo_host(SandboxConfig::default(), GuardPolicy::default());
    let (made, _) = counted_native(&host, "vendor", "made").await;
    // Another engine's or plugin's switch does not reach this one.
    host.set_plugin_settings(PluginSettings {
        disabled: BTreeSet::from(["other".to_owned()]),
        deny: BTreeSet::from(["zoo".to_owned()]),
        ..PluginSettings::default()
    });
    let engine = host.select(Some("made")).await;
    assert_eq!(engine.selected_id(), "made");
    assert!(engine.serving_selected());
    assert_eq!(made.load(Ordering::SeqCst), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn turning_an_engine_off_and_on_again_needs_no_re_registration() {
    let (_dir, host) = zoo_host(SandboxConfig::default(), GuardPolicy::default());
    let (made, _) = counted_native(&host, "vendor", "made").await;
    host.set_plugin_settings(PluginSettings {
        disabled: BTreeSet::from(["made".to_owned()]),
        ..PluginSettings::default()
    });
    assert_eq!(host.select(Some("made")).await.serving_id(), "legacy");
    assert_eq!(made.load(Ordering::SeqCst), 0);
    host.set_plugin_settings(PluginSettings::default());
    let engine = host.select(Some("made")).await;
    assert_eq!(engine.serving_id(), "made");
    assert_eq!(
        made.load(Ordering::SeqCst),
        1,
        "made once, when first enabled"
    );
    assert!(host.quarantine().list().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_or_failing_enabled_engine_is_still_quarantined() {
    let (_dir, host) = zoo_host(SandboxConfig::default(), GuardPolicy::default());
    let missing = host.select(Some("never-registered")).await;
    assert_eq!(missing.serving_id(), "legacy");
    let failure = missing.resolution_failure().expect("a failure");
    assert!(
        failure.message.contains("not registered"),
        "{}",
        failure.message
    );
    let broken = host.select(Some("wrong-version")).await;
    assert_eq!(broken.serving_id(), "legacy");
    let ids: Vec<String> = host
        .quarantine()
        .list()
        .into_iter()
        .map(|record| record.engine_id)
        .collect();
    assert_eq!(ids, ["never-registered", "wrong-version"]);
}

/// The reference propagates a host admission failure without quarantining
/// the engine: here, no free instance slot while selecting.
/// Starts a `sleeper` call that holds a slot of the pool until the returned
/// token is cancelled (the task ends soon after).
async fn hold_the_only_slot(host: &Engines) -> (CancellationToken, tokio::task::JoinHandle<()>) {
    let sleeper = host.select(Some("sleeper")).await;
    let abort = CancellationToken::new();
    let call = CallOptions::with_abort(abort.clone());
    let busy = tokio::spawn(async move {
        let history = History::new(conversation(2));
        let _ = sleeper
            .assemble(
                &call,
                &session("busy"),
                &history,
                &AssembleParams::default(),
            )
            .await;
    });
    tokio::time::sleep(Duration::from_millis(500)).await;
    (abort, busy)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_free_instance_slot_at_selection_is_an_admission_failure_the_caller_retries() {
    let config = SandboxConfig {
        max_instances: 1,
        call_timeout_ms: 60_000,
        ..SandboxConfig::default()
    };
    let (_dir, host) = zoo_host(config, GuardPolicy::default());
    // The sleeper's call holds the pool's only slot while it sleeps.
    let (abort, busy) = hold_the_only_slot(&host).await;

    let engine = host.select(Some("keep-recent")).await;
    let failure = engine.resolution_failure().expect("why");
    assert_eq!(failure.kind, FailureKind::Overloaded);
    // The call fails for the caller to retry: no other engine answers in
    // the selected one's place, so a stateful engine misses nothing.
    let refused = engine
        .assemble(
            &CallOptions::default(),
            &session("s"),
            &History::new(conversation(2)),
            &AssembleParams::default(),
        )
        .await
        .expect_err("refused, not served by legacy");
    assert_eq!(refused.kind, FailureKind::Overloaded);
    assert_eq!(refused.operation, Operation::Assemble);
    assert_eq!(engine.calls_served_by_legacy(), 0);
    let events = engine.take_events();
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(events[0].action, GuardAction::Overloaded);
    assert!(
        host.quarantine().get("keep-recent").is_none(),
        "an admission failure is not the engine's defect"
    );

    abort.cancel();
    busy.await.expect("the sleeper's call ends");
    let engine = host.select(Some("keep-recent")).await;
    assert!(engine.serving_selected(), "the next selection tries again");
    assert_eq!(engine.serving_id(), "keep-recent");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_free_instance_slot_at_call_time_refuses_the_call_without_a_stand_in() {
    let config = SandboxConfig {
        max_instances: 1,
        call_timeout_ms: 60_000,
        ..SandboxConfig::default()
    };
    let (_dir, host) = zoo_host(config, GuardPolicy::default());
    let engine = host.select(Some("keep-recent")).await;
    assert!(engine.serving_selected());
    // The sleeper's call takes the pool's only slot (keep-recent's idle
    // instance is recycled for it) and holds it while it sleeps.
    let (abort, busy) = hold_the_only_slot(&host).await;

    let refused = engine
        .assemble(
            &CallOptions::default(),
            &session("s"),
            &History::new(conversation(2)),
            &AssembleParams::default(),
        )
        .await
        .expect_err("refused, not served by legacy");
    assert_eq!(refused.kind, FailureKind::Overloaded);
    assert_eq!(engine.calls_served_by_legacy(), 0);
    let events = engine.take_events();
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(events[0].action, GuardAction::Overloaded);
    let record = host.quarantine().get("keep-recent");
    assert!(record.is_none(), "{record:?}");
    assert!(engine.serving_selected(), "still the engine in use");

    abort.cancel();
    busy.await.expect("the sleeper's call ends");
    assemble_once(engine.as_ref()).await;
    assert_eq!(
        engine.calls_served_by_legacy(),
        0,
        "the retry is the engine's"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn registering_a_native_engine_again_clears_its_quarantine() {
    let (_dir, host) = zoo_host(SandboxConfig::default(), GuardPolicy::default());
    let failure = EngineFailure::new("made", Operation::Assemble, FailureKind::Panic, "boom");
    host.quarantine()
        .record("plugin:vendor", None, &failure)
        .expect("record");
    assert_eq!(host.select(Some("made")).await.serving_id(), "legacy");
    counted_native(&host, "vendor", "made").await;
    assert!(host.quarantine().get("made").is_none());
    assert_eq!(host.select(Some("made")).await.serving_id(), "made");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn engines_are_given_their_configured_settings() {
    let (_dir, host) = zoo_host(SandboxConfig::default(), GuardPolicy::default());
    let (_, seen) = counted_native(&host, "vendor", "made").await;
    let config: Arc<str> = Arc::from(r#"{"keepTurns":8}"#);
    host.set_plugin_settings(PluginSettings {
        configs: [
            ("made".to_owned(), config.clone()),
            ("param-echo".to_owned(), Arc::from(r#"{"echo":"me"}"#)),
        ]
        .into(),
        agent_dir: Some("/agents/main".into()),
        workspace_dir: Some("/work/space".into()),
        ..PluginSettings::default()
    });
    host.select(Some("made")).await;
    let context = seen.lock().expect("lock").clone().expect("factory called");
    assert_eq!(context.config, Some(config));
    assert_eq!(context.agent_dir.as_deref(), Some("/agents/main".as_ref()));
    assert_eq!(
        context.workspace_dir.as_deref(),
        Some("/work/space".as_ref())
    );

    // A wasm engine reads its own entry through `host.engine-config`.
    let echo = host.select(Some("param-echo")).await;
    let result = assemble_once(echo.as_ref()).await;
    let addition = result.system_prompt_addition.expect("echo");
    assert!(addition.ends_with(r#"config={"echo":"me"}"#), "{addition}");
    assert!(
        !addition.contains("keepTurns"),
        "only its own entry: {addition}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_config_file_turns_engines_off_and_configures_them() {
    let dir = tempfile::tempdir().expect("temp dir");
    let text = format!(
        "dataDir = {:?}\n[plugins]\ndeny = [\"lossless\"]\n\
         [plugins.engines.echo]\npath = {:?}\n\
         [plugins.entries.echo.config]\nmode = \"test\"\n",
        dir.path().join("data"),
        guests::PARAM_ECHO,
    );
    let path = dir.path().join("ctxbox.toml");
    std::fs::write(&path, text).expect("write");
    let runtime = Runtime::new(Config::load(&path).expect("valid")).expect("runtime");
    let denied = runtime.select(Some("lossless")).await;
    assert_eq!(denied.serving_id(), "legacy");
    assert!(runtime.engines().quarantine().list().is_empty());
    let echo = runtime.select(Some("echo")).await;
    let result = assemble_once(echo.as_ref()).await;
    let addition = result.system_prompt_addition.expect("echo");
    assert!(
        addition.ends_with(r#"config={"mode":"test"}"#),
        "{addition}"
    );
}

/// `registry.test.ts`: a fresh host's default engine is core's and serves an
/// unset slot.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fresh_hosts_legacy_is_owned_by_core_and_serves_an_unset_slot() {
    let dir = tempfile::tempdir().expect("temp dir");
    let text = format!("dataDir = {:?}\n", dir.path().join("data"));
    let runtime = Runtime::new(Config::parse(&text).expect("valid")).expect("runtime");
    let registration = runtime
        .engines()
        .registry()
        .get("legacy")
        .expect("registered");
    assert_eq!(
        registration.owner,
        ctxbox_host::engines::registry::Owner::Core
    );
    let engine = runtime.select(None).await;
    assert_eq!(
        (engine.selected_id(), engine.serving_id()),
        ("legacy", "legacy")
    );
    assert!(engine.serving_selected());
    assemble_once(engine.as_ref()).await;
    assert!(engine.take_events().is_empty(), "nothing to guard");
    assert!(runtime.engines().quarantine().list().is_empty());
}

/// A native engine that answers as `inner` does under its own `info`,
/// counting its `assemble` calls and its disposals.
struct Marked {
    info: EngineInfo,
    inner: Arc<dyn ContextEngine>,
    assembled: Arc<AtomicUsize>,
    disposed: Arc<AtomicUsize>,
}

impl Marked {
    /// `inner` (a fresh host's legacy) as `id` named `name`.
    fn new(inner: Arc<dyn ContextEngine>, id: &str, name: &str) -> Self {
        Self {
            info: EngineInfo {
                id: id.to_owned(),
                name: name.to_owned(),
                ..inner.info().clone()
            },
            inner,
            assembled: Arc::default(),
            disposed: Arc::default(),
        }
    }
}

#[async_trait]
impl ContextEngine for Marked {
    fn info(&self) -> &EngineInfo {
        &self.info
    }

    async fn bootstrap(
        &self,
        call: &CallOptions,
        session: &SessionRef,
        history: &History,
    ) -> EngineResult<BootstrapResult> {
        self.inner.bootstrap(call, session, history).await
    }

    async fn ingest(
        &self,
        call: &CallOptions,
        session: &SessionRef,
        entry: &MessageEntry,
        heartbeat: bool,
    ) -> EngineResult<IngestResult> {
        self.inner.ingest(call, session, entry, heartbeat).await
    }

    async fn ingest_batch(
        &self,
        call: &CallOptions,
        session: &SessionRef,
        entries: &[MessageEntry],
        heartbeat: bool,
    ) -> EngineResult<IngestBatchResult> {
        self.inner
            .ingest_batch(call, session, entries, heartbeat)
            .await
    }

    async fn assemble(
        &self,
        call: &CallOptions,
        session: &SessionRef,
        history: &History,
        params: &AssembleParams,
    ) -> EngineResult<AssembleResult> {
        self.assembled.fetch_add(1, Ordering::SeqCst);
        self.inner.assemble(call, session, history, params).await
    }

    async fn compact(
        &self,
        call: &CallOptions,
        session: &SessionRef,
        history: &History,
        params: &CompactParams,
    ) -> EngineResult<CompactResult> {
        self.inner.compact(call, session, history, params).await
    }

    async fn after_turn(
        &self,
        call: &CallOptions,
        session: &SessionRef,
        history: &History,
        params: &AfterTurnParams,
    ) -> EngineResult<()> {
        self.inner.after_turn(call, session, history, params).await
    }

    async fn maintain(
        &self,
        call: &CallOptions,
        session: &SessionRef,
        history: &History,
        reason: MaintainReason,
        runtime_context: Option<&str>,
    ) -> EngineResult<MaintainResult> {
        self.inner
            .maintain(call, session, history, reason, runtime_context)
            .await
    }

    async fn prepare_subagent_spawn(
        &self,
        call: &CallOptions,
        spawn: &SubagentSpawn,
    ) -> EngineResult<Option<String>> {
        self.inner.prepare_subagent_spawn(call, spawn).await
    }

    async fn rollback_subagent_spawn(
        &self,
        call: &CallOptions,
        preparation_id: &str,
    ) -> EngineResult<()> {
        self.inner
            .rollback_subagent_spawn(call, preparation_id)
            .await
    }

    async fn on_subagent_ended(
        &self,
        call: &CallOptions,
        child_session_key: &str,
        reason: SubagentEndReason,
    ) -> EngineResult<()> {
        self.inner
            .on_subagent_ended(call, child_session_key, reason)
            .await
    }

    async fn dispose(&self) -> EngineResult<()> {
        self.disposed.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }
}

/// `registry.ts`: a registration for read-only discovery is never made;
/// selecting it uses the default engine, without quarantine, with one
/// warning naming the id and owner.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_discovery_only_engine_resolves_to_legacy_with_one_warning_and_no_quarantine() {
    let (_dir, host) = zoo_host(SandboxConfig::default(), GuardPolicy::default());
    let discovery = RegisterOptions {
        lifecycle: Lifecycle::Discovery,
        ..RegisterOptions::default()
    };
    let (made, _) = counted_native_with(&host, "vendor", "found", discovery).await;
    let capture = Capture::default();
    for _ in 0..3 {
        let engine = capture.run(host.select(Some("found"))).await;
        assert_eq!(engine.serving_id(), "legacy");
        assert!(engine.resolution_failure().is_none(), "not a failure");
        capture.run(assemble_once(engine.as_ref())).await;
        assert!(engine.take_events().is_empty(), "no fallback reported");
    }
    assert_eq!(
        made.load(Ordering::SeqCst),
        0,
        "its factory is never called"
    );
    assert!(host.quarantine().list().is_empty(), "nothing quarantined");
    let warnings: Vec<_> = capture
        .events()
        .into_iter()
        .filter(|event| event.level == Level::WARN)
        .collect();
    assert_eq!(warnings.len(), 1, "one warning: {warnings:?}");
    assert!(
        warnings[0].message.contains("discovery only"),
        "{warnings:?}"
    );
    assert_eq!(warnings[0].field("engine"), "found");
    assert_eq!(warnings[0].field("owner"), "plugin:vendor");

    // Runtime activation (the same owner, refreshing) makes it live; a
    // discovery pass after that changes nothing.
    let refresh = RegisterOptions {
        allow_same_owner_refresh: true,
        ..RegisterOptions::default()
    };
    let (made, _) = counted_native_with(&host, "vendor", "found", refresh).await;
    counted_native_with(
        &host,
        "vendor",
        "found",
        RegisterOptions {
            allow_same_owner_refresh: true,
            lifecycle: Lifecycle::Discovery,
        },
    )
    .await;
    let engine = host.select(Some("found")).await;
    assert_eq!(engine.serving_id(), "found");
    assert_eq!(made.load(Ordering::SeqCst), 1);
}

/// Code that does not name itself registers through the public path, as
/// `public-sdk`; its engine is selected like any other and is recorded under
/// that owner when it fails.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_engine_registered_through_the_public_path_is_selected_and_owned_by_public_sdk() {
    let (_dir, host) = zoo_host(SandboxConfig::default(), GuardPolicy::default());
    host.registry()
        .public()
        .register(
            "open-keep-recent",
            EngineFactory::WasmFile(guests::KEEP_RECENT.into()),
            RegisterOptions::default(),
        )
        .expect("registers");
    let engine = host.select(Some("open-keep-recent")).await;
    assert_eq!(engine.serving_id(), "open-keep-recent");
    assemble_once(engine.as_ref()).await;
    assert_eq!(engine.calls_served_by_legacy(), 0);

    host.registry()
        .public()
        .register(
            "open-broken",
            EngineFactory::WasmFile(guests::WRONG_VERSION.into()),
            RegisterOptions::default(),
        )
        .expect("registers");
    assert_eq!(
        host.select(Some("open-broken")).await.serving_id(),
        "legacy"
    );
    let record = host.quarantine().get("open-broken").expect("quarantined");
    assert_eq!(record.owner, "public-sdk");
}

/// `legacy.registration.ts`: core registers `legacy` with a same-owner
/// refresh; the refreshed engine is the one every later fallback uses.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn core_can_refresh_legacy_and_later_selections_fall_back_to_it() {
    let (_dir, host) = zoo_host(SandboxConfig::default(), GuardPolicy::default());
    let before = host.select(Some("never-registered")).await;
    let refreshed = Arc::new(Marked::new(
        host.select(None).await,
        "legacy",
        "Legacy, refreshed",
    ));
    let assembled = refreshed.assembled.clone();
    host.registry()
        .register_core(
            "legacy",
            EngineFactory::native(refreshed),
            RegisterOptions {
                allow_same_owner_refresh: true,
                ..RegisterOptions::default()
            },
        )
        .expect("core refreshes legacy");
    // Selections made after the refresh use it: the default slot, and the
    // fallback of an engine that could not be made.
    for slot in [None, Some("never-registered")] {
        let engine = host.select(slot).await;
        assert_eq!(engine.serving_id(), "legacy", "{slot:?}");
        let before = assembled.load(Ordering::SeqCst);
        assemble_once(engine.as_ref()).await;
        assert_eq!(assembled.load(Ordering::SeqCst), before + 1, "{slot:?}");
    }
    // One resolved before it keeps the engine it was made with.
    let count = assembled.load(Ordering::SeqCst);
    assemble_once(before.as_ref()).await;
    assert_eq!(assembled.load(Ordering::SeqCst), count);
    // A plugin still cannot take it.
    assert!(
        host.registry()
            .plugin("vendor")
            .register(
                "legacy",
                EngineFactory::native(host.select(None).await),
                RegisterOptions::default(),
            )
            .is_err()
    );
}

/// `registry.ts`: a factory whose engine fails contract validation has the
/// engine disposed, is quarantined (`contract-validation`; ctxbox's
/// operation is `info`) and the default engine serves.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_engine_whose_info_fails_validation_is_disposed_and_not_served() {
    let (_dir, host) = zoo_host(SandboxConfig::default(), GuardPolicy::default());
    let nameless = Arc::new(Marked::new(host.select(None).await, "nameless-native", " "));
    let (disposed, assembled) = (nameless.disposed.clone(), nameless.assembled.clone());
    host.registry()
        .plugin("vendor")
        .register(
            "nameless-native",
            EngineFactory::native(nameless),
            RegisterOptions::default(),
        )
        .expect("registers");
    let engine = host.select(Some("nameless-native")).await;
    assert_eq!(engine.serving_id(), "legacy");
    let failure = engine.resolution_failure().expect("refused");
    assert_eq!(failure.operation, Operation::Info);
    assert_eq!(failure.kind, FailureKind::InvalidOutput);
    assert!(
        failure.message.contains("empty name"),
        "{}",
        failure.message
    );
    assert_eq!(disposed.load(Ordering::SeqCst), 1, "disposed once");
    assemble_once(engine.as_ref()).await;
    assert_eq!(assembled.load(Ordering::SeqCst), 0, "never served");
    let record = host.quarantine().get("nameless-native").expect("recorded");
    assert_eq!(record.operation, "info");
}

/// The same for a component: its instance gets its `dispose` call before it
/// is dropped, so the only instance slot is free again for the next engine.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_component_whose_info_fails_validation_is_disposed_and_its_slot_freed() {
    let config = SandboxConfig {
        max_instances: 1,
        ..SandboxConfig::default()
    };
    let (_dir, host) = zoo_host(config, GuardPolicy::default());
    let capture = Capture::default();
    let nameless = capture.run(host.select(Some("blank-name"))).await;
    assert_eq!(nameless.serving_id(), "legacy");
    let failure = nameless.resolution_failure().expect("refused");
    assert_eq!(failure.operation, Operation::Info);
    let disposed = capture.with_message("disposed");
    assert_eq!(disposed.len(), 1, "{:?}", capture.events());
    assert_eq!(disposed[0].target, "ctxbox::engine");
    assert_eq!(host.sandbox().live_instances(), 0, "its instance is gone");
    let engine = host.select(Some("keep-recent")).await;
    assert_eq!(engine.serving_id(), "keep-recent", "the slot is free");
}

/// `registry.factory-admission.test.ts`: the owner cancelling a resolution
/// propagates: no fallback, no quarantine, and a later caller resolves
/// normally.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelling_a_resolution_propagates_without_fallback_or_record() {
    let cache = tempfile::tempdir().expect("cache dir");
    let config = SandboxConfig {
        max_instances: 1,
        dispose_timeout_ms: 60_000,
        cache_dir: Some(cache.path().to_owned()),
        ..SandboxConfig::default()
    };
    // keep-recent compiled into the cache first: its selection below then
    // reaches the pool (and slow-disposer's dispose) within milliseconds.
    // Compiling it there instead took longer than the cancellation's delay
    // on a loaded machine, so the cancellation landed before the recycle
    // and the next selection waited out the 60 s dispose.
    Sandbox::new(config.clone())
        .expect("sandbox")
        .load_file(Path::new(guests::KEEP_RECENT))
        .expect("keep-recent compiles into the cache");
    let (_dir, host) = zoo_host(config, GuardPolicy::default());
    // The pool's only slot holds slow-disposer's idle instance: making
    // keep-recent recycles it, which waits on its hour-long `dispose`.
    assert_eq!(
        host.select(Some("slow-disposer")).await.serving_id(),
        "slow-disposer"
    );
    let cancel = CancellationToken::new();
    let started = std::time::Instant::now();
    let cancelling = {
        let cancel = cancel.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_secs(2)).await;
            cancel.cancel();
        })
    };
    let failure = match host.select_cancellable(Some("keep-recent"), &cancel).await {
        Err(failure) => failure,
        Ok(engine) => panic!("cancelled, yet {} serves", engine.serving_id()),
    };
    cancelling.await.expect("cancels");
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "given up when cancelled, not after the dispose deadline"
    );
    assert_eq!(failure.kind, FailureKind::Aborted);
    assert_eq!(failure.engine_id, "keep-recent");
    assert!(host.quarantine().list().is_empty(), "nothing recorded");
    // Waiting on the given-up one would take slow-disposer's 60 s dispose
    // deadline; resolving on its own is a cached load.
    let next = tokio::time::timeout(Duration::from_secs(20), host.select(Some("keep-recent")))
        .await
        .expect("the next selection does not wait on the given-up one");
    assert_eq!(next.serving_id(), "keep-recent");
    // A selection already cancelled never starts.
    let cancelled = CancellationToken::new();
    cancelled.cancel();
    assert!(
        host.select_cancellable(Some("keep-recent"), &cancelled)
            .await
            .is_err()
    );
    assert!(host.quarantine().list().is_empty());
}

/// `registry.ts`: a failure while resolving is logged once, at resolution,
/// as one error line naming the engine, its owner, the operation and the
/// reason.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_resolution_logs_one_error_line_naming_id_owner_operation_and_reason() {
    let (_dir, host) = zoo_host(SandboxConfig::default(), GuardPolicy::default());
    let capture = Capture::default();
    let engine = capture.run(host.select(Some("wrong-version"))).await;
    let errors = |capture: &Capture| -> Vec<_> {
        capture
            .events()
            .into_iter()
            .filter(|event| event.level == Level::ERROR)
            .collect()
    };
    let logged = errors(&capture);
    assert_eq!(logged.len(), 1, "one error line, at resolution: {logged:?}");
    let line = &logged[0];
    assert_eq!(line.field("engine"), "wrong-version");
    assert_eq!(line.field("owner"), "plugin:zoo");
    assert_eq!(line.field("operation"), "load");
    assert!(line.field("reason").contains("0.1.0"), "{line:?}");
    // Serving through legacy and selecting it again adds no error line.
    capture.run(assemble_once(engine.as_ref())).await;
    capture.run(host.select(Some("wrong-version"))).await;
    assert_eq!(errors(&capture).len(), 1, "{:?}", capture.events());
}

/// A component that imports, beside functions this host has, one it does not
/// (`host.teleport`): built against a newer contract than this host's.
const NEEDS_TELEPORT: &str = r#"(component
  (import "ctxbox:engine/host@0.1.0" (instance
    (export "report-progress" (func))
    (export "aborted" (func (result bool)))
    (export "teleport" (func (param "where" string)))
  ))
  (instance $engine)
  (export "ctxbox:engine/engine@0.1.0" (instance $engine))
)"#;

/// `host-compat.ts`: an engine's host requirements are checked before it
/// runs, naming each missing capability. ctxbox derives them from the
/// component's imports: one needing a function this host lacks is never
/// made; `legacy` serves and nothing is recorded against the engine (the
/// host is what falls short), with one error line naming the capability.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_engine_needing_a_capability_this_host_lacks_is_refused_naming_it() {
    let (_dir, host) = zoo_host(SandboxConfig::default(), GuardPolicy::default());
    let bytes = wat::parse_str(NEEDS_TELEPORT).expect("valid component text");
    host.registry()
        .plugin("future")
        .register(
            "teleporter",
            EngineFactory::WasmBytes {
                label: "teleporter.wasm".into(),
                bytes: bytes.into(),
            },
            RegisterOptions::default(),
        )
        .expect("registers");
    let capture = Capture::default();
    let engine = capture.run(host.select(Some("teleporter"))).await;
    assert_eq!(engine.serving_id(), "legacy");
    let failure = engine.resolution_failure().expect("refused");
    assert_eq!(failure.kind, FailureKind::HostFault);
    assert!(
        failure.message.contains("host.teleport"),
        "names the missing capability: {}",
        failure.message
    );
    assert!(
        !failure.message.contains("report-progress") && !failure.message.contains("aborted"),
        "names only what is missing: {}",
        failure.message
    );
    assert!(host.quarantine().list().is_empty(), "nothing recorded");
    let errors: Vec<_> = capture
        .events()
        .into_iter()
        .filter(|event| event.level == Level::ERROR)
        .collect();
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert_eq!(errors[0].field("engine"), "teleporter");
    assert_eq!(errors[0].field("owner"), "plugin:future");
    assert!(
        errors[0].field("reason").contains("host.teleport"),
        "{errors:?}"
    );
    assemble_once(engine.as_ref()).await;
    assert_eq!(engine.calls_served_by_legacy(), 1);
}
