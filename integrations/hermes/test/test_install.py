"""The binary the plugin runs (found, versioned, checked by `ctxbox doctor`)
and the console messages a newcomer sees once."""

from __future__ import annotations

import json
import os
import stat
import sys
import types

import pytest

import ctxbox_hermes
from ctxbox_hermes import console, install
from ctxbox_hermes.config import ConfigError


def script(tmp_path, name: str, body: str) -> str:
    path = tmp_path / name
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


@pytest.mark.parametrize("version, verdict", [
    ("0.1.0", None),
    ("ctxbox 0.1.7", None),
    ("0.0.9", "too old"),
    ("0.2.0", "newer than this plugin knows"),
    ("1.0.0", "newer than this plugin knows"),
    ("something else", "not a ctxbox version"),
])
def test_versions_outside_the_supported_range_are_named(version, verdict):
    problem = install.version_problem("/bin/ctxbox", version)
    if verdict is None:
        assert problem is None
    else:
        assert verdict in problem and ">= 0.1.0, < 0.2.0" in problem


def test_a_missing_binary_says_how_to_install(tmp_path):
    problem = install.binary_problem(str(tmp_path / "ctxbox"))
    assert "no ctxbox binary" in problem and "ctxbox_bin" in problem and "pip install" in problem
    assert "not on PATH" in install.binary_problem("ctxbox-surely-not-installed-anywhere")


def test_the_binarys_version_is_asked(tmp_path):
    old = script(tmp_path, "old", "echo 'ctxbox 0.0.1'\n")
    assert "too old" in install.binary_problem(old)
    good = script(tmp_path, "good", "echo 'ctxbox 0.1.0'\n")
    assert install.binary_problem(good) is None


def test_the_setting_wins_then_the_venvs_binary_then_path(tmp_path, monkeypatch):
    assert install.find_binary("/opt/ctxbox") == "/opt/ctxbox"
    scripts = tmp_path / "venv-bin"
    scripts.mkdir()
    on_path = tmp_path / "on-path"
    on_path.mkdir()
    script(on_path, "ctxbox", "echo 'ctxbox 0.1.0'\n")
    monkeypatch.setenv("PATH", str(on_path))
    monkeypatch.setattr(install.sysconfig, "get_path", lambda name: str(scripts))
    monkeypatch.setattr(install.sys, "executable", str(scripts / "python"))
    assert install.find_binary(None) == str(on_path / "ctxbox")
    wheel_binary = script(scripts, "ctxbox", "echo 'ctxbox 0.1.0'\n")
    assert install.find_binary(None) == wheel_binary
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    os.remove(wheel_binary)
    assert install.find_binary(None) == "ctxbox"


def doctor_report(*findings) -> str:
    return json.dumps({"ok": False, "version": "0.1.0", "findings": list(findings)})


def test_doctors_problems_for_this_plugin_come_with_their_fix():
    output = doctor_report(
        {"area": "engine", "subject": "keep-recnet", "status": "problem",
         "detail": "no engine of that name is registered", "fix": "name a bundled engine"},
        {"area": "openclaw", "subject": "selected", "status": "problem", "detail": "not ctxbox", "fix": "x"},
        {"area": "data-dir", "subject": "free space", "status": "ok", "detail": "9000 MiB free"},
    )
    assert install.doctor_problems(output) == [
        "keep-recnet: no engine of that name is registered (fix: name a bundled engine)"]
    assert install.doctor_problems("not json") == []


def test_doctor_runs_in_the_background_and_its_problems_are_said(tmp_path):
    report = doctor_report({"area": "hermes", "subject": "window", "status": "problem",
                            "detail": "ctxbox.window_tokens is 1", "fix": "set it"})
    doctor = script(tmp_path, "ctxbox", f"cat <<'EOF'\n{report}\nEOF\n")
    said = []
    install.check_in_background(install.doctor_argv(doctor, "keep-recent", str(tmp_path), None),
                                said.append).join(timeout=30)
    assert said == ["ctxbox doctor: window: ctxbox.window_tokens is 1 (fix: set it)"]


def test_console_messages_are_said_once(capsys):
    text = f"a problem only this test has ({os.getpid()})"
    assert console.say_once(text)
    assert not console.say_once(text)
    assert capsys.readouterr().err == f"ctxbox: {text}\n"


def test_register_says_a_bad_setting_on_the_console(monkeypatch, capsys):
    config = {"ctxbox": {"engine": "keep-recent", "window": 8000}}
    hermes_cli = types.ModuleType("hermes_cli")
    hermes_config = types.ModuleType("hermes_cli.config")
    hermes_config.load_config = lambda: config
    monkeypatch.setitem(sys.modules, "hermes_cli", hermes_cli)
    monkeypatch.setitem(sys.modules, "hermes_cli.config", hermes_config)
    with pytest.raises(ConfigError):
        ctxbox_hermes.register(object())
    err = capsys.readouterr().err
    assert "ctxbox: ctxbox.window is not a setting" in err
    assert "Hermes compresses with its own compressor" in err


def test_a_missing_binary_is_said_at_start(tmp_path):
    said = []
    settings = ctxbox_hermes.read_settings({"engine": "keep-recent", "ctxbox_bin": str(tmp_path / "nope")})
    ctxbox_hermes.check_installation(settings, said.append)
    assert len(said) == 1 and "no ctxbox binary" in said[0]


def test_hellos_answer_names_an_unknown_engine_and_a_wrong_version():
    good = {"version": "0.1.0", "defaultEngine": "keep-recent", "engines": ["keep-recent", "legacy", "lossless"]}
    assert install.hello_problems("/bin/ctxbox", good) == []
    assert install.hello_problems("/bin/ctxbox", {**good, "defaultEngine": "/engines/mine.wasm"}) == []
    unknown = install.hello_problems("/bin/ctxbox", {**good, "defaultEngine": "keep-recnet"})
    assert len(unknown) == 1 and "no engine `keep-recnet`" in unknown[0] and "keep-recent, lossless" in unknown[0]
    assert "legacy" not in unknown[0]
    old = install.hello_problems("/bin/ctxbox", {**good, "version": "0.0.3"})
    assert len(old) == 1 and "too old" in old[0]
    assert install.hello_problems("/bin/ctxbox", {}) == [], "an older sidecar names neither"


def test_the_sidecar_says_an_unknown_engine_once_at_its_start(tmp_path, capsys):
    from ctxbox_hermes.sidecar import Sidecar

    fake = script(tmp_path, "ctxbox", f"exec {sys.executable} -c '{FAKE_SERVE}'\n")
    sidecar = Sidecar([fake, "serve", "--engine", "nope"], cwd=str(tmp_path))
    try:
        sidecar.call("health", {}, 10.0)
    finally:
        sidecar.close()
    assert "ctxbox: no engine `nope` (ctxbox.engine): this ctxbox has keep-recent" in capsys.readouterr().err


FAKE_SERVE = (
    "import json, sys\n"
    "for line in sys.stdin:\n"
    "    request = json.loads(line)\n"
    "    if request[\"method\"] == \"hello\":\n"
    "        result = {\"protocol\": 2, \"version\": \"0.1.0\", \"defaultEngine\": \"nope\","
    " \"engines\": [\"keep-recent\", \"legacy\"]}\n"
    "    else:\n"
    "        result = {}\n"
    "    print(json.dumps({\"id\": request[\"id\"], \"result\": result}), flush=True)\n"
)
