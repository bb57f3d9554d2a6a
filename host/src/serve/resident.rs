//! Which sessions `ctxbox serve` holds in memory (ARCHITECTURE.md §15): at
//! most `serve.maxSessions`, the least recently used given up first, and
//! none untouched for longer than `serve.idleSessionSeconds`. A session
//! given up loses its history copy and its engines' warm instances; its next
//! request starts it again (the client resends on `history-mismatch`) with a
//! fresh instance, which is what an engine already meets after a recycle:
//! its `host.state` is the memory that survives.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::{Duration, Instant};

use super::sessions::SessionHistory;
use crate::engines::guard::GuardedEngine;

/// One session's history, locked for the whole of a call so one session's
/// calls run one at a time, in order.
pub type HeldHistory = Arc<tokio::sync::Mutex<SessionHistory>>;

/// A session given up: the engines whose instances for it are to be closed.
pub struct Released {
    /// The session.
    pub session_id: String,
    /// Every engine that served it while it was held (still alive).
    pub engines: Vec<Arc<GuardedEngine>>,
}

struct Resident {
    history: HeldHistory,
    last_used: Instant,
    engines: Vec<Weak<GuardedEngine>>,
}

impl Resident {
    /// Whether a request holds or waits for the session: the map's handle
    /// is then not the only one.
    fn in_use(&self) -> bool {
        Arc::strong_count(&self.history) > 1
    }

    fn release(self, session_id: String) -> Released {
        Released {
            session_id,
            engines: self.engines.iter().filter_map(Weak::upgrade).collect(),
        }
    }
}

/// The sessions held, bounded by count and idle time.
pub struct ResidentSessions {
    map: Mutex<HashMap<String, Resident>>,
    max_sessions: usize,
    idle_limit: Option<Duration>,
}

impl ResidentSessions {
    /// At most `max_sessions` (at least one), each given up after
    /// `idle_limit` untouched when there is one.
    pub fn new(max_sessions: usize, idle_limit: Option<Duration>) -> Self {
        Self {
            map: Mutex::new(HashMap::new()),
            max_sessions: max_sessions.max(1),
            idle_limit,
        }
    }

    fn map(&self) -> std::sync::MutexGuard<'_, HashMap<String, Resident>> {
        self.map.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The session `id` (created empty on first use), marked used now by
    /// `engine`; and the sessions given up to stay within the count. A
    /// session in use by another request is never given up: the bound may
    /// be passed while every held session is busy.
    pub fn hold(&self, id: &str, engine: &Arc<GuardedEngine>) -> (HeldHistory, Vec<Released>) {
        let now = Instant::now();
        let mut map = self.map();
        let resident = map.entry(id.to_owned()).or_insert_with(|| Resident {
            history: HeldHistory::default(),
            last_used: now,
            engines: Vec::new(),
        });
        resident.last_used = now;
        resident.engines.retain(|known| known.strong_count() > 0);
        if !resident
            .engines
            .iter()
            .any(|known| std::ptr::eq(known.as_ptr(), Arc::as_ptr(engine)))
        {
            resident.engines.push(Arc::downgrade(engine));
        }
        let history = resident.history.clone();
        let mut released = Vec::new();
        while map.len() > self.max_sessions {
            let Some(oldest) = map
                .iter()
                .filter(|(key, resident)| key.as_str() != id && !resident.in_use())
                .min_by_key(|(_, resident)| resident.last_used)
                .map(|(key, _)| key.clone())
            else {
                break;
            };
            if let Some(resident) = map.remove(&oldest) {
                released.push(resident.release(oldest));
            }
        }
        (history, released)
    }

    /// Gives up every session untouched since `now - idle_limit` and not in
    /// use.
    pub fn release_idle(&self, now: Instant) -> Vec<Released> {
        let Some(limit) = self.idle_limit else {
            return Vec::new();
        };
        let mut map = self.map();
        let idle: Vec<String> = map
            .iter()
            .filter(|(_, resident)| {
                !resident.in_use() && now.saturating_duration_since(resident.last_used) >= limit
            })
            .map(|(key, _)| key.clone())
            .collect();
        idle.into_iter()
            .filter_map(|key| map.remove(&key).map(|resident| resident.release(key)))
            .collect()
    }

    /// How often [`Self::release_idle`] is worth calling: a quarter of the
    /// idle limit, between one second and half a minute.
    pub fn sweep_interval(&self) -> Option<Duration> {
        self.idle_limit
            .map(|limit| (limit / 4).clamp(Duration::from_secs(1), Duration::from_secs(30)))
    }

    /// Forgets the session `id`; whether it was held.
    pub fn remove(&self, id: &str) -> bool {
        self.map().remove(id).is_some()
    }

    /// How many sessions are held.
    pub fn len(&self) -> usize {
        self.map().len()
    }

    /// Whether no session is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engines::legacy::LegacyEngine;
    use crate::engines::quarantine::QuarantineStore;
    use crate::services::compaction::{CompactionConfig, Compactor};
    use crate::services::summarize::ExtractiveSummarizer;
    use crate::transcript::{TranscriptConfig, TranscriptStore};

    fn engine(dir: &std::path::Path) -> Arc<GuardedEngine> {
        let quarantine = QuarantineStore::open(&dir.join("q.sqlite3"), None).expect("quarantine");
        let legacy = LegacyEngine::new(Arc::new(Compactor::new(
            TranscriptStore::new(TranscriptConfig::default()),
            Arc::new(ExtractiveSummarizer),
            CompactionConfig::default(),
        )));
        Arc::new(GuardedEngine::legacy_only(
            Arc::new(legacy),
            Arc::new(quarantine),
        ))
    }

    #[test]
    fn the_least_recently_used_idle_session_goes_first() {
        let dir = tempfile::tempdir().expect("temp dir");
        let engine = engine(dir.path());
        let sessions = ResidentSessions::new(2, None);
        let (_, none) = sessions.hold("a", &engine);
        assert!(none.is_empty());
        sessions.hold("b", &engine);
        sessions.hold("a", &engine);
        let (_, released) = sessions.hold("c", &engine);
        let ids: Vec<&str> = released.iter().map(|r| r.session_id.as_str()).collect();
        assert_eq!(ids, ["b"], "b was used least recently");
        assert_eq!(released[0].engines.len(), 1, "its engine is named once");
        assert_eq!(sessions.len(), 2);
    }

    #[test]
    fn a_session_in_use_is_never_given_up() {
        let dir = tempfile::tempdir().expect("temp dir");
        let engine = engine(dir.path());
        let sessions = ResidentSessions::new(1, Some(Duration::ZERO));
        let (busy, _) = sessions.hold("busy", &engine);
        let (_, released) = sessions.hold("other", &engine);
        assert!(released.is_empty(), "the only other session is in use");
        assert_eq!(sessions.len(), 2, "over the bound while everything is busy");
        let idle = sessions.release_idle(Instant::now());
        let ids: Vec<&str> = idle.iter().map(|r| r.session_id.as_str()).collect();
        assert_eq!(ids, ["other"]);
        drop(busy);
        assert_eq!(sessions.release_idle(Instant::now()).len(), 1);
        assert!(sessions.is_empty());
    }

    #[test]
    fn idle_release_waits_for_the_limit() {
        let dir = tempfile::tempdir().expect("temp dir");
        let engine = engine(dir.path());
        let sessions = ResidentSessions::new(10, Some(Duration::from_secs(60)));
        sessions.hold("a", &engine);
        assert!(sessions.release_idle(Instant::now()).is_empty());
        let later = Instant::now() + Duration::from_secs(61);
        assert_eq!(sessions.release_idle(later).len(), 1);
        assert_eq!(sessions.sweep_interval(), Some(Duration::from_secs(15)));
    }
}
