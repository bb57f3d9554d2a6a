#![no_main]
//! Fuzz target: see `ctxbox_fuzz_checks::sidecar_powers`.
libfuzzer_sys::fuzz_target!(|data: &[u8]| ctxbox_fuzz_checks::sidecar_powers(data));
