//! The README's engine-author walkthrough, as written: a new engine crate
//! (`ctxbox new`), built for wasm32-wasip2, passes `ctxbox check` and replays
//! a real conversation with `ctxbox run`'s machinery.

use std::path::Path;
use std::process::Command;

use ctxbox_host::check::CheckOptions;
use ctxbox_host::engines::registry::{EngineFactory, RegisterOptions};
use ctxbox_host::runtime::Runtime;
use ctxbox_host::runtime::config::Config;
use ctxbox_host::scaffold;
use ctxbox_tests::{assert_check_passes, fixture_script};
use tokio_util::sync::CancellationToken;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_engine_builds_passes_check_and_runs() {
    let dir = tempfile::tempdir().expect("temp dir");
    let crate_dir = dir.path().join("my-engine");
    // The default: the SDK bundled in the binary, so this works outside a checkout.
    let (rust, bundled) = (scaffold::Language::Rust, scaffold::SdkSource::Bundled);
    scaffold::new_engine(&crate_dir, "my-engine", rust, &bundled).expect("scaffolds");
    assert!(
        crate_dir.join("Cargo.lock").exists(),
        "the new crate is pinned to the checkout's dependency versions"
    );
    assert!(crate_dir.join("vendor/ctxbox-guest/src/lib.rs").exists());
    assert!(crate_dir.join("vendor/wit/world.wit").exists());
    assert!(matches!(
        scaffold::new_engine(&crate_dir, "my-engine", rust, &bundled),
        Err(scaffold::ScaffoldError::Exists(_))
    ));

    // `cargo build --release --target wasm32-wasip2`, into a target dir kept
    // between runs so the SDK's dependencies are built once.
    let target = Path::new(env!("CARGO_TARGET_TMPDIR")).join("walkthrough-target");
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let status = Command::new(cargo)
        .current_dir(&crate_dir)
        .args(["build", "--release", "--target", "wasm32-wasip2"])
        .env("CARGO_TARGET_DIR", &target)
        .env_remove("RUSTFLAGS")
        .env_remove("CARGO_ENCODED_RUSTFLAGS")
        .status()
        .expect("cargo runs");
    assert!(status.success(), "the new engine builds");
    let wasm = target.join("wasm32-wasip2/release/my_engine.wasm");

    // `ctxbox check target/wasm32-wasip2/release/my_engine.wasm`
    assert_check_passes(&wasm, &CheckOptions::default(), "my-engine").await;

    // `ctxbox run --engine target/wasm32-wasip2/release/my_engine.wasm`
    let runtime = Runtime::new(Config {
        data_dir: Some(dir.path().join("data")),
        ..Config::default()
    })
    .expect("runtime");
    runtime
        .engines()
        .registry()
        .plugin("cli")
        .register(
            "my-engine",
            EngineFactory::WasmFile(wasm),
            RegisterOptions::default(),
        )
        .expect("registers");
    let script = fixture_script(
        runtime.transcripts(),
        "qwen-minimax-feishu-zh-3-hook-compactions.jsonl",
    );
    let engine = runtime.select(Some("my-engine")).await;
    let report = runtime
        .replay(
            &script,
            engine.clone(),
            16_384,
            &dir.path().join("run.jsonl"),
            &CancellationToken::new(),
            &mut |_, _| {},
        )
        .await
        .expect("replays");
    assert!(report.failed_turns.is_empty(), "{:?}", report.failed_turns);
    assert_eq!(report.turns.len(), script.turns.len());
    assert_eq!(engine.serving_id(), "my-engine", "{:?}", report.quarantined);
}
