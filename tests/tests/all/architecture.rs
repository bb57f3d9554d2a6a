//! The shape of the code, checked: `host/src` is layered and no module
//! imports from a layer above its own (`docs/ARCHITECTURE.md`, "Layers"), and
//! nothing in the repository cites a document that is not in it.

use std::fs;
use std::path::{Path, PathBuf};

/// The layers of `host/src`, bottom first. A module may use its own layer
/// and the ones before it. (`cli` is the binary: it sits on top of all.)
const LAYERS: &[&[&str]] = &[
    &["contract"],
    &["store"],
    &["transcript"],
    &["provider"],
    &["services"],
    &["sandbox"],
    &["engines"],
    &["runner"],
    &["runtime"],
    &["check", "scaffold", "serve", "compare"],
];

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the tests crate lives in the repository")
        .to_owned()
}

fn rank(module: &str) -> Option<usize> {
    LAYERS.iter().position(|layer| layer.contains(&module))
}

/// Every file under `dir` whose name ends in one of `extensions`, skipping
/// build output.
fn files(dir: &Path, extensions: &[&str]) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let Ok(entries) = fs::read_dir(dir) else {
        return found;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name();
        if path.is_dir() {
            if !matches!(name.to_str(), Some("target" | "node_modules" | ".git")) {
                found.extend(files(&path, extensions));
            }
        } else if extensions
            .iter()
            .any(|extension| name.to_string_lossy().ends_with(extension))
        {
            found.push(path);
        }
    }
    found
}

/// The `crate::<module>` paths a source file names.
fn crate_paths(source: &str) -> Vec<String> {
    let mut modules = Vec::new();
    let mut rest = source;
    while let Some(at) = rest.find("crate::") {
        rest = &rest[at + "crate::".len()..];
        let module: String = rest
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect();
        modules.push(module);
    }
    modules
}

#[test]
fn every_top_level_module_of_the_host_belongs_to_a_layer() {
    let src = repo_root().join("host/src");
    let mut unplaced = Vec::new();
    for entry in fs::read_dir(&src).expect("host/src").flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let module = name.trim_end_matches(".rs");
        if !matches!(module, "lib" | "main" | "cli") && rank(module).is_none() {
            unplaced.push(module.to_owned());
        }
    }
    assert!(
        unplaced.is_empty(),
        "modules in no layer (add them to LAYERS and docs/ARCHITECTURE.md): {unplaced:?}"
    );
}

#[test]
fn no_host_module_imports_from_a_layer_above_its_own() {
    let src = repo_root().join("host/src");
    let mut upward = Vec::new();
    for file in files(&src, &[".rs"]) {
        let relative = file.strip_prefix(&src).expect("under host/src");
        let top = relative
            .components()
            .next()
            .and_then(|component| component.as_os_str().to_str())
            .map(|name| name.trim_end_matches(".rs").to_owned())
            .unwrap_or_default();
        let Some(own) = rank(&top) else {
            continue;
        };
        let source = fs::read_to_string(&file).expect("readable source");
        for module in crate_paths(&source) {
            if rank(&module).is_some_and(|used| used > own) {
                upward.push(format!("{} uses crate::{module}", relative.display()));
            }
        }
    }
    upward.sort();
    upward.dedup();
    assert!(
        upward.is_empty(),
        "imports pointing up a layer: {upward:#?}"
    );
}

#[test]
fn nothing_cites_a_document_outside_the_repository() {
    let root = repo_root();
    // Spelled in pieces so this file does not match itself.
    let outside = [["DESIGN", " §"].concat(), ["shared/", "DESIGN"].concat()];
    let mut citing = Vec::new();
    let mut scanned = 0;
    for dir in [
        "host",
        "guest-sdk",
        "guest-build",
        "tests",
        "example-engines",
        "examples",
        "wit",
        "docs",
    ] {
        for file in files(&root.join(dir), &[".rs", ".md", ".wit", ".py", ".toml"]) {
            scanned += 1;
            let text = fs::read_to_string(&file).unwrap_or_default();
            if outside
                .iter()
                .any(|pattern| text.contains(pattern.as_str()))
            {
                citing.push(file.strip_prefix(&root).unwrap_or(&file).to_owned());
            }
        }
    }
    for file in ["README.md", "BENCHMARKS.md"] {
        scanned += 1;
        let text = fs::read_to_string(root.join(file)).expect("top-level docs exist");
        if outside
            .iter()
            .any(|pattern| text.contains(pattern.as_str()))
            || text.contains("../shared")
        {
            citing.push(PathBuf::from(file));
        }
    }
    assert!(
        scanned > 100,
        "the scan found the sources ({scanned} files)"
    );
    assert!(
        citing.is_empty(),
        "files citing a document outside the repository: {citing:?}"
    );
}
