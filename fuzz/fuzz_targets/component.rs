#![no_main]
//! Fuzz target: see `ctxbox_fuzz_checks::component`.
libfuzzer_sys::fuzz_target!(|data: &[u8]| ctxbox_fuzz_checks::component(data));
