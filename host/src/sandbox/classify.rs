//! Turns a wasmtime error from an engine call into a [`FailureKind`] and a
//! message a person can act on.

use wasmtime::Trap;

use super::store::HostTrap;
use crate::error::FailureKind;

/// Classifies `error`. `interrupted` is why the epoch callback stopped the
/// guest, if it did (an interrupt trap does not say why on its own).
pub(crate) fn classify(
    error: &wasmtime::Error,
    interrupted: Option<FailureKind>,
) -> (FailureKind, String) {
    if let Some(trap) = error.downcast_ref::<HostTrap>() {
        return (trap.kind, trap.message.clone());
    }
    let Some(trap) = error.downcast_ref::<Trap>() else {
        return (FailureKind::Trap, format!("{error:#}"));
    };
    match trap {
        Trap::OutOfFuel => (
            FailureKind::OutOfFuel,
            "the call used up its fuel (CPU) budget".to_owned(),
        ),
        Trap::Interrupt => match interrupted {
            Some(FailureKind::Aborted) => (
                FailureKind::Aborted,
                "the caller aborted and the engine did not return within the grace period"
                    .to_owned(),
            ),
            _ => (
                FailureKind::Timeout,
                "the call ran past its wall-clock deadline".to_owned(),
            ),
        },
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
