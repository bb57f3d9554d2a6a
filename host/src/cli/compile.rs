//! `ctxbox compile`: precompile engines into the on-disk cache, so the first
//! session that uses them does not pay for compilation.

use std::process::ExitCode;
use std::time::Instant;

use ctxbox_host::sandbox::{Sandbox, SandboxConfig};

use super::engine_source::EngineSource;
use super::settings::HostArgs;

/// Arguments of `ctxbox compile`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Engines: bundled names or `.wasm` paths.
    #[arg(required = true)]
    engines: Vec<String>,
    #[command(flatten)]
    host: HostArgs,
}

/// Runs `ctxbox compile`.
pub async fn run(args: Args) -> anyhow::Result<ExitCode> {
    let config = args.host.config()?;
    let cache_dir = config
        .sandbox
        .cache_dir
        .clone()
        .unwrap_or_else(|| config.data_dir().join("cache"));
    // Exactly the runtime's sandbox settings: they are part of the cache key.
    let sandbox = Sandbox::new(SandboxConfig {
        cache_dir: Some(cache_dir.clone()),
        ..config.sandbox.clone()
    })?;
    for spec in &args.engines {
        let source = EngineSource::parse(spec)?;
        let started = Instant::now();
        let component = source.load(&sandbox)?;
        println!(
            "{:<40} {} in {:.1} ms (sha256 {})",
            source.label(),
            if component.from_cache() {
                "already cached, loaded"
            } else {
                "compiled"
            },
            started.elapsed().as_secs_f64() * 1e3,
            &component.content_hash()[..16]
        );
    }
    println!("cache: {}", cache_dir.display());
    Ok(ExitCode::SUCCESS)
}
