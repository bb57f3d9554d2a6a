//! `ctxbox doctor`: checks an installation the way `brew doctor` does and
//! prints each problem with its fix — the binary and its version
//! ([`install`]), the data directory and its databases ([`install`]), each
//! configured engine ([`engines`]), and, where found, the OpenClaw
//! ([`openclaw`]) and Hermes ([`hermes`]) configuration of the plugins.
//! Exits 0 only when nothing is a problem.

mod binary;
mod engines;
mod hermes;
mod install;
mod openclaw;
mod report;
mod runtime_config;

use std::path::PathBuf;
use std::process::ExitCode;

use ctxbox_host::contract::text::untrusted_line;

use self::report::{Finding, Report};
use super::settings::HostArgs;

/// Arguments of `ctxbox doctor`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Print JSON (`{"ok", "version", "findings": [...]}`) instead of text.
    #[arg(long)]
    json: bool,
    /// Check only this engine (repeatable; default: every registered
    /// engine and those the plugins' configurations name).
    #[arg(long = "engine", value_name = "ID|FILE")]
    engines: Vec<String>,
    /// OpenClaw's configuration (default: `$OPENCLAW_CONFIG_PATH`, else
    /// `$OPENCLAW_STATE_DIR/openclaw.json`, else `~/.openclaw/openclaw.json`).
    #[arg(long, value_name = "FILE")]
    openclaw_config: Option<PathBuf>,
    /// Hermes's configuration (default: `$HERMES_HOME/config.yaml`, else
    /// `~/.hermes/config.yaml`).
    #[arg(long, value_name = "FILE")]
    hermes_config: Option<PathBuf>,
    #[command(flatten)]
    host: HostArgs,
}

/// Runs `ctxbox doctor`: exit 0 when all is well, 1 when anything is a problem.
pub async fn run(args: Args) -> anyhow::Result<ExitCode> {
    let report = examine(&args).await;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print_text(&report);
    }
    Ok(if report.ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// Every check, in the order they are printed.
async fn examine(args: &Args) -> Report {
    let mut findings = vec![binary::this_binary()];
    let openclaw = openclaw::Plugin::find(args.openclaw_config.clone());
    let hermes = hermes::Plugin::find(args.hermes_config.clone());
    let runtime = match args.host.config() {
        Ok(config) => {
            let data_dir = config.data_dir();
            findings.extend(install::data_dir(&data_dir));
            for (area, theirs) in [
                ("openclaw", openclaw.data_dir()),
                ("hermes", hermes.data_dir()),
            ] {
                if let Some(theirs) = theirs.filter(|theirs| *theirs != data_dir) {
                    findings.push(Finding::note(
                        area,
                        "data dir",
                        format!(
                            "the plugin keeps its data in {}, not in the directory checked here",
                            theirs.display()
                        ),
                        &format!(
                            "`ctxbox doctor --data-dir {}` checks that one",
                            theirs.display()
                        ),
                    ));
                }
            }
            match ctxbox_host::runtime::Runtime::new(config) {
                Ok(runtime) => Some(runtime),
                Err(error) => {
                    findings.push(Finding::problem(
                        "host",
                        "setup",
                        format!("cannot set up the host: {}", untrusted_line(&error.to_string(), 400)),
                        "fix what the message names (the configuration file, or the data directory's database it names: see the data-dir findings above)",
                    ));
                    None
                }
            }
        }
        Err(error) => {
            findings.push(Finding::problem(
                "host",
                "config",
                untrusted_line(&format!("{error:#}"), 400),
                "fix the key the message names in the configuration file, or pass another with --config",
            ));
            None
        }
    };
    let known: Vec<String> = runtime
        .as_ref()
        .map(|runtime| {
            runtime
                .engines()
                .registry()
                .ids()
                .into_iter()
                .map(|(id, _)| id)
                .collect()
        })
        .unwrap_or_default();
    findings.extend(openclaw.check(&known));
    findings.extend(hermes.check(&known));
    if let Some(runtime) = &runtime {
        let mut named = args.engines.clone();
        if named.is_empty() {
            named.extend(openclaw.engine().map(str::to_owned));
            named.extend(hermes.engine().map(str::to_owned));
        }
        findings.extend(engines::check(runtime, &named, args.engines.is_empty()).await);
    }
    Report::new(findings)
}

/// The report as text: one line per finding, its fix under a problem.
fn print_text(report: &Report) {
    println!("ctxbox doctor");
    for finding in &report.findings {
        println!(
            "{:<8} {:<9} {:<14} {}",
            finding.status.label(),
            finding.area,
            finding.subject,
            finding.detail
        );
        if let Some(fix) = &finding.fix {
            println!("{:<33} fix: {fix}", "");
        }
    }
    let problems = report.problems();
    if problems == 0 {
        println!("all is well");
    } else {
        println!(
            "{problems} problem{} found",
            if problems == 1 { "" } else { "s" }
        );
    }
}

#[cfg(test)]
mod tests {
    use super::report::Status;
    use super::*;

    fn args(dir: &std::path::Path, engines: &[&str]) -> Args {
        Args {
            json: true,
            engines: engines.iter().map(|engine| engine.to_string()).collect(),
            openclaw_config: Some(dir.join("openclaw.json")),
            hermes_config: Some(dir.join("config.yaml")),
            host: HostArgs {
                config: Some(dir.join("ctxbox.toml")),
                data_dir: Some(dir.join("data")),
                store: None,
            },
        }
    }

    fn examined(args: &Args) -> Report {
        tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
            .expect("runtime")
            .block_on(examine(args))
    }

    fn write(path: std::path::PathBuf, text: &str) {
        std::fs::write(path, text).expect("write");
    }

    #[test]
    fn a_sound_installation_is_all_well() {
        let dir = tempfile::tempdir().expect("tempdir");
        write(dir.path().join("ctxbox.toml"), "");
        write(
            dir.path().join("openclaw.json"),
            r#"{ plugins: { entries: { ctxbox: { enabled: true, config: { engine: "keep-recent" } } }, slots: { contextEngine: "ctxbox" } } }"#,
        );
        write(
            dir.path().join("config.yaml"),
            "context: {engine: ctxbox}\nplugins: {enabled: [ctxbox]}\nctxbox: {engine: keep-recent, window_tokens: 16000}\n",
        );
        let report = examined(&args(dir.path(), &["keep-recent"]));
        assert!(report.ok, "{:#?}", report.findings);
        let engine = report
            .findings
            .iter()
            .find(|f| f.area == "engine")
            .expect("the engine was checked");
        assert!(engine.detail.contains("ctxbox:engine@"), "{engine:?}");
    }

    #[test]
    fn a_broken_installation_names_each_problem_with_its_fix() {
        let dir = tempfile::tempdir().expect("tempdir");
        write(dir.path().join("ctxbox.toml"), "");
        // OpenClaw: the slot left to legacy and a misspelt engine.
        write(
            dir.path().join("openclaw.json"),
            r#"{ plugins: { entries: { ctxbox: { config: { engine: "keep-recnet" } } } } }"#,
        );
        // No Hermes configuration where one was named.
        // A damaged engine state file in the data directory.
        std::fs::create_dir_all(dir.path().join("data/state")).expect("state dir");
        write(
            dir.path().join("data/state/keep-recent-0.sqlite3"),
            "not a database but some text long enough to be read as one",
        );
        let report = examined(&args(dir.path(), &["keep-recnet"]));
        assert!(!report.ok);
        let problems: Vec<&Finding> = report
            .findings
            .iter()
            .filter(|f| f.status == Status::Problem)
            .collect();
        let about = |area: &str, subject: &str| {
            problems
                .iter()
                .find(|f| f.area == area && f.subject.ends_with(subject))
                .unwrap_or_else(|| panic!("no problem {area}/{subject}: {problems:#?}"))
        };
        assert!(
            about("openclaw", "selected")
                .fix
                .as_deref()
                .unwrap()
                .contains("contextEngine ctxbox")
        );
        assert!(
            about("openclaw", "config.engine")
                .detail
                .contains("keep-recnet")
        );
        assert!(about("engine", "keep-recnet").fix.is_some());
        assert!(
            about("hermes", "config.yaml")
                .detail
                .contains("no such file")
        );
        assert!(
            about("data-dir", "keep-recent-0.sqlite3")
                .fix
                .as_deref()
                .unwrap()
                .contains("move it aside")
        );
        assert!(
            problems.iter().all(|f| f.fix.is_some()),
            "every problem has its fix"
        );
        // And the JSON says the same.
        let json = serde_json::to_value(&report).expect("json");
        assert_eq!(json["ok"], false);
        assert!(json["findings"].as_array().expect("findings").len() >= problems.len());
    }
}
