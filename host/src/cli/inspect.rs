//! `ctxbox inspect`: load an engine and show who it is.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;

use ctxbox_host::contract::engine::ContextEngine;
use ctxbox_host::contract::services::NoServices;
use ctxbox_host::sandbox::{Sandbox, SandboxConfig, WIT_PACKAGE, WIT_VERSION};
use serde_json::json;

use super::engine_source::EngineSource;

/// Arguments of `ctxbox inspect`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// A bundled engine's name (e.g. `keep-recent`) or a path to a `.wasm` component.
    #[arg(default_value = "keep-recent")]
    engine: String,
    /// Directory for compiled engines (reused across runs).
    #[arg(long)]
    cache_dir: Option<PathBuf>,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
}

/// Runs `ctxbox inspect`.
pub async fn run(args: Args) -> anyhow::Result<ExitCode> {
    let source = EngineSource::parse(&args.engine)?;
    let sandbox = Sandbox::new(SandboxConfig {
        max_instances: 4,
        cache_dir: args.cache_dir,
        ..SandboxConfig::default()
    })?;
    let started = Instant::now();
    let component = source.load(&sandbox)?;
    let load_ms = started.elapsed().as_secs_f64() * 1e3;
    let started = Instant::now();
    let engine = sandbox
        .instantiate(&component, Arc::new(NoServices))
        .await?;
    let instantiate_ms = started.elapsed().as_secs_f64() * 1e3;
    let info = engine.info();

    if args.json {
        let report = json!({
            "source": source.label(),
            "sha256": component.content_hash(),
            "contract": format!("{WIT_PACKAGE}@{}", component.wit_version()),
            "info": info,
            "imports": component.imports(),
            "loadMs": load_ms,
            "fromCache": component.from_cache(),
            "instantiateMs": instantiate_ms,
        });
        println!("{}", serde_json::to_string_pretty(&report)?);
        return Ok(ExitCode::SUCCESS);
    }

    let params = match &info.accepted_host_params {
        None => "all (none declared)".to_owned(),
        Some(params) if params.is_empty() => "none".to_owned(),
        Some(params) => params
            .iter()
            .map(|p| format!("{p:?}"))
            .collect::<Vec<_>>()
            .join(", "),
    };
    println!(
        "engine       {} ({}) {}",
        info.id,
        info.name,
        info.version.as_deref().unwrap_or("(no version)")
    );
    println!("source       {}", source.label());
    println!("sha256       {}", component.content_hash());
    println!("contract     {WIT_PACKAGE}@{WIT_VERSION}");
    println!(
        "compaction   {}",
        if info.owns_compaction {
            "owned by the engine"
        } else {
            "the host decides when"
        }
    );
    println!("host params  {params}");
    if let Some(mode) = info.turn_maintenance_mode {
        println!("maintenance  {mode:?}");
    }
    println!(
        "imports      {}",
        component.imports().join("\n             ")
    );
    println!(
        "load         {load_ms:.1} ms ({}), first instance + info {instantiate_ms:.2} ms",
        if component.from_cache() {
            "from cache"
        } else {
            "compiled"
        }
    );
    Ok(ExitCode::SUCCESS)
}
