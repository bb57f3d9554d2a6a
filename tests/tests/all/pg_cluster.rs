//! A throw-away PostgreSQL server for the store tests: `initdb` into a
//! temporary directory, listening on 127.0.0.1 only (on a free port, its
//! socket in that directory), one per test process, stopped by a watchdog
//! when the process ends however it ends. As root the server runs as the
//! `postgres` user (`initdb` refuses root).
//!
//! The cluster sorts bytewise (`C`) but classifies characters by
//! `C.UTF-8`, as a production database with a UTF-8 locale does (`pg_trgm`
//! and `ILIKE` see non-ASCII letters only then); [`database_in_ctype`] gives
//! a database of another `LC_CTYPE`.
//!
//! Without the server package (no `/usr/lib/postgresql/*/bin/initdb`) the
//! tests print a skip line — or fail, when `CTXBOX_REQUIRE_POSTGRES=1` (CI).

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;

/// The running cluster: its binaries and the base URL (no database).
struct Cluster {
    bin: PathBuf,
    port: u16,
    run_as: Option<&'static str>,
}

static CLUSTER: OnceLock<Result<Cluster, String>> = OnceLock::new();

/// A fresh, empty database on the test cluster, as a connection URL; `None`
/// (after printing why) when PostgreSQL is not installed and not required.
pub fn database(test: &str) -> Option<String> {
    create(test, "")
}

/// [`database`] with `LC_CTYPE` `ctype` (`C`: only ASCII letters fold).
pub fn database_in_ctype(test: &str, ctype: &str) -> Option<String> {
    create(test, &format!(" TEMPLATE template0 LC_CTYPE '{ctype}'"))
}

fn create(test: &str, options: &str) -> Option<String> {
    let cluster = match CLUSTER.get_or_init(start) {
        Ok(cluster) => cluster,
        Err(why) => {
            if std::env::var("CTXBOX_REQUIRE_POSTGRES").as_deref() == Ok("1") {
                panic!(
                    "CTXBOX_REQUIRE_POSTGRES=1 but the PostgreSQL test server is unavailable: {why}"
                );
            }
            eprintln!(
                "SKIP {test}: no PostgreSQL test server ({why}); install postgresql (.ci/postgres.sh) to run it"
            );
            return None;
        }
    };
    let name = format!(
        "t_{}_{}",
        test.chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
            .take(40)
            .collect::<String>(),
        fastrand::u32(..)
    );
    let status = cluster
        .command("psql")
        .args([
            "-h",
            "127.0.0.1",
            "-p",
            &cluster.port.to_string(),
            "-U",
            "ctxbox",
            "-d",
            "postgres",
            "-q",
            "-c",
        ])
        .arg(format!("CREATE DATABASE {name}{options}"))
        .status()
        .expect("psql runs");
    assert!(status.success(), "cannot create the test database {name}");
    Some(cluster.url(&name))
}

/// Runs `sql` with `psql` in the database at `url` (one made by
/// [`database`]); panics if it fails.
pub fn psql(url: &str, sql: &str) {
    let cluster = CLUSTER
        .get()
        .and_then(|cluster| cluster.as_ref().ok())
        .expect("a database was made on the test cluster");
    let database = url.rsplit('/').next().expect("a database in the URL");
    let status = cluster
        .command("psql")
        .args([
            "-h",
            "127.0.0.1",
            "-p",
            &cluster.port.to_string(),
            "-U",
            "ctxbox",
        ])
        .args(["-d", database, "-q", "-v", "ON_ERROR_STOP=1", "-c", sql])
        .status()
        .expect("psql runs");
    assert!(status.success(), "psql failed: {sql}");
}

impl Cluster {
    fn url(&self, database: &str) -> String {
        format!("postgres://ctxbox@127.0.0.1:{}/{database}", self.port)
    }

    /// A command of the server's binaries, as the user the server runs as.
    fn command(&self, tool: &str) -> Command {
        let program = self.bin.join(tool);
        match self.run_as {
            Some(user) => {
                let mut command = Command::new("runuser");
                command.args(["-u", user, "--"]).arg(program);
                command
            }
            None => Command::new(program),
        }
    }
}

/// The newest installed server's binary directory.
fn server_bin() -> Result<PathBuf, String> {
    let mut found: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .map_err(|error| format!("/usr/lib/postgresql: {error}"))?
        .flatten()
        .filter_map(|entry| {
            let version = entry.file_name().to_string_lossy().parse::<u32>().ok()?;
            let bin = entry.path().join("bin");
            bin.join("initdb").exists().then_some((version, bin))
        })
        .collect();
    found.sort();
    found
        .pop()
        .map(|(_, bin)| bin)
        .ok_or_else(|| "no /usr/lib/postgresql/*/bin/initdb".to_owned())
}

fn start() -> Result<Cluster, String> {
    let bin = server_bin()?;
    let root = is_root();
    let run_as = root.then_some("postgres");
    let dir = tempfile::Builder::new()
        .prefix("ctxbox-pg-")
        .tempdir()
        .map_err(|error| error.to_string())?
        .keep();
    if root {
        chown_to_postgres(&dir)?;
    }
    let data = dir.join("data");
    let port = TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .map_err(|error| error.to_string())?
        .port();
    let cluster = Cluster { bin, port, run_as };
    let run = |mut command: Command, what: &str| -> Result<(), String> {
        let output = command
            .output()
            .map_err(|error| format!("{what}: {error}"))?;
        if output.status.success() {
            Ok(())
        } else {
            Err(format!(
                "{what} failed: {}{}",
                String::from_utf8_lossy(&output.stdout),
                String::from_utf8_lossy(&output.stderr)
            ))
        }
    };
    let mut initdb = cluster.command("initdb");
    initdb.arg("-D").arg(&data).args([
        "-U",
        "ctxbox",
        "--auth=trust",
        "-E",
        "UTF8",
        "--no-sync",
        "--locale=C",
        "--lc-ctype=C.UTF-8",
    ]);
    run(initdb, "initdb")?;
    let mut pg_ctl = cluster.command("pg_ctl");
    pg_ctl
        .arg("-D")
        .arg(&data)
        .arg("-l")
        .arg(dir.join("server.log"))
        .args(["-w", "-t", "60", "-o"])
        .arg(format!(
            "-c listen_addresses=127.0.0.1 -p {port} -k {} -c max_connections=200",
            dir.display()
        ))
        .arg("start")
        .stdout(Stdio::null());
    run(pg_ctl, "pg_ctl start")?;
    watch(&cluster, &data, &dir);
    Ok(cluster)
}

/// Stops the server and removes its directory once this process is gone:
/// a shell reads its stdin, a pipe whose other end only this process holds,
/// so the read ends when the process does, however it ends.
fn watch(cluster: &Cluster, data: &Path, dir: &Path) {
    let stop = cluster.command("pg_ctl");
    let prefix: Vec<String> = std::iter::once(stop.get_program().to_string_lossy().into_owned())
        .chain(
            stop.get_args()
                .map(|arg| arg.to_string_lossy().into_owned()),
        )
        .collect();
    let script = format!(
        "read -r _; {stop} -D '{data}' -m immediate stop >/dev/null 2>&1; rm -rf '{dir}'",
        stop = prefix.join(" "),
        data = data.display(),
        dir = dir.display(),
    );
    if let Ok(mut watchdog) = Command::new("sh")
        .args(["-c", &script])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
    {
        // Held open until the process exits (the kernel closes it then).
        std::mem::forget(watchdog.stdin.take());
    }
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|output| String::from_utf8_lossy(&output.stdout).trim() == "0")
}

fn chown_to_postgres(dir: &Path) -> Result<(), String> {
    let status = Command::new("chown")
        .args(["postgres:postgres"])
        .arg(dir)
        .status()
        .map_err(|error| format!("chown: {error}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!(
            "cannot give {} to the postgres user",
            dir.display()
        ))
    }
}
