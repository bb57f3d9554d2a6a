//! `ctxbox new`: a new engine crate, ready to build, check and run.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use ctxbox_host::scaffold;

/// Arguments of `ctxbox new`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Directory to create; its name becomes the crate and engine name.
    dir: PathBuf,
    /// The `guest-sdk` folder of a ctxbox checkout (default: found by walking
    /// up from the current directory).
    #[arg(long, value_name = "DIR")]
    sdk: Option<PathBuf>,
}

/// Runs `ctxbox new`.
pub async fn run(args: Args) -> anyhow::Result<ExitCode> {
    let name = args
        .dir
        .file_name()
        .map(|name| name.to_string_lossy().into_owned())
        .filter(|name| {
            !name.is_empty()
                && name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        })
        .with_context(|| {
            format!(
                "`{}` does not end in a crate name (letters, digits, - and _)",
                args.dir.display()
            )
        })?;
    let sdk = match args.sdk {
        Some(sdk) => sdk,
        None => find_sdk(&std::env::current_dir()?)
            .context("cannot find ctxbox's guest-sdk above the current directory; pass --sdk PATH/TO/guest-sdk")?,
    };
    scaffold::new_engine(&args.dir, &name, &sdk)?;
    let wasm = format!(
        "target/wasm32-wasip2/release/{}.wasm",
        name.replace('-', "_")
    );
    println!("created engine `{name}` in {}", args.dir.display());
    println!();
    println!("  cd {}", args.dir.display());
    println!("  cargo build --release --target wasm32-wasip2");
    println!("  ctxbox check {wasm}");
    println!("  ctxbox run --engine {wasm}");
    Ok(ExitCode::SUCCESS)
}

/// `guest-sdk` of the ctxbox checkout containing `dir`, if any.
fn find_sdk(dir: &Path) -> Option<PathBuf> {
    dir.ancestors()
        .map(|ancestor| ancestor.join("guest-sdk"))
        .find(|candidate| candidate.join("Cargo.toml").exists())
}
