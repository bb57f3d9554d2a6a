//! The engine registry (ARCHITECTURE.md §4): ids mapped to a factory and an owner.
//!
//! Owners are `core` (the host's built-ins), `plugin:<name>`, or
//! `public-sdk` for code that registers without naming itself (the
//! reference's public `registerContextEngine`). An id held by one owner cannot
//! be taken by another; the same owner replaces its own engine only with
//! [`RegisterOptions::allow_same_owner_refresh`]; `legacy` is core's alone
//! (core may refresh it, with a native engine: the fallback must never fail).
//! What an embedding host hands to plugins is a [`PluginRegistrar`], which
//! always registers as that plugin (or as `public-sdk`,
//! [`Registry::public`], which can never refresh) and can never take a core
//! id.
//!
//! A registration is for running the engine ([`Lifecycle::Runtime`]) or only
//! for discovering it ([`Lifecycle::Discovery`]: listed, never made). A
//! discovery-only registration never replaces a runtime one of the same
//! owner: it is accepted and changes nothing.
//!
//! A successful registration clears the id's quarantine when the engine is
//! really new: a different artifact than the one quarantined (by
//! fingerprint), a native engine (its code is the host's own, and it cannot
//! be fingerprinted: registering it again is the reference's "re-register to
//! clear"), or an explicit re-registration of an id this registry already
//! holds. Registering the same broken wasm artifact again at the next
//! start-up keeps it quarantined, so records survive restarts.

use std::collections::HashMap;
use std::fmt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, PoisonError, RwLock};

use crate::contract::engine::ContextEngine;
use crate::engines::plugins::FactoryContext;
use crate::engines::quarantine::{QuarantineError, QuarantineStore};

/// The id of the built-in engine every host falls back to.
pub const LEGACY_ID: &str = "legacy";

/// Who registered an engine.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Owner {
    /// The host itself.
    Core,
    /// A plugin, by name.
    Plugin(String),
    /// Code that registered through the public path without naming itself.
    Public,
}

impl fmt::Display for Owner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Core => f.write_str("core"),
            Self::Plugin(name) => write!(f, "plugin:{name}"),
            Self::Public => f.write_str("public-sdk"),
        }
    }
}

/// Makes a native engine from its settings.
pub type NativeFactory = dyn Fn(&FactoryContext) -> Arc<dyn ContextEngine> + Send + Sync;

/// How to make an engine.
#[derive(Clone)]
pub enum EngineFactory {
    /// A native engine, made by this function from the engine's settings.
    Native(Arc<NativeFactory>),
    /// A wasm component file.
    WasmFile(PathBuf),
    /// A wasm component in memory.
    WasmBytes {
        /// Names the component in errors.
        label: String,
        /// The component.
        bytes: Arc<[u8]>,
    },
}

impl EngineFactory {
    /// A factory that hands out the same native engine every time.
    pub fn native(engine: Arc<dyn ContextEngine>) -> Self {
        Self::Native(Arc::new(move |_: &FactoryContext| engine.clone()))
    }

    /// SHA-256 of the component (hex), for wasm engines whose bytes can be
    /// read; `None` for native engines.
    pub fn fingerprint(&self) -> Option<String> {
        match self {
            Self::Native(_) => None,
            Self::WasmFile(path) => std::fs::read(path).ok().map(|bytes| sha256_hex(&bytes)),
            Self::WasmBytes { bytes, .. } => Some(sha256_hex(bytes)),
        }
    }
}

fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::{Digest, Sha256};
    hex::encode(Sha256::digest(bytes))
}

impl fmt::Debug for EngineFactory {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Native(_) => f.write_str("Native"),
            Self::WasmFile(path) => write!(f, "WasmFile({})", path.display()),
            Self::WasmBytes { label, bytes } => {
                write!(f, "WasmBytes({label}, {} bytes)", bytes.len())
            }
        }
    }
}

/// What a registration is for.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Lifecycle {
    /// Running the engine: selection makes it.
    #[default]
    Runtime,
    /// Only discovering it (a plugin loaded to read what it offers): the id
    /// is listed, but its factory is never called; selecting it uses
    /// `legacy`, with one warning and no quarantine.
    Discovery,
}

/// Options of a registration.
#[derive(Debug, Clone, Copy, Default)]
pub struct RegisterOptions {
    /// Let an owner replace an engine it registered before.
    pub allow_same_owner_refresh: bool,
    /// What the registration is for.
    pub lifecycle: Lifecycle,
}

/// Why a registration was refused.
#[derive(Debug, thiserror::Error)]
pub enum RegisterError {
    /// Another owner holds the id.
    #[error("engine id `{id}` is already registered by {existing_owner}")]
    OwnedByOther {
        /// The id.
        id: String,
        /// Who holds it.
        existing_owner: Owner,
    },
    /// The same owner registered it already.
    #[error(
        "engine id `{id}` is already registered by {owner}; set allow_same_owner_refresh to replace it"
    )]
    AlreadyRegistered {
        /// The id.
        id: String,
        /// The owner.
        owner: Owner,
    },
    /// The id belongs to the host.
    #[error("engine id `{id}` is reserved for the host's built-in engines")]
    Reserved {
        /// The id.
        id: String,
    },
    /// The id is empty or blank.
    #[error("an engine id must not be empty")]
    EmptyId,
    /// `legacy` given a factory that is not native.
    #[error("the fallback engine `{id}` must be native: it serves when every other engine fails")]
    FallbackNotNative {
        /// The id.
        id: String,
    },
    /// Clearing the id's quarantine failed.
    #[error(transparent)]
    Quarantine(#[from] QuarantineError),
}

/// A registered engine.
#[derive(Debug, Clone)]
pub struct Registration {
    /// How to make it.
    pub factory: EngineFactory,
    /// Who registered it.
    pub owner: Owner,
    /// The artifact's fingerprint ([`EngineFactory::fingerprint`]).
    pub fingerprint: Option<String>,
    /// Changes on every (re-)registration of the id, so resolved engines
    /// know when they are stale.
    pub generation: u64,
    /// What it is registered for.
    pub lifecycle: Lifecycle,
}

/// Every registered engine.
pub struct Registry {
    entries: RwLock<HashMap<String, Registration>>,
    quarantine: Arc<QuarantineStore>,
    generations: AtomicU64,
}

impl Registry {
    /// An empty registry whose registrations clear records in `quarantine`.
    pub fn new(quarantine: Arc<QuarantineStore>) -> Self {
        Self {
            entries: RwLock::new(HashMap::new()),
            quarantine,
            generations: AtomicU64::new(0),
        }
    }

    /// Registers a built-in engine (owner `core`). `legacy` takes only a
    /// native factory; core refreshes it like any of its engines, and
    /// selections made after that fall back to the new one.
    pub fn register_core(
        &self,
        id: &str,
        factory: EngineFactory,
        options: RegisterOptions,
    ) -> Result<(), RegisterError> {
        if id == LEGACY_ID && !matches!(factory, EngineFactory::Native(_)) {
            return Err(RegisterError::FallbackNotNative { id: id.to_owned() });
        }
        self.register(id, factory, Owner::Core, options)
    }

    /// The registration API to hand to plugin `name`.
    pub fn plugin(&self, name: &str) -> PluginRegistrar<'_> {
        PluginRegistrar {
            registry: self,
            owner: Owner::Plugin(name.to_owned()),
        }
    }

    /// The public registration API, for code that does not name itself:
    /// its engines are owned by `public-sdk`, which can never take a core id
    /// nor replace an engine, its own included (the reference's public
    /// `registerContextEngine`).
    pub fn public(&self) -> PluginRegistrar<'_> {
        PluginRegistrar {
            registry: self,
            owner: Owner::Public,
        }
    }

    fn register(
        &self,
        id: &str,
        factory: EngineFactory,
        owner: Owner,
        options: RegisterOptions,
    ) -> Result<(), RegisterError> {
        if id.trim().is_empty() {
            return Err(RegisterError::EmptyId);
        }
        let fingerprint = factory.fingerprint();
        let mut entries = self.entries.write().unwrap_or_else(PoisonError::into_inner);
        let refresh = entries.contains_key(id);
        if let Some(existing) = entries.get(id) {
            if existing.owner != owner {
                return Err(RegisterError::OwnedByOther {
                    id: id.to_owned(),
                    existing_owner: existing.owner.clone(),
                });
            }
            // Discovery may run again after the engine went live: it must
            // not swap the runtime factory for its own.
            if existing.lifecycle == Lifecycle::Runtime && options.lifecycle == Lifecycle::Discovery
            {
                return Ok(());
            }
            if !options.allow_same_owner_refresh {
                return Err(RegisterError::AlreadyRegistered {
                    id: id.to_owned(),
                    owner,
                });
            }
        }
        // Only an engine registered to run is new code that may have fixed
        // what was quarantined.
        let runtime = options.lifecycle == Lifecycle::Runtime;
        let native = matches!(factory, EngineFactory::Native(_));
        let new_artifact = self
            .quarantine
            .get(id)
            .is_some_and(|record| native || record.fingerprint != fingerprint);
        if runtime && (refresh || new_artifact) {
            self.quarantine.clear(id)?;
        }
        let generation = self.generations.fetch_add(1, Ordering::Relaxed) + 1;
        entries.insert(
            id.to_owned(),
            Registration {
                factory,
                owner,
                fingerprint,
                generation,
                lifecycle: options.lifecycle,
            },
        );
        tracing::info!(engine = id, generation, lifecycle = ?options.lifecycle, "engine registered");
        Ok(())
    }

    /// The registration of `id`.
    pub fn get(&self, id: &str) -> Option<Registration> {
        self.entries
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .get(id)
            .cloned()
    }

    /// Every registered id with its owner, sorted by id.
    pub fn ids(&self) -> Vec<(String, Owner)> {
        let entries = self.entries.read().unwrap_or_else(PoisonError::into_inner);
        let mut ids: Vec<_> = entries
            .iter()
            .map(|(id, registration)| (id.clone(), registration.owner.clone()))
            .collect();
        ids.sort_by(|a, b| a.0.cmp(&b.0));
        ids
    }
}

/// Registers engines on behalf of one plugin (or of the public path): the
/// owner is always that plugin, so it can never take an id the host or
/// another plugin holds.
pub struct PluginRegistrar<'a> {
    registry: &'a Registry,
    owner: Owner,
}

impl PluginRegistrar<'_> {
    /// Registers `id` for this plugin.
    pub fn register(
        &self,
        id: &str,
        factory: EngineFactory,
        options: RegisterOptions,
    ) -> Result<(), RegisterError> {
        if id == LEGACY_ID {
            return Err(RegisterError::Reserved { id: id.to_owned() });
        }
        let options = match self.owner {
            // The public path has no options: it never replaces an engine.
            Owner::Public => RegisterOptions {
                allow_same_owner_refresh: false,
                ..options
            },
            _ => options,
        };
        self.registry
            .register(id, factory, self.owner.clone(), options)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::contract::failure::{EngineFailure, FailureKind, Operation};

    fn registry() -> (tempfile::TempDir, Arc<QuarantineStore>, Registry) {
        let dir = tempfile::tempdir().expect("temp dir");
        let quarantine =
            Arc::new(QuarantineStore::open(&dir.path().join("q.sqlite3"), None).expect("open"));
        let registry = Registry::new(quarantine.clone());
        (dir, quarantine, registry)
    }

    fn wasm(name: &str) -> EngineFactory {
        EngineFactory::WasmFile(PathBuf::from(name))
    }

    #[test]
    fn another_owner_cannot_take_an_id_and_is_told_who_has_it() {
        let (_dir, _quarantine, registry) = registry();
        registry
            .plugin("acme")
            .register("lossless", wasm("a.wasm"), RegisterOptions::default())
            .expect("first");
        let error = registry
            .plugin("rival")
            .register(
                "lossless",
                wasm("b.wasm"),
                RegisterOptions {
                    allow_same_owner_refresh: true,
                    ..RegisterOptions::default()
                },
            )
            .expect_err("taken");
        assert!(
            matches!(&error, RegisterError::OwnedByOther { existing_owner: Owner::Plugin(name), .. } if name == "acme"),
            "{error}"
        );
        assert!(error.to_string().contains("plugin:acme"), "{error}");
    }

    #[test]
    fn the_same_owner_needs_refresh_to_replace() {
        let (_dir, _quarantine, registry) = registry();
        let plugin = registry.plugin("acme");
        plugin
            .register("x", wasm("1.wasm"), RegisterOptions::default())
            .expect("first");
        let first = registry.get("x").expect("registered").generation;
        assert!(matches!(
            plugin.register("x", wasm("2.wasm"), RegisterOptions::default()),
            Err(RegisterError::AlreadyRegistered { .. })
        ));
        plugin
            .register(
                "x",
                wasm("2.wasm"),
                RegisterOptions {
                    allow_same_owner_refresh: true,
                    ..RegisterOptions::default()
                },
            )
            .expect("refresh");
        let refreshed = registry.get("x").expect("registered");
        assert!(refreshed.generation > first);
        assert!(
            matches!(refreshed.factory, EngineFactory::WasmFile(path) if path.as_os_str() == "2.wasm")
        );
    }

    /// A native factory; registry tests never make engines.
    fn native() -> EngineFactory {
        EngineFactory::Native(Arc::new(|_: &FactoryContext| -> Arc<dyn ContextEngine> {
            unreachable!("the registry never makes engines")
        }))
    }

    fn refresh() -> RegisterOptions {
        RegisterOptions {
            allow_same_owner_refresh: true,
            ..RegisterOptions::default()
        }
    }

    #[test]
    fn legacy_is_core_only_and_core_may_refresh_it_natively() {
        let (_dir, _quarantine, registry) = registry();
        assert!(matches!(
            registry.plugin("sneaky").register(
                LEGACY_ID,
                wasm("l.wasm"),
                RegisterOptions::default()
            ),
            Err(RegisterError::Reserved { .. })
        ));
        assert!(matches!(
            registry.public().register(LEGACY_ID, native(), refresh()),
            Err(RegisterError::Reserved { .. })
        ));
        registry
            .register_core(LEGACY_ID, native(), RegisterOptions::default())
            .expect("core");
        let first = registry.get(LEGACY_ID).expect("registered").generation;
        // Again without asking for a refresh: refused, as for any owner.
        assert!(matches!(
            registry.register_core(LEGACY_ID, native(), RegisterOptions::default()),
            Err(RegisterError::AlreadyRegistered { .. })
        ));
        // The fallback must never fail: never a component.
        assert!(matches!(
            registry.register_core(LEGACY_ID, wasm("legacy.wasm"), refresh()),
            Err(RegisterError::FallbackNotNative { .. })
        ));
        registry
            .register_core(LEGACY_ID, native(), refresh())
            .expect("core refreshes legacy");
        let refreshed = registry.get(LEGACY_ID).expect("registered");
        assert!(refreshed.generation > first);
        assert_eq!(refreshed.owner, Owner::Core);
        // A plugin cannot take any other core id either.
        registry
            .register_core("builtin", wasm("b"), RegisterOptions::default())
            .expect("core");
        assert!(matches!(
            registry
                .plugin("p")
                .register("builtin", wasm("p"), RegisterOptions::default()),
            Err(RegisterError::OwnedByOther {
                existing_owner: Owner::Core,
                ..
            })
        ));
        assert_eq!(
            registry.ids(),
            vec![
                ("builtin".to_owned(), Owner::Core),
                (LEGACY_ID.to_owned(), Owner::Core)
            ]
        );
    }

    #[test]
    fn the_public_path_registers_as_public_sdk_and_never_replaces() {
        let (_dir, _quarantine, registry) = registry();
        let public = registry.public();
        public
            .register("open", wasm("1.wasm"), RegisterOptions::default())
            .expect("registers");
        let registration = registry.get("open").expect("registered");
        assert_eq!(registration.owner, Owner::Public);
        assert_eq!(registration.owner.to_string(), "public-sdk");
        // Not even its own engine, asked to refresh.
        let again = public
            .register("open", wasm("2.wasm"), refresh())
            .expect_err("no refresh on the public path");
        assert!(
            matches!(
                &again,
                RegisterError::AlreadyRegistered {
                    owner: Owner::Public,
                    ..
                }
            ),
            "{again}"
        );
        assert!(
            matches!(registry.get("open").expect("kept").factory, EngineFactory::WasmFile(path) if path.as_os_str() == "1.wasm")
        );
        // Nor a plugin's, nor a core id; and a plugin cannot take its id.
        registry
            .plugin("acme")
            .register("acme-engine", wasm("a.wasm"), RegisterOptions::default())
            .expect("plugin");
        assert!(matches!(
            public.register("acme-engine", wasm("p.wasm"), RegisterOptions::default()),
            Err(RegisterError::OwnedByOther {
                existing_owner: Owner::Plugin(_),
                ..
            })
        ));
        registry
            .register_core("builtin", wasm("b"), RegisterOptions::default())
            .expect("core");
        assert!(matches!(
            public.register("builtin", wasm("p.wasm"), RegisterOptions::default()),
            Err(RegisterError::OwnedByOther {
                existing_owner: Owner::Core,
                ..
            })
        ));
        let taken = registry
            .plugin("acme")
            .register("open", wasm("a.wasm"), refresh())
            .expect_err("public-sdk holds it");
        assert!(taken.to_string().contains("public-sdk"), "{taken}");
    }

    #[test]
    fn a_later_discovery_registration_never_replaces_a_runtime_one() {
        let (_dir, _quarantine, registry) = registry();
        let plugin = registry.plugin("acme");
        plugin
            .register("x", wasm("runtime.wasm"), RegisterOptions::default())
            .expect("runtime");
        let runtime = registry.get("x").expect("registered");
        let discovery = RegisterOptions {
            lifecycle: Lifecycle::Discovery,
            ..refresh()
        };
        plugin
            .register("x", wasm("discovery.wasm"), discovery)
            .expect("accepted, and ignored");
        let kept = registry.get("x").expect("registered");
        assert_eq!(kept.lifecycle, Lifecycle::Runtime);
        assert_eq!(kept.generation, runtime.generation, "nothing changed");
        assert!(
            matches!(kept.factory, EngineFactory::WasmFile(path) if path.as_os_str() == "runtime.wasm")
        );
        // Another owner's discovery is still refused.
        assert!(matches!(
            registry
                .plugin("rival")
                .register("x", wasm("r.wasm"), discovery),
            Err(RegisterError::OwnedByOther { .. })
        ));
        // Discovery first, then runtime activation (a refresh) replaces it.
        plugin
            .register("y", wasm("discovery.wasm"), discovery)
            .expect("discovery");
        assert_eq!(
            registry.get("y").expect("registered").lifecycle,
            Lifecycle::Discovery
        );
        plugin
            .register("y", wasm("runtime.wasm"), refresh())
            .expect("activated");
        assert_eq!(
            registry.get("y").expect("registered").lifecycle,
            Lifecycle::Runtime
        );
    }

    #[test]
    fn a_discovery_registration_keeps_the_quarantine() {
        let (_dir, quarantine, registry) = registry();
        let failure = EngineFailure::new("x", Operation::Assemble, FailureKind::Panic, "boom");
        quarantine
            .record("plugin:acme", None, &failure)
            .expect("record");
        let discovery = RegisterOptions {
            lifecycle: Lifecycle::Discovery,
            ..RegisterOptions::default()
        };
        registry
            .plugin("acme")
            .register("x", native(), discovery)
            .expect("discovery");
        assert!(quarantine.is_blocked("x"), "no new code to run yet");
        registry
            .plugin("acme")
            .register("x", native(), refresh())
            .expect("runtime");
        assert!(!quarantine.is_blocked("x"));
    }

    fn bytes(data: &[u8]) -> EngineFactory {
        EngineFactory::WasmBytes {
            label: "x.wasm".into(),
            bytes: data.into(),
        }
    }

    #[test]
    fn registering_the_quarantined_artifact_again_keeps_the_quarantine() {
        let (_dir, quarantine, registry) = registry();
        let failure = EngineFailure::new("x", Operation::Assemble, FailureKind::Panic, "boom");
        let fingerprint = bytes(b"build-1").fingerprint();
        quarantine
            .record("plugin:acme", fingerprint.as_deref(), &failure)
            .expect("record");
        // A restart: the plugin registers the same build again.
        let plugin = registry.plugin("acme");
        plugin
            .register("x", bytes(b"build-1"), RegisterOptions::default())
            .expect("register");
        assert!(
            quarantine.is_blocked("x"),
            "same artifact, still quarantined"
        );
        // An explicit refresh in the running host clears it.
        plugin
            .register("x", bytes(b"build-1"), refresh())
            .expect("refresh");
        assert!(!quarantine.is_blocked("x"));
    }

    #[test]
    fn registering_a_new_artifact_clears_the_quarantine() {
        let (_dir, quarantine, registry) = registry();
        let failure = EngineFailure::new("x", Operation::Assemble, FailureKind::Panic, "boom");
        let fingerprint = bytes(b"build-1").fingerprint();
        quarantine
            .record("plugin:acme", fingerprint.as_deref(), &failure)
            .expect("record");
        let plugin = registry.plugin("acme");
        plugin
            .register("x", bytes(b"build-2"), RegisterOptions::default())
            .expect("register");
        assert!(!quarantine.is_blocked("x"));
    }

    #[test]
    fn empty_ids_are_refused() {
        let (_dir, _quarantine, registry) = registry();
        assert!(matches!(
            registry
                .plugin("p")
                .register("  ", wasm("x"), RegisterOptions::default()),
            Err(RegisterError::EmptyId)
        ));
    }
}
