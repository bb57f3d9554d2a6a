//! A runtime's configuration file, as `ctxbox doctor` finds it: read and
//! parsed once, then either the document to check or the finding that says
//! why there is none (absent, unreadable, not parseable).

use std::path::PathBuf;

use ctxbox_host::contract::text::untrusted_line;
use serde_json::Value;

use super::report::Finding;

/// One runtime's configuration file.
pub struct RuntimeConfig {
    /// Where it is (or would be).
    pub path: PathBuf,
    /// Whether the path was given on the command line (then it must exist).
    pub named: bool,
    /// The document; `None` when the file does not exist; the error's words
    /// when it cannot be read or parsed.
    pub document: Result<Option<Value>, String>,
}

impl RuntimeConfig {
    /// Reads `given`, else `default`, parsing it with `parse` (which names
    /// the format in its error).
    pub fn read(
        given: Option<PathBuf>,
        default: impl FnOnce() -> PathBuf,
        parse: impl FnOnce(&str) -> Result<Value, String>,
    ) -> Self {
        let named = given.is_some();
        let path = given.unwrap_or_else(default);
        let document = match std::fs::read_to_string(&path) {
            Ok(text) => parse(&text).map(Some),
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(error) => Err(format!("cannot read it: {error}")),
        };
        Self {
            path,
            named,
            document,
        }
    }

    /// The document, if it was read.
    pub fn get(&self) -> Option<&Value> {
        self.document.as_ref().ok()?.as_ref()
    }

    /// The document to check, or the one finding about the file when there
    /// is none: a note when it is absent where the runtime would look (the
    /// runtime is not set up here), a problem when a named file is absent
    /// (`where_it_is` says how to find the right one) or it cannot be read.
    pub fn open(&self, area: &'static str, where_it_is: &str) -> Result<&Value, Finding> {
        let file = self.path.display().to_string();
        match &self.document {
            Ok(Some(document)) => Ok(document),
            Ok(None) if self.named => {
                Err(Finding::problem(area, file, "no such file", where_it_is))
            }
            Ok(None) => Err(Finding::note(
                area,
                file,
                format!("no {area} configuration here ({where_it_is} if it is elsewhere)"),
                "",
            )),
            Err(why) => Err(Finding::problem(
                area,
                file,
                untrusted_line(why, 400),
                "correct the file at the place named",
            )),
        }
    }
}

/// A problem when `value` (a setting's, shown as JSON) is not `wanted`.
pub fn selected(
    area: &'static str,
    setting: &str,
    value: Option<&Value>,
    wanted: &str,
    consequence: &str,
    fix: &str,
) -> Finding {
    if value.and_then(Value::as_str) == Some(wanted) {
        Finding::ok(area, "selected", format!("{setting} is {wanted}"))
    } else {
        Finding::problem(
            area,
            "selected",
            format!(
                "{setting} is {}, so {consequence}",
                value.map_or_else(
                    || "unset".to_owned(),
                    |value| untrusted_line(&value.to_string(), 80)
                )
            ),
            fix,
        )
    }
}

/// Problems for the keys of `settings` not among `known` (`prefix` names
/// where they sit; `consequence` says what the runtime does about them).
pub fn unknown_keys<'a>(
    area: &'static str,
    prefix: &str,
    settings: &serde_json::Map<String, Value>,
    known: impl Iterator<Item = &'a str> + Clone,
    consequence: &str,
) -> Vec<Finding> {
    settings
        .keys()
        .filter(|key| !known.clone().any(|name| name == key.as_str()))
        .map(|key| {
            Finding::problem(
                area,
                format!("{prefix}{}", untrusted_line(key, 40)),
                format!("not a setting of the plugin: {consequence}"),
                format!(
                    "remove it, or use one of {}",
                    known.clone().collect::<Vec<_>>().join(", ")
                ),
            )
        })
        .collect()
}
