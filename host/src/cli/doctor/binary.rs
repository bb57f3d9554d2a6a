//! The `ctxbox` binaries: this one, and the one a plugin's configuration
//! names (`ctxboxBin`, `ctxbox_bin`), found and asked for its version.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use ctxbox_host::contract::text::untrusted_line;

use super::report::Finding;

/// How long a configured binary may take to print its version.
const VERSION_TIMEOUT: Duration = Duration::from_secs(10);

/// This binary: its version and where it is.
pub fn this_binary() -> Finding {
    let path = std::env::current_exe()
        .map(|path| path.display().to_string())
        .unwrap_or_else(|_| "(path unknown)".to_owned());
    Finding::ok(
        "binary",
        "ctxbox",
        format!("ctxbox {} at {path}", env!("CARGO_PKG_VERSION")),
    )
}

/// The binary a plugin setting names (`value`: a path, or a name looked up
/// on `PATH`), run with `--version`.
pub fn configured(area: &'static str, setting: &str, value: &str) -> Finding {
    let Some(path) = resolve(value) else {
        return Finding::problem(
            area,
            setting,
            format!(
                "`{}` is not an executable file, nor on PATH",
                untrusted_line(value, 200)
            ),
            format!(
                "install ctxbox (README.md, \"Installing\") or set {setting} to the binary's path (`command -v ctxbox` prints it)"
            ),
        );
    };
    match version_of(&path) {
        Ok(version) if version == env!("CARGO_PKG_VERSION") => Finding::ok(
            area,
            setting,
            format!("{} is ctxbox {version}", path.display()),
        ),
        Ok(version) => Finding::note(
            area,
            setting,
            format!(
                "{} is ctxbox {}, this doctor is {}: the plugin runs the other one",
                path.display(),
                untrusted_line(&version, 40),
                env!("CARGO_PKG_VERSION")
            ),
            &format!(
                "run that binary's own `{} doctor` to check what the plugin runs",
                path.display()
            ),
        ),
        Err(why) => Finding::problem(
            area,
            setting,
            format!("{} does not answer `--version`: {why}", path.display()),
            format!("point {setting} at a ctxbox binary (or reinstall it)"),
        ),
    }
}

/// `value` as an executable file: a path as it is (with `~` expanded), a
/// bare name looked up on `PATH`.
pub fn resolve(value: &str) -> Option<PathBuf> {
    if value.contains('/') || value.starts_with('~') {
        let path = expand_home(value);
        return is_executable(&path).then_some(path);
    }
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|dir| dir.join(value))
        .find(|path| is_executable(path))
}

/// `value` with a leading `~` replaced by the home directory.
pub fn expand_home(value: &str) -> PathBuf {
    match (value.strip_prefix('~'), std::env::var_os("HOME")) {
        (Some(rest), Some(home)) => PathBuf::from(home).join(rest.trim_start_matches('/')),
        _ => PathBuf::from(value),
    }
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    path.metadata()
        .is_ok_and(|meta| meta.is_file() && meta.permissions().mode() & 0o111 != 0)
}

/// The version `path --version` prints (`ctxbox 0.1.0` → `0.1.0`), waited
/// for at most [`VERSION_TIMEOUT`].
fn version_of(path: &Path) -> Result<String, String> {
    let mut child = Command::new(path)
        .arg("--version")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|error| error.to_string())?;
    let started = Instant::now();
    loop {
        match child.try_wait().map_err(|error| error.to_string())? {
            Some(_) => break,
            None if started.elapsed() > VERSION_TIMEOUT => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!("no answer in {} s", VERSION_TIMEOUT.as_secs()));
            }
            None => std::thread::sleep(Duration::from_millis(20)),
        }
    }
    let output = child
        .wait_with_output()
        .map_err(|error| error.to_string())?;
    let text = String::from_utf8_lossy(&output.stdout);
    text.trim()
        .strip_prefix("ctxbox ")
        .map(str::to_owned)
        .ok_or_else(|| {
            format!(
                "it printed `{}`, not `ctxbox <version>`",
                untrusted_line(text.trim(), 80)
            )
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_binary_is_a_problem_naming_the_setting() {
        let finding = configured("openclaw", "ctxboxBin", "/nonexistent/ctxbox");
        assert_eq!(finding.status, super::super::report::Status::Problem);
        assert!(
            finding.detail.contains("/nonexistent/ctxbox"),
            "{}",
            finding.detail
        );
        assert!(finding.fix.as_deref().unwrap_or("").contains("ctxboxBin"));
    }

    #[test]
    fn a_binary_that_is_not_ctxbox_is_a_problem() {
        let dir = tempfile::tempdir().expect("tempdir");
        let fake = dir.path().join("fake");
        std::fs::write(&fake, "#!/bin/sh\necho 'something else 1.0'\n").expect("write");
        std::fs::set_permissions(&fake, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .expect("chmod");
        let finding = configured("hermes", "ctxbox.ctxbox_bin", fake.to_str().expect("utf-8"));
        assert_eq!(finding.status, super::super::report::Status::Problem);
        assert!(
            finding.detail.contains("something else"),
            "{}",
            finding.detail
        );
    }

    #[test]
    fn another_version_is_a_note_and_the_same_is_ok() {
        let dir = tempfile::tempdir().expect("tempdir");
        let other = dir.path().join("other");
        std::fs::write(&other, "#!/bin/sh\necho 'ctxbox 0.0.1'\n").expect("write");
        let same = dir.path().join("same");
        std::fs::write(
            &same,
            format!("#!/bin/sh\necho 'ctxbox {}'\n", env!("CARGO_PKG_VERSION")),
        )
        .expect("write");
        for path in [&other, &same] {
            std::fs::set_permissions(path, std::os::unix::fs::PermissionsExt::from_mode(0o755))
                .expect("chmod");
        }
        let finding = configured("openclaw", "ctxboxBin", other.to_str().expect("utf-8"));
        assert_eq!(finding.status, super::super::report::Status::Note);
        assert!(finding.detail.contains("0.0.1"), "{}", finding.detail);
        let finding = configured("openclaw", "ctxboxBin", same.to_str().expect("utf-8"));
        assert_eq!(
            finding.status,
            super::super::report::Status::Ok,
            "{}",
            finding.detail
        );
    }
}
