//! Instance slots: how many engine instances may be alive at once (the
//! pooling allocator's capacity), which session holds which, and recycling
//! the least recently used idle instance when the pool is full.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::Instant;

use super::call::Request;
use super::instance::Live;
use crate::contract::engine::CallOptions;
use crate::contract::failure::EngineFailure;

/// The first `dispose` failure among an engine's instances that the engine
/// has not reported yet. An instance is disposed when it is recycled, outside
/// any call of the engine's, so the failure is reported by the engine's next
/// call (or its own `dispose`): a slow or failing `dispose` counts against
/// the engine like any other failure.
#[derive(Debug, Default)]
pub(crate) struct DisposalFailures(Mutex<Option<EngineFailure>>);

impl DisposalFailures {
    fn record(&self, failure: EngineFailure) {
        let mut first = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        first.get_or_insert(failure);
    }

    /// The failure not reported yet, if any (and forgets it).
    pub(crate) fn take(&self) -> Option<EngineFailure> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner).take()
    }
}

/// Where one session's instance of one engine lives (empty between a failure
/// or a recycle and the next call).
pub(crate) struct SlotCell {
    pub(crate) live: tokio::sync::Mutex<Option<Live>>,
    last_used: AtomicU64,
}

impl SlotCell {
    /// Marks the slot as used now.
    pub(crate) fn touch(&self, pool: &InstancePool) {
        self.last_used.store(pool.now(), Ordering::Relaxed);
    }
}

/// The sandbox-wide instance budget.
pub(crate) struct InstancePool {
    capacity: u32,
    live: AtomicU32,
    cells: Mutex<Vec<Weak<SlotCell>>>,
    origin: Instant,
}

/// A reserved place in the pool, held by a live instance; dropping it frees
/// the place.
pub(crate) struct PoolTicket {
    pool: Arc<InstancePool>,
}

impl Drop for PoolTicket {
    fn drop(&mut self) {
        self.pool.live.fetch_sub(1, Ordering::AcqRel);
    }
}

impl InstancePool {
    pub(crate) fn new(capacity: u32) -> Arc<Self> {
        Arc::new(Self {
            capacity,
            live: AtomicU32::new(0),
            cells: Mutex::new(Vec::new()),
            origin: Instant::now(),
        })
    }

    fn now(&self) -> u64 {
        self.origin.elapsed().as_micros() as u64
    }

    /// Instances alive now.
    pub(crate) fn live(&self) -> u32 {
        self.live.load(Ordering::Acquire)
    }

    /// A new, registered, empty slot.
    pub(crate) fn new_cell(&self) -> Arc<SlotCell> {
        let cell = Arc::new(SlotCell {
            live: tokio::sync::Mutex::new(None),
            last_used: AtomicU64::new(self.now()),
        });
        let mut cells = self.cells.lock().unwrap_or_else(PoisonError::into_inner);
        cells.retain(|weak| weak.strong_count() > 0);
        cells.push(Arc::downgrade(&cell));
        cell
    }

    fn try_reserve(self: &Arc<Self>) -> Option<PoolTicket> {
        self.live
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |live| {
                (live < self.capacity).then_some(live + 1)
            })
            .ok()
            .map(|_| PoolTicket { pool: self.clone() })
    }

    /// A place for a new instance, recycling idle instances (least recently
    /// used first) while the pool is full. `None` when every instance is busy.
    pub(crate) async fn reserve(self: &Arc<Self>) -> Option<PoolTicket> {
        loop {
            if let Some(ticket) = self.try_reserve() {
                return Some(ticket);
            }
            if !self.recycle_idle().await {
                return None;
            }
        }
    }

    /// Disposes and drops the least recently used idle instance; false if
    /// none is idle.
    async fn recycle_idle(&self) -> bool {
        let mut candidates: Vec<(u64, Arc<SlotCell>)> = {
            let cells = self.cells.lock().unwrap_or_else(PoisonError::into_inner);
            cells
                .iter()
                .filter_map(Weak::upgrade)
                .map(|cell| (cell.last_used.load(Ordering::Relaxed), cell))
                .collect()
        };
        candidates.sort_by_key(|(last_used, _)| *last_used);
        for (_, cell) in candidates {
            let Ok(mut slot) = cell.live.try_lock() else {
                continue;
            };
            if let Some(mut live) = slot.take() {
                dispose_instance(&mut live).await;
                return true;
            }
        }
        false
    }
}

/// Gives an instance about to be dropped (recycled, or refused at
/// selection) its `dispose` call, under the short dispose deadline. The
/// instance goes either way; a failure is logged and kept for the engine to
/// report ([`DisposalFailures`]).
pub(crate) async fn dispose_instance(live: &mut Live) {
    if let Err(error) = live.call(&Request::Dispose, &CallOptions::default()).await {
        let failure = error.into_failure();
        tracing::warn!(
            engine = failure.engine_id,
            operation = "dispose",
            classification = failure.kind.as_str(),
            reason = failure.message,
            "engine failed to dispose an instance being dropped"
        );
        live.disposals().record(failure);
    }
}
