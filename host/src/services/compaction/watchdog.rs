//! The compaction window (`agents.defaults.compaction.timeoutSeconds`) as
//! the reference runs it: a quiet period, not a total. Every sign of progress
//! — a summarizer request starting, a chunk's summary arriving — re-arms it,
//! so a remote summarizer working through many chunks is not cut off at
//! `timeoutSeconds`; compaction fails when nothing has happened for that
//! long. One summarizer request is capped at the window too (the reference's
//! request timeout is the same figure), so a stuck request ends it.

use std::future::Future;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::CompactionError;

/// A re-armable compaction window.
#[derive(Debug)]
pub(super) struct Watchdog {
    window: Duration,
    last_progress: Mutex<Instant>,
}

impl Watchdog {
    /// A window of `window`, armed now.
    pub(super) fn new(window: Duration) -> Self {
        Self {
            window,
            last_progress: Mutex::new(Instant::now()),
        }
    }

    /// Re-arms the window: something happened.
    pub(super) fn progress(&self) {
        *self
            .last_progress
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Instant::now();
    }

    /// When the window closes unless progress re-arms it.
    fn deadline(&self) -> Instant {
        *self
            .last_progress
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            + self.window
    }

    /// The deadline of a summarizer request starting now (which is progress).
    pub(super) fn request_deadline(&self) -> std::time::Instant {
        self.progress();
        (Instant::now() + self.window).into_std()
    }

    /// `work`, unless the caller aborts or the window closes first.
    pub(super) async fn bound<T>(
        &self,
        work: impl Future<Output = Result<T, CompactionError>>,
        abort: &CancellationToken,
    ) -> Result<T, CompactionError> {
        tokio::pin!(work);
        loop {
            let deadline = self.deadline();
            tokio::select! {
                result = &mut work => return result,
                () = abort.cancelled() => return Err(CompactionError::Aborted),
                () = tokio::time::sleep_until(deadline) => {
                    // Progress since the wait began moved the deadline on.
                    if self.deadline() <= Instant::now() {
                        return Err(CompactionError::Timeout {
                            seconds: self.window.as_secs(),
                        });
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime")
    }

    const WINDOW: Duration = Duration::from_millis(200);
    const STEP: Duration = Duration::from_millis(120);

    #[test]
    fn progress_keeps_the_window_open_past_its_length() {
        let watchdog = Watchdog::new(WINDOW);
        let work = async {
            for _ in 0..5 {
                tokio::time::sleep(STEP).await;
                watchdog.progress();
            }
            Ok(30)
        };
        let result = runtime().block_on(watchdog.bound(work, &CancellationToken::new()));
        assert_eq!(
            result.expect("re-armed by progress"),
            30,
            "600 ms in a 200 ms window"
        );
    }

    #[test]
    fn a_quiet_window_closes() {
        let watchdog = Watchdog::new(WINDOW);
        let work = async {
            tokio::time::sleep(STEP).await;
            watchdog.progress();
            tokio::time::sleep(WINDOW * 2).await;
            Ok(())
        };
        let error = runtime()
            .block_on(watchdog.bound(work, &CancellationToken::new()))
            .expect_err("a quiet window");
        assert!(matches!(error, CompactionError::Timeout { .. }), "{error}");
    }
}
