//! [`PoolShare`]: how many of the shared store's pooled connections one
//! engine may hold at once (half the pool, at least one), so that an engine
//! whose searches or commits run long cannot take every connection the
//! other engines need. A call waits for a share of its engine until its
//! deadline, never past it.

use std::collections::HashMap;
use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

/// How long work with no deadline of its own waits for its engine's share.
const UNBOUNDED_WAIT: Duration = Duration::from_secs(30);

/// Connections each engine holds now, bounded per engine.
#[derive(Debug)]
pub(super) struct PoolShare {
    per_engine: usize,
    held: Mutex<HashMap<String, usize>>,
    freed: Condvar,
}

/// One connection's worth of an engine's share, given back on drop.
#[derive(Debug)]
pub(super) struct Held<'a> {
    share: &'a PoolShare,
    engine: String,
}

impl PoolShare {
    /// Shares of a pool of `pool_size` connections.
    pub(super) fn new(pool_size: usize) -> Self {
        Self {
            per_engine: (pool_size / 2).max(1),
            held: Mutex::new(HashMap::new()),
            freed: Condvar::new(),
        }
    }

    fn held(&self) -> MutexGuard<'_, HashMap<String, usize>> {
        self.held.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// One connection for `engine`, once it holds fewer than its share,
    /// waiting until `deadline` at most (`None`: the engine holds its whole
    /// share until then).
    pub(super) fn take(&self, engine: &str, deadline: Option<Instant>) -> Option<Held<'_>> {
        let until = deadline.unwrap_or_else(|| Instant::now() + UNBOUNDED_WAIT);
        let mut held = self.held();
        loop {
            let count = held.entry(engine.to_owned()).or_insert(0);
            if *count < self.per_engine {
                *count += 1;
                return Some(Held {
                    share: self,
                    engine: engine.to_owned(),
                });
            }
            let left = until.checked_duration_since(Instant::now())?;
            held = self
                .freed
                .wait_timeout(held, left)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
    }
}

impl Drop for Held<'_> {
    fn drop(&mut self) {
        let mut held = self.share.held();
        if let Some(count) = held.get_mut(&self.engine) {
            *count -= 1;
            if *count == 0 {
                held.remove(&self.engine);
            }
        }
        drop(held);
        self.share.freed.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_engine_holds_at_most_its_share_and_others_still_get_theirs() {
        let share = PoolShare::new(4);
        let soon = || Some(Instant::now() + Duration::from_millis(50));
        let first = share.take("hog", soon()).expect("first");
        let _second = share.take("hog", soon()).expect("second");
        assert!(
            share.take("hog", soon()).is_none(),
            "a third waits, then gives up"
        );
        let _other = share.take("other", soon()).expect("another engine's");
        drop(first);
        assert!(share.take("hog", soon()).is_some(), "freed");
        let single = PoolShare::new(1);
        let _only = single.take("e", soon()).expect("one of a pool of one");
        assert!(single.take("e", soon()).is_none());
    }
}
