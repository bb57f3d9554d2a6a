"""The `ctxbox` binary the plugin runs: where it is found, whether its
version is one this plugin speaks, and what `ctxbox doctor` says about the
installation. Problems go to the console once (`console.say_once`)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import threading
from typing import Callable, Optional

MIN_CTXBOX = (0, 1, 0)
"""The oldest ctxbox this plugin works with (its `serve` protocol 1 and 2)."""

BELOW_CTXBOX = (0, 2, 0)
"""The first ctxbox version this plugin does not know (0.x: each minor
version may change what the sidecar says)."""

_VERSION_TIMEOUT_S = 10.0
_DOCTOR_TIMEOUT_S = 120.0

INSTALL_HINT = ("install it into Hermes's venv (`pip install 'ctxbox-hermes[binary]'`, or the "
                "ctxbox_bin wheel packaging/build.sh makes) or set ctxbox.ctxbox_bin to its path")


def find_binary(setting: Optional[str]) -> str:
    """The binary to run: the `ctxbox_bin` setting when given, else the one
    the `ctxbox-bin` wheel put beside this Python (the venv's `bin/`, on
    PATH or not), else `ctxbox` on PATH."""
    if setting:
        return setting
    for scripts in {sysconfig.get_path("scripts"), os.path.dirname(sys.executable)}:
        candidate = os.path.join(scripts, "ctxbox")
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    return shutil.which("ctxbox") or "ctxbox"


def parse_version(text: str) -> Optional[tuple[int, ...]]:
    """`0.1.0` (or `ctxbox 0.1.0`, `0.1.0-rc.1`) as a tuple; None if it is not one."""
    word = text.strip().split()[-1] if text.strip() else ""
    core = word.split("-")[0].split("+")[0]
    parts = core.split(".")
    if len(parts) != 3 or not all(part.isdigit() for part in parts):
        return None
    return tuple(int(part) for part in parts)


def version_problem(binary: str, version: str) -> Optional[str]:
    """Why ctxbox `version` (what `binary` reported) does not suit this
    plugin, or None when it does."""
    wanted = f">= {_dotted(MIN_CTXBOX)}, < {_dotted(BELOW_CTXBOX)}"
    parsed = parse_version(version)
    if parsed is None:
        return f"{binary} reports version {version!r}, not a ctxbox version; this plugin needs ctxbox {wanted}"
    if parsed < MIN_CTXBOX:
        return (f"{binary} is ctxbox {version}, too old for this plugin (it needs ctxbox {wanted}): "
                f"upgrade the binary ({INSTALL_HINT})")
    if parsed >= BELOW_CTXBOX:
        return (f"{binary} is ctxbox {version}, newer than this plugin knows (it needs ctxbox {wanted}): "
                f"upgrade the plugin (`pip install -U ctxbox-hermes`) or install ctxbox {MIN_CTXBOX[0]}.{MIN_CTXBOX[1]}.x")
    return None


def hello_problems(binary: str, answer: dict) -> list[str]:
    """What a sidecar's `hello` answer says is wrong for this plugin: a ctxbox
    version it does not support, an engine (`defaultEngine`, the plugin's
    `ctxbox.engine`) the sidecar does not have."""
    problems = []
    version = answer.get("version")
    if isinstance(version, str):
        problem = version_problem(binary, version)
        if problem:
            problems.append(problem)
    engine, engines = answer.get("defaultEngine"), answer.get("engines")
    if isinstance(engine, str) and isinstance(engines, list) and not engine.endswith(".wasm") and engine not in engines:
        known = ", ".join(str(name) for name in engines if name != "legacy")
        problems.append(f"no engine `{engine}` (ctxbox.engine): this ctxbox has {known}, or name a .wasm file; "
                        f"every turn goes on with Hermes's own compressor meanwhile")
    return problems


def binary_problem(binary: str, run: Callable = subprocess.run) -> Optional[str]:
    """Why `binary` cannot serve this plugin (missing, not ctxbox, the wrong
    version), or None."""
    path = binary if os.sep in binary else shutil.which(binary)
    if not path or not os.path.isfile(path):
        return (f"no ctxbox binary: `{binary}` is not "
                f"{'a file' if os.sep in binary else 'on PATH'}, so every turn goes on with Hermes's own "
                f"compressor; {INSTALL_HINT}")
    try:
        done = run([path, "--version"], capture_output=True, timeout=_VERSION_TIMEOUT_S, check=False)
    except (OSError, subprocess.SubprocessError) as error:
        return f"cannot run {path}: {error}; {INSTALL_HINT}"
    return version_problem(path, done.stdout.decode("utf-8", "replace").strip())


def doctor_argv(binary: str, engine: str, data_dir: str, config_file: Optional[str]) -> list[str]:
    """`ctxbox doctor` limited to the plugin's engine and data directory."""
    argv = [binary, "doctor", "--json", "--engine", engine, "--data-dir", data_dir]
    if config_file:
        argv += ["--config", config_file]
    return argv


def doctor_problems(output: str) -> list[str]:
    """The problems in `ctxbox doctor --json`'s `output` that concern this
    plugin (not OpenClaw's), each with its fix."""
    try:
        report = json.loads(output)
    except ValueError:
        return []
    problems = []
    for finding in report.get("findings", []) if isinstance(report, dict) else []:
        if not isinstance(finding, dict) or finding.get("status") != "problem" or finding.get("area") == "openclaw":
            continue
        text = f"{finding.get('subject', '')}: {finding.get('detail', '')}"
        if finding.get("fix"):
            text += f" (fix: {finding['fix']})"
        problems.append(text)
    return problems


def check_in_background(argv: list[str], say: Callable[[str], object]) -> threading.Thread:
    """Runs `ctxbox doctor` (`argv`) in a daemon thread and says each
    problem it reports."""

    def run() -> None:
        try:
            done = subprocess.run(argv, capture_output=True, timeout=_DOCTOR_TIMEOUT_S, check=False)
        except (OSError, subprocess.SubprocessError):
            return
        for problem in doctor_problems(done.stdout.decode("utf-8", "replace")):
            say(f"ctxbox doctor: {problem}")

    thread = threading.Thread(target=run, daemon=True, name="ctxbox-doctor")
    thread.start()
    return thread


def _dotted(version: tuple[int, ...]) -> str:
    return ".".join(str(part) for part in version)
