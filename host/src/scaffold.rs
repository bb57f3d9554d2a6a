//! Scaffolding a new engine (`ctxbox new`): a Rust crate or a TypeScript
//! project with a small working engine to start from, built on the SDK
//! bundled in this binary (`bundled`) or on a ctxbox checkout's.

mod bundled;
mod typescript;

pub use typescript::component_path as ts_component_path;

use std::path::{Path, PathBuf};

/// The language of a new engine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Language {
    /// A Rust crate on `ctxbox-guest`, built with cargo for `wasm32-wasip2`.
    Rust,
    /// A TypeScript project on `@ctxbox/guest`, built with `ctxbox-ts-build`.
    TypeScript,
}

/// Where a new engine's SDK comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SdkSource {
    /// A copy written into the engine's `vendor/` folder: the SDK this binary
    /// was built with. Works anywhere, no checkout needed.
    Bundled,
    /// The SDK folder of a ctxbox checkout (`guest-sdk` or `guest-sdk-ts`),
    /// referred to by path: for working on the SDK itself.
    Checkout(PathBuf),
}

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
//!
//! What must outlive an instance goes to the host: `host::state` (keys and
//! values), `host::index` (full-text search) or `host::sql`, a SQLite
//! database of the engine's own (FTS5 included; see `wit/sql.wit`):
//!
//! ```ignore
//! let db = host::sql::Database::open()?;
//! db.execute_batch("CREATE TABLE IF NOT EXISTS notes(text TEXT NOT NULL)")?;
//! db.execute("INSERT INTO notes(text) VALUES (?)", ctxbox_guest::sql_params!["kept"])?;
//! let rows = db.query("SELECT text FROM notes", ())?;
//! ```
//!
//! A call's writes become durable when it answers; a call that fails
//! leaves none of them.

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
    /// The SDK folder is not ctxbox's guest SDK for the language.
    #[error("`{0}` is not ctxbox's {1} (no {2} there)")]
    NoSdk(String, &'static str, &'static str),
    /// The name cannot name a crate or package.
    #[error("`{0}` is not a usable engine name (letters, digits, - and _)")]
    BadName(String),
    /// Writing failed.
    #[error("cannot write `{path}`: {source}")]
    Write {
        /// The file or folder.
        path: String,
        /// Why.
        source: std::io::Error,
    },
}

/// Creates engine `name` in `dir`, in `language`, on the SDK from `sdk`.
pub fn new_engine(
    dir: &Path,
    name: &str,
    language: Language,
    sdk: &SdkSource,
) -> Result<(), ScaffoldError> {
    if name.is_empty()
        || !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
    {
        return Err(ScaffoldError::BadName(name.to_owned()));
    }
    if dir.exists() {
        return Err(ScaffoldError::Exists(dir.display().to_string()));
    }
    match language {
        Language::Rust => new_rust_engine(dir, name, sdk),
        Language::TypeScript => typescript::new_engine(dir, name, sdk),
    }
}

/// The checkout SDK folder `sdk`, made absolute, if it holds `marker`.
fn checkout_sdk(
    sdk: &Path,
    what: &'static str,
    marker: &'static str,
) -> Result<PathBuf, ScaffoldError> {
    std::fs::canonicalize(sdk)
        .ok()
        .filter(|sdk| sdk.join(marker).exists())
        .ok_or_else(|| ScaffoldError::NoSdk(sdk.display().to_string(), what, marker))
}

/// A Rust engine crate: `Cargo.toml`, `src/lib.rs`, the lockfile ctxbox is
/// tested with, and (bundled) the SDK and WIT under `vendor/`.
fn new_rust_engine(dir: &Path, name: &str, sdk: &SdkSource) -> Result<(), ScaffoldError> {
    let sdk_path = match sdk {
        SdkSource::Bundled => "vendor/ctxbox-guest".to_owned(),
        SdkSource::Checkout(path) => checkout_sdk(path, "guest-sdk", "Cargo.toml")?
            .display()
            .to_string(),
    };
    let fill = |template: &str| template.replace("{name}", name).replace("{sdk}", &sdk_path);
    bundled::write(&dir.join("Cargo.toml"), &fill(CARGO_TOML))?;
    bundled::write(&dir.join("src/lib.rs"), &fill(LIB_RS))?;
    bundled::write(&dir.join(".gitignore"), "/target\n")?;
    bundled::write(&dir.join("Cargo.lock"), bundled::CARGO_LOCK)?;
    if *sdk == SdkSource::Bundled {
        let vendor = dir.join("vendor");
        bundled::write_files(
            &vendor.join("ctxbox-guest"),
            bundled::RUST_SDK,
            str::to_owned,
        )?;
        bundled::write(
            &vendor.join("ctxbox-guest/Cargo.toml"),
            &bundled::rust_sdk_manifest(),
        )?;
        // The SDK's bindings read `../wit` from its own folder.
        bundled::write_files(&vendor.join("wit"), bundled::WIT, str::to_owned)?;
    }
    Ok(())
}
