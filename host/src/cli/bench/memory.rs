//! Memory: many concurrent sessions, each with a warm instance.

use std::sync::Arc;

use ctxbox_host::bundled;
use ctxbox_host::engine::ContextEngine;
use ctxbox_host::sandbox::{Sandbox, SandboxConfig};
use ctxbox_host::services::NoServices;

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
    let base = resident_bytes().unwrap_or(start);
    let mut checkpoints = vec![options.sessions];
    checkpoints.extend(
        [2_000, 3_000, options.max_sessions]
            .into_iter()
            .filter(|n| *n > options.sessions && *n <= options.max_sessions),
    );
    checkpoints.dedup();
    let mut warmed = 0usize;
    let mut growth = Vec::new();
    for checkpoint in checkpoints {
        while warmed < checkpoint {
            engine.prewarm(&format!("session-{warmed}")).await?;
            warmed += 1;
        }
        let rss = resident_bytes().unwrap_or(base);
        growth.push(format!("{checkpoint}: {:.0} MiB", mib(rss)));
        if checkpoint == options.sessions {
            let per_session = (rss.saturating_sub(base)) as f64 / checkpoint as f64;
            rows.push(Row {
                what: format!("{checkpoint} concurrent sessions with a warm instance each"),
                figure: format!(
                    "{:.0} MiB resident ({:.0} KiB per session)",
                    mib(rss),
                    per_session / 1024.0
                ),
                target: "≤ 2 GiB".into(),
                met: Some(rss <= 2 * 1024 * 1024 * 1024),
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
