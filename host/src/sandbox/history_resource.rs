//! The `history` resource: a host [`History`] snapshot lent to one call.

use crate::contract::history::History;

/// What a `history` handle in the resource table points at.
pub struct HistoryHandle(pub(crate) History);
