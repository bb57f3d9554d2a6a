//! The engine's tunables.

/// Which tool output counts as stale.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// Tool results of the newest this many turns (a turn starts with a user
    /// message) are always sent whole; older ones are stale. 0 makes every
    /// tool result stale.
    pub recent_turns: u32,
    /// A stale result is replaced only when the host estimates it above this
    /// many tokens: smaller ones cost little more than their placeholder.
    pub min_elided_tokens: u64,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            recent_turns: 3,
            min_elided_tokens: 100,
        }
    }
}
