//! ctxbox's end-to-end tests: one test binary, one module per topic, so the
//! host (wasmtime and Cranelift with it) is linked once rather than once per
//! topic. Shared helpers live in the `ctxbox-tests` library (`tests/src`).

mod architecture;
mod check;
mod compaction_convergence;
mod compare_report;
mod engine_powers;
mod example_engines;
mod fuzz_corpus;
mod hardening;
mod host_services;
mod host_work;
mod hostile;
mod keep_recent;
mod limits;
mod multi_host;
mod openclaw_plugin;
mod packed_history;
mod pg_cluster;
mod provider_openai;
mod python_engine;
mod reference_overflow;
mod reference_selection;
mod replay;
mod replay_fidelity;
mod runner;
mod sdk_defaults;
mod serve;
mod serve_bounds;
mod serve_memory;
mod serve_metrics;
mod serve_powers;
mod soak;
mod sql;
mod state_batch;
mod store;
mod store_bench;
mod transcript_crash;
mod transcript_fixtures;
mod ts_engine;
mod untrusted_output;
mod walkthrough;
