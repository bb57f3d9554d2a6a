//! Giving freed memory back to the system. glibc's allocator keeps what a
//! large request or a closed session freed in its arenas, so a sidecar that
//! lives for weeks would stay at its high-water mark; `malloc_trim` returns
//! their free pages. With any other allocator this does nothing.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// The least time between two trims: each walks the whole heap.
const MIN_INTERVAL: Duration = Duration::from_secs(1);

/// Requests whose parameters, and answers whose line, are at least this
/// large are followed by a trim.
pub const LARGE_BYTES: usize = 1024 * 1024;

/// Trims the heap when memory was freed: at once after a large free, at most
/// once a [`MIN_INTERVAL`] for the frequent releases of sessions.
#[derive(Debug)]
pub struct HeapTrim {
    origin: Instant,
    /// When the last trim ran, ms after `origin` (`u64::MAX`: never).
    last_ms: AtomicU64,
}

impl Default for HeapTrim {
    fn default() -> Self {
        Self {
            origin: Instant::now(),
            last_ms: AtomicU64::new(u64::MAX),
        }
    }
}

impl HeapTrim {
    /// Much memory was just freed (a closed session, a large request
    /// answered): give it back now.
    pub fn freed(&self) {
        self.last_ms.store(self.now_ms(), Ordering::Relaxed);
        give_back();
    }

    /// Sessions were let go, as happens with every new session once
    /// `serve.maxSessions` are held: give their memory back unless that was
    /// done within the last second (the next release catches what this one
    /// skips).
    pub fn released(&self) {
        let now = self.now_ms();
        let last = self.last_ms.load(Ordering::Relaxed);
        let due = last == u64::MAX || now.saturating_sub(last) >= MIN_INTERVAL.as_millis() as u64;
        if due
            && self
                .last_ms
                .compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
        {
            give_back();
        }
    }

    fn now_ms(&self) -> u64 {
        u64::try_from(self.origin.elapsed().as_millis()).unwrap_or(u64::MAX - 1)
    }
}

/// Blocks at least this large get pages of their own, returned when freed.
const OWN_PAGES_BYTES: i32 = 1024 * 1024;

/// A thread arena's free top is returned once it passes this.
const TRIM_TOP_BYTES: i32 = 4 * 1024 * 1024;

/// Sets the allocator up for a process that lives for weeks. By default
/// glibc raises its thresholds after the first large block is freed, so
/// later large blocks come from the arenas, and `malloc_trim` never returns
/// the free top of a thread's arena: what a large request used could stay
/// resident (tens of MiB after a 16 MiB line). Fixed thresholds keep large
/// blocks on pages of their own and trim arena tops as they are freed. Only
/// the first call does anything; with any other allocator, nothing.
pub fn tune_for_long_life() {
    static TUNED: std::sync::Once = std::sync::Once::new();
    TUNED.call_once(|| {
        #[cfg(all(target_os = "linux", target_env = "gnu"))]
        // SAFETY: `mallopt` only changes the allocator's thresholds; it is
        // thread-safe and touches no memory in use.
        unsafe {
            libc::mallopt(libc::M_MMAP_THRESHOLD, OWN_PAGES_BYTES);
            libc::mallopt(libc::M_TRIM_THRESHOLD, TRIM_TOP_BYTES);
        }
    });
}

/// Returns the allocator's free pages to the system.
fn give_back() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: `malloc_trim` only releases memory the allocator holds free;
    // it is thread-safe and touches no memory in use.
    unsafe {
        libc::malloc_trim(0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn releases_trim_at_most_once_a_second() {
        let trim = HeapTrim::default();
        trim.released();
        let first = trim.last_ms.load(Ordering::Relaxed);
        assert_ne!(first, u64::MAX, "the first one runs");
        trim.released();
        assert_eq!(
            trim.last_ms.load(Ordering::Relaxed),
            first,
            "not again at once"
        );
        trim.freed();
        assert!(
            trim.last_ms.load(Ordering::Relaxed) >= first,
            "a large free trims whatever the time"
        );
    }
}
