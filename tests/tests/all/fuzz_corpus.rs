//! Every checked-in fuzz input (`fuzz/corpus/<target>/`: the seeds and any
//! input that once crashed) replayed through its target's checks on stable
//! Rust, so what the fuzzers found stays fixed without running them.

use std::fs;
use std::path::Path;

use ctxbox_fuzz_checks::TARGETS;

#[test]
fn every_corpus_input_passes_its_target() {
    let corpus = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz/corpus");
    for (target, check) in TARGETS {
        let dir = corpus.join(target);
        let inputs: Vec<_> = fs::read_dir(&dir)
            .unwrap_or_else(|error| panic!("{}: {error}", dir.display()))
            .map(|entry| entry.expect("a corpus entry").path())
            .collect();
        assert!(
            inputs.len() >= 3,
            "{target} has a seed corpus ({} inputs)",
            inputs.len()
        );
        for input in inputs {
            let bytes = fs::read(&input).expect("a corpus input reads");
            let outcome = std::panic::catch_unwind(|| check(&bytes));
            assert!(outcome.is_ok(), "{target} crashes on {}", input.display());
        }
    }
}
