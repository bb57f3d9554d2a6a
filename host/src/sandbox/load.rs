//! Loading a component: refuse what is not a ctxbox engine (with a message
//! that names the problem), compile it or take it from the on-disk cache, and
//! prepare it for fast instantiation.

use std::fs;
use std::io::Write;
use std::path::Path;

use std::sync::mpsc::RecvTimeoutError;

use sha2::{Digest, Sha256};
use wasmtime::component::Component;
use wasmtime::wasmparser::{BinaryReaderError, Parser, Payload};

use super::Sandbox;
use super::bindings::EngineExportsPre;
use super::capabilities;
use super::error::{LoadError, RefusedImport};
use super::sql::imports_sql;
use super::store::StoreState;

/// The contract package this host implements.
pub const WIT_PACKAGE: &str = "ctxbox:engine";
/// The contract version this host implements.
pub const WIT_VERSION: &str = "0.1.0";
/// The export every engine must have.
const ENGINE_INTERFACE: &str = "ctxbox:engine/engine";

/// Prefix of every cache file; the rest of the header is a SHA-256 of the
/// payload, checked before anything is deserialized.
const CACHE_MAGIC: &[u8; 8] = b"CTXBOXC1";

/// A component ready to be instantiated.
pub struct LoadedComponent {
    pub(crate) name: String,
    pub(crate) pre: EngineExportsPre<StoreState>,
    imports: Vec<String>,
    content_hash: String,
    from_cache: bool,
}

impl LoadedComponent {
    /// The file name or label it was loaded under.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Everything the component imports, by interface name.
    pub fn imports(&self) -> &[String] {
        &self.imports
    }

    /// Whether it imports the SQL power (`wit/sql.wit`).
    pub fn imports_sql(&self) -> bool {
        imports_sql(&self.imports)
    }

    /// SHA-256 of the component's bytes, hex.
    pub fn content_hash(&self) -> &str {
        &self.content_hash
    }

    /// Whether the compiled code came from the on-disk cache.
    pub fn from_cache(&self) -> bool {
        self.from_cache
    }

    /// The contract version it implements (always the supported one: others
    /// are refused at load).
    pub fn wit_version(&self) -> &'static str {
        WIT_VERSION
    }
}

impl std::fmt::Debug for LoadedComponent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LoadedComponent")
            .field("name", &self.name)
            .field("content_hash", &self.content_hash)
            .field("from_cache", &self.from_cache)
            .finish()
    }
}

impl Sandbox {
    /// Loads the component in `path`. A file over `sandbox.maxComponentKib`
    /// is refused before it is read.
    pub fn load_file(&self, path: &Path) -> Result<LoadedComponent, LoadError> {
        let name = path.display().to_string();
        let io = |source| LoadError::from_io(&name, Some(path), source);
        let size = fs::metadata(path).map_err(io)?.len();
        self.check_size(&name, size)?;
        let bytes = fs::read(path).map_err(io)?;
        self.load_bytes(&name, &bytes)
    }

    /// Loads a component from memory; `name` labels it in errors. Before
    /// anything is hashed or compiled, the bytes must be a component within
    /// the size cap that exports the engine interface and imports only what
    /// the sandbox grants; compiling then gets `sandbox.compileTimeoutMs`.
    pub fn load_bytes(&self, name: &str, bytes: &[u8]) -> Result<LoadedComponent, LoadError> {
        self.check_size(name, bytes.len() as u64)?;
        let imports = check_component(name, bytes)?;
        let content_hash = hex::encode(Sha256::digest(bytes));
        let (component, from_cache) = self.compile_cached(name, bytes, &content_hash)?;
        let missing = capabilities::missing(&self.inner.engine, &component);
        if !missing.is_empty() {
            return Err(LoadError::MissingCapabilities {
                name: name.to_owned(),
                missing,
            });
        }
        let pre = self
            .inner
            .linker
            .instantiate_pre(&component)
            .and_then(EngineExportsPre::new)
            .map_err(|error| LoadError::Link {
                name: name.to_owned(),
                reason: format!("{error:#}"),
            })?;
        Ok(LoadedComponent {
            name: name.to_owned(),
            pre,
            imports,
            content_hash,
            from_cache,
        })
    }

    /// Compiles `bytes`, or deserializes the cached compilation of the same
    /// bytes by the same engine configuration.
    fn compile_cached(
        &self,
        name: &str,
        bytes: &[u8],
        content_hash: &str,
    ) -> Result<(Component, bool), LoadError> {
        let compile = || self.compile_bounded(name, bytes);
        let Some(cache_dir) = &self.inner.config.cache_dir else {
            return Ok((compile()?, false));
        };
        let path = cache_dir.join(format!(
            "{content_hash}-{}.cwasm",
            self.inner.compatibility_hash
        ));
        if let Some(component) = self.read_cache(&path) {
            return Ok((component, true));
        }
        let component = compile()?;
        if let Err(reason) = write_cache(cache_dir, &path, &component) {
            // A cache that cannot be written only costs a recompilation.
            tracing::warn!(path = %path.display(), reason, "cannot write the compiled-engine cache");
        }
        Ok((component, false))
    }

    /// Refuses a component of `size` bytes over `sandbox.maxComponentKib`.
    fn check_size(&self, name: &str, size: u64) -> Result<(), LoadError> {
        let limit = self.inner.config.max_component_kib.saturating_mul(1024);
        if size > limit {
            return Err(LoadError::TooLarge {
                name: name.to_owned(),
                size,
                limit,
            });
        }
        Ok(())
    }

    /// Compiles `bytes` on a thread of its own, waiting at most
    /// `sandbox.compileTimeoutMs`. Cranelift cannot be interrupted: a
    /// compilation given up on finishes in the background and is dropped
    /// (its size is bounded by the component size cap).
    fn compile_bounded(&self, name: &str, bytes: &[u8]) -> Result<Component, LoadError> {
        let invalid = |reason: String| LoadError::Invalid {
            name: name.to_owned(),
            reason,
        };
        let engine = self.inner.engine.clone();
        let owned = bytes.to_vec();
        let (sender, receiver) = std::sync::mpsc::channel();
        std::thread::Builder::new()
            .name("ctxbox-compile".into())
            .spawn(move || {
                // The receiver is gone when the load gave up: nothing to do.
                let _ = sender.send(Component::from_binary(&engine, &owned));
            })
            .map_err(|error| LoadError::from_io(name, None, error))?;
        let limit = self.inner.config.compile_timeout();
        match receiver.recv_timeout(limit) {
            Ok(compiled) => compiled.map_err(|error| invalid(format!("{error:#}"))),
            Err(RecvTimeoutError::Timeout) => Err(LoadError::CompileTimeout {
                name: name.to_owned(),
                limit_ms: self.inner.config.compile_timeout_ms,
            }),
            Err(RecvTimeoutError::Disconnected) => {
                Err(invalid("the compiler stopped without an answer".into()))
            }
        }
    }

    /// The cached component at `path`, if the file exists, is ours (magic and
    /// checksum match) and deserializes.
    fn read_cache(&self, path: &Path) -> Option<Component> {
        let file = fs::read(path).ok()?;
        let payload = verified_payload(&file);
        if payload.is_none() {
            tracing::warn!(path = %path.display(), "ignoring a corrupt compiled-engine cache file");
            return None;
        }
        // SAFETY: the bytes come from a file in our own cache directory,
        // written by `write_cache` from `Component::serialize` of an engine
        // with the same compatibility hash (it is in the file name), and their
        // checksum matches, so they are the artifact we wrote.
        match unsafe { Component::deserialize(&self.inner.engine, payload?) } {
            Ok(component) => Some(component),
            Err(error) => {
                tracing::warn!(path = %path.display(), error = %error, "cannot use a compiled-engine cache file");
                None
            }
        }
    }
}

/// The part of a cache file after its header, if the header says it is ours
/// and intact.
fn verified_payload(file: &[u8]) -> Option<&[u8]> {
    let header_len = CACHE_MAGIC.len() + 32;
    if file.len() < header_len || &file[..CACHE_MAGIC.len()] != CACHE_MAGIC {
        return None;
    }
    let (header, payload) = file.split_at(header_len);
    (Sha256::digest(payload).as_slice() == &header[CACHE_MAGIC.len()..]).then_some(payload)
}

/// Writes the compiled component atomically: a temp file of its own in the
/// cache dir (unique per write, so concurrent writers of the same component,
/// in this process or another, never share one), fsync, rename. A failed
/// write removes its temp file.
fn write_cache(cache_dir: &Path, path: &Path, component: &Component) -> Result<(), String> {
    let payload = component.serialize().map_err(|error| error.to_string())?;
    fs::create_dir_all(cache_dir).map_err(|error| error.to_string())?;
    let mut temp = tempfile::Builder::new()
        .prefix(".compiling-")
        .suffix(".tmp")
        .tempfile_in(cache_dir)
        .map_err(|error| error.to_string())?;
    let file = temp.as_file_mut();
    file.write_all(CACHE_MAGIC)
        .and_then(|()| file.write_all(&Sha256::digest(&payload)))
        .and_then(|()| file.write_all(&payload))
        .and_then(|()| file.sync_all())
        .map_err(|error| error.to_string())?;
    temp.persist(path)
        .map(drop)
        .map_err(|error| error.error.to_string())
}

/// The checks a component passes before it is hashed or compiled: a
/// component (not a core module) by its header, exporting the engine
/// interface and importing only what the sandbox grants. Returns its
/// imports. Reads the bytes without validating or compiling them, so it is
/// cheap on anything, however malformed.
pub fn check_component(name: &str, bytes: &[u8]) -> Result<Vec<String>, LoadError> {
    check_header(name, bytes)?;
    let declared = Declared::read(name, bytes)?;
    check_exports(name, &declared.exports)?;
    check_imports(name, declared.imports)
}

/// Refuses bytes that are not a component by their header.
fn check_header(name: &str, bytes: &[u8]) -> Result<(), LoadError> {
    const CORE_VERSION: [u8; 4] = [0x01, 0x00, 0x00, 0x00];
    const COMPONENT_VERSION: [u8; 4] = [0x0d, 0x00, 0x01, 0x00];
    if bytes.len() < 8 || &bytes[..4] != b"\0asm" {
        return Err(LoadError::NotWasm {
            name: name.to_owned(),
        });
    }
    match <[u8; 4]>::try_from(&bytes[4..8]) {
        Ok(CORE_VERSION) => Err(LoadError::CoreModule {
            name: name.to_owned(),
        }),
        Ok(COMPONENT_VERSION) => Ok(()),
        _ => Err(LoadError::Invalid {
            name: name.to_owned(),
            reason: format!(
                "unsupported WebAssembly version/layer bytes {:02x?}",
                &bytes[4..8]
            ),
        }),
    }
}

/// Why an import is refused, or `None` if the sandbox grants it.
fn refusal(import: &str) -> Option<&'static str> {
    let interface = import.split('@').next().unwrap_or(import);
    let (package, _) = interface.split_once('/').unwrap_or((interface, ""));
    match package {
        // Clocks, randomness and the stream plumbing behind stdout/stderr.
        "wasi:io" | "wasi:clocks" | "wasi:random" => None,
        // Linked but empty: no variables or arguments, stdin closed. Rust's
        // standard library imports these whether it uses them or not.
        "wasi:cli" => None,
        "wasi:filesystem" => Some("engines get no filesystem; keep state with host.state-set"),
        "wasi:sockets" | "wasi:http" => Some("engines get no network access"),
        WIT_PACKAGE => None,
        _ => Some("it is not part of the ctxbox sandbox"),
    }
}

/// The imports and exports a component declares at its top level, read from
/// its bytes without validating or compiling them.
#[derive(Debug, Default)]
struct Declared {
    imports: Vec<String>,
    exports: Vec<String>,
}

impl Declared {
    fn read(name: &str, bytes: &[u8]) -> Result<Self, LoadError> {
        let invalid = |error: BinaryReaderError| LoadError::Invalid {
            name: name.to_owned(),
            reason: error.to_string(),
        };
        let mut declared = Self::default();
        // Nested modules and components bring their own sections: only the
        // outermost component's imports and exports count.
        let mut depth = 0usize;
        for payload in Parser::new(0).parse_all(bytes) {
            match payload.map_err(invalid)? {
                Payload::Version { .. } => depth += 1,
                Payload::End(_) => depth = depth.saturating_sub(1),
                Payload::ComponentImportSection(section) if depth == 1 => {
                    for import in section {
                        declared
                            .imports
                            .push(import.map_err(invalid)?.name.name.to_owned());
                    }
                }
                Payload::ComponentExportSection(section) if depth == 1 => {
                    for export in section {
                        declared
                            .exports
                            .push(export.map_err(invalid)?.name.name.to_owned());
                    }
                }
                _ => {}
            }
        }
        Ok(declared)
    }
}

/// Checks every import against the sandbox's grant and the contract version.
fn check_imports(name: &str, imports: Vec<String>) -> Result<Vec<String>, LoadError> {
    let mut refused = Vec::new();
    for import in &imports {
        if let Some(why) = refusal(import) {
            refused.push(RefusedImport {
                import: import.to_owned(),
                why,
            });
        }
        if import.starts_with(WIT_PACKAGE) && !import.ends_with(&format!("@{WIT_VERSION}")) {
            return Err(unsupported_version(name, import));
        }
    }
    if refused.is_empty() {
        Ok(imports)
    } else {
        Err(LoadError::DisallowedImport {
            name: name.to_owned(),
            refused,
        })
    }
}

/// Checks that the component exports the engine interface of the supported
/// version.
fn check_exports(name: &str, exports: &[String]) -> Result<(), LoadError> {
    let supported = format!("{ENGINE_INTERFACE}@{WIT_VERSION}");
    let mut other_version = None;
    for export in exports {
        if *export == supported {
            return Ok(());
        }
        if export.starts_with(ENGINE_INTERFACE) {
            other_version = Some(export.to_owned());
        }
    }
    match other_version {
        Some(found) => Err(unsupported_version(name, &found)),
        None => Err(LoadError::NotAnEngine {
            name: name.to_owned(),
            expected: supported,
        }),
    }
}

/// `found` names an interface of the contract at another version.
fn unsupported_version(name: &str, found: &str) -> LoadError {
    let interface = found.split('@').next().unwrap_or(found);
    LoadError::UnsupportedVersion {
        name: name.to_owned(),
        found: found.to_owned(),
        supported: format!("{interface}@{WIT_VERSION}"),
        supported_version: WIT_VERSION.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_are_told_apart() {
        assert!(matches!(
            check_header("x", b"hello"),
            Err(LoadError::NotWasm { .. })
        ));
        assert!(matches!(
            check_header("x", b"\0asm\x01\x00\x00\x00"),
            Err(LoadError::CoreModule { .. })
        ));
        assert!(check_header("x", b"\0asm\x0d\x00\x01\x00").is_ok());
        assert!(matches!(
            check_header("x", b"\0asm\x02\x00\x00\x00"),
            Err(LoadError::Invalid { .. })
        ));
    }

    #[test]
    fn the_grant_refuses_network_and_strangers() {
        assert_eq!(refusal("wasi:io/streams@0.2.6"), None);
        assert_eq!(refusal("wasi:clocks/monotonic-clock@0.2.6"), None);
        assert_eq!(refusal("ctxbox:engine/host@0.1.0"), None);
        assert_eq!(refusal("wasi:cli/environment@0.2.6"), None);
        assert!(refusal("wasi:filesystem/preopens@0.2.6").is_some());
        assert!(refusal("wasi:sockets/tcp@0.2.6").is_some());
        assert!(refusal("wasi:http/outgoing-handler@0.2.6").is_some());
        assert!(refusal("acme:spy/exfiltrate").is_some());
    }

    #[test]
    fn cache_files_must_carry_our_header_and_checksum() {
        let payload = b"compiled".to_vec();
        let mut file = CACHE_MAGIC.to_vec();
        file.extend_from_slice(&Sha256::digest(&payload));
        file.extend_from_slice(&payload);
        assert_eq!(verified_payload(&file), Some(payload.as_slice()));
        let last = file.len() - 1;
        file[last] ^= 1;
        assert_eq!(verified_payload(&file), None);
        assert_eq!(verified_payload(b"CTXBOXC1short"), None);
    }
}
