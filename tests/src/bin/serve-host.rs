//! One `ctxbox serve` host of the multi-host and memory tests: the same
//! service and stdio protocol as `ctxbox serve [--store URL]`, built from
//! the library with a short session lease, so a test can run several, kill
//! one and watch the others take its sessions over, or read one's memory.
//!
//! Usage: `serve-host <postgres-url | -> <data-dir> <lease-ms> [engine]`
//! (`-`: no shared store; the engine defaults to `legacy`). With
//! `CTXBOX_SERVE_HOST_METRICS=ADDR` it also serves its metrics there, as
//! `ctxbox serve --metrics ADDR` does, and writes the address it bound to
//! `<data-dir>/metrics-address`.

use std::sync::Arc;

use anyhow::{Context, Result};
use ctxbox_host::runtime::Runtime;
use ctxbox_host::runtime::config::Config;
use ctxbox_host::sandbox::SandboxConfig;
use ctxbox_host::serve::{Service, exposition, serve};
use ctxbox_host::store::StoreConfig;

fn main() -> Result<()> {
    let mut args = std::env::args().skip(1);
    let (Some(url), Some(data_dir), Some(lease_ms)) = (args.next(), args.next(), args.next())
    else {
        anyhow::bail!("usage: serve-host <postgres-url | -> <data-dir> <lease-ms> [engine]");
    };
    let lease_ms: u64 = lease_ms.parse().context("lease-ms")?;
    // `legacy` by default: the multi-host test is about the store, not an engine.
    let engine = args.next().unwrap_or_else(|| "legacy".to_owned());
    let store = StoreConfig {
        lease_ms,
        lease_wait_ms: lease_ms * 10,
        ..StoreConfig::default()
    };
    let config = Config {
        data_dir: Some(data_dir.clone().into()),
        store: if url == "-" {
            store
        } else {
            store.with_url(url)
        },
        sandbox: SandboxConfig {
            max_instances: 16,
            ..SandboxConfig::default()
        },
        ..Config::default()
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let host = Runtime::new(config).context("cannot set up the host")?;
        let service =
            Arc::new(Service::new(host, Some(engine)).context("cannot start the server")?);
        if let Ok(address) = std::env::var("CTXBOX_SERVE_HOST_METRICS") {
            let listener = exposition::bind(address.parse()?, false).await?;
            let bound = listener.local_addr()?;
            exposition::spawn_endpoint(listener, service.clone());
            std::fs::write(
                std::path::Path::new(&data_dir).join("metrics-address"),
                bound.to_string(),
            )?;
        }
        serve(
            service,
            tokio::io::BufReader::new(tokio::io::stdin()),
            tokio::io::stdout(),
        )
        .await
        .context("the request channel failed")
    })
}
