//! Compiles guest engine crates to `wasm32-wasip2` components from a build
//! script, with a nested `cargo build` into a separate target directory (the
//! pattern wasmtime's own test programs use), so a plain `cargo build` or
//! `cargo test` of the workspace needs no extra step.

use std::env;
use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The target guests are built for.
pub const TARGET: &str = "wasm32-wasip2";

/// A built guest: its crate name and the component file.
#[derive(Debug, Clone)]
pub struct Guest {
    /// The crate's package name, e.g. `keep-recent`.
    pub name: String,
    /// Path of the built `.wasm` component.
    pub wasm: PathBuf,
}

impl Guest {
    /// The name as a Rust constant, e.g. `KEEP_RECENT`.
    pub fn const_name(&self) -> String {
        self.name.to_uppercase().replace('-', "_")
    }
}

/// The workspace root, from a crate directory one level below it.
pub fn workspace_root() -> PathBuf {
    let manifest_dir = PathBuf::from(
        env::var_os("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR is set by cargo"),
    );
    manifest_dir
        .parent()
        .expect("crates live one level below the workspace root")
        .to_owned()
}

/// Guest crates in the given folders (relative to the workspace root): every
/// subfolder with a `Cargo.toml`, in name order.
pub fn guest_crates(root: &Path, folders: &[&str]) -> Vec<(String, PathBuf)> {
    let mut crates = Vec::new();
    for folder in folders {
        let Ok(entries) = fs::read_dir(root.join(folder)) else {
            continue;
        };
        for entry in entries.flatten() {
            let manifest = entry.path().join("Cargo.toml");
            if let Some(name) = package_name(&manifest) {
                crates.push((name, entry.path()));
            }
        }
    }
    crates.sort();
    crates
}

/// The `name = "…"` of a manifest's `[package]`.
fn package_name(manifest: &Path) -> Option<String> {
    let text = fs::read_to_string(manifest).ok()?;
    let package = text.split("[package]").nth(1)?;
    package.lines().find_map(|line| {
        let (key, value) = line.split_once('=')?;
        (key.trim() == "name").then(|| value.trim().trim_matches('"').to_owned())
    })
}

/// Builds `crates` (name, directory) for [`TARGET`] in release mode, into
/// `<outer target dir>/wasm-guests`, and returns the components. Tells cargo
/// to rerun when a guest, the SDK or the WIT changes. Panics with an
/// actionable message when the build cannot run: a build script has no better
/// way to fail.
pub fn build(root: &Path, crates: &[(String, PathBuf)]) -> Vec<Guest> {
    for path in ["wit", "guest-sdk/src", "guest-sdk/Cargo.toml", "Cargo.lock"] {
        println!("cargo:rerun-if-changed={}", root.join(path).display());
    }
    for (_, dir) in crates {
        println!("cargo:rerun-if-changed={}", dir.display());
    }
    if crates.is_empty() {
        return Vec::new();
    }
    ensure_target_installed();

    let target_dir = guest_target_dir(root);
    let cargo = env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut command = Command::new(cargo);
    command
        .current_dir(root)
        .args(["build", "--release", "--target", TARGET, "--target-dir"])
        .arg(&target_dir);
    for (name, _) in crates {
        command.args(["-p", name]);
    }
    // Components without DWARF (the workspace's release profile keeps line
    // tables for the host): a tenth of the size, so loading hashes and
    // compiles far less. The name section stays, so traps still name the
    // guest's functions.
    command
        .env("CARGO_PROFILE_RELEASE_DEBUG", "false")
        .env("CARGO_PROFILE_RELEASE_STRIP", "debuginfo");
    // Flags meant for the host build must not leak into the guest build.
    for var in [
        "RUSTFLAGS",
        "CARGO_ENCODED_RUSTFLAGS",
        "CARGO_TARGET_DIR",
        "CARGO_BUILD_TARGET",
        "RUSTC_WORKSPACE_WRAPPER",
        "CARGO_MAKEFLAGS",
        "MAKEFLAGS",
        "MFLAGS",
    ] {
        command.env_remove(var);
    }
    let status = command
        .status()
        .unwrap_or_else(|error| panic!("cannot run cargo to build the wasm guests: {error}"));
    assert!(
        status.success(),
        "building the wasm guest engines failed (see the cargo output above); to reproduce: cargo build --release --target {TARGET} -p <guest>"
    );

    crates
        .iter()
        .map(|(name, _)| Guest {
            name: name.clone(),
            wasm: target_dir
                .join(TARGET)
                .join("release")
                .join(format!("{}.wasm", name.replace('-', "_"))),
        })
        .collect()
}

/// Rust source declaring one `pub const NAME: &str = "path";` per guest,
/// and `ALL`, every guest as `(crate name, path)`.
pub fn constants(guests: &[Guest]) -> String {
    let mut source = String::new();
    let mut all = String::from(
        "/// Every guest as (crate name, component path).\npub const ALL: &[(&str, &str)] = &[\n",
    );
    for guest in guests {
        let _ = writeln!(
            source,
            "/// The `{}` component.\npub const {}: &str = {:?};",
            guest.name,
            guest.const_name(),
            guest.wasm.display().to_string()
        );
        let _ = writeln!(all, "    ({:?}, {}),", guest.name, guest.const_name());
    }
    all.push_str("];\n");
    source + &all
}

/// `<outer target dir>/wasm-guests/<workspace folder name>`: the outer
/// target dir is derived from `OUT_DIR` (`<target>/<profile>/build/<crate>-<hash>/out`);
/// the folder name keeps checkouts that share a target dir (git worktrees)
/// from overwriting each other's components.
fn guest_target_dir(root: &Path) -> PathBuf {
    let out_dir = PathBuf::from(env::var_os("OUT_DIR").expect("OUT_DIR is set by cargo"));
    let checkout = root
        .file_name()
        .map(|name| name.to_owned())
        .unwrap_or_else(|| "workspace".into());
    out_dir
        .ancestors()
        .nth(4)
        .map(|target| target.join("wasm-guests"))
        .unwrap_or_else(|| out_dir.join("wasm-guests"))
        .join(checkout)
}

/// Installs the wasm target with rustup if it is missing, or explains how.
fn ensure_target_installed() {
    let sysroot = Command::new(env::var_os("RUSTC").unwrap_or_else(|| "rustc".into()))
        .args(["--print", "sysroot"])
        .output()
        .ok()
        .filter(|output| output.status.success())
        .map(|output| PathBuf::from(String::from_utf8_lossy(&output.stdout).trim()));
    let installed = sysroot
        .map(|root| root.join("lib/rustlib").join(TARGET).exists())
        .unwrap_or(false);
    if installed {
        return;
    }
    let added = Command::new("rustup")
        .args(["target", "add", TARGET])
        .status()
        .map(|status| status.success())
        .unwrap_or(false);
    assert!(
        added,
        "the `{TARGET}` Rust target is missing and could not be installed; run: rustup target add {TARGET}"
    );
}
