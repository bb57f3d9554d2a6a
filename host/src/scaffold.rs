//! Scaffolding a new engine crate (`ctxbox new`): a `Cargo.toml` pointing at
//! the guest SDK and a small working engine to start from.

use std::path::Path;

/// `Cargo.toml` of a new engine; `{name}` and `{sdk}` are filled in.
const CARGO_TOML: &str = r#"[package]
name = "{name}"
version = "0.1.0"
edition = "2024"

[lib]
# A cdylib becomes the wasm component; the rlib lets tests run the logic natively.
crate-type = ["cdylib", "rlib"]

[dependencies]
ctxbox-guest = { path = "{sdk}" }

[profile.release]
# Small, fast components.
opt-level = "s"
strip = true

# Its own workspace, wherever it is created.
[workspace]
"#;

/// `src/lib.rs` of a new engine: the newest messages that fit the budget.
const LIB_RS: &str = r#"//! `{name}`: a ctxbox context engine.

use ctxbox_guest::prelude::*;

#[derive(Default)]
struct MyEngine;

impl Engine for MyEngine {
    fn info(&self) -> EngineInfo {
        EngineInfo::new("{name}", "{name}").with_version(env!("CARGO_PKG_VERSION"))
    }

    /// The newest messages that fit the budget, never starting on a tool
    /// result whose call would be left out.
    fn assemble(
        &mut self,
        _session: &SessionRef,
        history: &History,
        params: AssembleParams,
    ) -> Result<AssembleResult, EngineError> {
        let len = history.len();
        let budget = params.token_budget.unwrap_or(u64::MAX);
        let mut start = len;
        while start > 0 && history.tokens(start - 1..len) <= budget {
            start -= 1;
        }
        while start < len && matches!(history.tool_pairing(start), Some(ToolPairing::ToolResult(Some(call))) if call < start) {
            start += 1;
        }
        if start == len && len > 0 {
            // Nothing fits: the newest message alone beats an empty prompt.
            start = match history.tool_pairing(len - 1) {
                Some(ToolPairing::ToolResult(Some(call))) => call,
                _ => len - 1,
            };
        }
        Ok(AssembleResult::keep_range(start..len, history.tokens(start..len)))
    }
}

ctxbox_guest::export_engine!(MyEngine);
"#;

/// Why a new engine crate could not be created.
#[derive(Debug, thiserror::Error)]
pub enum ScaffoldError {
    /// The target exists already.
    #[error("`{0}` already exists")]
    Exists(String),
    /// The SDK folder is not ctxbox's guest SDK.
    #[error("`{0}` is not ctxbox's guest-sdk (no Cargo.toml there)")]
    NoSdk(String),
    /// Writing failed.
    #[error("cannot write `{path}`: {source}")]
    Write {
        /// The file or folder.
        path: String,
        /// Why.
        source: std::io::Error,
    },
}

/// Creates engine crate `name` in `dir`, depending on the guest SDK at
/// `sdk`.
pub fn new_engine(dir: &Path, name: &str, sdk: &Path) -> Result<(), ScaffoldError> {
    if dir.exists() {
        return Err(ScaffoldError::Exists(dir.display().to_string()));
    }
    let sdk = std::fs::canonicalize(sdk)
        .ok()
        .filter(|sdk| sdk.join("Cargo.toml").exists())
        .ok_or_else(|| ScaffoldError::NoSdk(sdk.display().to_string()))?;
    let fill = |template: &str| {
        template
            .replace("{name}", name)
            .replace("{sdk}", &sdk.display().to_string())
    };
    let write = |path: &Path, contents: &str| {
        std::fs::write(path, contents).map_err(|source| ScaffoldError::Write {
            path: path.display().to_string(),
            source,
        })
    };
    std::fs::create_dir_all(dir.join("src")).map_err(|source| ScaffoldError::Write {
        path: dir.display().to_string(),
        source,
    })?;
    write(&dir.join("Cargo.toml"), &fill(CARGO_TOML))?;
    write(&dir.join("src/lib.rs"), &fill(LIB_RS))?;
    write(&dir.join(".gitignore"), "/target\n")?;
    // The checkout's lockfile pins the SDK's dependencies to the versions
    // ctxbox is tested with; cargo drops the entries the engine does not use.
    if let Some(lock) = sdk.parent().map(|checkout| checkout.join("Cargo.lock"))
        && let Ok(contents) = std::fs::read_to_string(&lock)
    {
        write(&dir.join("Cargo.lock"), &contents)?;
    }
    Ok(())
}
