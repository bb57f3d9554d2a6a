//! Each sandbox limit proven with a tiny hostile guest, plus the load path's
//! refusals and the compiled-engine cache.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ctxbox_host::contract::engine::{CallOptions, ContextEngine};
use ctxbox_host::contract::failure::{FailureKind, Operation};
use ctxbox_host::contract::history::History;
use ctxbox_host::contract::services::NoServices;
use ctxbox_host::contract::types::AssembleParams;
use ctxbox_host::sandbox::LoadError;
use ctxbox_host::sandbox::{EngineIdentity, EngineLimits, Sandbox, SandboxConfig};
use ctxbox_tests::{conversation, engine, guests, sandbox, sandbox_with, session};
use tokio_util::sync::CancellationToken;

/// Slack for wall-clock bounds on a shared, noisy machine: these tests show a
/// call is stopped near its deadline, not how precisely (that is benched).
const SCHEDULING_SLACK: Duration = Duration::from_secs(3);

async fn assemble_failure(
    sandbox: &Sandbox,
    guest: &str,
    prompt: Option<&str>,
) -> ctxbox_host::contract::failure::EngineFailure {
    let engine = engine(sandbox, guest).await;
    let params = AssembleParams {
        prompt: prompt.map(str::to_owned),
        ..AssembleParams::default()
    };
    engine
        .assemble(
            &CallOptions::default(),
            &session("s1"),
            &History::new(conversation(2)),
            &params,
        )
        .await
        .expect_err("the hostile engine must fail")
}

/// `guest` registered as `id` with its own `limits`: the failure of its
/// `assemble`, and how long the call took.
async fn failure_with_own_limits(
    sandbox: &Sandbox,
    guest: &str,
    id: &str,
    limits: EngineLimits,
) -> (ctxbox_host::contract::failure::EngineFailure, Duration) {
    let component = sandbox
        .load_file(Path::new(guest))
        .expect("the guest loads");
    let identity = EngineIdentity {
        id: id.to_owned(),
        owner: "plugin:limits-test".to_owned(),
        config: None,
        limits,
    };
    let engine = sandbox
        .instantiate_as(&component, identity, Arc::new(NoServices))
        .await
        .expect("instantiates");
    let started = Instant::now();
    let failure = engine
        .assemble(
            &CallOptions::default(),
            &session("s1"),
            &History::new(conversation(2)),
            &AssembleParams::default(),
        )
        .await
        .expect_err("the hostile engine never answers");
    (failure, started.elapsed())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_endless_loop_is_stopped_at_its_deadline() {
    let sandbox = sandbox_with(SandboxConfig {
        call_timeout_ms: 300,
        fuel_per_call: u64::MAX / 4,
        ..SandboxConfig::default()
    });
    let started = Instant::now();
    let failure = assemble_failure(&sandbox, guests::SPIN, None).await;
    let elapsed = started.elapsed();
    assert_eq!(failure.kind, FailureKind::Timeout, "{failure}");
    assert_eq!(failure.operation, Operation::Assemble);
    assert_eq!(failure.engine_id, "spin");
    assert!(
        elapsed >= Duration::from_millis(300),
        "stopped early: {elapsed:?}"
    );
    assert!(
        elapsed < Duration::from_millis(300) + SCHEDULING_SLACK,
        "stopped late: {elapsed:?}"
    );
}

/// On one thread, with no other worker to run timers or tasks: the spinning
/// guest yields every so often, so another engine's call on the same thread
/// answers meanwhile, and the spin is still stopped at its deadline.
#[tokio::test(flavor = "current_thread")]
async fn an_endless_loop_yields_to_other_calls_on_its_thread_and_stops_at_its_deadline() {
    let sandbox = sandbox_with(SandboxConfig {
        call_timeout_ms: 1_500,
        fuel_per_call: u64::MAX / 4,
        ..SandboxConfig::default()
    });
    let spin = engine(&sandbox, guests::SPIN).await;
    let keep_recent = engine(&sandbox, guests::KEEP_RECENT).await;
    let history = History::new(conversation(4));
    let params = AssembleParams::default();
    let options = CallOptions::default();
    let started = Instant::now();
    let spinning = async {
        let outcome = spin
            .assemble(&options, &session("s1"), &history, &params)
            .await;
        (outcome, started.elapsed())
    };
    let answering = async {
        // Starts once the spin is running.
        tokio::task::yield_now().await;
        let outcome = keep_recent
            .assemble(&options, &session("s2"), &history, &params)
            .await;
        (outcome, started.elapsed())
    };
    let ((spun, spin_ended), (answered, answer_ended)) = tokio::join!(spinning, answering);

    let failure = spun.expect_err("the endless loop must be stopped");
    assert_eq!(failure.kind, FailureKind::Timeout, "{failure}");
    assert!(
        spin_ended >= Duration::from_millis(1_500),
        "stopped early: {spin_ended:?}"
    );
    assert!(
        spin_ended < Duration::from_millis(1_500) + SCHEDULING_SLACK,
        "stopped late: {spin_ended:?}"
    );
    answered.expect("keep-recent answers beside the spinning engine");
    assert!(
        answer_ended < spin_ended,
        "keep-recent answered only after the spin ended ({answer_ended:?} vs {spin_ended:?}): the spinning guest did not yield"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cpu_hog_runs_out_of_fuel() {
    let sandbox = sandbox_with(SandboxConfig {
        fuel_per_call: 50_000_000,
        call_timeout_ms: 120_000,
        ..SandboxConfig::default()
    });
    let failure = assemble_failure(&sandbox, guests::FUEL_BOMB, None).await;
    assert_eq!(failure.kind, FailureKind::OutOfFuel, "{failure}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_engines_own_limits_replace_the_sandboxs_for_that_engine_alone() {
    let sandbox = sandbox_with(SandboxConfig {
        fuel_per_call: 50_000_000,
        call_timeout_ms: 120_000,
        ..SandboxConfig::default()
    });
    let generous = EngineLimits {
        fuel_per_call: Some(u64::MAX / 4),
        call_timeout_ms: Some(300),
        ..EngineLimits::default()
    };
    let failures = [
        failure_with_own_limits(&sandbox, guests::FUEL_BOMB, "bomb-own", generous).await,
        failure_with_own_limits(
            &sandbox,
            guests::FUEL_BOMB,
            "bomb-plain",
            EngineLimits::default(),
        )
        .await,
    ];
    let (own, own_time) = &failures[0];
    assert_eq!(
        own.kind,
        FailureKind::Timeout,
        "its own fuel outlasts its own deadline: {own}"
    );
    assert!(
        *own_time < Duration::from_millis(300) + SCHEDULING_SLACK,
        "stopped late: {own_time:?}"
    );
    let (plain, _) = &failures[1];
    assert_eq!(
        plain.kind,
        FailureKind::OutOfFuel,
        "the other keeps the sandbox's fuel: {plain}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_memory_hog_hits_the_instance_budget() {
    let sandbox = sandbox_with(SandboxConfig {
        memory_limit_mib: 16,
        ..SandboxConfig::default()
    });
    let failure = assemble_failure(&sandbox, guests::MEMORY_BOMB, None).await;
    assert_eq!(failure.kind, FailureKind::Memory, "{failure}");
    assert!(
        failure.message.contains("16777216 byte limit"),
        "{}",
        failure.message
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_engines_own_memory_limit_above_the_sandboxs_holds_it_and_no_other() {
    let own = EngineLimits {
        memory_limit_mib: Some(48),
        ..EngineLimits::default()
    };
    // The pool lets a memory grow to the largest engine's limit; each
    // instance's budget is its own engine's.
    let sandbox = sandbox_with(
        SandboxConfig {
            memory_limit_mib: 16,
            ..SandboxConfig::default()
        }
        .with_room_for([&own]),
    );
    for (id, limits, limit_bytes) in [
        ("bomb-own", own.clone(), 48 * 1024 * 1024),
        ("bomb-plain", EngineLimits::default(), 16 * 1024 * 1024),
    ] {
        let (failure, _) = failure_with_own_limits(&sandbox, guests::MEMORY_BOMB, id, limits).await;
        assert_eq!(failure.kind, FailureKind::Memory, "{id}: {failure}");
        assert!(
            failure
                .message
                .contains(&format!("{limit_bytes} byte limit")),
            "{id} stops at {limit_bytes} bytes: {}",
            failure.message
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runaway_recursion_overflows_the_wasm_stack() {
    let failure = assemble_failure(&sandbox(), guests::DEEP_RECURSION, None).await;
    assert_eq!(failure.kind, FailureKind::StackOverflow, "{failure}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panic_is_classified_with_the_guest_message_and_the_instance_replaced() {
    let sandbox = sandbox();
    let engine = engine(&sandbox, guests::PANICKER).await;
    let history = History::new(conversation(2));
    let call = CallOptions::default();
    let panic = AssembleParams {
        prompt: Some("panic".into()),
        ..AssembleParams::default()
    };
    let failure = engine
        .assemble(&call, &session("s1"), &history, &panic)
        .await
        .expect_err("panics");
    assert_eq!(failure.kind, FailureKind::Panic, "{failure}");
    assert!(
        failure
            .stderr_tail
            .contains("engine exploded on a history of 8 entries"),
        "stderr tail: {:?}",
        failure.stderr_tail
    );
    // The poisoned store was dropped; the same session gets a fresh instance.
    let result = engine
        .assemble(&call, &session("s1"), &history, &AssembleParams::default())
        .await
        .expect("a fresh instance serves the next call");
    assert_eq!(result.estimated_tokens, history.total_tokens());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_abort_before_the_call_never_reaches_the_engine() {
    let sandbox = sandbox();
    let engine = engine(&sandbox, guests::SPIN).await;
    let abort = CancellationToken::new();
    abort.cancel();
    let failure = engine
        .assemble(
            &CallOptions::with_abort(abort),
            &session("s1"),
            &History::new(conversation(1)),
            &AssembleParams::default(),
        )
        .await
        .expect_err("aborted");
    assert_eq!(failure.kind, FailureKind::Aborted);
    assert!(
        failure.message.contains("before the call started"),
        "{}",
        failure.message
    );
    assert_eq!(
        engine.live_instances().await,
        1,
        "no session instance was created"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_abort_during_the_call_interrupts_it_after_the_grace_period() {
    let sandbox = sandbox_with(SandboxConfig {
        call_timeout_ms: 60_000,
        fuel_per_call: u64::MAX / 4,
        abort_grace_ms: 50,
        ..SandboxConfig::default()
    });
    let engine = engine(&sandbox, guests::SPIN).await;
    let abort = CancellationToken::new();
    let trigger = abort.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(100)).await;
        trigger.cancel();
    });
    let started = Instant::now();
    let failure = engine
        .assemble(
            &CallOptions::with_abort(abort),
            &session("s1"),
            &History::new(conversation(1)),
            &AssembleParams::default(),
        )
        .await
        .expect_err("aborted");
    assert_eq!(failure.kind, FailureKind::Aborted, "{failure}");
    assert!(started.elapsed() < Duration::from_millis(150) + SCHEDULING_SLACK);
}

fn load_error(bytes: &[u8]) -> LoadError {
    sandbox()
        .load_bytes("engine.wasm", bytes)
        .expect_err("the bytes must be refused")
}

#[test]
fn malformed_files_get_their_own_clear_errors() {
    let error = load_error(b"#!/bin/sh\necho not wasm\n");
    assert!(matches!(error, LoadError::NotWasm { .. }), "{error}");

    let error = load_error(b"\0asm\x01\x00\x00\x00");
    assert!(matches!(error, LoadError::CoreModule { .. }), "{error}");
    assert!(error.to_string().contains("wasm32-wasip2"), "{error}");

    let component = std::fs::read(guests::KEEP_RECENT).expect("keep-recent was built");
    let error = load_error(&component[..component.len() / 3]);
    assert!(matches!(error, LoadError::Invalid { .. }), "{error}");
    assert!(
        error.to_string().contains("engine.wasm"),
        "names the file: {error}"
    );
}

#[test]
fn a_component_over_the_size_cap_is_refused_before_it_is_read() {
    let sandbox = sandbox_with(SandboxConfig {
        max_component_kib: 16,
        ..SandboxConfig::default()
    });
    let error = sandbox
        .load_file(Path::new(guests::KEEP_RECENT))
        .expect_err("keep-recent is over 16 KiB");
    assert!(matches!(error, LoadError::TooLarge { .. }), "{error}");
    assert!(
        error.to_string().contains("sandbox.maxComponentKib"),
        "{error}"
    );
}

/// An empty component with a custom section of `size` bytes: no engine.
fn component_with_custom_section(size: usize) -> Vec<u8> {
    let mut payload = vec![1, b'x'];
    payload.resize(size, 0);
    let mut bytes = b"\0asm\x0d\x00\x01\x00".to_vec();
    bytes.push(0); // custom section
    let mut length = payload.len();
    loop {
        let byte = (length & 0x7f) as u8;
        length >>= 7;
        if length == 0 {
            bytes.push(byte);
            break;
        }
        bytes.push(byte | 0x80);
    }
    bytes.extend(payload);
    bytes
}

#[test]
fn what_is_no_engine_is_refused_before_compiling_and_compiling_is_bounded() {
    // With a 1 ms compile budget, anything that reached the compiler would
    // fail with `CompileTimeout`: these are refused before it.
    let sandbox = sandbox_with(SandboxConfig {
        compile_timeout_ms: 1,
        ..SandboxConfig::default()
    });
    let error = sandbox
        .load_bytes("padded.wasm", &component_with_custom_section(8 << 20))
        .expect_err("no engine export");
    assert!(matches!(error, LoadError::NotAnEngine { .. }), "{error}");
    let error = sandbox
        .load_file(Path::new(guests::WRONG_VERSION))
        .expect_err("another version");
    assert!(
        matches!(error, LoadError::UnsupportedVersion { .. }),
        "{error}"
    );
    let error = sandbox
        .load_file(Path::new(guests::PHONE_HOME))
        .expect_err("network import");
    assert!(
        matches!(error, LoadError::DisallowedImport { .. }),
        "{error}"
    );

    // A real engine reaches the compiler, which does not finish in 1 ms.
    let error = sandbox
        .load_file(Path::new(guests::KEEP_RECENT))
        .expect_err("compiling takes longer than 1 ms");
    assert!(matches!(error, LoadError::CompileTimeout { .. }), "{error}");
    assert!(
        error.to_string().contains("sandbox.compileTimeoutMs"),
        "{error}"
    );
}

#[test]
fn a_missing_file_names_its_path() {
    let error = sandbox()
        .load_file(Path::new("/nowhere/engine.wasm"))
        .expect_err("missing");
    assert!(matches!(error, LoadError::Io { .. }));
    assert!(
        error.to_string().contains("/nowhere/engine.wasm"),
        "{error}"
    );
}

#[test]
fn another_contract_version_is_refused_naming_both_versions() {
    let error = sandbox()
        .load_file(Path::new(guests::WRONG_VERSION))
        .expect_err("0.2.0 is not supported");
    assert!(
        matches!(error, LoadError::UnsupportedVersion { .. }),
        "{error}"
    );
    let message = error.to_string();
    assert!(message.contains("ctxbox:engine/engine@0.2.0"), "{message}");
    assert!(message.contains("ctxbox:engine/engine@0.1.0"), "{message}");
}

#[test]
fn a_network_import_is_refused_by_name() {
    let error = sandbox()
        .load_file(Path::new(guests::PHONE_HOME))
        .expect_err("sockets are not granted");
    let LoadError::DisallowedImport { refused, .. } = &error else {
        panic!("expected a disallowed import, got: {error}");
    };
    assert!(
        refused
            .iter()
            .any(|refused| refused.import.starts_with("wasi:sockets/")),
        "{refused:?}"
    );
    let message = error.to_string();
    assert!(message.contains("wasi:sockets/tcp@"), "{message}");
    assert!(message.contains("no network access"), "{message}");
}

#[test]
fn compiled_engines_are_cached_and_a_corrupt_cache_file_is_ignored() {
    let cache = tempfile::tempdir().expect("temp dir");
    let config = SandboxConfig {
        cache_dir: Some(cache.path().to_owned()),
        ..SandboxConfig::default()
    };
    let path = Path::new(guests::KEEP_RECENT);
    let first = sandbox_with(config.clone())
        .load_file(path)
        .expect("compiles");
    assert!(!first.from_cache());
    let second = sandbox_with(config.clone()).load_file(path).expect("loads");
    assert!(second.from_cache(), "the second load uses the cache");
    assert_eq!(first.content_hash(), second.content_hash());

    let cached: Vec<_> = std::fs::read_dir(cache.path())
        .expect("cache dir")
        .map(|entry| entry.expect("entry").path())
        .collect();
    assert_eq!(cached.len(), 1, "{cached:?}");
    let mut bytes = std::fs::read(&cached[0]).expect("cache file");
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0xff;
    std::fs::write(&cached[0], bytes).expect("corrupt it");
    let third = sandbox_with(config).load_file(path).expect("recompiles");
    assert!(
        !third.from_cache(),
        "a corrupt cache file is not deserialized"
    );
}

#[test]
fn a_filesystem_import_is_refused_by_name() {
    let error = sandbox()
        .load_file(Path::new(guests::FS_READER))
        .expect_err("the filesystem is not granted");
    let LoadError::DisallowedImport { refused, .. } = &error else {
        panic!("expected a disallowed import, got: {error}");
    };
    assert!(
        refused
            .iter()
            .all(|refused| refused.import.starts_with("wasi:filesystem/")),
        "only the filesystem is refused: {refused:?}"
    );
    let message = error.to_string();
    assert!(message.contains("wasi:filesystem/"), "{message}");
    assert!(message.contains("no filesystem"), "{message}");
}

/// Runs log-flood's `assemble` with `prompt` under `config`, capturing what
/// the host logs.
async fn logged(
    config: SandboxConfig,
    prompt: &str,
) -> (
    Result<
        ctxbox_host::contract::types::AssembleResult,
        ctxbox_host::contract::failure::EngineFailure,
    >,
    ctxbox_tests::traces::Capture,
) {
    let sandbox = sandbox_with(config);
    let engine = engine(&sandbox, guests::LOG_FLOOD).await;
    let params = AssembleParams {
        prompt: Some(prompt.to_owned()),
        ..AssembleParams::default()
    };
    let capture = ctxbox_tests::traces::Capture::default();
    let outcome = capture
        .run(engine.assemble(
            &CallOptions::default(),
            &session("s1"),
            &History::new(conversation(1)),
            &params,
        ))
        .await;
    (outcome, capture)
}

/// Engine log records among the captured events.
fn engine_records(capture: &ctxbox_tests::traces::Capture) -> Vec<String> {
    capture
        .events()
        .into_iter()
        .filter(|event| event.target == "ctxbox::engine")
        .map(|event| {
            assert_eq!(event.field("engine"), "log-flood", "{event:?}");
            assert_eq!(event.field("session"), "s1", "{event:?}");
            event.message
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn log_records_past_the_allowance_are_dropped_without_failing_the_call() {
    let config = SandboxConfig {
        max_log_records_per_call: 10,
        ..SandboxConfig::default()
    };
    let (outcome, capture) = logged(config.clone(), "records 25").await;
    outcome.expect("dropping records does not fail the call");
    let records = engine_records(&capture);
    let expected: Vec<String> = (0..10).map(|record| format!("record {record}")).collect();
    assert_eq!(records, expected, "the first ten reach the log");
    let dropped = capture.with_message("engine log records over the per-call limit were dropped");
    assert_eq!(dropped.len(), 1, "{:?}", capture.events());
    assert_eq!(dropped[0].field("dropped"), "15");

    // A hundred times the allowance is a flood: the call fails.
    let (outcome, _) = logged(config, "records 1001").await;
    let failure = outcome.expect_err("a flood fails the call");
    assert_eq!(failure.kind, FailureKind::HostLimit, "{failure}");
    assert!(
        failure.message.contains("more than 1000 log records"),
        "{failure}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_overlong_log_record_is_truncated_without_failing_the_call() {
    let config = SandboxConfig {
        max_log_message_bytes: 100,
        ..SandboxConfig::default()
    };
    let (outcome, capture) = logged(config, "long 5000").await;
    outcome.expect("truncating does not fail the call");
    let records = engine_records(&capture);
    assert_eq!(records.len(), 1, "{records:?}");
    let note = " … [truncated: 5000 bytes in all]";
    assert_eq!(
        records[0],
        format!("{}{note}", "y".repeat(100 - note.len()))
    );
}
