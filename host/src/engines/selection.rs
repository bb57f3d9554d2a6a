//! Selecting the engine for an agent (ARCHITECTURE.md §4): the configured slot
//! (`plugins.slots.contextEngine`) resolved through the registry to a guarded
//! engine, falling back to `legacy` — and quarantining the id — when it is not
//! registered, will not load or instantiate, or answers `info` badly.
//!
//! Two outcomes quarantine nothing, as the reference's do: configuration
//! turning the engine off ([`PluginSettings`]: the engine is never made,
//! `legacy` serves, and a notice is logged once per selection), and the host
//! failing to admit it (no free instance slot): every call of that selection
//! is refused `overloaded`, with no `legacy` stand-in (a stateful engine
//! never hears of what legacy would have done), and the next selection tries
//! again. The host's own fault while loading (`host-fault`) is not recorded
//! either; `legacy` serves then.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use crate::contract::engine::ContextEngine;
use crate::contract::failure::{EngineFailure, FailureKind, Operation};
use crate::contract::services::HostServices;
use crate::engines::guard::{GuardPolicy, GuardedEngine, Selected};
use crate::engines::observe::CallObservers;
use crate::engines::plugins::PluginSettings;
use crate::engines::quarantine::QuarantineStore;
use crate::engines::registry::{
    EngineFactory, LEGACY_ID, Owner, RegisterError, RegisterOptions, Registration, Registry,
};
use crate::sandbox::{EngineIdentity, Sandbox};

/// Owner recorded for an id that was selected but never registered.
const UNREGISTERED: &str = "unregistered";
/// Slot values that mean "the default engine" (the reference's too).
const DEFAULT_SLOT_VALUES: [&str; 3] = ["", LEGACY_ID, "none"];

/// The engines of one host: registry, sandbox, quarantine, and the guarded
/// engines resolved so far.
pub struct Engines {
    sandbox: Sandbox,
    registry: Registry,
    quarantine: Arc<QuarantineStore>,
    services: Arc<dyn HostServices>,
    legacy: Arc<dyn ContextEngine>,
    policy: GuardPolicy,
    plugins: std::sync::RwLock<PluginSettings>,
    /// One slot per selected id, each with its own lock: resolving (and
    /// compiling) one engine never holds up the selection of another.
    resolved: Mutex<HashMap<String, Arc<ResolvedSlot>>>,
    /// Who hears of every guarded call.
    observers: Arc<CallObservers>,
}

/// The resolution of one id, once made.
type ResolvedSlot = tokio::sync::Mutex<Option<Resolved>>;

struct Resolved {
    generation: u64,
    engine: Arc<GuardedEngine>,
}

impl Engines {
    /// A host whose built-in fallback is `legacy` (registered as `legacy` by
    /// core here, once), whose wasm engines run in `sandbox` with `services`.
    pub fn new(
        sandbox: Sandbox,
        quarantine: Arc<QuarantineStore>,
        services: Arc<dyn HostServices>,
        legacy: Arc<dyn ContextEngine>,
        policy: GuardPolicy,
    ) -> Result<Self, RegisterError> {
        let registry = Registry::new(quarantine.clone());
        registry.register_core(
            LEGACY_ID,
            EngineFactory::native(legacy.clone()),
            RegisterOptions::default(),
        )?;
        Ok(Self {
            sandbox,
            registry,
            quarantine,
            services,
            legacy,
            policy,
            plugins: std::sync::RwLock::new(PluginSettings::default()),
            resolved: Mutex::new(HashMap::new()),
            observers: Arc::default(),
        })
    }

    /// Replaces what configuration says about plugins; later selections
    /// follow it (an engine turned back on is made again, no re-registration
    /// needed).
    pub fn set_plugin_settings(&self, settings: PluginSettings) {
        *self.plugins.write().unwrap_or_else(PoisonError::into_inner) = settings;
    }

    /// What configuration says about plugins now.
    pub fn plugin_settings(&self) -> PluginSettings {
        self.plugins().clone()
    }

    fn plugins(&self) -> std::sync::RwLockReadGuard<'_, PluginSettings> {
        self.plugins.read().unwrap_or_else(PoisonError::into_inner)
    }

    /// Why configuration turns the engine of slot value `slot` off, naming
    /// the key; `None` when it may be used (or is `legacy`).
    pub fn refusal(&self, slot: Option<&str>) -> Option<String> {
        let id = slot_id(slot);
        if id == LEGACY_ID {
            return None;
        }
        let owner = self.registry.get(id).map(|registration| registration.owner);
        self.plugins().refusal(id, owner.as_ref())
    }

    /// The registry (to register engines; hand plugins
    /// [`Registry::plugin`]).
    pub fn registry(&self) -> &Registry {
        &self.registry
    }

    /// The quarantine records.
    pub fn quarantine(&self) -> &QuarantineStore {
        &self.quarantine
    }

    /// Where this host's guarded engines report each call: an observer
    /// installed ([`CallObservers::install`]) hears of every call from then
    /// on, engines selected earlier included.
    pub fn call_observers(&self) -> &CallObservers {
        &self.observers
    }

    /// The sandbox wasm engines run in.
    pub fn sandbox(&self) -> &Sandbox {
        &self.sandbox
    }

    /// The guarded engine for slot value `slot` (`None`, `""`, `none` and
    /// `legacy` mean legacy). Never fails: whatever goes wrong is quarantined
    /// and the engine answers through `legacy` (or fails its calls in strict
    /// mode); an engine configuration turns off is served by `legacy`.
    pub async fn select(&self, slot: Option<&str>) -> Arc<GuardedEngine> {
        let id = slot_id(slot);
        if let Some(reason) = self.refusal(Some(id)) {
            tracing::info!(
                engine = id,
                reason,
                "engine turned off by configuration; using legacy"
            );
            return Arc::new(
                GuardedEngine::legacy_only(self.legacy.clone(), self.quarantine.clone())
                    .observed_by(self.observers.clone()),
            );
        }
        let slot = self
            .resolved
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .entry(id.to_owned())
            .or_default()
            .clone();
        let mut resolved = slot.lock().await;
        let registration = self.registry.get(id);
        let generation = registration.as_ref().map_or(0, |r| r.generation);
        if let Some(known) = &*resolved {
            let retry_due = !known.engine.serving_selected() && !self.quarantine.is_blocked(id);
            if known.generation == generation && !retry_due {
                return known.engine.clone();
            }
        }
        let engine = Arc::new(
            self.resolve(id, registration)
                .await
                .observed_by(self.observers.clone()),
        );
        *resolved = Some(Resolved {
            generation,
            engine: engine.clone(),
        });
        engine
    }

    async fn resolve(&self, id: &str, registration: Option<Registration>) -> GuardedEngine {
        if id == LEGACY_ID {
            return GuardedEngine::legacy_only(self.legacy.clone(), self.quarantine.clone());
        }
        let Some(registration) = registration else {
            let registered: Vec<String> =
                self.registry.ids().into_iter().map(|(id, _)| id).collect();
            let failure = EngineFailure::new(
                id,
                Operation::Load,
                FailureKind::Load,
                format!(
                    "engine `{id}` is not registered (registered: {})",
                    registered.join(", ")
                ),
            );
            let selected = Selected {
                id: id.to_owned(),
                owner: Owner::Plugin(UNREGISTERED.to_owned()),
                fingerprint: None,
            };
            return self.unavailable(selected, failure);
        };
        let selected = Selected {
            id: id.to_owned(),
            owner: registration.owner.clone(),
            fingerprint: registration.fingerprint.clone(),
        };
        if self.quarantine.is_blocked(id) {
            // Quarantined earlier (possibly in an earlier run): stay on legacy
            // without loading it until it is registered again or its
            // back-off is over.
            let record = self.quarantine.get(id);
            let failure = record.as_ref().map_or_else(
                || EngineFailure::new(id, Operation::Load, FailureKind::Load, "quarantined"),
                EngineFailure::from,
            );
            return GuardedEngine::unavailable(
                selected,
                failure,
                self.legacy.clone(),
                self.quarantine.clone(),
                self.policy,
            );
        }
        match self.instantiate(&selected, &registration.factory).await {
            Ok(engine) => GuardedEngine::new(
                selected,
                engine,
                self.legacy.clone(),
                self.quarantine.clone(),
                self.policy,
            ),
            Err(failure) => self.unavailable(selected, failure),
        }
    }

    /// Quarantines `failure` and answers the stand-in that serves through
    /// legacy. The stand-in reports the fallback (its one tracing event and
    /// guard event) with the first call it serves, which names the session.
    /// When the host could not admit the engine now (no free instance slot:
    /// the caller retries) or its own resources ran out while loading it
    /// (`legacy` serves), it is not the engine's fault: nothing is recorded,
    /// and the next selection tries again.
    fn unavailable(&self, selected: Selected, failure: EngineFailure) -> GuardedEngine {
        let owner = selected.owner.to_string();
        let hosts_fault = matches!(
            failure.kind,
            FailureKind::Overloaded | FailureKind::HostFault
        );
        if !hosts_fault
            && let Err(error) =
                self.quarantine
                    .record(&owner, selected.fingerprint.as_deref(), &failure)
        {
            tracing::error!(engine = %failure.engine_id, %error, "cannot persist a quarantine record");
        }
        GuardedEngine::unavailable(
            selected,
            failure,
            self.legacy.clone(),
            self.quarantine.clone(),
            self.policy,
        )
    }

    /// Makes the engine of `factory`, registered as `selected`: a wasm
    /// engine's state, logs and failures are scoped to the registered id,
    /// whatever id its `info` declares.
    async fn instantiate(
        &self,
        selected: &Selected,
        factory: &EngineFactory,
    ) -> Result<Arc<dyn ContextEngine>, EngineFailure> {
        let id = selected.id.as_str();
        let load_failure =
            |message: String| EngineFailure::new(id, Operation::Load, FailureKind::Load, message);
        // Compiling takes Cranelift a while: off the async workers.
        let sandbox = self.sandbox.clone();
        let context = self.plugins().factory_context(id);
        let load = match factory {
            EngineFactory::Native(make) => return Ok(make(&context)),
            EngineFactory::WasmFile(path) => {
                let path = path.clone();
                tokio::task::spawn_blocking(move || sandbox.load_file(&path))
            }
            EngineFactory::WasmBytes { label, bytes } => {
                let (label, bytes) = (label.clone(), bytes.clone());
                tokio::task::spawn_blocking(move || sandbox.load_bytes(&label, &bytes))
            }
        };
        let component = load
            .await
            .map_err(|error| load_failure(format!("the loading task failed: {error}")))?
            .map_err(|error| {
                // The host's own fault (descriptors, disk): nothing is held
                // against the engine.
                let kind = if error.is_host_fault() {
                    FailureKind::HostFault
                } else {
                    FailureKind::Load
                };
                EngineFailure::new(id, Operation::Load, kind, error.to_string())
            })?;
        let identity = EngineIdentity {
            id: id.to_owned(),
            owner: selected.owner.to_string(),
            config: context.config,
        };
        let engine = self
            .sandbox
            .instantiate_as(&component, identity, self.services.clone())
            .await?;
        Ok(Arc::new(engine))
    }
}

/// The registry id slot value `slot` names.
fn slot_id(slot: Option<&str>) -> &str {
    match slot.map(str::trim) {
        Some(id) if !DEFAULT_SLOT_VALUES.contains(&id) => id,
        _ => LEGACY_ID,
    }
}
