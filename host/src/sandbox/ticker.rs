//! The epoch ticker: a dedicated thread that advances the shared engine's
//! epoch every [`EPOCH_TICK`], so deadline checks run in long guest code. It
//! holds only a weak handle and stops when the engine is dropped.

use super::call::EPOCH_TICK;

/// Starts the ticker for `engine`.
pub(crate) fn spawn(engine: &wasmtime::Engine) -> std::io::Result<()> {
    let engine = engine.weak();
    std::thread::Builder::new()
        .name("ctxbox-epoch".to_owned())
        .spawn(move || {
            loop {
                std::thread::sleep(EPOCH_TICK);
                match engine.upgrade() {
                    Some(engine) => engine.increment_epoch(),
                    None => break,
                }
            }
        })?;
    Ok(())
}
