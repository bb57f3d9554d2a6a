//! With the `bundled-engines` feature, compiles the example engines (and the
//! bench probe) to wasm and embeds them (see `src/bundled.rs`).

use std::fmt::Write as _;
use std::path::PathBuf;

/// Guest crates `ctxbox bench` needs beside the example engines (the two
/// history probes read a whole history by `to_vec` and by `scan`; `chaos`
/// fails a tenth of its calls, for the soak; `powers-probe` asks the host's
/// model and `tool-spinner` offers an echoing tool, for the powers rows;
/// `sql-bench` runs the SQL rows' statements).
const PROBES: &[&str] = &[
    "history-reader",
    "history-scanner",
    "chaos",
    "powers-probe",
    "tool-spinner",
    "sql-bench",
];

fn main() {
    let out_dir = PathBuf::from(std::env::var_os("OUT_DIR").expect("OUT_DIR is set by cargo"));
    let mut engines = String::from("&[\n");
    let mut probes = String::from("&[\n");
    if std::env::var_os("CARGO_FEATURE_BUNDLED_ENGINES").is_some() {
        let root = ctxbox_guest_build::workspace_root();
        let mut crates = ctxbox_guest_build::guest_crates(&root, &["example-engines"]);
        crates.extend(
            ctxbox_guest_build::guest_crates(&root, &["tests/engines"])
                .into_iter()
                .filter(|(name, _)| PROBES.contains(&name.as_str())),
        );
        for guest in ctxbox_guest_build::build(&root, &crates) {
            let list = if PROBES.contains(&guest.name.as_str()) {
                &mut probes
            } else {
                &mut engines
            };
            let _ = writeln!(
                list,
                "    ({:?}, include_bytes!({:?})),",
                guest.name,
                guest.wasm.display().to_string()
            );
        }
    }
    engines.push(']');
    probes.push(']');
    std::fs::write(out_dir.join("bundled.rs"), engines).expect("write bundled.rs to OUT_DIR");
    std::fs::write(out_dir.join("probes.rs"), probes).expect("write probes.rs to OUT_DIR");
}
