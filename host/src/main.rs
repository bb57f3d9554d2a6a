//! `ctxbox`: run, inspect and check context engines from the command line.

mod cli;

fn main() -> std::process::ExitCode {
    cli::main()
}
