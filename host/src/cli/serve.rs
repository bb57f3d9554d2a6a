//! `ctxbox serve`: the sidecar an agent runtime talks to over stdio.

use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context;
use ctxbox_host::serve::{Service, serve};

use super::settings::HostArgs;

/// Arguments of `ctxbox serve`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The engine of requests that name none: a registered id (e.g.
    /// `keep-recent`) or a `.wasm` file.
    #[arg(long)]
    engine: Option<String>,
    #[command(flatten)]
    host: HostArgs,
}

/// Serves requests on stdin, answers on stdout (logs go to stderr), until
/// stdin closes.
pub async fn run(args: Args) -> anyhow::Result<ExitCode> {
    let runtime = args.host.runtime()?;
    let service = Arc::new(Service::new(runtime, args.engine).context("cannot start the server")?);
    service.warm_up();
    serve(
        service,
        tokio::io::BufReader::new(tokio::io::stdin()),
        tokio::io::stdout(),
    )
    .await
    .context("the request channel failed")?;
    Ok(ExitCode::SUCCESS)
}
