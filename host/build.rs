//! With the `bundled-engines` feature, compiles the example engines to wasm
//! and embeds them (see `src/bundled.rs`).

use std::fmt::Write as _;
use std::path::PathBuf;

fn main() {
    let out_dir = PathBuf::from(std::env::var_os("OUT_DIR").expect("OUT_DIR is set by cargo"));
    let mut source = String::from("&[\n");
    if std::env::var_os("CARGO_FEATURE_BUNDLED_ENGINES").is_some() {
        let root = ctxbox_guest_build::workspace_root();
        let crates = ctxbox_guest_build::guest_crates(&root, &["example-engines"]);
        for guest in ctxbox_guest_build::build(&root, &crates) {
            let _ = writeln!(
                source,
                "    ({:?}, include_bytes!({:?})),",
                guest.name,
                guest.wasm.display().to_string()
            );
        }
    }
    source.push(']');
    std::fs::write(out_dir.join("bundled.rs"), source).expect("write bundled.rs to OUT_DIR");
}
