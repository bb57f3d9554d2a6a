//! Hermes's configuration of the plugin (`config.yaml`): the plugin is
//! enabled and selected as the context engine, and its `ctxbox:` section
//! names an engine that exists, a binary that runs, and a window.

use std::path::PathBuf;

use ctxbox_host::contract::text::untrusted_line;
use serde_json::{Map, Value};
use yaml_rust2::{Yaml, YamlLoader};

use super::report::Finding;
use super::runtime_config::{RuntimeConfig, selected, unknown_keys};
use super::{binary, engines};

/// The plugin's name in Hermes (`plugins.enabled`, `context.engine`).
const PLUGIN_ID: &str = "ctxbox";

/// The settings of the `ctxbox:` section (`Settings` in
/// `integrations/hermes/ctxbox_hermes/config.py`).
const SETTINGS: &[&str] = &[
    "engine",
    "ctxbox_bin",
    "data_dir",
    "config_file",
    "call_timeout_ms",
    "window_tokens",
    "threshold",
    "target",
];

/// Hermes's configuration, as found.
pub struct Plugin(RuntimeConfig);

impl Plugin {
    /// Reads `given`, else `$HERMES_HOME/config.yaml`, else
    /// `~/.hermes/config.yaml`.
    pub fn find(given: Option<PathBuf>) -> Self {
        let default = || match std::env::var_os("HERMES_HOME").filter(|home| !home.is_empty()) {
            Some(home) => PathBuf::from(home).join("config.yaml"),
            None => binary::expand_home("~/.hermes/config.yaml"),
        };
        Self(RuntimeConfig::read(given, default, |text| {
            YamlLoader::load_from_str(text)
                .map(|documents| documents.first().map_or(Value::Null, json))
                .map_err(|error| format!("not valid YAML: {error}"))
        }))
    }

    fn section(&self) -> Option<&Value> {
        self.0.get()?.get("ctxbox")
    }

    /// The engine the `ctxbox:` section names, if any.
    pub fn engine(&self) -> Option<&str> {
        self.section()?.get("engine")?.as_str()
    }

    /// The plugin's data directory, when the section sets one.
    pub fn data_dir(&self) -> Option<PathBuf> {
        Some(binary::expand_home(
            self.section()?.get("data_dir")?.as_str()?,
        ))
    }

    /// The checks, with `known` the registered engine ids.
    pub fn check(&self, known: &[String]) -> Vec<Finding> {
        let config = match self.0.open(
            "hermes",
            "set HERMES_HOME, or pass --hermes-config the path of Hermes's config.yaml",
        ) {
            Ok(config) => config,
            Err(finding) => return vec![finding],
        };
        let file = self.0.path.display().to_string();
        let mut findings = vec![Finding::ok("hermes", file, "read")];
        let enabled = config
            .pointer("/plugins/enabled")
            .and_then(Value::as_array)
            .is_some_and(|list| list.iter().any(|id| id.as_str() == Some(PLUGIN_ID)));
        findings.push(if enabled {
            Finding::ok("hermes", "enabled", "plugins.enabled lists ctxbox")
        } else {
            Finding::problem(
                "hermes",
                "enabled",
                "plugins.enabled does not list ctxbox, so Hermes does not load the plugin",
                "`hermes plugins enable ctxbox`",
            )
        });
        findings.push(selected(
            "hermes",
            "context.engine",
            config.pointer("/context/engine"),
            PLUGIN_ID,
            "Hermes uses its own compressor",
            "`hermes config set context.engine ctxbox`",
        ));
        let Some(section) = self.section() else {
            findings.push(Finding::problem(
                "hermes",
                "ctxbox",
                "no `ctxbox:` section: the plugin has no engine to run",
                "`hermes config set ctxbox.engine keep-recent --force` (--force: Hermes refuses keys it does not know without it)",
            ));
            return findings;
        };
        let Some(section) = section.as_object() else {
            findings.push(Finding::problem(
                "hermes",
                "ctxbox",
                "`ctxbox:` is not a mapping",
                "make it a mapping of the plugin's settings (integrations/hermes/README.md)",
            ));
            return findings;
        };
        findings.extend(settings(section, known));
        findings
    }
}

/// The `ctxbox:` section's settings, checked as the plugin checks them.
fn settings(section: &Map<String, Value>, known: &[String]) -> Vec<Finding> {
    let mut findings = unknown_keys(
        "hermes",
        "ctxbox.",
        section,
        SETTINGS.iter().copied(),
        "the plugin refuses to start",
    );
    findings.push(match section.get("engine").and_then(Value::as_str) {
        Some(engine) => engines::named("hermes", "ctxbox.engine", engine, known),
        None => Finding::problem(
            "hermes",
            "ctxbox.engine",
            "ctxbox.engine is not set (a string)",
            "`hermes config set ctxbox.engine keep-recent --force`",
        ),
    });
    if let Some(bin) = section.get("ctxbox_bin").and_then(Value::as_str) {
        findings.push(binary::configured("hermes", "ctxbox.ctxbox_bin", bin));
    }
    findings.push(match section.get("window_tokens") {
        None | Some(Value::Null) => Finding::note(
            "hermes",
            "window",
            "ctxbox.window_tokens is unset: compression works in the model's context length (Hermes assumes 256k for a model it does not know), so a short trial never compresses",
            "`hermes config set ctxbox.window_tokens 32000 --force` for a trial",
        ),
        Some(window) if window.as_f64().is_some_and(|tokens| tokens >= 256.0) => {
            Finding::ok("hermes", "window", format!("ctxbox.window_tokens is {window}"))
        }
        Some(window) => Finding::problem(
            "hermes",
            "window",
            format!(
                "ctxbox.window_tokens is {}, not a number of tokens >= 256",
                untrusted_line(&window.to_string(), 40)
            ),
            "`hermes config set ctxbox.window_tokens 32000 --force`",
        ),
    });
    let share = |key: &str, default: f64| section.get(key).map_or(Some(default), Value::as_f64);
    match (share("threshold", 0.75), share("target", 0.5)) {
        (Some(threshold), Some(target))
            if 0.0 < threshold && threshold <= 1.0 && 0.0 < target && target < threshold => {}
        _ => findings.push(Finding::problem(
            "hermes",
            "ctxbox.target",
            "ctxbox.threshold must be above 0 and at most 1, and ctxbox.target above 0 and below it",
            "remove both (0.75 and 0.5 are the defaults) or correct them",
        )),
    }
    findings
}

/// A YAML document as JSON (keys that are not strings become their text).
fn json(yaml: &Yaml) -> Value {
    match yaml {
        Yaml::Real(text) => text
            .parse::<f64>()
            .ok()
            .and_then(serde_json::Number::from_f64)
            .map_or_else(|| Value::String(text.clone()), Value::Number),
        Yaml::Integer(number) => Value::from(*number),
        Yaml::String(text) => Value::String(text.clone()),
        Yaml::Boolean(flag) => Value::Bool(*flag),
        Yaml::Array(items) => Value::Array(items.iter().map(json).collect()),
        Yaml::Hash(entries) => Value::Object(
            entries
                .iter()
                .map(|(key, value)| {
                    let key = match key {
                        Yaml::String(text) | Yaml::Real(text) => text.clone(),
                        Yaml::Integer(number) => number.to_string(),
                        Yaml::Boolean(flag) => flag.to_string(),
                        _ => String::new(),
                    };
                    (key, json(value))
                })
                .collect(),
        ),
        Yaml::Alias(_) | Yaml::Null | Yaml::BadValue => Value::Null,
    }
}

#[cfg(test)]
mod tests {
    use super::super::report::Status;
    use super::*;

    fn plugin(text: &str) -> (tempfile::TempDir, Plugin) {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("config.yaml");
        std::fs::write(&path, text).expect("write");
        let plugin = Plugin::find(Some(path));
        (dir, plugin)
    }

    fn known() -> Vec<String> {
        vec!["keep-recent".to_owned(), "lossless".to_owned()]
    }

    fn problem<'a>(findings: &'a [Finding], subject: &str) -> &'a Finding {
        findings
            .iter()
            .find(|f| f.status == Status::Problem && f.subject == subject)
            .unwrap_or_else(|| panic!("no problem about {subject}: {findings:#?}"))
    }

    #[test]
    fn a_good_configuration_passes() {
        let (_dir, plugin) = plugin(
            "model:\n  provider: custom\ncontext:\n  engine: ctxbox\nplugins:\n  enabled: [ctxbox]\nctxbox:\n  engine: keep-recent\n  window_tokens: 32000\n  threshold: 0.8\n",
        );
        let findings = plugin.check(&known());
        assert!(
            findings.iter().all(|f| f.status == Status::Ok),
            "{findings:#?}"
        );
        assert_eq!(plugin.engine(), Some("keep-recent"));
    }

    #[test]
    fn each_broken_setting_is_named_with_its_fix() {
        let (_dir, plugin) = plugin(
            "context:\n  engine: compressor\nplugins:\n  enabled: []\nctxbox:\n  engine: keep-recnet\n  ctxbox_bin: /nonexistent/ctxbox\n  window: 32000\n  target: 0.9\n",
        );
        let findings = plugin.check(&known());
        assert!(
            problem(&findings, "enabled")
                .fix
                .as_deref()
                .unwrap()
                .contains("hermes plugins enable ctxbox")
        );
        let selected = problem(&findings, "selected");
        assert!(selected.detail.contains("compressor"));
        assert!(
            selected
                .fix
                .as_deref()
                .unwrap()
                .contains("context.engine ctxbox")
        );
        let engine = problem(&findings, "ctxbox.engine");
        assert!(engine.detail.contains("keep-recnet"));
        assert!(engine.fix.as_deref().unwrap().contains("keep-recent"));
        assert!(
            problem(&findings, "ctxbox.ctxbox_bin")
                .detail
                .contains("/nonexistent/ctxbox")
        );
        assert!(
            problem(&findings, "ctxbox.window")
                .fix
                .as_deref()
                .unwrap()
                .contains("window_tokens")
        );
        assert!(problem(&findings, "ctxbox.target").detail.contains("below"));
        let window = findings
            .iter()
            .find(|f| f.subject == "window")
            .expect("window");
        assert_eq!(window.status, Status::Note);
        assert!(window.fix.as_deref().unwrap().contains("--force"));
    }

    #[test]
    fn broken_yaml_names_the_file_and_the_place() {
        let (_dir, plugin) = plugin("ctxbox:\n  engine: [unclosed\n");
        let findings = plugin.check(&known());
        let problem = &findings[0];
        assert_eq!(problem.status, Status::Problem);
        assert!(problem.subject.ends_with("config.yaml"));
        assert!(problem.detail.contains("line"), "{problem:?}");
    }

    #[test]
    fn a_missing_section_says_how_to_add_it() {
        let (_dir, plugin) = plugin("context:\n  engine: ctxbox\nplugins:\n  enabled: [ctxbox]\n");
        let findings = plugin.check(&known());
        assert!(
            problem(&findings, "ctxbox")
                .fix
                .as_deref()
                .unwrap()
                .contains("--force")
        );
    }
}
