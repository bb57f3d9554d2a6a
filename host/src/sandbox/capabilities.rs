//! Host capabilities (the reference's `hostRequirements`): the contract
//! functions this host implements, and those a component requires of it,
//! derived from its imports.
//!
//! The contract grows within a version (`read-transcript-page`, `complete`
//! and `runtime-settings` came after 0.1.0 shipped): a component built
//! against a newer SDK may import a function an older host does not have.
//! Such a component is refused at load naming each missing capability,
//! as the host's shortcoming rather than the engine's fault
//! ([`LoadError::MissingCapabilities`](super::LoadError::MissingCapabilities)).
//!
//! What this host implements is read from the WIT files its bindings are
//! generated from, so the two cannot drift apart.

use std::collections::BTreeSet;
use std::sync::OnceLock;

use wasmtime::component::Component;
use wasmtime::component::types::ComponentItem;

use super::load::WIT_PACKAGE;

/// The contract's interfaces with functions an engine imports, with their
/// WIT source (the others declare only types).
const IMPORTED_INTERFACES: [(&str, &str); 3] = [
    ("host", include_str!("../../../wit/host.wit")),
    ("history", include_str!("../../../wit/history.wit")),
    ("sql", include_str!("../../../wit/sql.wit")),
];

/// The capabilities a component imports that this host does not have, each
/// named `interface.function` (a resource's method as
/// `interface.[method]resource.function`; an interface this host does not
/// know at all has every function missing). Empty when it can run here.
pub(super) fn missing(engine: &wasmtime::Engine, component: &Component) -> Vec<String> {
    let offered = offered();
    let mut missing = Vec::new();
    for (name, item) in component.component_type().imports(engine) {
        let Some(interface) = contract_interface(name) else {
            continue;
        };
        let ComponentItem::ComponentInstance(instance) = item.ty else {
            continue;
        };
        for (function, item) in instance.exports(engine) {
            let capability = format!("{interface}.{function}");
            if matches!(item.ty, ComponentItem::ComponentFunc(_)) && !offered.contains(&capability)
            {
                missing.push(capability);
            }
        }
    }
    missing
}

/// The interface of contract import `name` (`ctxbox:engine/host@0.1.0`:
/// `host`); `None` for anything else.
fn contract_interface(name: &str) -> Option<&str> {
    let rest = name.strip_prefix(WIT_PACKAGE)?.strip_prefix('/')?;
    Some(rest.split('@').next().unwrap_or(rest))
}

/// Every function this host implements, named as [`missing`] names them.
fn offered() -> &'static BTreeSet<String> {
    static OFFERED: OnceLock<BTreeSet<String>> = OnceLock::new();
    OFFERED.get_or_init(|| {
        IMPORTED_INTERFACES
            .iter()
            .flat_map(|(interface, wit)| {
                declared_functions(wit)
                    .into_iter()
                    .map(move |function| format!("{interface}.{function}"))
            })
            .collect()
    })
}

/// The functions WIT text `wit` declares, as a component names them: a free
/// function by its name, a resource's as `[method]resource.name` (or
/// `[constructor]resource`, `[static]resource.name`).
fn declared_functions(wit: &str) -> Vec<String> {
    let mut functions = Vec::new();
    let mut depth = 0usize;
    let mut resource: Option<(String, usize)> = None;
    for line in wit.lines().map(str::trim) {
        if line.starts_with("//") {
            continue;
        }
        if let Some(name) = line
            .strip_prefix("resource ")
            .and_then(|rest| rest.split([' ', '{', ';']).next())
            && line.ends_with('{')
        {
            resource = Some((name.to_owned(), depth + 1));
        }
        if let Some((name, signature)) = line.split_once(':')
            && (signature.trim_start().starts_with("func(")
                || signature.trim_start().starts_with("static func("))
        {
            let name = name.trim();
            functions.push(match &resource {
                Some((owner, _)) if signature.trim_start().starts_with("static") => {
                    format!("[static]{owner}.{name}")
                }
                Some((owner, _)) => format!("[method]{owner}.{name}"),
                None => name.to_owned(),
            });
        } else if let (Some((owner, _)), true) = (&resource, line.starts_with("constructor(")) {
            functions.push(format!("[constructor]{owner}"));
        }
        depth += line.matches('{').count();
        depth = depth.saturating_sub(line.matches('}').count());
        if resource.as_ref().is_some_and(|(_, level)| depth < *level) {
            resource = None;
        }
    }
    functions
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_host_offers_every_function_of_its_wit() {
        let offered = offered();
        for capability in [
            "host.log",
            "host.complete",
            "host.read-transcript-page",
            "host.index-search",
            "history.[method]history.packed-range",
            "sql.[method]database.execute",
            "sql.[method]statement.columns",
        ] {
            assert!(offered.contains(capability), "{capability}: {offered:?}");
        }
        // A resource's methods are not free functions.
        assert!(!offered.contains("sql.execute"), "{offered:?}");
        assert!(!offered.contains("history.len"), "{offered:?}");
    }

    #[test]
    fn declared_functions_reads_free_functions_and_resource_members() {
        let wit = "interface x {\n    /// a: func() in a comment\n    record r {\n        f: u32,\n    }\n    \
                   free: func(a: u32) -> u32;\n    resource thing {\n        constructor(n: u32);\n        \
                   poke: func();\n        make: static func() -> thing;\n    }\n    after: func();\n}\n";
        assert_eq!(
            declared_functions(wit),
            [
                "free",
                "[constructor]thing",
                "[method]thing.poke",
                "[static]thing.make",
                "after"
            ]
        );
    }

    #[test]
    fn only_contract_imports_name_an_interface() {
        assert_eq!(contract_interface("ctxbox:engine/host@0.1.0"), Some("host"));
        assert_eq!(contract_interface("ctxbox:engine/sql"), Some("sql"));
        assert_eq!(contract_interface("wasi:io/streams@0.2.6"), None);
        assert_eq!(contract_interface("ctxbox:enginex/host@0.1.0"), None);
    }
}
