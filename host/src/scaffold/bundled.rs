//! The SDKs a new engine builds on, embedded in the `ctxbox` binary so that
//! `ctxbox new` works wherever it runs: the Rust SDK (`guest-sdk/`), the
//! TypeScript SDK (`guest-sdk-ts/`) and the contract (`wit/`), as they were
//! when this binary was built. A new engine gets its own copy under
//! `vendor/`, which is the exact SDK this `ctxbox` checks and runs against.

use std::path::Path;

use super::ScaffoldError;

/// A file: its path relative to its folder, and its contents.
pub(super) type File = (&'static str, &'static str);

/// `wit/`: the contract.
pub(super) const WIT: &[File] = &[
    ("engine.wit", include_str!("../../../wit/engine.wit")),
    ("history.wit", include_str!("../../../wit/history.wit")),
    ("host.wit", include_str!("../../../wit/host.wit")),
    ("sql.wit", include_str!("../../../wit/sql.wit")),
    ("tools.wit", include_str!("../../../wit/tools.wit")),
    ("types.wit", include_str!("../../../wit/types.wit")),
    ("world.wit", include_str!("../../../wit/world.wit")),
];

/// `guest-sdk/src/`: the Rust SDK's sources (its `Cargo.toml` is written by
/// [`rust_sdk_manifest`], without the workspace's inherited keys).
pub(super) const RUST_SDK: &[File] = &[
    (
        "src/codec.rs",
        include_str!("../../../guest-sdk/src/codec.rs"),
    ),
    (
        "src/engine.rs",
        include_str!("../../../guest-sdk/src/engine.rs"),
    ),
    (
        "src/glue.rs",
        include_str!("../../../guest-sdk/src/glue.rs"),
    ),
    (
        "src/history.rs",
        include_str!("../../../guest-sdk/src/history.rs"),
    ),
    (
        "src/host.rs",
        include_str!("../../../guest-sdk/src/host.rs"),
    ),
    (
        "src/host/sql.rs",
        include_str!("../../../guest-sdk/src/host/sql.rs"),
    ),
    ("src/lib.rs", include_str!("../../../guest-sdk/src/lib.rs")),
    (
        "src/packed.rs",
        include_str!("../../../guest-sdk/src/packed.rs"),
    ),
    (
        "src/testing.rs",
        include_str!("../../../guest-sdk/src/testing.rs"),
    ),
    (
        "src/types.rs",
        include_str!("../../../guest-sdk/src/types.rs"),
    ),
];

/// The workspace manifest: the versions the Rust SDK is built and tested with.
const WORKSPACE_MANIFEST: &str = include_str!("../../../Cargo.toml");

/// The workspace's lockfile: pins a new Rust engine's dependencies to the
/// versions ctxbox is tested with (cargo drops the entries it does not use).
pub(super) const CARGO_LOCK: &str = include_str!("../../../Cargo.lock");

/// `guest-sdk-ts/`: the TypeScript SDK (package, sources, build command,
/// generated types).
pub(super) const TS_SDK: &[File] = &[
    (
        "package.json",
        include_str!("../../../guest-sdk-ts/package.json"),
    ),
    ("README.md", include_str!("../../../guest-sdk-ts/README.md")),
    (
        "tsconfig.json",
        include_str!("../../../guest-sdk-ts/tsconfig.json"),
    ),
    (
        "bin/ctxbox-ts-build.mjs",
        include_str!("../../../guest-sdk-ts/bin/ctxbox-ts-build.mjs"),
    ),
    (
        "bin/imports.mjs",
        include_str!("../../../guest-sdk-ts/bin/imports.mjs"),
    ),
    (
        "bin/openclaw-plugin.mjs",
        include_str!("../../../guest-sdk-ts/bin/openclaw-plugin.mjs"),
    ),
    (
        "bin/plugin-transforms.mjs",
        include_str!("../../../guest-sdk-ts/bin/plugin-transforms.mjs"),
    ),
    (
        "src/console.ts",
        include_str!("../../../guest-sdk-ts/src/console.ts"),
    ),
    (
        "src/engine.ts",
        include_str!("../../../guest-sdk-ts/src/engine.ts"),
    ),
    (
        "src/errors.ts",
        include_str!("../../../guest-sdk-ts/src/errors.ts"),
    ),
    (
        "src/globals.d.ts",
        include_str!("../../../guest-sdk-ts/src/globals.d.ts"),
    ),
    (
        "src/history.ts",
        include_str!("../../../guest-sdk-ts/src/history.ts"),
    ),
    (
        "src/host.ts",
        include_str!("../../../guest-sdk-ts/src/host.ts"),
    ),
    (
        "src/index.ts",
        include_str!("../../../guest-sdk-ts/src/index.ts"),
    ),
    (
        "src/measure-memo.ts",
        include_str!("../../../guest-sdk-ts/src/measure-memo.ts"),
    ),
    (
        "src/node/crypto.ts",
        include_str!("../../../guest-sdk-ts/src/node/crypto.ts"),
    ),
    (
        "src/node/digest-memo.ts",
        include_str!("../../../guest-sdk-ts/src/node/digest-memo.ts"),
    ),
    (
        "src/node/encoding.ts",
        include_str!("../../../guest-sdk-ts/src/node/encoding.ts"),
    ),
    (
        "src/node/path.ts",
        include_str!("../../../guest-sdk-ts/src/node/path.ts"),
    ),
    (
        "src/node/sha.ts",
        include_str!("../../../guest-sdk-ts/src/node/sha.ts"),
    ),
    (
        "src/node/process.ts",
        include_str!("../../../guest-sdk-ts/src/node/process.ts"),
    ),
    (
        "src/node/timers.ts",
        include_str!("../../../guest-sdk-ts/src/node/timers.ts"),
    ),
    (
        "src/node/intl.ts",
        include_str!("../../../guest-sdk-ts/src/node/intl.ts"),
    ),
    (
        "src/node/util.ts",
        include_str!("../../../guest-sdk-ts/src/node/util.ts"),
    ),
    (
        "src/node/os.ts",
        include_str!("../../../guest-sdk-ts/src/node/os.ts"),
    ),
    (
        "src/node/async_hooks.ts",
        include_str!("../../../guest-sdk-ts/src/node/async_hooks.ts"),
    ),
    (
        "src/node/buffer.ts",
        include_str!("../../../guest-sdk-ts/src/node/buffer.ts"),
    ),
    (
        "src/node/globals.ts",
        include_str!("../../../guest-sdk-ts/src/node/globals.ts"),
    ),
    (
        "src/node/fs.ts",
        include_str!("../../../guest-sdk-ts/src/node/fs.ts"),
    ),
    (
        "src/node/fs_promises.ts",
        include_str!("../../../guest-sdk-ts/src/node/fs_promises.ts"),
    ),
    (
        "src/node/globals-installed.ts",
        include_str!("../../../guest-sdk-ts/src/node/globals-installed.ts"),
    ),
    (
        "src/node/module.ts",
        include_str!("../../../guest-sdk-ts/src/node/module.ts"),
    ),
    (
        "src/node/readline.ts",
        include_str!("../../../guest-sdk-ts/src/node/readline.ts"),
    ),
    (
        "src/openclaw/api.ts",
        include_str!("../../../guest-sdk-ts/src/openclaw/api.ts"),
    ),
    (
        "src/openclaw/bootstrap-marks.ts",
        include_str!("../../../guest-sdk-ts/src/openclaw/bootstrap-marks.ts"),
    ),
    (
        "src/openclaw/call.ts",
        include_str!("../../../guest-sdk-ts/src/openclaw/call.ts"),
    ),
    (
        "src/openclaw/compaction.ts",
        include_str!("../../../guest-sdk-ts/src/openclaw/compaction.ts"),
    ),
    (
        "src/openclaw/index.ts",
        include_str!("../../../guest-sdk-ts/src/openclaw/index.ts"),
    ),
    (
        "src/openclaw/live-messages.ts",
        include_str!("../../../guest-sdk-ts/src/openclaw/live-messages.ts"),
    ),
    (
        "src/openclaw/messages.ts",
        include_str!("../../../guest-sdk-ts/src/openclaw/messages.ts"),
    ),
    (
        "src/openclaw/plugin-sdk/core.ts",
        include_str!("../../../guest-sdk-ts/src/openclaw/plugin-sdk/core.ts"),
    ),
    (
        "src/openclaw/plugin-sdk/index.ts",
        include_str!("../../../guest-sdk-ts/src/openclaw/plugin-sdk/index.ts"),
    ),
    (
        "src/openclaw/plugin-sdk/logging-core.ts",
        include_str!("../../../guest-sdk-ts/src/openclaw/plugin-sdk/logging-core.ts"),
    ),
    (
        "src/openclaw/plugin-sdk/session-transcript-runtime.ts",
        include_str!("../../../guest-sdk-ts/src/openclaw/plugin-sdk/session-transcript-runtime.ts"),
    ),
    (
        "src/openclaw/tool-pairing.ts",
        include_str!("../../../guest-sdk-ts/src/openclaw/tool-pairing.ts"),
    ),
    (
        "src/openclaw/tools.ts",
        include_str!("../../../guest-sdk-ts/src/openclaw/tools.ts"),
    ),
    (
        "src/prompt.ts",
        include_str!("../../../guest-sdk-ts/src/prompt.ts"),
    ),
    (
        "src/sql-text.ts",
        include_str!("../../../guest-sdk-ts/src/sql-text.ts"),
    ),
    (
        "src/sqlite.ts",
        include_str!("../../../guest-sdk-ts/src/sqlite.ts"),
    ),
    (
        "src/wit.ts",
        include_str!("../../../guest-sdk-ts/src/wit.ts"),
    ),
    (
        "types/wit.d.ts",
        include_str!("../../../guest-sdk-ts/types/wit.d.ts"),
    ),
    (
        "types/interfaces/ctxbox-engine-engine.d.ts",
        include_str!("../../../guest-sdk-ts/types/interfaces/ctxbox-engine-engine.d.ts"),
    ),
    (
        "types/interfaces/ctxbox-engine-history.d.ts",
        include_str!("../../../guest-sdk-ts/types/interfaces/ctxbox-engine-history.d.ts"),
    ),
    (
        "types/interfaces/ctxbox-engine-host.d.ts",
        include_str!("../../../guest-sdk-ts/types/interfaces/ctxbox-engine-host.d.ts"),
    ),
    (
        "types/interfaces/ctxbox-engine-sql.d.ts",
        include_str!("../../../guest-sdk-ts/types/interfaces/ctxbox-engine-sql.d.ts"),
    ),
    (
        "types/interfaces/ctxbox-engine-tools.d.ts",
        include_str!("../../../guest-sdk-ts/types/interfaces/ctxbox-engine-tools.d.ts"),
    ),
    (
        "types/interfaces/ctxbox-engine-types.d.ts",
        include_str!("../../../guest-sdk-ts/types/interfaces/ctxbox-engine-types.d.ts"),
    ),
];

/// The new TypeScript engine's own files (`{name}` is filled in).
pub(super) const TS_TEMPLATE: &[File] = &[
    (
        "src/engine.ts",
        include_str!("../../../guest-sdk-ts/template/src/engine.ts"),
    ),
    (
        "tsconfig.json",
        include_str!("../../../guest-sdk-ts/template/tsconfig.json"),
    ),
    (
        ".gitignore",
        include_str!("../../../guest-sdk-ts/template/gitignore"),
    ),
];

/// The Rust SDK's `Cargo.toml`, with the edition, license and `wit-bindgen`
/// requirement the workspace gives it.
pub(super) fn rust_sdk_manifest() -> String {
    let workspace: toml::Table = toml::from_str(WORKSPACE_MANIFEST).unwrap_or_default();
    let lookup = |path: &[&str]| {
        let mut value = workspace.get(path[0]);
        for key in &path[1..] {
            value = value.and_then(|value| value.get(key));
        }
        value
            .and_then(toml::Value::as_str)
            .unwrap_or_default()
            .to_owned()
    };
    format!(
        "[package]\nname = \"ctxbox-guest\"\ndescription = \"SDK for writing ctxbox context engines as WebAssembly components (bundled by ctxbox {version})\"\nversion = \"{version}\"\nedition = \"{edition}\"\nlicense = \"{license}\"\n\n[dependencies]\nwit-bindgen = \"{wit_bindgen}\"\n",
        version = env!("CARGO_PKG_VERSION"),
        edition = lookup(&["workspace", "package", "edition"]),
        license = lookup(&["workspace", "package", "license"]),
        wit_bindgen = lookup(&["workspace", "dependencies", "wit-bindgen"]),
    )
}

/// The TypeScript SDK's `package.json`, parsed.
pub(super) fn ts_sdk_package() -> serde_json::Value {
    serde_json::from_str(TS_SDK[0].1).unwrap_or_default()
}

/// Writes `files` under `dir`, creating folders as needed; `fill` rewrites each file's contents.
pub(super) fn write_files(
    dir: &Path,
    files: &[File],
    fill: impl Fn(&str) -> String,
) -> Result<(), ScaffoldError> {
    for (relative, contents) in files {
        write(&dir.join(relative), &fill(contents))?;
    }
    Ok(())
}

/// Writes one file, creating its folder.
pub(super) fn write(path: &Path, contents: &str) -> Result<(), ScaffoldError> {
    let failed = |source| ScaffoldError::Write {
        path: path.display().to_string(),
        source,
    };
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(failed)?;
    }
    std::fs::write(path, contents).map_err(failed)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every file of `dir` (relative, sorted), skipping `skip` folders.
    fn listing(dir: &Path, prefix: &str, skip: &[&str], found: &mut Vec<String>) {
        for entry in std::fs::read_dir(dir).expect("readable").flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            let relative = format!("{prefix}{name}");
            if skip.contains(&relative.as_str()) {
                continue;
            }
            if entry.path().is_dir() {
                listing(&entry.path(), &format!("{relative}/"), skip, found);
            } else {
                found.push(relative);
            }
        }
    }

    fn names(files: &[File]) -> Vec<String> {
        let mut names: Vec<String> = files.iter().map(|(name, _)| (*name).to_owned()).collect();
        names.sort();
        names
    }

    fn on_disk(folder: &str, skip: &[&str]) -> Vec<String> {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("..")
            .join(folder);
        let mut found = Vec::new();
        listing(&root, "", skip, &mut found);
        found.sort();
        found
    }

    #[test]
    fn every_sdk_and_contract_file_is_bundled() {
        assert_eq!(names(WIT), on_disk("wit", &[]));
        let mut rust = names(RUST_SDK);
        rust.push("Cargo.toml".into());
        rust.sort();
        assert_eq!(rust, on_disk("guest-sdk", &[]));
        let mut ts = names(TS_SDK);
        // Not bundled: the lockfile of the SDK's own development install, `wit`
        // (a link to the contract, bundled as WIT), the template (the new
        // engine's files), the SDK's tests, its benches (which run on the
        // tests' fake host) and CI script.
        ts.extend(["package-lock.json".into()]);
        ts.sort();
        assert_eq!(
            ts,
            on_disk(
                "guest-sdk-ts",
                &["node_modules", "wit", "template", "test", "bench", "ci.sh"]
            )
        );
    }

    #[test]
    fn the_rust_sdk_manifest_takes_the_workspace_versions() {
        let manifest: toml::Table = toml::from_str(&rust_sdk_manifest()).expect("valid TOML");
        assert_eq!(manifest["package"]["edition"].as_str(), Some("2024"));
        let wit_bindgen = manifest["dependencies"]["wit-bindgen"]
            .as_str()
            .unwrap_or("");
        assert!(!wit_bindgen.is_empty(), "{manifest:?}");
        assert_eq!(ts_sdk_package()["name"], "@ctxbox/guest");
    }
}
