//! The sandbox's own errors: why a component was refused at load, and why
//! the sandbox could not be set up.

use std::path::PathBuf;

/// Why a component was refused at load.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The file could not be read.
    #[error("cannot read engine `{}`: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The component is larger than `sandbox.maxComponentKib` allows.
    #[error(
        "`{name}` is {size} bytes, over the {limit}-byte limit on components (sandbox.maxComponentKib)"
    )]
    TooLarge {
        /// File name or label.
        name: String,
        /// Its size in bytes.
        size: u64,
        /// The limit in bytes.
        limit: u64,
    },
    /// Compiling took longer than `sandbox.compileTimeoutMs`.
    #[error("compiling `{name}` took longer than {limit_ms} ms (sandbox.compileTimeoutMs)")]
    CompileTimeout {
        /// File name or label.
        name: String,
        /// The limit in milliseconds.
        limit_ms: u64,
    },
    /// The bytes are not WebAssembly at all.
    #[error("`{name}` is not a WebAssembly file (no `\\0asm` header)")]
    NotWasm {
        /// File name or label.
        name: String,
    },
    /// A core module where a component is needed.
    #[error(
        "`{name}` is a core WebAssembly module, not a component: build it for `wasm32-wasip2` (or wrap it with `wasm-tools component new`)"
    )]
    CoreModule {
        /// File name or label.
        name: String,
    },
    /// The component does not validate or compile.
    #[error("`{name}` is not a valid component: {reason}")]
    Invalid {
        /// File name or label.
        name: String,
        /// The compiler's explanation.
        reason: String,
    },
    /// The component implements another version of the contract.
    #[error(
        "`{name}` implements `{found}`, but this host supports `{supported}`: rebuild it against ctxbox-guest {supported_version}"
    )]
    UnsupportedVersion {
        /// File name or label.
        name: String,
        /// The interface the component exports.
        found: String,
        /// The interface this host supports.
        supported: String,
        /// The supported package version.
        supported_version: String,
    },
    /// The component does not export the engine interface at all.
    #[error("`{name}` does not export `{expected}`: it is not a ctxbox context engine")]
    NotAnEngine {
        /// File name or label.
        name: String,
        /// The interface expected.
        expected: String,
    },
    /// The component imports something the sandbox does not grant.
    #[error(
        "`{name}` imports what ctxbox engines may not use: {}",
        list_refused(refused)
    )]
    DisallowedImport {
        /// File name or label.
        name: String,
        /// Every refused import, with why.
        refused: Vec<RefusedImport>,
    },
    /// The component imports contract functions this host does not have
    /// (built against a newer contract than this host's): the host's
    /// shortcoming, not the engine's fault ([`LoadError::is_host_fault`]).
    #[error(
        "`{name}` needs host capabilities this host does not have: {}; run it on a ctxbox host that has them",
        missing.join(", ")
    )]
    MissingCapabilities {
        /// File name or label.
        name: String,
        /// Each missing capability, as `interface.function`.
        missing: Vec<String>,
    },
    /// The component's imports or exports do not match the contract.
    #[error("`{name}` does not match the ctxbox:engine contract: {reason}")]
    Link {
        /// File name or label.
        name: String,
        /// Wasmtime's explanation.
        reason: String,
    },
    /// The host ran out of something it needs to load any component (file
    /// descriptors, disk, memory, threads) or its disk failed: a fault of
    /// this machine, never of the engine ([`LoadError::is_host_fault`]).
    #[error(
        "the host could not load `{name}`: {source} (a fault of this machine, not of the engine)"
    )]
    HostFault {
        /// File name or label.
        name: String,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The compilation cache could not be used.
    #[error("compiled-engine cache at `{}`: {reason}", path.display())]
    Cache {
        /// The cache file or directory.
        path: PathBuf,
        /// What went wrong.
        reason: String,
    },
}

impl LoadError {
    /// `source`, met loading `name` (`path`, when it was reading its file):
    /// a [`LoadError::HostFault`] when the host ran out of something or
    /// its disk failed, else the file's own problem ([`LoadError::Io`]:
    /// missing, unreadable).
    pub fn from_io(name: &str, path: Option<&std::path::Path>, source: std::io::Error) -> Self {
        let host_fault = matches!(
            source.raw_os_error(),
            Some(
                libc::EMFILE
                    | libc::ENFILE
                    | libc::ENOSPC
                    | libc::EDQUOT
                    | libc::ENOMEM
                    | libc::EIO
                    | libc::EAGAIN
            )
        ) || matches!(
            source.kind(),
            std::io::ErrorKind::OutOfMemory | std::io::ErrorKind::StorageFull
        );
        match path {
            Some(path) if !host_fault => Self::Io {
                path: path.to_owned(),
                source,
            },
            _ => Self::HostFault {
                name: name.to_owned(),
                source,
            },
        }
    }

    /// Whether the load failed for the host's reason, not the component's
    /// (a fault of this machine, or a capability this host lacks): nothing
    /// is held against the engine, and the next selection tries again.
    pub fn is_host_fault(&self) -> bool {
        matches!(
            self,
            Self::HostFault { .. } | Self::MissingCapabilities { .. }
        )
    }
}

/// An import the sandbox does not grant, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RefusedImport {
    /// The interface, e.g. `wasi:sockets/tcp@0.2.6`.
    pub import: String,
    /// Why it is refused.
    pub why: &'static str,
}

fn list_refused(refused: &[RefusedImport]) -> String {
    refused
        .iter()
        .map(|refused| format!("`{}` ({})", refused.import, refused.why))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Why the sandbox itself could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    /// A `sandbox.*` setting is out of range.
    #[error("cannot set up the wasm sandbox: `{key}` {problem}")]
    Setting {
        /// The setting, e.g. `sandbox.memoryLimitMib`.
        key: &'static str,
        /// What is wrong with its value.
        problem: String,
    },
    /// Wasmtime refused the engine configuration.
    #[error("cannot set up the wasm sandbox: {0}")]
    Engine(String),
    /// The host functions (WASI or the contract's imports) could not be linked.
    #[error("cannot set up the wasm sandbox: linking {what}: {reason}")]
    Link {
        /// `WASI` or `the host interface`.
        what: &'static str,
        /// Wasmtime's explanation.
        reason: String,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn running_out_is_the_hosts_fault_and_a_missing_file_the_components() {
        let path = std::path::Path::new("engine.wasm");
        for errno in [libc::EMFILE, libc::ENFILE, libc::ENOSPC, libc::EIO] {
            let error = LoadError::from_io(
                "engine.wasm",
                Some(path),
                std::io::Error::from_raw_os_error(errno),
            );
            assert!(error.is_host_fault(), "{error}");
            assert!(error.to_string().contains("not of the engine"), "{error}");
        }
        let missing = LoadError::from_io(
            "engine.wasm",
            Some(path),
            std::io::Error::from_raw_os_error(libc::ENOENT),
        );
        assert!(!missing.is_host_fault(), "{missing}");
        assert!(matches!(missing, LoadError::Io { .. }));
    }
}
