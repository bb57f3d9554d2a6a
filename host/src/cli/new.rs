//! `ctxbox new`: a new engine, ready to build, check and run: a Rust crate
//! (default) or a TypeScript project (`--lang ts`), on the SDK bundled in
//! this binary unless `--sdk` names a checkout's.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use ctxbox_host::scaffold::{self, Language, SdkSource};

/// The languages `--lang` accepts.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
enum Lang {
    /// A Rust crate on `ctxbox-guest`.
    Rust,
    /// A TypeScript project on `@ctxbox/guest`.
    Ts,
}

/// Arguments of `ctxbox new`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Directory to create; its name becomes the crate or package and engine name.
    dir: PathBuf,
    /// The engine's language.
    #[arg(long, value_enum, default_value = "rust")]
    lang: Lang,
    /// Use the SDK of a ctxbox checkout (its `guest-sdk` or `guest-sdk-ts`
    /// folder) instead of the copy bundled in this binary.
    #[arg(long, value_name = "DIR")]
    sdk: Option<PathBuf>,
}

/// Runs `ctxbox new`.
pub async fn run(args: Args) -> anyhow::Result<ExitCode> {
    let name = args
        .dir
        .file_name()
        .map(|name| name.to_string_lossy().into_owned())
        .with_context(|| format!("`{}` does not end in a name", args.dir.display()))?;
    let sdk = args.sdk.map_or(SdkSource::Bundled, SdkSource::Checkout);
    let language = match args.lang {
        Lang::Rust => Language::Rust,
        Lang::Ts => Language::TypeScript,
    };
    scaffold::new_engine(&args.dir, &name, language, &sdk)?;
    println!("created engine `{name}` in {}", args.dir.display());
    println!();
    println!("  cd {}", args.dir.display());
    let wasm = match language {
        Language::Rust => {
            println!("  cargo build --release --target wasm32-wasip2");
            format!(
                "target/wasm32-wasip2/release/{}.wasm",
                name.replace('-', "_")
            )
        }
        Language::TypeScript => {
            println!("  npm install && npm run build");
            scaffold::ts_component_path(&name)
        }
    };
    println!("  ctxbox check {wasm}");
    println!("  ctxbox run --engine {wasm}");
    Ok(ExitCode::SUCCESS)
}
