//! How the engine heard of a turn `commitTurn` committed: the turn is
//! durable whatever the engine does, so its calls' outcome is reported in
//! the answer (`afterTurn`), not as an error — and an `overloaded` one
//! tells the client to retry the engine's part.

use crate::contract::failure::{EngineFailure, FailureKind};

/// How the engine heard of a committed turn (its `ingest-batch`, then its
/// `after-turn`), as `commitTurn` answers it in `afterTurn`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum EngineHearing {
    /// Both calls answered (by the engine, or by `legacy` for it).
    Done,
    /// A call found no free instance (`overloaded`): the engine did not
    /// hear of the turn; the client may call `afterTurn` later.
    Overloaded,
    /// A call failed otherwise (the guard reported it).
    Failed,
}

impl EngineHearing {
    /// This, after a call that failed with `failure`: an overload is
    /// kept over any other failure, so the client hears to retry.
    pub(super) fn and(self, failure: &EngineFailure) -> Self {
        if self == Self::Overloaded || failure.kind == FailureKind::Overloaded {
            Self::Overloaded
        } else {
            Self::Failed
        }
    }

    /// Its name in `commitTurn`'s answer.
    pub(super) fn as_str(self) -> &'static str {
        match self {
            Self::Done => "done",
            Self::Overloaded => "overloaded",
            Self::Failed => "failed",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::contract::failure::Operation;

    fn failed(kind: FailureKind) -> EngineFailure {
        EngineFailure::new("e", Operation::AfterTurn, kind, "why")
    }

    #[test]
    fn an_overload_is_kept_over_later_failures() {
        let overloaded = failed(FailureKind::Overloaded);
        let panicked = failed(FailureKind::Panic);
        assert_eq!(EngineHearing::Done.and(&panicked), EngineHearing::Failed);
        assert_eq!(
            EngineHearing::Done.and(&overloaded),
            EngineHearing::Overloaded
        );
        assert_eq!(
            EngineHearing::Failed.and(&overloaded),
            EngineHearing::Overloaded
        );
        assert_eq!(
            EngineHearing::Overloaded.and(&panicked).as_str(),
            "overloaded"
        );
    }
}
