//! Compiles every guest crate (example engines and the hostile test engines)
//! to wasm and records where each component is (`ctxbox_tests::guests`); builds
//! the Python example engine too when its tools are installed.

use std::path::{Path, PathBuf};
use std::process::Command;

fn main() {
    let root = ctxbox_guest_build::workspace_root();
    let crates = ctxbox_guest_build::guest_crates(&root, &["example-engines", "tests/engines"]);
    // Shared by several test engines (`include!`d), outside any crate's folder.
    println!(
        "cargo:rerun-if-changed={}",
        root.join("tests/engines/prompt_probe.rs").display()
    );
    let guests = ctxbox_guest_build::build(&root, &crates);
    let out_dir = PathBuf::from(std::env::var_os("OUT_DIR").expect("OUT_DIR is set by cargo"));
    let mut source = ctxbox_guest_build::constants(&guests);
    source.push_str(&python_engine(&root, &out_dir));
    std::fs::write(out_dir.join("guests.rs"), source).expect("write guests.rs to OUT_DIR");
}

/// How to get the tools `examples/python-engine/build.sh` needs.
const PYTHON_ENGINE_HOWTO: &str = "run `examples/python-engine/build.sh` once: it installs componentize-py (PyPI) and wasm-tools (crates.io) under $CARGO_TARGET_DIR/python-engine/, and the next `cargo test` builds the Python engine";

/// Builds `examples/python-engine` into `OUT_DIR` with its `build.sh` if the
/// tools it needs are already installed (the script installs nothing here), and
/// returns the Rust source of `KEEP_RECENT_PY`: `Ok(path)`, or `Err(how to
/// enable it)`.
fn python_engine(root: &Path, out_dir: &Path) -> String {
    let example = root.join("examples/python-engine");
    for path in ["src", "build.sh"] {
        println!("cargo:rerun-if-changed={}", example.join(path).display());
    }
    for var in ["COMPONENTIZE_PY", "WASM_TOOLS", "PYTHON"] {
        println!("cargo:rerun-if-env-changed={var}");
    }
    // The tools live in <target>/python-engine; watching that folder (created
    // here, so it exists) reruns this script once someone installs them.
    let target_dir = out_dir.ancestors().nth(4).unwrap_or(out_dir);
    let tools_dir = target_dir.join("python-engine");
    let _ = std::fs::create_dir_all(&tools_dir);
    println!("cargo:rerun-if-changed={}", tools_dir.display());

    let wasm = out_dir.join("keep_recent_py.wasm");
    // The tests cache the component's compilation here; a new build makes it stale.
    let _ = std::fs::remove_dir_all(out_dir.join("compiled"));
    let status = Command::new("bash")
        .arg(example.join("build.sh"))
        .arg(&wasm)
        .env("CTXBOX_NO_INSTALL", "1")
        .env("CARGO_TARGET_DIR", target_dir)
        .status();
    let outcome: Result<String, String> = match status {
        Ok(status) if status.success() => Ok(wasm.display().to_string()),
        // Exit status 3: a tool is not installed (build.sh said which).
        Ok(status) if status.code() == Some(3) => {
            println!(
                "cargo:warning=the Python example engine's tests will be skipped: componentize-py or wasm-tools is not installed (run examples/python-engine/build.sh once to enable them)"
            );
            Err(format!(
                "the Python example engine was not built: its tools are not installed; {PYTHON_ENGINE_HOWTO}"
            ))
        }
        Ok(status) => panic!(
            "building the Python example engine failed ({status}, see the output above); to reproduce: examples/python-engine/build.sh"
        ),
        Err(error) => Err(format!(
            "the Python example engine was not built: cannot run bash: {error}"
        )),
    };
    format!(
        "/// The `keep-recent-py` component (examples/python-engine), or why it was not built.\npub const KEEP_RECENT_PY: Result<&str, &str> = {outcome:?};\n"
    )
}
