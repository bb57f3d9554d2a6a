//! Each configured engine: it loads (compiles, or comes from the cache),
//! speaks a contract version this host does, answers `info` in a fresh
//! instance, and is not quarantined.

use std::path::PathBuf;
use std::sync::Arc;

use ctxbox_host::contract::engine::ContextEngine;
use ctxbox_host::contract::services::NoServices;
use ctxbox_host::contract::text::untrusted_line;
use ctxbox_host::engines::registry::{EngineFactory, LEGACY_ID};
use ctxbox_host::runtime::Runtime;
use ctxbox_host::sandbox::{LoadedComponent, WIT_PACKAGE, WIT_VERSION};

use super::report::Finding;

/// The checks of the engines `named` (ids or `.wasm` paths), and of every
/// registered engine when `all`.
pub async fn check(runtime: &Runtime, named: &[String], all: bool) -> Vec<Finding> {
    let registry = runtime.engines().registry();
    let mut specs: Vec<String> = if all {
        registry
            .ids()
            .into_iter()
            .map(|(id, _)| id)
            .filter(|id| id != LEGACY_ID)
            .collect()
    } else {
        Vec::new()
    };
    for spec in named {
        if !specs.contains(spec) {
            specs.push(spec.clone());
        }
    }
    let mut findings = Vec::new();
    for spec in specs {
        findings.push(one(runtime, &spec).await);
    }
    findings
}

/// Where an engine's component comes from.
enum Source {
    File(PathBuf),
    Bytes(String, Arc<[u8]>),
}

async fn one(runtime: &Runtime, spec: &str) -> Finding {
    let shown = untrusted_line(spec, 120);
    let source = match runtime.engines().registry().get(spec) {
        Some(registration) => match registration.factory {
            EngineFactory::Native(_) => {
                return Finding::ok("engine", shown, "native (built into the host)");
            }
            EngineFactory::WasmFile(path) => Source::File(path),
            EngineFactory::WasmBytes { label, bytes } => Source::Bytes(label, bytes),
        },
        None if spec.ends_with(".wasm") => Source::File(super::binary::expand_home(spec)),
        None => {
            return Finding::problem(
                "engine",
                shown,
                "no engine of that name is registered",
                "name a bundled engine (`ctxbox doctor` lists them as ok), a [plugins.engines] id of ctxbox.toml, or a .wasm file's path",
            );
        }
    };
    let sandbox = runtime.engines().sandbox();
    let loaded = match &source {
        Source::File(path) => sandbox.load_file(path),
        Source::Bytes(label, bytes) => sandbox.load_bytes(label, bytes),
    };
    let component = match loaded {
        Ok(component) => component,
        Err(error) => {
            return Finding::problem(
                "engine",
                shown,
                format!("does not load: {}", untrusted_line(&error.to_string(), 400)),
                format!(
                    "rebuild the engine against {WIT_PACKAGE}@{WIT_VERSION} (`ctxbox check` shows what its contract test says), or name another engine"
                ),
            );
        }
    };
    if let Some(record) = runtime.engines().quarantine().get(spec) {
        let retry = match record.retry_at_ms {
            Some(at) => format!(
                "it is tried again after {}",
                humantime::format_rfc3339_seconds(
                    std::time::UNIX_EPOCH + std::time::Duration::from_millis(at.max(0) as u64)
                )
            ),
            None => "it is never tried again (quarantine.retryAfterSeconds = 0)".to_owned(),
        };
        return Finding::problem(
            "engine",
            shown,
            format!(
                "quarantined: {} in {} ({}); {retry}",
                record.classification,
                record.operation,
                untrusted_line(&record.reason, 200)
            ),
            "`ctxbox health` shows why; fix the engine and register the changed .wasm (that clears it), or wait for the retry",
        );
    }
    instantiated(runtime, &shown, &component).await
}

/// The engine's identity from a fresh instance, with its contract.
async fn instantiated(runtime: &Runtime, shown: &str, component: &LoadedComponent) -> Finding {
    let contract = format!("{WIT_PACKAGE}@{}", component.wit_version());
    match runtime
        .engines()
        .sandbox()
        .instantiate(component, Arc::new(NoServices))
        .await
    {
        Ok(engine) => {
            let info = engine.info();
            Finding::ok(
                "engine",
                shown.to_owned(),
                format!(
                    "loads ({}), {contract}, {} {}",
                    if component.from_cache() {
                        "from the cache"
                    } else {
                        "compiled"
                    },
                    untrusted_line(&info.id, 64),
                    untrusted_line(info.version.as_deref().unwrap_or("(no version)"), 32)
                ),
            )
        }
        Err(failure) => Finding::problem(
            "engine",
            shown.to_owned(),
            format!(
                "loads ({contract}) but does not start: {}",
                untrusted_line(&failure.to_string(), 400)
            ),
            "`ctxbox inspect` and `ctxbox check` on the engine show more; fix the engine or name another",
        ),
    }
}

/// A plugin's engine setting (`value`): a registered id, or a `.wasm` file
/// that exists.
pub fn named(area: &'static str, setting: &str, value: &str, known: &[String]) -> Finding {
    let shown = untrusted_line(value, 200);
    if known.iter().any(|id| id == value) {
        return Finding::ok(area, setting, format!("engine `{shown}`"));
    }
    if value.ends_with(".wasm") {
        let path = super::binary::expand_home(value);
        return if path.is_file() {
            Finding::ok(area, setting, format!("engine file {}", path.display()))
        } else {
            Finding::problem(
                area,
                setting,
                format!("engine file `{shown}` does not exist"),
                format!("build the engine or correct the path in {setting}"),
            )
        };
    }
    let ids: Vec<&str> = known
        .iter()
        .map(String::as_str)
        .filter(|id| *id != LEGACY_ID)
        .collect();
    Finding::problem(
        area,
        setting,
        format!("no engine `{shown}`"),
        format!(
            "set {setting} to one of {} or to a .wasm file's path",
            if ids.is_empty() {
                "the registered engines (none could be listed)".to_owned()
            } else {
                ids.join(", ")
            }
        ),
    )
}
