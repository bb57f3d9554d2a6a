//! Instruction counts from valgrind's callgrind, for `ctxbox bench
//! --count-instructions`: a count does not drift with the machine's load the
//! way a time does, so a change can be judged on a noisy machine.
//!
//! The bench runs itself again under `valgrind --tool=callgrind
//! --collect-atstart=no`. Each measured run turns collection on around
//! itself, and each row ends with a dump whose total the bench reads back.
//! Collection is per thread in callgrind, so a count is what the bench's own
//! thread executed: the engine call, its host imports and the guest's code,
//! which all run there; idle runtime threads are left out.
//!
//! The client requests are valgrind's documented "magic" instruction
//! sequence, written here for x86-64 instead of through a crate that needs
//! valgrind's C headers, a C compiler and libclang to build. Outside valgrind
//! the sequence changes nothing and answers 0.

use std::ffi::CString;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

use anyhow::Context;

/// Where the child run finds the directory its dumps go to.
const OUT_DIR_ENV: &str = "CTXBOX_BENCH_CALLGRIND_DIR";
/// The dump file name callgrind is given; dumps are `callgrind.out.<n>`.
const OUT_FILE: &str = "callgrind.out";

const RUNNING_ON_VALGRIND: usize = 0x1001;
/// `VG_USERREQ_TOOL_BASE('C', 'T')`, callgrind's requests.
const CALLGRIND_REQUESTS: usize = ((b'C' as usize) << 24) | ((b'T' as usize) << 16);
const TOGGLE_COLLECT: usize = CALLGRIND_REQUESTS + 2;
const DUMP_STATS_AT: usize = CALLGRIND_REQUESTS + 3;

/// Sends one client request with one argument; valgrind's answer, or 0
/// when not running under valgrind.
#[cfg(target_arch = "x86_64")]
fn client_request(request: usize, argument: usize) -> usize {
    let arguments: [usize; 6] = [request, argument, 0, 0, 0, 0];
    let mut answer: usize = 0;
    // SAFETY: the four rotations turn `rdi` by 128 bits in all, back to its
    // value, and `xchg rbx, rbx` swaps a register with itself: natively the
    // sequence has no effect but on the flags, which are not preserved here.
    // Under valgrind it reads the six words `rax` points to (alive on this
    // stack frame) and, for a dump, the C string they name, and writes its
    // answer to `rdx`.
    unsafe {
        std::arch::asm!(
            "rol rdi, 3",
            "rol rdi, 13",
            "rol rdi, 61",
            "rol rdi, 51",
            "xchg rbx, rbx",
            in("rax") arguments.as_ptr(),
            inout("rdx") answer,
            inout("rdi") 0usize => _,
            options(nostack),
        );
    }
    answer
}

#[cfg(not(target_arch = "x86_64"))]
fn client_request(_request: usize, _argument: usize) -> usize {
    0
}

/// Whether this process runs under valgrind.
fn running_on_valgrind() -> bool {
    client_request(RUNNING_ON_VALGRIND, 0) != 0
}

/// Turns collection on or off for this thread.
pub fn toggle_collect() {
    client_request(TOGGLE_COLLECT, 0);
}

/// How `--count-instructions` goes on in this process.
pub enum Mode {
    /// Not under valgrind yet: run again under it ([`rerun`]).
    Rerun,
    /// Under callgrind, dumping into this directory.
    Counting(Dumps),
}

/// Decides whether this process counts or must first run itself again
/// under callgrind.
pub fn mode() -> anyhow::Result<Mode> {
    match std::env::var_os(OUT_DIR_ENV) {
        Some(dir) if running_on_valgrind() => Ok(Mode::Counting(Dumps {
            dir: PathBuf::from(dir),
            taken: 0,
        })),
        Some(_) => {
            anyhow::bail!("{OUT_DIR_ENV} is set but this process is not running under valgrind")
        }
        None => {
            anyhow::ensure!(
                cfg!(target_arch = "x86_64"),
                "--count-instructions needs an x86-64 build (callgrind's client requests are written for it)"
            );
            Ok(Mode::Rerun)
        }
    }
}

/// Runs this bench again under callgrind, dumps kept in `dir`, and answers
/// with its exit status. Valgrind's own messages go to `dir/valgrind.log`.
pub fn rerun(dir: &Path) -> anyhow::Result<ExitCode> {
    let exe = std::env::current_exe().context("cannot find this program to run it again")?;
    let status = Command::new("valgrind")
        .arg("--tool=callgrind")
        .arg("--collect-atstart=no")
        .arg(format!(
            "--callgrind-out-file={}",
            dir.join(OUT_FILE).display()
        ))
        .arg(format!("--log-file={}", dir.join("valgrind.log").display()))
        .arg(exe)
        .args(std::env::args_os().skip(1))
        .env(OUT_DIR_ENV, dir)
        .status()
        .map_err(|error| {
            anyhow::anyhow!(
                "--count-instructions runs the bench under valgrind's callgrind, and `valgrind` could not be started ({error}); install it (Debian: `apt install valgrind`)"
            )
        })?;
    if status.success() {
        eprintln!(
            "callgrind profiles of each row: {} (read one with `callgrind_annotate`)",
            dir.display()
        );
        Ok(ExitCode::SUCCESS)
    } else {
        anyhow::bail!(
            "the bench under callgrind failed ({status}); valgrind's log: {}",
            dir.join("valgrind.log").display()
        )
    }
}

/// The dumps of the counting run, one per measured row.
pub struct Dumps {
    dir: PathBuf,
    taken: usize,
}

impl Dumps {
    /// Dumps what was collected since the last dump, labelled `label`, and
    /// answers with its instruction total.
    pub fn take(&mut self, label: &str) -> anyhow::Result<u64> {
        let label = CString::new(label.replace('\0', " "))?;
        client_request(DUMP_STATS_AT, label.as_ptr() as usize);
        self.taken += 1;
        let path = self.dir.join(format!("{OUT_FILE}.{}", self.taken));
        let profile = std::fs::read_to_string(&path)
            .with_context(|| format!("callgrind wrote no dump at {}", path.display()))?;
        instruction_total(&profile)
            .with_context(|| format!("no instruction total in {}", path.display()))
    }
}

/// The `summary:` (or `totals:`) figure of a callgrind profile.
fn instruction_total(profile: &str) -> Option<u64> {
    profile.lines().find_map(|line| {
        let figure = line
            .strip_prefix("summary:")
            .or_else(|| line.strip_prefix("totals:"))?;
        figure.split_whitespace().next()?.parse().ok()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outside_valgrind_the_requests_change_nothing() {
        assert!(!running_on_valgrind());
        toggle_collect();
        assert_eq!(client_request(DUMP_STATS_AT, 0), 0);
    }

    #[test]
    fn reads_the_total_of_a_profile() {
        let profile = "version: 1\ncreator: callgrind-3.19.0\ndesc: Trigger: Client Request: x\nevents: Ir\nsummary: 123456\n\nfn=(1) main\n";
        assert_eq!(instruction_total(profile), Some(123_456));
        assert_eq!(instruction_total("events: Ir\ntotals: 42 7\n"), Some(42));
        assert_eq!(instruction_total("events: Ir\n"), None);
    }
}
