//! Engine selection as the reference does it (its `registry.selection`,
//! `registry.factory-admission` and registry tests): configuration turning
//! engines off, the slot values that mean the default, admission failures,
//! re-registration, and the settings each engine is made with.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use ctxbox_host::contract::engine::{CallOptions, ContextEngine};
use ctxbox_host::contract::failure::{EngineFailure, FailureKind, Operation};
use ctxbox_host::contract::history::History;
use ctxbox_host::contract::types::{AssembleParams, CompactParams};
use ctxbox_host::engines::guard::{GuardAction, GuardPolicy};
use ctxbox_host::engines::plugins::{FactoryContext, PluginSettings};
use ctxbox_host::engines::registry::{EngineFactory, RegisterOptions};
use ctxbox_host::engines::selection::Engines;
use ctxbox_host::runtime::{Config, Runtime};
use ctxbox_host::sandbox::SandboxConfig;
use ctxbox_tests::{conversation, guests, session, zoo_host};
use tokio_util::sync::CancellationToken;

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
            RegisterOptions::default(),
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
