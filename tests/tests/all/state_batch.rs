//! An engine call's state writes are one batch: the `services-probe`
//! engine, served by `NativeServices` over a real SQLite store, sees its own
//! pending writes within a call; once the call has answered they are durable
//! (another connection to the database, as after a restart, reads them); a
//! call that fails — an `engine-error` or a trap — leaves none of them.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context, Result, bail, ensure};
use ctxbox_host::contract::engine::{CallOptions, ContextEngine};
use ctxbox_host::contract::failure::{EngineFailure, FailureKind};
use ctxbox_host::contract::history::History;
use ctxbox_host::contract::types::{AgentMessage, AssembleParams, AssembledItem, ContentBlock};
use ctxbox_host::sandbox::WasmEngine;
use ctxbox_host::services::compaction::{CompactionConfig, Compactor};
use ctxbox_host::services::native::NativeServices;
use ctxbox_host::services::state::{EngineState, StateConfig, StateStore};
use ctxbox_host::services::summarize::ExtractiveSummarizer;
use ctxbox_host::transcript::{TranscriptConfig, TranscriptStore};
use ctxbox_tests::guests;

/// The id the probe's state lives under.
const PROBE: &str = "services-probe";

struct Host {
    _dir: tempfile::TempDir,
    data: PathBuf,
    engine: WasmEngine,
}

async fn host() -> Result<Host> {
    let dir = tempfile::tempdir()?;
    let data = dir.path().join("data");
    let compactor = Arc::new(Compactor::new(
        TranscriptStore::new(TranscriptConfig::default()),
        Arc::new(ExtractiveSummarizer),
        CompactionConfig::default(),
    ));
    let state = Arc::new(StateStore::open_in(&data, &StateConfig::default())?);
    let services = NativeServices::new(compactor, state);
    let engine = ctxbox_tests::engine_with(
        &ctxbox_tests::sandbox(),
        guests::SERVICES_PROBE,
        Arc::new(services),
    )
    .await;
    Ok(Host {
        _dir: dir,
        data,
        engine,
    })
}

impl Host {
    /// Runs probe `name`: its report, or how the call failed.
    async fn probe(&self, name: &str) -> Result<Result<String, EngineFailure>> {
        let params = AssembleParams {
            prompt: Some(name.to_owned()),
            ..AssembleParams::default()
        };
        let answer = self
            .engine
            .assemble(
                &CallOptions::default(),
                &ctxbox_tests::session("batch"),
                &History::new(vec![]),
                &params,
            )
            .await;
        let result = match answer {
            Ok(result) => result,
            Err(failure) => return Ok(Err(failure)),
        };
        match result.items.last() {
            Some(AssembledItem::Insert(AgentMessage::Custom { content, .. })) => {
                match content.first() {
                    Some(ContentBlock::Text { text }) => Ok(Ok(text.clone())),
                    other => bail!("the note holds {other:?}"),
                }
            }
            other => bail!("no report note: {other:?}"),
        }
    }

    /// The database as another connection sees it (what a restarted host
    /// would read).
    fn reopened(&self) -> Result<StateStore> {
        StateStore::open_in(Path::new(&self.data), &StateConfig::default())
            .context("reopening the state database")
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_calls_writes_are_seen_within_it_and_durable_once_it_answers() -> Result<()> {
    let host = host().await?;
    let report = host.probe("state").await??;
    ensure!(
        report == "get=1 scan=probe/a,probe/b deleted=true,false missing=none",
        "{report}"
    );
    let store = host.reopened()?;
    ensure!(store.get(PROBE, "probe/a")? == Some(b"1".to_vec()));
    ensure!(store.get(PROBE, "other")? == Some(b"3".to_vec()));
    ensure!(store.get(PROBE, "probe/b")?.is_none(), "set then deleted");

    // The next call changes stored keys and reads them back before it ends.
    let report = host.probe("overlay").await??;
    ensure!(
        report == "deleted=true other=none scan=probe/a=replaced,probe/c=c keys=2",
        "{report}"
    );
    ensure!(store.get(PROBE, "probe/a")? == Some(b"replaced".to_vec()));
    ensure!(store.get(PROBE, "probe/c")? == Some(b"c".to_vec()));
    ensure!(store.get(PROBE, "other")?.is_none());
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_call_leaves_none_of_its_writes() -> Result<()> {
    let host = host().await?;
    host.probe("state").await??;
    let store = host.reopened()?;
    let usage = store.usage(PROBE)?;

    let failed = host.probe("doomed").await?.map_err(|failure| failure.kind);
    ensure!(failed == Err(FailureKind::EngineError), "{failed:?}");
    let trapped = host
        .probe("doomed-trap")
        .await?
        .map_err(|failure| failure.kind);
    ensure!(trapped == Err(FailureKind::Panic), "{trapped:?}");

    ensure!(store.get(PROBE, "doomed/a")?.is_none(), "the error's write");
    ensure!(store.get(PROBE, "doomed/b")?.is_none(), "the trap's write");
    ensure!(
        store.get(PROBE, "other")? == Some(b"3".to_vec()),
        "the failed call's delete is dropped too"
    );
    ensure!(store.usage(PROBE)? == usage, "usage unchanged");

    // A fresh instance after the trap writes again.
    host.probe("overlay").await??;
    ensure!(store.get(PROBE, "probe/c")? == Some(b"c".to_vec()));
    Ok(())
}
