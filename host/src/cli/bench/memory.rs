//! Memory: many concurrent sessions, each with a warm instance that has
//! served a call (so its memory is touched, as a real session's is). Runs
//! first, before other measurements have grown the process's heap.

use std::sync::Arc;

use ctxbox_host::check::cases;
use ctxbox_host::contract::engine::{CallOptions, ContextEngine};
use ctxbox_host::contract::history::History;
use ctxbox_host::contract::services::NoServices;
use ctxbox_host::contract::types::{AssembleParams, SessionRef};
use ctxbox_host::engines::bundled;
use ctxbox_host::sandbox::{Sandbox, SandboxConfig};

use super::measure::{mib, resident_bytes};
use super::{Options, Row};

/// Resident memory with `options.sessions` warm sessions, and as it grows to
/// `options.max_sessions`.
pub async fn rows(options: &Options, rows: &mut Vec<Row>) -> anyhow::Result<()> {
    let Some(start) = resident_bytes() else {
        rows.push(Row::skipped(
            "warm sessions, resident memory",
            "no /proc/self/status here",
        ));
        return Ok(());
    };
    let bytes = bundled::engine("keep-recent")
        .ok_or_else(|| anyhow::anyhow!("keep-recent is not bundled"))?;
    let sandbox = Sandbox::new(SandboxConfig {
        max_instances: options.max_sessions as u32 + 1,
        ..SandboxConfig::default()
    })?;
    let component = sandbox.load_bytes("keep-recent", bytes)?;
    let engine = sandbox
        .instantiate(&component, Arc::new(NoServices))
        .await?;
    let base = resident_bytes().map_or(start.now, |resident| resident.now);
    let mut checkpoints = vec![options.sessions];
    checkpoints.extend(
        [2_000, 3_000, options.max_sessions]
            .into_iter()
            .filter(|n| *n > options.sessions && *n <= options.max_sessions),
    );
    checkpoints.dedup();
    // A short conversation each session's instance assembles once.
    let history = History::new(cases::conversation(10));
    let call = CallOptions::default();
    let params = AssembleParams {
        token_budget: Some(4_000),
        ..AssembleParams::default()
    };
    let mut warmed = 0usize;
    let mut growth = Vec::new();
    for checkpoint in checkpoints {
        while warmed < checkpoint {
            let session = SessionRef::new(format!("session-{warmed}"), "/bench.jsonl");
            engine.assemble(&call, &session, &history, &params).await?;
            warmed += 1;
        }
        let Some(resident) = resident_bytes() else {
            break;
        };
        growth.push(format!("{checkpoint}: {:.0} MiB", mib(resident.now)));
        if checkpoint == options.sessions {
            let per_session = resident.now.saturating_sub(base) as f64 / checkpoint as f64;
            rows.push(Row {
                what: format!("{checkpoint} concurrent sessions with a warm instance each"),
                figure: format!(
                    "{:.0} MiB resident, peak {:.0} MiB ({:.0} KiB per session)",
                    mib(resident.now),
                    mib(resident.peak),
                    per_session / 1024.0
                ),
                target: "≤ 2 GiB".into(),
                met: Some(resident.peak <= 2 * 1024 * 1024 * 1024),
            });
        }
    }
    rows.push(Row {
        what: "resident memory as sessions grow".into(),
        figure: growth.join(", "),
        target: "report".into(),
        met: None,
    });
    let _ = engine.dispose().await;
    Ok(())
}
