//! [`StateBatch`]: the `state-set`s and `state-delete`s of one engine call,
//! held until the call ends. The host commits them in one transaction when
//! the call answers (before the answer is used) and drops them when it
//! fails, so a failed call leaves no half-written state behind. Reads within
//! the call see its own pending writes ([`StateBatch::pending`],
//! [`StateBatch::merge_page`]).
//!
//! The batch only keeps the writes and what the engine's store counts with
//! them ([`StateUsage`]); the limits and the store itself are the host
//! services' (`services::state`).
//!
//! So that a write need not read the store first, the batch also remembers
//! what the call read ([`StateBatch::note_stored`]: a later write of the key
//! knows what it replaces) and which written keys it counted as new without
//! reading ([`StateBatch::unread`]): with those, its usage is an upper bound
//! that the host makes exact ([`StateBatch::correct`]) only when a write
//! would otherwise be refused.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Mutex, MutexGuard, PoisonError};

/// What an engine's store counts against its limits: bytes (keys, values
/// and a fixed overhead per entry) and keys.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StateUsage {
    /// Bytes, as the quota counts them.
    pub bytes: u64,
    /// Keys.
    pub keys: u64,
}

/// One key's new value (`None`: deleted).
pub type StateWrite = (String, Option<Vec<u8>>);

/// The pending state writes of one engine call.
#[derive(Debug, Default)]
pub struct StateBatch {
    inner: Mutex<Pending>,
}

#[derive(Debug, Default)]
struct Pending {
    /// Each key the call wrote, with its last value (`None`: deleted).
    writes: BTreeMap<String, Option<Vec<u8>>>,
    /// What the store counts with the writes applied (`None` before the
    /// first write); over the exact figure by the entries of `unread` the
    /// store has.
    usage: Option<StateUsage>,
    /// The stored length of each key the call read (`None`: no such key).
    stored: BTreeMap<String, Option<usize>>,
    /// Keys written without knowing what they replace, counted as new.
    unread: BTreeSet<String>,
}

impl StateBatch {
    fn pending_writes(&self) -> MutexGuard<'_, Pending> {
        // The batch holds plain data: a panic elsewhere leaves it consistent.
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether the call wrote nothing.
    pub fn is_empty(&self) -> bool {
        self.pending_writes().writes.is_empty()
    }

    /// The call's own value of `key`: `Some(None)` if the call deleted it,
    /// `None` if the call did not write it.
    pub fn pending(&self, key: &str) -> Option<Option<Vec<u8>>> {
        self.pending_writes().writes.get(key).cloned()
    }

    /// The length of the call's own value of `key` (`Some(None)`: deleted by
    /// the call, `None`: not written by it).
    pub fn pending_len(&self, key: &str) -> Option<Option<usize>> {
        self.pending_writes()
            .writes
            .get(key)
            .map(|value| value.as_ref().map(Vec::len))
    }

    /// What the store counts with the call's writes applied (state and
    /// index writes: they share one quota), once the call has written.
    pub fn usage(&self) -> Option<StateUsage> {
        self.pending_writes().usage
    }

    /// Records that the call set `key` to `value` (`None`: deleted it), after
    /// which the store counts `usage`.
    pub fn record(&self, key: &str, value: Option<Vec<u8>>, usage: StateUsage) {
        let mut pending = self.pending_writes();
        pending.writes.insert(key.to_owned(), value);
        pending.usage = Some(usage);
    }

    /// Records that the call read `key` from the store, finding a value of
    /// `length` bytes (`None`: no such key).
    pub fn note_stored(&self, key: &str, length: Option<usize>) {
        self.pending_writes().stored.insert(key.to_owned(), length);
    }

    /// The stored length the call read for `key` (`Some(None)`: it found
    /// none; `None`: it did not read it).
    pub fn stored_len(&self, key: &str) -> Option<Option<usize>> {
        self.pending_writes().stored.get(key).copied()
    }

    /// Records that the call set `key` to `value` without knowing what the
    /// store holds under it, counted as a new key in `usage`.
    pub fn record_unread(&self, key: &str, value: Vec<u8>, usage: StateUsage) {
        let mut pending = self.pending_writes();
        pending.writes.insert(key.to_owned(), Some(value));
        pending.unread.insert(key.to_owned());
        pending.usage = Some(usage);
    }

    /// The keys written as new without reading the store.
    pub fn unread(&self) -> Vec<String> {
        self.pending_writes().unread.iter().cloned().collect()
    }

    /// Makes the usage exact: of the [`unread`](Self::unread) keys, the
    /// store has `existing` (entries counting `bytes` together), which the
    /// usage counted as new.
    pub fn correct(&self, existing: StateUsage) {
        let mut pending = self.pending_writes();
        pending.unread.clear();
        if let Some(usage) = pending.usage.as_mut() {
            usage.bytes = usage.bytes.saturating_sub(existing.bytes);
            usage.keys = usage.keys.saturating_sub(existing.keys);
        }
    }

    /// Records that another write of the call (an index write, which
    /// shares the engine's quota) leaves the store counting `usage`.
    pub fn record_usage(&self, usage: StateUsage) {
        self.pending_writes().usage = Some(usage);
    }

    /// The writes in key order, leaving the batch empty.
    pub fn take(&self) -> Vec<StateWrite> {
        let mut pending = self.pending_writes();
        pending.usage = None;
        pending.stored.clear();
        pending.unread.clear();
        std::mem::take(&mut pending.writes).into_iter().collect()
    }

    /// How many keys the call deleted that a scan of `prefix` after
    /// `start_after` would cover: a page of the store must be read this much
    /// longer for [`merge_page`](Self::merge_page) to fill `limit`.
    pub fn deletes_in(&self, prefix: &str, start_after: Option<&str>) -> u32 {
        let pending = self.pending_writes();
        let count = pending
            .writes
            .iter()
            .filter(|(key, value)| value.is_none() && in_page(key, prefix, start_after))
            .count();
        u32::try_from(count).unwrap_or(u32::MAX)
    }

    /// A scan page as the call sees it: `stored` (the store's page, at least
    /// `limit` plus [`deletes_in`](Self::deletes_in) entries long unless the
    /// store had fewer) with the call's writes applied, in key order, at most
    /// `limit` entries.
    pub fn merge_page(
        &self,
        stored: Vec<(String, Vec<u8>)>,
        prefix: &str,
        start_after: Option<&str>,
        limit: u32,
    ) -> Vec<(String, Vec<u8>)> {
        let pending = self.pending_writes();
        if pending.writes.is_empty() {
            return stored.into_iter().take(limit as usize).collect();
        }
        let mut page: BTreeMap<String, Vec<u8>> = stored
            .into_iter()
            .filter(|(key, _)| !pending.writes.contains_key(key))
            .collect();
        for (key, value) in &pending.writes {
            if let Some(value) = value
                && in_page(key, prefix, start_after)
            {
                page.insert(key.clone(), value.clone());
            }
        }
        page.into_iter().take(limit as usize).collect()
    }
}

/// Whether a scan of `prefix` after `start_after` covers `key`.
fn in_page(key: &str, prefix: &str, start_after: Option<&str>) -> bool {
    key.starts_with(prefix) && start_after.is_none_or(|after| key > after)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entries(keys: &[&str]) -> Vec<(String, Vec<u8>)> {
        keys.iter()
            .map(|key| ((*key).to_owned(), b"stored".to_vec()))
            .collect()
    }

    fn keys(page: &[(String, Vec<u8>)]) -> Vec<&str> {
        page.iter().map(|(key, _)| key.as_str()).collect()
    }

    #[test]
    fn the_call_reads_its_own_writes() {
        let batch = StateBatch::default();
        assert!(batch.is_empty());
        assert_eq!(batch.pending("a"), None);
        batch.record("a", Some(b"1".to_vec()), StateUsage { bytes: 66, keys: 1 });
        batch.record("b", None, StateUsage { bytes: 66, keys: 1 });
        assert_eq!(batch.pending("a"), Some(Some(b"1".to_vec())));
        assert_eq!(batch.pending_len("a"), Some(Some(1)));
        assert_eq!(batch.pending("b"), Some(None));
        assert_eq!(batch.usage(), Some(StateUsage { bytes: 66, keys: 1 }));
        assert_eq!(
            batch.take(),
            vec![
                ("a".to_owned(), Some(b"1".to_vec())),
                ("b".to_owned(), None)
            ]
        );
        assert!(batch.is_empty());
        assert_eq!(batch.usage(), None);
    }

    #[test]
    fn a_page_shows_the_calls_writes_over_the_stored_entries() {
        let batch = StateBatch::default();
        let usage = StateUsage::default();
        batch.record("k/b", None, usage);
        batch.record("k/c", Some(b"new".to_vec()), usage);
        batch.record("k/0", Some(b"new".to_vec()), usage);
        batch.record("other", Some(b"new".to_vec()), usage);
        assert_eq!(batch.deletes_in("k/", None), 1);
        assert_eq!(batch.deletes_in("k/", Some("k/b")), 0);
        let stored = entries(&["k/a", "k/b", "k/c", "k/d"]);
        let page = batch.merge_page(stored.clone(), "k/", None, 10);
        assert_eq!(keys(&page), ["k/0", "k/a", "k/c", "k/d"]);
        assert_eq!(page[2].1, b"new", "the call's value wins");
        let first = batch.merge_page(stored, "k/", None, 2);
        assert_eq!(keys(&first), ["k/0", "k/a"]);
        let next = batch.merge_page(entries(&["k/b", "k/c", "k/d"]), "k/", Some("k/a"), 2);
        assert_eq!(keys(&next), ["k/c", "k/d"]);
    }

    #[test]
    fn unread_writes_count_as_new_until_corrected() {
        let batch = StateBatch::default();
        batch.note_stored("read", Some(5));
        assert_eq!(batch.stored_len("read"), Some(Some(5)));
        assert_eq!(batch.stored_len("other"), None);
        batch.record_unread(
            "a",
            b"1".to_vec(),
            StateUsage {
                bytes: 200,
                keys: 3,
            },
        );
        batch.record_unread(
            "b",
            b"2".to_vec(),
            StateUsage {
                bytes: 300,
                keys: 4,
            },
        );
        assert_eq!(batch.unread(), ["a", "b"]);
        assert_eq!(batch.pending("a"), Some(Some(b"1".to_vec())));
        // The store had `a` (70 bytes): the usage counted it twice.
        batch.correct(StateUsage { bytes: 70, keys: 1 });
        assert_eq!(
            batch.usage(),
            Some(StateUsage {
                bytes: 230,
                keys: 3
            })
        );
        assert!(batch.unread().is_empty());
        batch.take();
        assert_eq!(batch.stored_len("read"), None, "a new call reads again");
    }

    #[test]
    fn an_empty_batch_passes_the_page_through() {
        let batch = StateBatch::default();
        let page = batch.merge_page(entries(&["a", "b", "c"]), "", None, 2);
        assert_eq!(keys(&page), ["a", "b"]);
    }
}
