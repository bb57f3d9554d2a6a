//! Turns a wasmtime error from an engine call into a [`FailureKind`] and a
//! message a person can act on.

use wasmtime::Trap;
use wasmtime::component::ResourceTableError;

use super::store::HostTrap;
use crate::contract::failure::FailureKind;

/// Classifies `error`. (A call stopped at its deadline or abort never gets
/// here: it is dropped at a yield, see `call::expiry`.)
pub(crate) fn classify(error: &wasmtime::Error) -> (FailureKind, String) {
    if let Some(trap) = error.downcast_ref::<HostTrap>() {
        return (trap.kind, trap.message.clone());
    }
    // A WASI or history import could not hand out one more resource: the
    // engine holds as many handles as `sandbox.maxHandles` allows.
    if let Some(ResourceTableError::Full) = error.downcast_ref::<ResourceTableError>() {
        return (
            FailureKind::HostLimit,
            "the engine holds too many resource handles (sandbox.maxHandles); drop pollables, streams and history handles it no longer needs".to_owned(),
        );
    }
    // `exit()` (WASI `cli/exit`): the engine ended its own instance.
    if let Some(exit) = error.downcast_ref::<wasmtime_wasi::I32Exit>() {
        let (kind, how) = if exit.0 == 0 {
            (FailureKind::Trap, "with status 0")
        } else {
            (FailureKind::Panic, "with a failure status")
        };
        return (
            kind,
            format!(
                "the engine called exit ({how}: {}) instead of returning an answer",
                exit.0
            ),
        );
    }
    let Some(trap) = error.downcast_ref::<Trap>() else {
        return (FailureKind::Trap, format!("{error:#}"));
    };
    match trap {
        Trap::OutOfFuel => (
            FailureKind::OutOfFuel,
            "the call used up its fuel (CPU) budget".to_owned(),
        ),
        Trap::StackOverflow => (
            FailureKind::StackOverflow,
            "the engine exhausted its wasm stack (runaway recursion?)".to_owned(),
        ),
        Trap::UnreachableCodeReached => (
            FailureKind::Panic,
            "the engine panicked or aborted (wasm `unreachable`); see its stderr".to_owned(),
        ),
        other => (FailureKind::Trap, format!("the engine trapped: {other}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_resource_table_is_a_host_limit() {
        let error = wasmtime::Error::new(ResourceTableError::Full)
            .context("wasi:clocks/monotonic-clock.subscribe-duration");
        let (kind, message) = classify(&error);
        assert_eq!(kind, FailureKind::HostLimit);
        assert!(message.contains("sandbox.maxHandles"), "{message}");
    }

    #[test]
    fn an_exit_is_named_as_such() {
        let error = wasmtime::Error::new(wasmtime_wasi::I32Exit(3)).context("wasm backtrace: …");
        let (kind, message) = classify(&error);
        assert_eq!(kind, FailureKind::Panic);
        assert_eq!(
            message,
            "the engine called exit (with a failure status: 3) instead of returning an answer"
        );
        let (kind, _) = classify(&wasmtime::Error::new(wasmtime_wasi::I32Exit(0)));
        assert_eq!(kind, FailureKind::Trap);
    }

    #[test]
    fn other_resource_errors_stay_traps() {
        let error = wasmtime::Error::new(ResourceTableError::NotPresent);
        assert_eq!(classify(&error).0, FailureKind::Trap);
    }
}
