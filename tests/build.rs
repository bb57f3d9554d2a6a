//! Compiles every guest crate (example engines and the hostile test engines)
//! to wasm and records where each component is (`ctxbox_tests::guests`).

use std::path::PathBuf;

fn main() {
    let root = ctxbox_guest_build::workspace_root();
    let crates = ctxbox_guest_build::guest_crates(&root, &["example-engines", "tests/engines"]);
    let guests = ctxbox_guest_build::build(&root, &crates);
    let out_dir = PathBuf::from(std::env::var_os("OUT_DIR").expect("OUT_DIR is set by cargo"));
    std::fs::write(
        out_dir.join("guests.rs"),
        ctxbox_guest_build::constants(&guests),
    )
    .expect("write guests.rs to OUT_DIR");
}
