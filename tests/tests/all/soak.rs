//! Load with faults: many concurrent sessions on one host run turns through
//! an engine that traps, hangs or answers invalidly on a tenth of its calls.
//! Every turn completes (on `legacy` where it must), and afterwards every
//! acknowledged entry is in its transcript on disk, in order
//! ([`ctxbox_host::runner::load`], which `ctxbox bench --only soak` runs at
//! 1,000 sessions × 20 turns with the process's memory followed).

use std::time::Duration;

use ctxbox_host::engines::guard::{GuardAction, GuardPolicy};
use ctxbox_host::engines::quarantine::QuarantineStore;
use ctxbox_host::runner::load::{LoadPlan, run_load};
use ctxbox_host::sandbox::SandboxConfig;
use ctxbox_host::transcript::{TranscriptConfig, TranscriptStore};
use ctxbox_tests::zoo_host_with;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_turn_completes_and_every_entry_is_kept_under_random_engine_faults() {
    let dir = tempfile::tempdir().expect("temp dir");
    // A 1 ms back-off: a failed engine is retried almost at once, so it
    // keeps failing a tenth of the calls instead of being set aside.
    let quarantine = QuarantineStore::open(
        &dir.path().join("quarantine.sqlite3"),
        Some(Duration::from_millis(1)),
    )
    .expect("quarantine store");
    let config = SandboxConfig {
        call_timeout_ms: 300,
        ..SandboxConfig::default()
    };
    let host = zoo_host_with(dir.path(), config, GuardPolicy::default(), quarantine);
    let engine = host.select(Some("chaos")).await;
    let plan = LoadPlan {
        sessions: 200,
        turns: 10,
        concurrent: 16,
        window: 16_384,
    };
    let report = run_load(
        engine,
        TranscriptStore::new(TranscriptConfig::default()),
        dir.path(),
        &plan,
        |_| {},
    )
    .await
    .unwrap_or_else(|error| panic!("a turn was not served: {error}"));

    assert_eq!(report.turns, 2_000);
    assert_eq!(report.model_calls, 2_000, "one model call a turn");
    assert!(report.lost.is_empty(), "entries lost: {:#?}", report.lost);
    // The faults happened (each turn reports the guard's decisions), and the
    // engine served again after its back-offs.
    let count = |action: GuardAction| report.events.iter().filter(|e| e.action == action).count();
    assert!(
        count(GuardAction::FellBack) > 0,
        "some calls failed: {:?}",
        report.events
    );
    assert!(count(GuardAction::Recovered) > 0, "the engine came back");
}
