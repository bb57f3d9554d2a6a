//! What configuration says about plugin engines (the reference's
//! `plugins.enabled`, `plugins.deny`, `plugins.entries.<id>`): which may be
//! used, and the settings each is given.
//!
//! A switch names an engine id or the plugin that registered it (its owner's
//! name), so one entry can turn off every engine of a plugin. An engine that
//! configuration turns off is not a failure: agents use `legacy` for it,
//! nothing is quarantined, and the engine's factory is never called.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::Arc;

use crate::engines::registry::Owner;
use crate::sandbox::EngineLimits;

/// Which plugin engines may be used, and their settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PluginSettings {
    /// `plugins.enabled`: `false` turns every plugin engine off.
    pub enabled: bool,
    /// `plugins.deny`: engine ids and plugin names refused.
    pub deny: BTreeSet<String>,
    /// Engine ids and plugin names with `plugins.entries.<id>.enabled = false`.
    pub disabled: BTreeSet<String>,
    /// Each engine's `plugins.entries.<id>.config`, as JSON.
    pub configs: BTreeMap<String, Arc<str>>,
    /// Each sandboxed engine's `plugins.entries.<id>.limits`.
    pub limits: BTreeMap<String, EngineLimits>,
    /// The agent's directory, handed to native factories.
    pub agent_dir: Option<PathBuf>,
    /// The agent's workspace, handed to native factories.
    pub workspace_dir: Option<PathBuf>,
}

impl Default for PluginSettings {
    fn default() -> Self {
        Self {
            enabled: true,
            deny: BTreeSet::new(),
            disabled: BTreeSet::new(),
            configs: BTreeMap::new(),
            limits: BTreeMap::new(),
            agent_dir: None,
            workspace_dir: None,
        }
    }
}

/// What a native engine's factory is told when it makes the engine (the
/// reference's factory context).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FactoryContext {
    /// The engine's `plugins.entries.<id>.config`, as JSON.
    pub config: Option<Arc<str>>,
    /// The engine's `plugins.entries.<id>.limits` (sandboxed engines only).
    pub limits: EngineLimits,
    /// The agent's directory, if configured.
    pub agent_dir: Option<PathBuf>,
    /// The agent's workspace, if configured.
    pub workspace_dir: Option<PathBuf>,
}

impl PluginSettings {
    /// Why configuration turns engine `id` (registered by `owner`, if it is
    /// registered) off, naming the key; `None` when it may be used. The
    /// host's own engines (owner `core`) are never turned off.
    pub fn refusal(&self, id: &str, owner: Option<&Owner>) -> Option<String> {
        let plugin = match owner {
            Some(Owner::Core) => return None,
            Some(Owner::Plugin(name)) => Some(name.as_str()),
            // The public path names no plugin: only the engine id reaches it.
            Some(Owner::Public) | None => None,
        };
        let names = std::iter::once(id).chain(plugin);
        if !self.enabled {
            return Some("plugins are turned off (`plugins.enabled = false`)".to_owned());
        }
        for name in names {
            if self.deny.contains(name) {
                return Some(format!("`{name}` is in `plugins.deny`"));
            }
            if self.disabled.contains(name) {
                return Some(format!("`plugins.entries.{name}.enabled` is false"));
            }
        }
        None
    }

    /// The settings engine `id` is made with.
    pub fn factory_context(&self, id: &str) -> FactoryContext {
        FactoryContext {
            config: self.configs.get(id).cloned(),
            limits: self.limits.get(id).cloned().unwrap_or_default(),
            agent_dir: self.agent_dir.clone(),
            workspace_dir: self.workspace_dir.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plugin(name: &str) -> Owner {
        Owner::Plugin(name.to_owned())
    }

    #[test]
    fn an_engine_is_refused_by_its_id_or_its_plugin() {
        let settings = PluginSettings {
            deny: BTreeSet::from(["denied".to_owned()]),
            disabled: BTreeSet::from(["vendor".to_owned()]),
            ..PluginSettings::default()
        };
        let denied = settings.refusal("denied", None).expect("denied by id");
        assert!(denied.contains("plugins.deny"), "{denied}");
        let disabled = settings
            .refusal("other", Some(&plugin("vendor")))
            .expect("disabled by plugin");
        assert!(
            disabled.contains("plugins.entries.vendor.enabled"),
            "{disabled}"
        );
        assert_eq!(settings.refusal("other", Some(&plugin("acme"))), None);
    }

    #[test]
    fn turning_plugins_off_spares_core_engines() {
        let settings = PluginSettings {
            enabled: false,
            ..PluginSettings::default()
        };
        assert!(settings.refusal("x", Some(&plugin("acme"))).is_some());
        assert!(settings.refusal("missing", None).is_some());
        assert!(settings.refusal("open", Some(&Owner::Public)).is_some());
        assert_eq!(settings.refusal("builtin", Some(&Owner::Core)), None);
    }
}
