//! `ctxbox health`'s view of serving processes: each `ctxbox serve` writes
//! its figures ([`MetricsSnapshot`]) to `serve-metrics/<pid>.json` in its
//! data directory every [`SNAPSHOT_INTERVAL`] (written aside and renamed,
//! so a reader never sees half a file) and removes the file when it ends.
//! A snapshot not rewritten for three intervals belongs to a process that
//! died or hangs, and is not shown as live.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::methods::Service;
use super::metrics::MetricsSnapshot;

/// The data directory's folder of snapshots.
pub const SNAPSHOT_DIR: &str = "serve-metrics";
/// How often a serving process writes its snapshot.
pub const SNAPSHOT_INTERVAL: Duration = Duration::from_secs(5);
/// Snapshots older than this many intervals are not a live process's.
const LIVE_INTERVALS: u32 = 3;

/// Where the process `pid` writes its snapshot under `data_dir`.
pub fn snapshot_path(data_dir: &Path, pid: u32) -> PathBuf {
    data_dir.join(SNAPSHOT_DIR).join(format!("{pid}.json"))
}

/// Writes `snapshot` to its process's file under `data_dir`, atomically.
pub fn write(data_dir: &Path, snapshot: &MetricsSnapshot) -> std::io::Result<()> {
    let path = snapshot_path(data_dir, snapshot.pid);
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let aside = path.with_extension("json.tmp");
    std::fs::write(&aside, serde_json::to_vec_pretty(snapshot)?)?;
    std::fs::rename(&aside, &path)
}

/// The snapshots of live serving processes under `data_dir` (written within
/// the last three intervals before `now_ms`), by pid. Unreadable files are
/// skipped.
pub fn live(data_dir: &Path, now_ms: i64) -> Vec<MetricsSnapshot> {
    let oldest = now_ms - (SNAPSHOT_INTERVAL * LIVE_INTERVALS).as_millis() as i64;
    let Ok(entries) = std::fs::read_dir(data_dir.join(SNAPSHOT_DIR)) else {
        return Vec::new();
    };
    let mut snapshots: Vec<MetricsSnapshot> = entries
        .flatten()
        .filter(|entry| entry.path().extension().is_some_and(|ext| ext == "json"))
        .filter_map(|entry| std::fs::read(entry.path()).ok())
        .filter_map(|bytes| serde_json::from_slice::<MetricsSnapshot>(&bytes).ok())
        .filter(|snapshot| snapshot.written_at_ms >= oldest)
        .collect();
    snapshots.sort_by_key(|snapshot| snapshot.pid);
    snapshots
}

/// Writes `service`'s snapshot into its data directory every `interval`
/// until stopped.
pub struct SnapshotWriter {
    task: tokio::task::JoinHandle<()>,
    stop: CancellationToken,
    path: PathBuf,
}

impl SnapshotWriter {
    /// Starts writing (the first snapshot at once).
    pub fn start(service: Arc<Service>, interval: Duration) -> Self {
        let data_dir = service.runtime().data_dir().to_owned();
        let path = snapshot_path(&data_dir, std::process::id());
        let stop = CancellationToken::new();
        let stopped = stop.clone();
        let task = tokio::spawn(async move {
            let mut ticks = tokio::time::interval(interval);
            loop {
                tokio::select! {
                    () = stopped.cancelled() => break,
                    _ = ticks.tick() => {}
                }
                let snapshot = service.snapshot();
                let dir = data_dir.clone();
                let written = tokio::task::spawn_blocking(move || write(&dir, &snapshot)).await;
                if let Ok(Err(error)) = written {
                    tracing::warn!(%error, dir = %data_dir.display(), "cannot write the metrics snapshot");
                }
            }
        });
        Self { task, stop, path }
    }

    /// Stops writing (after a write under way) and removes the snapshot:
    /// the process is no longer live.
    pub async fn stop(self) {
        self.stop.cancel();
        let _ = self.task.await;
        let _ = std::fs::remove_file(&self.path);
    }
}
