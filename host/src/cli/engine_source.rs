//! Naming an engine on the command line: a bundled engine's id or a path to
//! a `.wasm` component.

use std::path::PathBuf;

use anyhow::{Context, bail};
use ctxbox_host::engines::bundled;
use ctxbox_host::sandbox::{LoadedComponent, Sandbox};

/// Where an engine's component comes from.
#[derive(Debug, Clone)]
pub enum EngineSource {
    /// Embedded in this binary.
    Bundled(&'static str, &'static [u8]),
    /// A file.
    File(PathBuf),
}

impl EngineSource {
    /// Resolves `spec`: a bundled engine's name, else a path that must exist.
    pub fn parse(spec: &str) -> anyhow::Result<Self> {
        if let Some((name, bytes)) = bundled::ENGINES.iter().find(|(name, _)| *name == spec) {
            return Ok(Self::Bundled(name, bytes));
        }
        let path = PathBuf::from(spec);
        if path.exists() {
            return Ok(Self::File(path));
        }
        let names: Vec<&str> = bundled::ENGINES.iter().map(|(name, _)| *name).collect();
        bail!(
            "no engine `{spec}`: not a bundled engine ({}) and no such file",
            if names.is_empty() {
                "none bundled".to_owned()
            } else {
                names.join(", ")
            }
        )
    }

    /// How the source reads in reports.
    pub fn label(&self) -> String {
        match self {
            Self::Bundled(name, _) => format!("bundled:{name}"),
            Self::File(path) => path.display().to_string(),
        }
    }

    /// Loads the component into `sandbox`.
    pub fn load(&self, sandbox: &Sandbox) -> anyhow::Result<LoadedComponent> {
        let loaded = match self {
            Self::Bundled(name, bytes) => sandbox.load_bytes(&format!("bundled:{name}"), bytes),
            Self::File(path) => sandbox.load_file(path),
        };
        loaded.with_context(|| format!("cannot load engine {}", self.label()))
    }
}
