//! `ctxbox serve`: the sidecar an agent runtime talks to over stdio.

use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context;
use ctxbox_host::serve::exposition;
use ctxbox_host::serve::snapshots::{SNAPSHOT_INTERVAL, SnapshotWriter};
use ctxbox_host::serve::{Service, serve};

use super::settings::HostArgs;

/// Arguments of `ctxbox serve`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The engine of requests that name none: a registered id (e.g.
    /// `keep-recent`) or a `.wasm` file.
    #[arg(long)]
    engine: Option<String>,
    /// Serve Prometheus metrics at http://ADDR/metrics (e.g.
    /// 127.0.0.1:9464; a loopback address unless --metrics-allow-remote).
    #[arg(long, value_name = "ADDR")]
    metrics: Option<SocketAddr>,
    /// Allow --metrics on an address other than loopback.
    #[arg(long, requires = "metrics")]
    metrics_allow_remote: bool,
    #[command(flatten)]
    host: HostArgs,
}

/// Serves requests on stdin, answers on stdout (logs go to stderr), until
/// stdin closes. The process's figures go to the data directory every few
/// seconds for `ctxbox health`, and to `--metrics` when given.
pub async fn run(args: Args) -> anyhow::Result<ExitCode> {
    let runtime = args.host.runtime()?;
    let listener = match args.metrics {
        Some(address) => Some(exposition::bind(address, args.metrics_allow_remote).await?),
        None => None,
    };
    let service = Arc::new(Service::new(runtime, args.engine).context("cannot start the server")?);
    let endpoint = match listener {
        Some(listener) => {
            if let Ok(address) = listener.local_addr() {
                eprintln!("metrics at http://{address}/metrics");
            }
            Some(exposition::spawn_endpoint(listener, service.clone()))
        }
        None => None,
    };
    let snapshots = SnapshotWriter::start(service.clone(), SNAPSHOT_INTERVAL);
    service.warm_up();
    let served = serve(
        service,
        tokio::io::BufReader::new(tokio::io::stdin()),
        tokio::io::stdout(),
    )
    .await;
    snapshots.stop().await;
    if let Some(endpoint) = endpoint {
        endpoint.abort();
    }
    served.context("the request channel failed")?;
    Ok(ExitCode::SUCCESS)
}
