#![no_main]
//! Fuzz target: see `ctxbox_fuzz_checks::sidecar`.
libfuzzer_sys::fuzz_target!(|data: &[u8]| ctxbox_fuzz_checks::sidecar(data));
