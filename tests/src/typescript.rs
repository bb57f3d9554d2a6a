//! TypeScript engines for the tests: built from their projects with the
//! SDK's `ctxbox-ts-build` (`guest-sdk-ts/`), cached by a hash of everything
//! the component is made of, so repeated test runs build nothing.
//!
//! The tools (jco, componentize-js, TypeScript) are the SDK's pinned npm
//! install, `guest-sdk-ts/node_modules`, which `guest-sdk-ts/ci.sh
//! --install-only` creates. Without it (or without `node`) a build answers
//! why; callers skip unless `CTXBOX_REQUIRE_TS_ENGINE` is set ([`required`]).

use std::collections::hash_map::DefaultHasher;
use std::hash::Hasher;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;

/// The repository's root.
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the tests crate lives in the repository")
        .to_owned()
}

/// The TypeScript SDK's folder.
pub fn sdk_dir() -> PathBuf {
    repo_root().join("guest-sdk-ts")
}

/// Whether CI asked for the TypeScript engines (`CTXBOX_REQUIRE_TS_ENGINE`):
/// then a missing toolchain is a failure, not a skip.
pub fn required() -> bool {
    std::env::var_os("CTXBOX_REQUIRE_TS_ENGINE").is_some()
}

/// `result`'s component, or `None` after printing why the test is skipped;
/// panics instead when [`required`].
pub fn or_skip(what: &str, result: Result<PathBuf, String>) -> Option<PathBuf> {
    match result {
        Ok(path) => Some(path),
        Err(why) if required() => panic!("CTXBOX_REQUIRE_TS_ENGINE is set but {why}"),
        Err(why) => {
            eprintln!(
                "skipping {what}: {why} (set CTXBOX_REQUIRE_TS_ENGINE=1 to make this a failure)"
            );
            None
        }
    }
}

/// Why the toolchain cannot build, if it cannot.
fn toolchain_missing() -> Option<String> {
    let jco = sdk_dir().join("node_modules/@bytecodealliance/jco/package.json");
    if !jco.exists() {
        return Some(format!(
            "the TypeScript SDK's tools are not installed (no {}); run `guest-sdk-ts/ci.sh --install-only` (npm, pinned versions)",
            jco.display()
        ));
    }
    match Command::new("node").arg("--version").output() {
        Ok(output) if output.status.success() => None,
        _ => Some("`node` (20 or later) is not on PATH".to_owned()),
    }
}

/// Hashes every file under `dir` (names and contents, in order), skipping
/// `node_modules`, `dist` and `.git`.
fn hash_tree(hasher: &mut DefaultHasher, dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut entries: Vec<_> = entries.flatten().collect();
    entries.sort_by_key(|entry| entry.file_name());
    for entry in entries {
        let name = entry.file_name();
        if matches!(name.to_str(), Some("node_modules" | "dist" | ".git")) {
            continue;
        }
        let path = entry.path();
        if path.is_dir() {
            hash_tree(hasher, &path);
        } else if let Ok(bytes) = std::fs::read(&path) {
            hasher.write(path.to_string_lossy().as_bytes());
            hasher.write(&bytes);
        }
    }
}

/// Serializes builds: two tests asking for the same engine build it once.
static BUILDS: Mutex<()> = Mutex::new(());

/// The component of the TypeScript engine project `project` (module
/// `entry`), built into `ts-engines/` of this crate's build folder in the
/// target dir unless a build of the
/// same sources is there already.
pub fn build(project: &Path, entry: &str, name: &str) -> Result<PathBuf, String> {
    cached_build(project, name, &[entry])
}

/// The OpenClaw plugin in `plugin` (a package with `openclaw.plugin.json`),
/// built unmodified into a component with `ctxbox-ts-build --openclaw-plugin`
/// (which never writes into `plugin`), cached like [`build`].
pub fn openclaw_plugin(plugin: &Path, name: &str) -> Result<PathBuf, String> {
    if !plugin.join("openclaw.plugin.json").exists() {
        return Err(format!(
            "{} holds no OpenClaw plugin (openclaw.plugin.json)",
            plugin.display()
        ));
    }
    let plugin = plugin.to_string_lossy();
    cached_build(
        Path::new(plugin.as_ref()),
        name,
        &["--openclaw-plugin", &plugin],
    )
}

/// Runs `ctxbox-ts-build ARGS -o OUT` in `project`, where OUT is named by a
/// hash of `project`, the SDK and the WIT, unless OUT is there already.
fn cached_build(project: &Path, name: &str, args: &[&str]) -> Result<PathBuf, String> {
    if let Some(why) = toolchain_missing() {
        return Err(why);
    }
    let sdk = sdk_dir();
    let mut hasher = DefaultHasher::new();
    hash_tree(&mut hasher, project);
    for part in ["src", "bin", "types", "package.json", "package-lock.json"] {
        let path = sdk.join(part);
        if path.is_dir() {
            hash_tree(&mut hasher, &path);
        } else if let Ok(bytes) = std::fs::read(&path) {
            hasher.write(&bytes);
        }
    }
    hash_tree(&mut hasher, &repo_root().join("wit"));
    let out = Path::new(env!("OUT_DIR"))
        .join("ts-engines")
        .join(format!("{name}-{:016x}.wasm", hasher.finish()));
    let _one_at_a_time = BUILDS
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    if out.exists() {
        // Marked as the newest build of `name`: CI's OpenClaw stage takes
        // the newest as the one this run used.
        let _ = std::fs::File::options()
            .append(true)
            .open(&out)
            .and_then(|file| file.set_modified(std::time::SystemTime::now()));
        return Ok(out);
    }
    let output = Command::new("node")
        .current_dir(project)
        .arg(sdk.join("bin/ctxbox-ts-build.mjs"))
        .args(args)
        .arg("-o")
        .arg(&out)
        .output()
        .map_err(|error| format!("cannot run node: {error}"))?;
    if !output.status.success() {
        return Err(format!(
            "building {name} failed:\n{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        ));
    }
    Ok(out)
}

/// `examples/ts-lossless`, built (its `npm ci` links the SDK; without it the
/// SDK is linked here, which is all the build needs).
pub fn ts_lossless() -> Result<PathBuf, String> {
    let project = repo_root().join("examples/ts-lossless");
    link_sdk(&project, &sdk_dir())?;
    build(&project, "src/engine.ts", "ts_lossless")
}

/// `tests/ts-engines/sql-memory` (a test engine over the SQL power), built.
pub fn sql_memory() -> Result<PathBuf, String> {
    let project = repo_root().join("tests/ts-engines/sql-memory");
    link_sdk(&project, &sdk_dir())?;
    build(&project, "src/engine.ts", "sql_memory")
}

/// Makes `project/node_modules/@ctxbox/guest` point at `sdk`, as `npm install`
/// of a `file:` dependency does.
pub fn link_sdk(project: &Path, sdk: &Path) -> Result<(), String> {
    let link = project.join("node_modules/@ctxbox/guest");
    if link.exists() {
        return Ok(());
    }
    let parent = link.parent().expect("a parent folder");
    std::fs::create_dir_all(parent)
        .map_err(|error| format!("cannot create {}: {error}", parent.display()))?;
    std::os::unix::fs::symlink(sdk, &link)
        .map_err(|error| format!("cannot link {}: {error}", link.display()))
}

/// The test subjects: the folder `CTXBOX_SUBJECTS` names, else the first
/// `shared/subjects` found walking up from the clone (read-only input kept
/// beside it), as the SDK's Node tests find it.
fn subjects_dir() -> Result<PathBuf, String> {
    if let Some(dir) = std::env::var_os("CTXBOX_SUBJECTS") {
        return Ok(PathBuf::from(dir));
    }
    repo_root()
        .ancestors()
        .map(|dir| dir.join("shared/subjects"))
        .find(|dir| dir.is_dir())
        .ok_or_else(|| "no shared/subjects beside the clone (set CTXBOX_SUBJECTS)".to_owned())
}

/// lossless-claw 1.0.0-beta.4, OpenClaw's flagship context-engine plugin, from
/// the test subjects ([`subjects_dir`]), built unmodified with
/// `--openclaw-plugin`.
pub fn lossless_claw() -> Result<PathBuf, String> {
    let subjects = subjects_dir()?;
    openclaw_plugin(
        &subjects.join("lossless-claw-1.0.0-beta.4"),
        "lossless_claw",
    )
}
