#![no_main]
//! Fuzz target: see `ctxbox_fuzz_checks::transcript`.
libfuzzer_sys::fuzz_target!(|data: &[u8]| ctxbox_fuzz_checks::transcript(data));
