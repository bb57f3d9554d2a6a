//! Selecting the engine for an agent (ARCHITECTURE.md §4): the configured slot
//! (`plugins.slots.contextEngine`) resolved through the registry to a guarded
//! engine, falling back to `legacy` — and quarantining the id — when it is not
//! registered, will not load or instantiate, or answers `info` badly.
//!
//! Some outcomes quarantine nothing, as the reference's do: configuration
//! turning the engine off ([`PluginSettings`]: the engine is never made,
//! `legacy` serves, and a notice is logged once per selection); an engine
//! registered for discovery only ([`Lifecycle::Discovery`]: never made,
//! `legacy` serves, one warning per registration); the host failing to admit
//! it (no free instance slot): every call of that selection is refused
//! `overloaded`, with no `legacy` stand-in (a stateful engine never hears of
//! what legacy would have done), and the next selection tries again; and the
//! caller cancelling the selection ([`Engines::select_cancellable`]): it
//! fails `aborted`, with no fallback. The host's own fault while loading
//! (`host-fault`) is not recorded either; `legacy` serves then.
//!
//! A failure that is recorded is logged once, when the engine is resolved, as
//! one error line naming the id, owner, operation and reason. An engine made
//! but refused (its `info` unusable) is disposed before it is dropped.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use crate::contract::engine::ContextEngine;
use crate::contract::failure::{EngineFailure, FailureKind, Operation};
use crate::contract::services::HostServices;
use crate::contract::validate;
use crate::engines::guard::{GuardPolicy, GuardedEngine, Selected};
use crate::engines::observe::CallObservers;
use crate::engines::plugins::PluginSettings;
use crate::engines::quarantine::QuarantineStore;
use crate::engines::registry::{
    EngineFactory, LEGACY_ID, Lifecycle, Owner, RegisterError, RegisterOptions, Registration,
    Registry,
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
    /// The `legacy` engine registered at start-up; the fallback is made
    /// from `legacy`'s registration, which core may refresh, and this one
    /// serves only should that registration ever be missing.
    initial_legacy: Arc<dyn ContextEngine>,
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
    /// The generations of the selected id's and of `legacy`'s registrations
    /// it was resolved with.
    generations: (u64, u64),
    engine: Arc<GuardedEngine>,
}

impl Engines {
    /// A host whose built-in fallback is `legacy` (registered as `legacy` by
    /// core here; core may refresh it later through [`Self::registry`]),
    /// whose wasm engines run in `sandbox` with `services`.
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
            initial_legacy: legacy,
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

    /// The fallback engine, made from `legacy`'s registration now (core may
    /// have refreshed it since start-up).
    fn legacy(&self) -> Arc<dyn ContextEngine> {
        match self.registry.get(LEGACY_ID).map(|legacy| legacy.factory) {
            Some(EngineFactory::Native(make)) => make(&self.plugins().factory_context(LEGACY_ID)),
            // The registry takes only native factories for `legacy`.
            _ => self.initial_legacy.clone(),
        }
    }

    fn generation(&self, id: &str) -> u64 {
        self.registry.get(id).map_or(0, |r| r.generation)
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

    /// [`Self::select`], given up when `cancel` is cancelled first: the
    /// selection then fails `aborted`, with no fallback and nothing recorded
    /// (the reference's owner cancellation), and the next selection starts
    /// afresh.
    pub async fn select_cancellable(
        &self,
        slot: Option<&str>,
        cancel: &tokio_util::sync::CancellationToken,
    ) -> Result<Arc<GuardedEngine>, EngineFailure> {
        tokio::select! {
            biased;
            () = cancel.cancelled() => Err(EngineFailure::new(
                slot_id(slot),
                Operation::Load,
                FailureKind::Aborted,
                "the caller cancelled the engine's selection",
            )),
            engine = self.select(slot) => Ok(engine),
        }
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
                GuardedEngine::legacy_only(self.legacy(), self.quarantine.clone())
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
        let generations = (
            registration.as_ref().map_or(0, |r| r.generation),
            self.generation(LEGACY_ID),
        );
        if let Some(known) = &*resolved {
            let retry_due = !known.engine.serving_selected() && !self.quarantine.is_blocked(id);
            if known.generations == generations && !retry_due {
                return known.engine.clone();
            }
        }
        let engine = Arc::new(
            self.resolve(id, registration)
                .await
                .observed_by(self.observers.clone()),
        );
        *resolved = Some(Resolved {
            generations,
            engine: engine.clone(),
        });
        engine
    }

    async fn resolve(&self, id: &str, registration: Option<Registration>) -> GuardedEngine {
        let legacy = self.legacy();
        if id == LEGACY_ID {
            return GuardedEngine::legacy_only(legacy, self.quarantine.clone());
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
            return self.unavailable(selected, failure, legacy);
        };
        if registration.lifecycle == Lifecycle::Discovery {
            // Known, but not registered to run: not a failure.
            tracing::warn!(
                engine = id,
                owner = %registration.owner,
                "engine registered for discovery only; using legacy, without quarantine, until it is registered to run"
            );
            return GuardedEngine::legacy_only(legacy, self.quarantine.clone());
        }
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
                legacy,
                self.quarantine.clone(),
                self.policy,
            );
        }
        match self.instantiate(&selected, &registration.factory).await {
            Ok(engine) => GuardedEngine::new(
                selected,
                engine,
                legacy,
                self.quarantine.clone(),
                self.policy,
            ),
            Err(failure) => self.unavailable(selected, failure, legacy),
        }
    }

    /// Quarantines `failure`, logs it (one error line naming the id, owner,
    /// operation and reason) and answers the stand-in that serves through
    /// `legacy`. The stand-in also reports the fallback (its one tracing event
    /// and guard event) with the first call it serves, which names the
    /// session. When it is not the engine's fault, nothing is recorded and
    /// the next selection tries again: the host could not admit the engine
    /// now (no free instance slot: the caller retries, and the refused call
    /// reports it), or the host fell short (`host-fault`: its own resources
    /// ran out while loading, or the engine needs a capability this host
    /// lacks), which is still logged, as such, and `legacy` serves.
    fn unavailable(
        &self,
        selected: Selected,
        failure: EngineFailure,
        legacy: Arc<dyn ContextEngine>,
    ) -> GuardedEngine {
        let owner = selected.owner.to_string();
        let log = |message: &str| {
            tracing::error!(
                engine = %failure.engine_id,
                owner,
                operation = failure.operation.as_str(),
                classification = failure.kind.as_str(),
                reason = %failure.message,
                "{message}"
            );
        };
        match failure.kind {
            FailureKind::Overloaded => {}
            FailureKind::HostFault => log(
                "engine could not be made, by the host's fault; legacy serves, nothing recorded",
            ),
            _ => {
                log("engine failed while being resolved; quarantined, falling back to legacy");
                if let Err(error) =
                    self.quarantine
                        .record(&owner, selected.fingerprint.as_deref(), &failure)
                {
                    tracing::error!(engine = %failure.engine_id, %error, "cannot persist a quarantine record");
                }
            }
        }
        GuardedEngine::unavailable(
            selected,
            failure,
            legacy,
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
            EngineFactory::Native(make) => return checked(id, make(&context)).await,
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
            limits: context.limits,
        };
        let engine = self
            .sandbox
            .instantiate_as(&component, identity, self.services.clone())
            .await?;
        Ok(Arc::new(engine))
    }
}

/// `engine`, made natively for `id`, if its `info` is usable; otherwise it is
/// disposed (what it holds released) and refused, as a sandboxed engine
/// whose `info` is unusable is.
async fn checked(
    id: &str,
    engine: Arc<dyn ContextEngine>,
) -> Result<Arc<dyn ContextEngine>, EngineFailure> {
    let Some(problem) = validate::info_problem(engine.info()) else {
        return Ok(engine);
    };
    if let Err(failure) = engine.dispose().await {
        tracing::warn!(engine = id, reason = %failure, "engine with an unusable info failed to dispose");
    }
    Err(EngineFailure::new(
        id,
        Operation::Info,
        FailureKind::InvalidOutput,
        problem,
    ))
}

/// The registry id slot value `slot` names.
fn slot_id(slot: Option<&str>) -> &str {
    match slot.map(str::trim) {
        Some(id) if !DEFAULT_SLOT_VALUES.contains(&id) => id,
        _ => LEGACY_ID,
    }
}
