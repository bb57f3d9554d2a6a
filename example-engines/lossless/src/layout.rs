//! Where a session's data lives in the store (the layout table is in the
//! crate docs).

/// The keys of one session's data.
#[derive(Debug, Clone)]
pub(crate) struct Keys {
    /// `s/<escaped session id>/`.
    prefix: String,
}

impl Keys {
    /// The keys of session `session_id`.
    pub(crate) fn new(session_id: &str) -> Self {
        Self {
            prefix: format!("s/{}/", escape(session_id)),
        }
    }

    /// The session's [`Meta`](crate::records::Meta).
    pub(crate) fn meta(&self) -> String {
        format!("{}meta", self.prefix)
    }

    /// The message stored with sequence number `seq`.
    pub(crate) fn message(&self, seq: u64) -> String {
        format!("{}m/{seq:016x}", self.prefix)
    }

    /// The index entry of the message whose transcript id is `entry_id`.
    pub(crate) fn entry_index(&self, entry_id: &str) -> String {
        format!("{}e/{}", self.prefix, escape(entry_id))
    }

    /// How many of the session's messages are indexed for recall (a
    /// prefix, in sequence order).
    pub(crate) fn indexed(&self) -> String {
        format!("{}ix", self.prefix)
    }

    /// The summary node `node`.
    pub(crate) fn node(&self, node: u64) -> String {
        format!("{}n/{node:016x}", self.prefix)
    }
}

/// `text` with `%` and `/` percent-encoded, so an escaped id never contains
/// the separator and one session's prefix is never a prefix of another's.
fn escape(text: &str) -> String {
    text.replace('%', "%25").replace('/', "%2F")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_session_prefix_is_a_prefix_of_another() {
        let sessions = ["a", "a/b", "a%2Fb", "ab", "", "/"];
        for one in sessions {
            for other in sessions {
                if one != other {
                    assert!(
                        !Keys::new(other).meta().starts_with(&Keys::new(one).prefix),
                        "{one:?} vs {other:?}"
                    );
                }
            }
        }
    }

    #[test]
    fn sequence_keys_sort_in_sequence_order() {
        let keys = Keys::new("s");
        assert!(keys.message(9) < keys.message(10));
        assert!(keys.message(255) < keys.message(256));
        assert!(keys.node(0xfff) < keys.node(0x1000));
    }
}
