//! A new TypeScript engine project: `package.json` (the build command, the
//! SDK and the exact tool versions it is tested with), `tsconfig.json`,
//! `src/engine.ts`, and (bundled) the SDK under `vendor/ctxbox-guest`.

use std::path::Path;

use serde_json::{Map, Value, json};

use super::{ScaffoldError, SdkSource, bundled, checkout_sdk};

/// Writes the project `name` into `dir`.
pub(super) fn new_engine(dir: &Path, name: &str, sdk: &SdkSource) -> Result<(), ScaffoldError> {
    let sdk_dependency = match sdk {
        SdkSource::Bundled => {
            let vendored = dir.join("vendor/ctxbox-guest");
            bundled::write_files(&vendored, bundled::TS_SDK, str::to_owned)?;
            bundled::write_files(&vendored.join("wit"), bundled::WIT, str::to_owned)?;
            "file:vendor/ctxbox-guest".to_owned()
        }
        SdkSource::Checkout(path) => {
            let sdk = checkout_sdk(path, "guest-sdk-ts", "bin/ctxbox-ts-build.mjs")?;
            format!("file:{}", sdk.display())
        }
    };
    let package = package_json(name, &sdk_dependency);
    bundled::write(
        &dir.join("package.json"),
        &format!(
            "{}\n",
            serde_json::to_string_pretty(&package).unwrap_or_default()
        ),
    )?;
    bundled::write_files(dir, bundled::TS_TEMPLATE, |template| {
        template.replace("{name}", name)
    })
}

/// The `.wasm` file `npm run build` writes for engine `name`.
pub fn component_path(name: &str) -> String {
    format!("dist/{}.wasm", name.replace('-', "_"))
}

/// `package.json` of project `name`: the SDK from `sdk_dependency`, and the
/// SDK's own pinned tools and overrides as the project's, because npm applies
/// `overrides` only from the root package and installs a linked folder's
/// dependencies only when the root asks for them.
fn package_json(name: &str, sdk_dependency: &str) -> Value {
    let sdk = bundled::ts_sdk_package();
    let mut dependencies = Map::new();
    dependencies.insert("@ctxbox/guest".into(), sdk_dependency.into());
    if let Some(tools) = sdk["dependencies"].as_object() {
        dependencies.extend(tools.clone());
    }
    json!({
        "name": name,
        "version": "0.1.0",
        "private": true,
        "type": "module",
        "scripts": {
            "build": format!("ctxbox-ts-build src/engine.ts -o {}", component_path(name)),
            "check": "tsc --noEmit",
        },
        "dependencies": dependencies,
        "overrides": sdk["overrides"].clone(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_package_pins_the_sdk_tools_and_their_override() {
        let package = package_json("my-engine", "file:vendor/ctxbox-guest");
        let sdk = bundled::ts_sdk_package();
        assert_eq!(
            package["dependencies"]["@ctxbox/guest"],
            "file:vendor/ctxbox-guest"
        );
        for (tool, version) in sdk["dependencies"]
            .as_object()
            .expect("the SDK has dependencies")
        {
            assert_eq!(&package["dependencies"][tool], version, "{tool}");
        }
        assert_eq!(package["overrides"], sdk["overrides"]);
        assert_eq!(
            package["scripts"]["build"],
            "ctxbox-ts-build src/engine.ts -o dist/my_engine.wasm"
        );
    }
}
