//! The host services from inside the sandbox: the `services-probe` engine
//! uses state, transcript deltas, summarize and delegate-compaction through
//! its imports, served by `NativeServices`.

use std::path::Path;
use std::sync::Arc;

use anyhow::{Context, Result, bail, ensure};
use ctxbox_host::contract::engine::{CallOptions, ContextEngine};
use ctxbox_host::contract::failure::{EngineFailure, FailureKind};
use ctxbox_host::contract::types::{
    AgentMessage, AssembleParams, AssembledItem, CompactParams, CompactionTarget, ContentBlock,
    SessionRef,
};
use ctxbox_host::sandbox::{Sandbox, SandboxConfig, WasmEngine};
use ctxbox_host::services::compaction::{CompactionConfig, Compactor};
use ctxbox_host::services::native::NativeServices;
use ctxbox_host::services::state::{
    ENTRY_OVERHEAD_BYTES, EngineState, StateConfig, StateStore, WAL_LIMIT_BYTES,
};
use ctxbox_host::services::summarize::ExtractiveSummarizer;
use ctxbox_host::transcript::{NewSession, Transcript, TranscriptConfig, TranscriptStore};
use ctxbox_tests::guests;

struct Host {
    _dir: tempfile::TempDir,
    dir: std::path::PathBuf,
    transcripts: TranscriptStore,
    state: Arc<StateStore>,
    engine: WasmEngine,
}

async fn host(quota_bytes: u64, compaction: CompactionConfig) -> Result<Host> {
    let dir = tempfile::tempdir()?;
    let transcripts = TranscriptStore::new(TranscriptConfig::default());
    let compactor = Arc::new(Compactor::new(
        transcripts.clone(),
        Arc::new(ExtractiveSummarizer),
        compaction,
    ));
    let state = Arc::new(StateStore::open_in(
        &dir.path().join("data"),
        &StateConfig {
            quota_bytes,
            ..StateConfig::default()
        },
    )?);
    let services = NativeServices::new(compactor, state.clone());
    let sandbox = Sandbox::new(SandboxConfig::default())?;
    let component = sandbox.load_file(guests::SERVICES_PROBE.as_ref())?;
    let engine = sandbox.instantiate(&component, Arc::new(services)).await?;
    Ok(Host {
        dir: dir.path().to_owned(),
        _dir: dir,
        transcripts,
        state,
        engine,
    })
}

impl Host {
    /// Runs probe `name` on `session` and answers its report.
    async fn probe(
        &self,
        name: &str,
        session: &SessionRef,
        transcript: Option<&Transcript>,
    ) -> Result<String> {
        self.probe_with(&CallOptions::default(), name, session, transcript)
            .await
    }

    /// [`Host::probe`] with these call options.
    async fn probe_with(
        &self,
        options: &CallOptions,
        name: &str,
        session: &SessionRef,
        transcript: Option<&Transcript>,
    ) -> Result<String> {
        let history = transcript
            .map(Transcript::history)
            .unwrap_or_else(|| ctxbox_host::contract::history::History::new(vec![]));
        let params = AssembleParams {
            prompt: Some(name.to_owned()),
            ..AssembleParams::default()
        };
        let result = self
            .engine
            .assemble(options, session, &history, &params)
            .await?;
        match result.items.last() {
            Some(AssembledItem::Insert(AgentMessage::Custom { content, .. })) => {
                match content.first() {
                    Some(ContentBlock::Text { text }) => Ok(text.clone()),
                    other => bail!("the note holds {other:?}"),
                }
            }
            other => bail!("no report note: {other:?}"),
        }
    }

    fn session(&self, name: &str) -> Result<Transcript> {
        let transcript = self
            .transcripts
            .create(&self.dir.join(name), NewSession::default())?;
        for turn in 0..12 {
            transcript.append(&[
                AgentMessage::user_text(format!(
                    "Turn {turn}: deploy /srv/app/release-{turn} to 10.0.0.{turn}. {}",
                    "Context words. ".repeat(20)
                )),
                AgentMessage::assistant_text(format!(
                    "I decided to use the blue-green rollout for release {turn}. {}",
                    "Details follow. ".repeat(20)
                )),
            ])?;
        }
        Ok(transcript)
    }
}

fn ids(transcript: &Transcript, from: usize) -> Vec<String> {
    transcript.history().entries()[from..]
        .iter()
        .map(|e| e.id.clone())
        .collect()
}

/// The ids listed on the report's `page` lines, in order.
fn paged_ids(report: &str) -> Vec<String> {
    report
        .lines()
        .filter_map(|line| line.strip_prefix("page "))
        .flat_map(|line| {
            let ids = line.rsplit_once(" more=").map_or(line, |(ids, _)| ids);
            ids.split(',')
                .filter(|id| !id.is_empty())
                .map(str::to_owned)
                .collect::<Vec<_>>()
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn state_lives_in_the_engines_private_store() -> Result<()> {
    let host = host(1 << 20, CompactionConfig::default()).await?;
    let transcript = host.session("state.jsonl")?;
    let report = host
        .probe("state", &transcript.session_ref(), Some(&transcript))
        .await?;
    ensure!(
        report == "get=1 scan=probe/a,probe/b deleted=true,false missing=none",
        "{report}"
    );
    ensure!(host.state.get("services-probe", "other")? == Some(b"3".to_vec()));
    ensure!(host.state.get("services-probe", "probe/b")?.is_none());
    ensure!(host.state.get("someone-else", "other")?.is_none());
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_quota_is_enforced_across_the_boundary() -> Result<()> {
    let host = host(1_024, CompactionConfig::default()).await?;
    let transcript = host.session("quota.jsonl")?;
    let report = host
        .probe("quota", &transcript.session_ref(), Some(&transcript))
        .await?;
    ensure!(report.starts_with("quota-exceeded: "), "{report}");
    ensure!(host.state.get("services-probe", "big")?.is_none());
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tiny_keys_are_refused_before_they_fill_the_disk() -> Result<()> {
    let quota = 32 * 1024;
    let host = host(quota, CompactionConfig::default()).await?;
    let transcript = host.session("hoard.jsonl")?;
    let report = host
        .probe("hoard", &transcript.session_ref(), Some(&transcript))
        .await?;
    let (count, why) = report
        .strip_prefix("hoarded ")
        .and_then(|rest| rest.split_once(": "))
        .ok_or_else(|| anyhow::anyhow!("unexpected report {report}"))?;
    let count: u64 = count.parse()?;
    ensure!(count <= quota / ENTRY_OVERHEAD_BYTES, "{report}");
    ensure!(why.contains("state.quotaBytes"), "{report}");
    let on_disk = ctxbox_tests::bytes_under(&host.dir.join("data"));
    ensure!(
        on_disk <= 8 * quota + WAL_LIMIT_BYTES,
        "{on_disk} bytes on disk for a {quota}-byte quota"
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn summarize_uses_the_hosts_summarizer() -> Result<()> {
    let host = host(1 << 20, CompactionConfig::default()).await?;
    let transcript = host.session("summarize.jsonl")?;
    let report = host
        .probe("summarize", &transcript.session_ref(), Some(&transcript))
        .await?;
    ensure!(
        report.contains("## Decisions") && report.contains("blue-green"),
        "{report}"
    );
    ensure!(
        report.contains("/srv/app/release-11"),
        "identifiers are kept: {report}"
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deltas_page_through_appends_and_reset_after_rotation() -> Result<()> {
    let rotate = CompactionConfig {
        truncate_after_compaction: true,
        ..CompactionConfig::default()
    };
    let host = host(1 << 20, rotate).await?;
    let transcript = host.session("delta.jsonl")?;
    let session = transcript.session_ref();

    let report = host.probe("delta", &session, Some(&transcript)).await?;
    ensure!(paged_ids(&report) == ids(&transcript, 0), "{report}");
    ensure!(
        report.lines().all(|line| line.starts_with("page ")),
        "{report}"
    );
    ensure!(report.ends_with("more=false"), "{report}");

    // Only what was appended since comes next.
    transcript.append(&[
        AgentMessage::user_text("one more"),
        AgentMessage::assistant_text("ok"),
    ])?;
    let report = host.probe("delta", &session, Some(&transcript)).await?;
    ensure!(paged_ids(&report) == ids(&transcript, 24), "{report}");

    // delegate-compaction, rotating into a new transcript.
    let params = CompactParams {
        token_budget: Some(2_000),
        force: true,
        compaction_target: CompactionTarget::Budget,
        ..CompactParams::default()
    };
    let result = host
        .engine
        .compact(
            &CallOptions::default(),
            &session,
            &transcript.history(),
            &params,
        )
        .await?;
    ensure!(result.ok && result.compacted, "{result:?}");
    ensure!(
        result.tokens_after.is_some_and(|after| after <= 2_000),
        "{result:?}"
    );
    let first_kept = result.first_kept_entry_id.clone().context("first kept")?;
    ensure!(transcript.history().entry(1).map(|e| e.id.clone()) == Some(first_kept));
    let rotated = result.rotated_session.context("rotated")?;

    // The engine's cursor belongs to the old session: reset, then the new file.
    let successor = host.transcripts.open(Path::new(&rotated.session_file))?;
    let new_session = SessionRef::new(rotated.session_id.clone(), rotated.session_file.clone());
    let report = host.probe("delta", &new_session, Some(&successor)).await?;
    let first = report.lines().next().unwrap_or_default();
    ensure!(
        first.starts_with("reset ") && first.contains("rotated"),
        "{report}"
    );
    // File order: the kept entries, then the compaction that summarizes
    // what came before them.
    let mut in_file_order = ids(&successor, 1);
    in_file_order.extend(ids(&successor, 0).into_iter().take(1));
    ensure!(paged_ids(&report) == in_file_order, "{report}");

    let missing = SessionRef::new("gone", host.dir.join("gone.jsonl").to_string_lossy());
    ensure!(host.probe("delta", &missing, None).await? == "missing");
    Ok(())
}

/// A runtime that keeps its sessions in its own store (OpenClaw 2026.9's
/// SQLite) names no file the host can read; under `ctxbox serve` the session
/// is the history the runtime sent, and the engine reads that as its
/// transcript. With no history either, the transcript is missing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_without_a_transcript_file_is_read_from_the_history_it_was_given() -> Result<()> {
    let host = host(1 << 20, CompactionConfig::default()).await?;
    let transcript = host.session("given.jsonl")?;
    let elsewhere = SessionRef::new(
        transcript.session_ref().session_id,
        "agent:main:explicit:kept-in-the-runtimes-store",
    );
    let report = host.probe("delta", &elsewhere, Some(&transcript)).await?;
    ensure!(paged_ids(&report) == ids(&transcript, 0), "{report}");
    ensure!(host.probe("delta", &elsewhere, None).await? == "missing");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_delta_follows_the_active_branch_and_stops_at_the_current_turn() -> Result<()> {
    let host = host(1 << 20, CompactionConfig::default()).await?;
    let transcript = host.session("branch.jsonl")?;
    let session = transcript.session_ref();
    let report = host.probe("delta", &session, Some(&transcript)).await?;
    ensure!(paged_ids(&report) == ids(&transcript, 0), "{report}");

    // A turn with a runtime-context carrier: the engine reads the turn's
    // messages, never the carrier (the reference's hidden runtime context).
    let before_turn = transcript.leaf_id();
    let turn = transcript.append(&[
        AgentMessage::Custom {
            custom_type: "openclaw.runtime-context".into(),
            content: vec![ContentBlock::text("cwd: /srv/app")],
            display: false,
            details: Some(r#"{"source":"openclaw-runtime-context"}"#.into()),
        },
        AgentMessage::user_text("a turn that will be rolled back"),
        AgentMessage::assistant_text("an answer on the abandoned branch"),
    ])?;
    let report = host.probe("delta", &session, Some(&transcript)).await?;
    ensure!(
        paged_ids(&report) == [turn[1].id.clone(), turn[2].id.clone()],
        "{report}"
    );
    ensure!(
        !ids(&transcript, 0).contains(&turn[0].id),
        "no history holds the carrier"
    );

    // The turn is rolled back: the cursor had read the abandoned branch, so
    // it is reset and the active branch is read again, without the turn.
    let abandoned: Vec<String> = turn.iter().map(|entry| entry.id.clone()).collect();
    transcript.roll_back_to(before_turn.as_deref(), &abandoned, "test")?;
    let report = host.probe("delta", &session, Some(&transcript)).await?;
    let first = report.lines().next().unwrap_or_default();
    ensure!(
        first.starts_with("reset anchor_missing:") && first.contains(&turn[2].id),
        "{report}"
    );
    ensure!(paged_ids(&report) == ids(&transcript, 0), "{report}");

    // The current turn's ask, appended before its prompt is built: a read
    // fenced before it does not see it; after the turn, the same cursor does.
    let ask = transcript.append(&[AgentMessage::user_text("the current ask")])?;
    let fenced = CallOptions::default().fenced_before(Some(ask[0].id.clone()));
    let report = host
        .probe_with(&fenced, "delta", &session, Some(&transcript))
        .await?;
    ensure!(paged_ids(&report).is_empty(), "{report}");
    let report = host.probe("delta", &session, Some(&transcript)).await?;
    ensure!(paged_ids(&report) == [ask[0].id.clone()], "{report}");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_page_names_the_bytes_its_next_entry_needs_and_says_when_the_transcript_is_unavailable()
-> Result<()> {
    let host = host(1 << 20, CompactionConfig::default()).await?;
    let transcript = host.session("pages.jsonl")?;
    let session = transcript.session_ref();
    // Every entry's size: its line in the file (the header comes first).
    let file = std::fs::read_to_string(host.dir.join("pages.jsonl"))?;
    let sizes: Vec<usize> = file.lines().skip(1).map(str::len).collect();
    let entries = ids(&transcript, 0);
    ensure!(sizes.len() == entries.len() && sizes.iter().all(|&size| size > 64));

    // Within 64 bytes the first entry does not fit: the host names its size.
    // Asked again with that budget, each page holds exactly one entry.
    let report = host.probe("page", &session, Some(&transcript)).await?;
    let expected: Vec<String> = std::iter::once(format!("need {}", sizes[0]))
        .chain(
            entries
                .iter()
                .zip(&sizes)
                .enumerate()
                .map(|(at, (id, size))| {
                    let more = at + 1 < entries.len();
                    format!("page {id} more={more} bytes={size}")
                }),
        )
        .collect();
    ensure!(
        report.lines().eq(expected.iter().map(String::as_str)),
        "{report}"
    );

    // A transcript the host cannot read (a folder stands where it should be):
    // `read-transcript-page` answers `unavailable` ...
    std::fs::create_dir(host.dir.join("folder.jsonl"))?;
    let unreadable = SessionRef::new(
        "unreadable",
        host.dir.join("folder.jsonl").to_string_lossy(),
    );
    let report = host.probe("page", &unreadable, None).await?;
    ensure!(
        report.starts_with("unavailable storage_unavailable:") && report.contains("folder.jsonl"),
        "{report}"
    );
    // ... while `read-transcript-delta`, which has no such answer, fails as it
    // always did, as the host's fault, never the engine's.
    let error = host
        .probe("delta", &unreadable, None)
        .await
        .err()
        .context("the delta probe fails on an unreadable transcript")?;
    let failure = error
        .downcast_ref::<EngineFailure>()
        .with_context(|| format!("an engine failure, not {error:#}"))?;
    ensure!(
        failure.kind == FailureKind::HostFault && failure.message.contains("storage_unavailable"),
        "{failure:?}"
    );
    Ok(())
}

/// The functions a component imports from the contract's `host` interface.
fn host_functions_imported(path: &str) -> Result<Vec<String>> {
    let mut config = wasmtime::Config::new();
    config.wasm_component_model(true);
    let engine = wasmtime::Engine::new(&config).map_err(anyhow::Error::msg)?;
    let component =
        wasmtime::component::Component::from_file(&engine, path).map_err(anyhow::Error::msg)?;
    let host = component
        .component_type()
        .imports(&engine)
        .find_map(|(name, item)| match item.ty {
            wasmtime::component::types::ComponentItem::ComponentInstance(instance)
                if name == "ctxbox:engine/host@0.1.0" =>
            {
                Some(instance)
            }
            _ => None,
        })
        .context("no host import")?;
    Ok(host
        .exports(&engine)
        .map(|(name, _)| name.to_owned())
        .collect())
}

/// `read-transcript-page` is additive: a component imports only the host
/// functions it calls, so an engine that never calls it (every engine built
/// before it) does not import it, and links with this host as with the one
/// before; one that calls it imports it next to `read-transcript-delta`.
#[test]
fn only_engines_that_call_read_transcript_page_import_it() -> Result<()> {
    let keep_recent = host_functions_imported(guests::KEEP_RECENT)?;
    ensure!(
        !keep_recent.is_empty()
            && !keep_recent
                .iter()
                .any(|name| name == "read-transcript-page"),
        "{keep_recent:?}"
    );
    let probe = host_functions_imported(guests::SERVICES_PROBE)?;
    for name in ["read-transcript-delta", "read-transcript-page"] {
        ensure!(probe.iter().any(|imported| imported == name), "{probe:?}");
    }
    Ok(())
}
