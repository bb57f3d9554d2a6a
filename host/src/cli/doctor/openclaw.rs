//! OpenClaw's configuration of the plugin (`openclaw.json`, JSON5): the
//! plugin entry is there and enabled, holds the context-engine slot, names
//! an engine that exists and a binary that runs, and — with Tool Search off
//! — the model's window leaves room for OpenClaw's tool schemas.

use std::path::{Path, PathBuf};

use ctxbox_host::contract::text::untrusted_line;
use serde_json::Value;

use super::report::Finding;
use super::runtime_config::{RuntimeConfig, selected, unknown_keys};
use super::{binary, engines};

/// The plugin's id in OpenClaw (`plugins.entries.<id>`, the slot's value).
const PLUGIN_ID: &str = "ctxbox";

/// The plugin's manifest: its `configSchema` lists the settings OpenClaw
/// accepts (it refuses any other key).
const MANIFEST: &str = include_str!("../../../../integrations/openclaw/openclaw.plugin.json");

/// Tokens OpenClaw's own tool schemas take of every request with Tool
/// Search off (measured, integrations/openclaw/README.md).
const TOOL_SCHEMA_TOKENS: u64 = 37_000;

/// A window below this, with Tool Search off, leaves the model too little
/// room to answer.
const MIN_WINDOW_WITHOUT_TOOL_SEARCH: u64 = 2 * TOOL_SCHEMA_TOKENS;

/// OpenClaw's configuration, as found.
pub struct Plugin(RuntimeConfig);

impl Plugin {
    /// Reads `given`, else where OpenClaw looks: `$OPENCLAW_CONFIG_PATH`,
    /// `$OPENCLAW_STATE_DIR/openclaw.json`, `~/.openclaw/openclaw.json`.
    pub fn find(given: Option<PathBuf>) -> Self {
        Self(RuntimeConfig::read(given, default_path, |text| {
            json5::from_str::<Value>(text).map_err(|error| format!("not valid JSON5: {error}"))
        }))
    }

    /// The engine the plugin's configuration names, if any.
    pub fn engine(&self) -> Option<&str> {
        self.entry()?.pointer("/config/engine")?.as_str()
    }

    /// The plugin's data directory, when the configuration sets one.
    pub fn data_dir(&self) -> Option<PathBuf> {
        let dir = self.entry()?.pointer("/config/dataDir")?.as_str()?;
        Some(binary::expand_home(dir))
    }

    fn entry(&self) -> Option<&Value> {
        self.0.get()?.pointer("/plugins/entries/ctxbox")
    }

    /// The checks, with `known` the registered engine ids.
    pub fn check(&self, known: &[String]) -> Vec<Finding> {
        let config = match self.0.open(
            "openclaw",
            "set OPENCLAW_CONFIG_PATH, or pass --openclaw-config the path of openclaw.json",
        ) {
            Ok(config) => config,
            Err(finding) => return vec![finding],
        };
        let file = self.0.path.display().to_string();
        let mut findings = vec![Finding::ok("openclaw", file, "read")];
        let Some(entry) = self.entry() else {
            findings.push(Finding::problem(
                "openclaw",
                "plugins.entries",
                "the ctxbox plugin is not configured",
                "install it (`openclaw plugins install --accept-capabilities <the @ctxbox/openclaw tarball>`), then `openclaw config set --strict-json plugins.entries.ctxbox '{\"enabled\":true,\"config\":{\"engine\":\"keep-recent\"}}'`",
            ));
            return findings;
        };
        findings.push(if entry.get("enabled") == Some(&Value::Bool(false)) {
            Finding::problem(
                "openclaw",
                "enabled",
                "plugins.entries.ctxbox.enabled is false",
                "`openclaw plugins enable ctxbox --accept-capabilities`, then restart the gateway",
            )
        } else {
            Finding::ok("openclaw", "enabled", "the plugin is enabled")
        });
        if let Some(allow) = config.pointer("/plugins/allow").and_then(Value::as_array)
            && !allow.iter().any(|id| id.as_str() == Some(PLUGIN_ID))
        {
            findings.push(Finding::problem(
                "openclaw",
                "plugins.allow",
                "plugins.allow lists other plugins but not ctxbox, so OpenClaw does not load it",
                "add \"ctxbox\" to plugins.allow in openclaw.json",
            ));
        }
        findings.push(selected(
            "openclaw",
            "plugins.slots.contextEngine",
            config.pointer("/plugins/slots/contextEngine"),
            PLUGIN_ID,
            "OpenClaw does not use ctxbox",
            "`openclaw config set plugins.slots.contextEngine ctxbox`, then restart the gateway",
        ));
        let settings = entry.get("config").cloned().unwrap_or(Value::Null);
        findings.extend(unknown_settings(&settings));
        match settings.get("engine") {
            Some(Value::String(engine)) => findings.push(engines::named(
                "openclaw",
                "config.engine",
                engine,
                known,
            )),
            _ => findings.push(Finding::problem(
                "openclaw",
                "config.engine",
                "plugins.entries.ctxbox.config.engine is not set (a string)",
                "`openclaw config set plugins.entries.ctxbox.config.engine keep-recent` (or another engine, or a .wasm path)",
            )),
        }
        if let Some(bin) = settings.get("ctxboxBin").and_then(Value::as_str) {
            findings.push(binary::configured("openclaw", "config.ctxboxBin", bin));
        }
        findings.extend(window(config));
        findings
    }
}

/// Where OpenClaw reads its configuration.
fn default_path() -> PathBuf {
    let env = |name: &str| std::env::var_os(name).filter(|value| !value.is_empty());
    if let Some(path) = env("OPENCLAW_CONFIG_PATH") {
        return binary::expand_home(&PathBuf::from(path).to_string_lossy());
    }
    if let Some(dir) = env("OPENCLAW_STATE_DIR") {
        return Path::new(&dir).join("openclaw.json");
    }
    binary::expand_home("~/.openclaw/openclaw.json")
}

/// A problem for each setting the manifest's schema does not declare
/// (OpenClaw refuses the configuration then).
fn unknown_settings(settings: &Value) -> Vec<Finding> {
    let manifest: Value = serde_json::from_str(MANIFEST).unwrap_or(Value::Null);
    let (Some(declared), Some(settings)) = (
        manifest
            .pointer("/configSchema/properties")
            .and_then(Value::as_object),
        settings.as_object(),
    ) else {
        return Vec::new();
    };
    unknown_keys(
        "openclaw",
        "config.",
        settings,
        declared.keys().map(String::as_str),
        "OpenClaw refuses the configuration",
    )
}

/// With Tool Search off, every configured model's window against
/// OpenClaw's own tool schemas.
fn window(config: &Value) -> Vec<Finding> {
    if config.pointer("/tools/toolSearch") != Some(&Value::Bool(false)) {
        return vec![Finding::ok(
            "openclaw",
            "window",
            "Tool Search is on: OpenClaw's tool schemas stay out of the window",
        )];
    }
    let mut findings = Vec::new();
    let providers = config
        .pointer("/models/providers")
        .and_then(Value::as_object)
        .into_iter()
        .flatten();
    for (provider, settings) in providers {
        for model in settings
            .get("models")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let Some(window) = model.get("contextWindow").and_then(Value::as_u64) else {
                continue;
            };
            if window < MIN_WINDOW_WITHOUT_TOOL_SEARCH {
                let id = model.get("id").and_then(Value::as_str).unwrap_or("?");
                findings.push(Finding::problem(
                    "openclaw",
                    "window",
                    format!(
                        "tools.toolSearch is off and {}/{} has a {window}-token window: OpenClaw's own tool schemas take ~{TOOL_SCHEMA_TOKENS} tokens of every request, leaving the model almost nothing to answer with",
                        untrusted_line(provider, 60),
                        untrusted_line(id, 80)
                    ),
                    "turn Tool Search back on (`openclaw config unset tools.toolSearch`) or use a model with a larger window",
                ));
            }
        }
    }
    if findings.is_empty() {
        findings.push(Finding::note(
            "openclaw",
            "window",
            format!("tools.toolSearch is off: OpenClaw's tool schemas take ~{TOOL_SCHEMA_TOKENS} tokens of every request"),
            "keep the model's window well above that, or turn Tool Search back on",
        ));
    }
    findings
}

#[cfg(test)]
mod tests {
    use super::super::report::Status;
    use super::*;

    fn plugin(text: &str) -> (tempfile::TempDir, Plugin) {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("openclaw.json");
        std::fs::write(&path, text).expect("write");
        let plugin = Plugin::find(Some(path));
        (dir, plugin)
    }

    fn known() -> Vec<String> {
        vec![
            "keep-recent".to_owned(),
            "lossless".to_owned(),
            "legacy".to_owned(),
        ]
    }

    fn problems(findings: &[Finding]) -> Vec<&Finding> {
        findings
            .iter()
            .filter(|f| f.status == Status::Problem)
            .collect()
    }

    #[test]
    fn a_good_json5_configuration_passes() {
        let (_dir, plugin) = plugin(
            r#"{
              // OpenClaw writes JSON5: comments, unquoted keys, trailing commas
              plugins: {
                entries: { ctxbox: { enabled: true, config: { engine: "keep-recent", }, }, },
                slots: { contextEngine: "ctxbox" },
              },
            }"#,
        );
        let findings = plugin.check(&known());
        assert!(problems(&findings).is_empty(), "{findings:#?}");
        assert_eq!(plugin.engine(), Some("keep-recent"));
    }

    #[test]
    fn a_syntax_error_names_the_file_and_the_place() {
        let (_dir, plugin) = plugin("{ plugins: { entries: { ctxbox: { enabled: true,, } } }");
        let findings = plugin.check(&known());
        let problem = problems(&findings)[0];
        assert!(problem.subject.ends_with("openclaw.json"), "{problem:?}");
        assert!(problem.detail.contains("JSON5"), "{problem:?}");
        assert!(problem.fix.is_some());
    }

    #[test]
    fn each_broken_setting_is_named_with_its_fix() {
        let (_dir, plugin) = plugin(
            r#"{"plugins": {"allow": ["other"],
                "entries": {"ctxbox": {"enabled": false, "config": {"engine": "no-such-engine", "ctxboxBin": "/nonexistent/ctxbox", "windowTokens": 1}}},
                "slots": {"contextEngine": "legacy"}},
              "tools": {"toolSearch": false},
              "models": {"providers": {"local": {"models": [{"id": "small", "contextWindow": 32000}]}}}}"#,
        );
        let findings = plugin.check(&known());
        let by_subject = |subject: &str| {
            problems(&findings)
                .into_iter()
                .find(|f| f.subject == subject)
                .unwrap_or_else(|| panic!("no problem about {subject}: {findings:#?}"))
                .clone()
        };
        assert!(
            by_subject("enabled")
                .fix
                .unwrap()
                .contains("openclaw plugins enable ctxbox")
        );
        assert!(
            by_subject("plugins.allow")
                .fix
                .unwrap()
                .contains("plugins.allow")
        );
        let selected = by_subject("selected");
        assert!(selected.detail.contains("legacy"), "{selected:?}");
        assert!(
            selected
                .fix
                .unwrap()
                .contains("plugins.slots.contextEngine ctxbox")
        );
        let engine = by_subject("config.engine");
        assert!(engine.detail.contains("no-such-engine"));
        assert!(engine.fix.unwrap().contains("keep-recent, lossless"));
        assert!(
            by_subject("config.ctxboxBin")
                .detail
                .contains("/nonexistent/ctxbox")
        );
        assert!(
            by_subject("config.windowTokens")
                .fix
                .unwrap()
                .contains("ctxboxBin")
        );
        assert!(by_subject("window").detail.contains("local/small"));
    }

    #[test]
    fn a_missing_entry_says_how_to_install() {
        let (_dir, plugin) = plugin(r#"{"plugins": {}}"#);
        let findings = plugin.check(&known());
        let problem = problems(&findings)[0];
        assert!(
            problem
                .fix
                .as_deref()
                .unwrap()
                .contains("openclaw plugins install"),
            "{problem:?}"
        );
    }

    #[test]
    fn no_configuration_is_only_a_note_unless_named() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("openclaw.json");
        let mut absent = Plugin::find(Some(path.clone()));
        assert_eq!(absent.check(&known())[0].status, Status::Problem);
        absent.0.named = false;
        assert_eq!(absent.check(&known())[0].status, Status::Note);
    }
}
