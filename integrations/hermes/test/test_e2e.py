"""End to end against the real Hermes Agent (0.19.0, from PyPI): the plugin
installed as Hermes installs plugins (a pip package's entry point, or this
folder's package as `$HERMES_HOME/plugins/ctxbox/`), sessions of several
turns run by `hermes_driver.py` in a process of its own, and a loopback
fake model that records every request. Run by ci.sh with:

    CTXBOX_BIN             the ctxbox binary
    CTXBOX_SPIN_WASM       the `spin` test engine (hangs in assemble)
    CTXBOX_PANICKER_WASM   the `panicker` test engine (panics in assemble on "panic")
    CTXBOX_SLEEPER_WASM    optional: the `sleeper` test engine (sleeps in assemble)
    CTXBOX_LOSSLESS_CLAW_WASM optional: lossless-claw, an OpenClaw plugin built
                           into an engine (CTXBOX_LOSSLESS_CLAW_CACHE: a
                           compile cache for it)
    CTXBOX_TOOL_SPINNER_WASM optional: the `tool_spinner` test engine (offers the
                           tools `echo` and `spin`; `spin` never returns)

with the Hermes venv's python (`python -m pytest test/test_e2e.py`). Every
server binds 127.0.0.1; every process it starts is ended by its PID.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys

import pytest

from fake_model import ENGINE_SUMMARY, FakeModel
from hermes_driver import sidecars

HERE = os.path.dirname(os.path.abspath(__file__))
PLUGIN_ROOT = os.path.dirname(HERE)


def need(name: str) -> str:
    value = os.environ.get(name)
    if not value:
        pytest.skip(f"set {name} (see the top of test/test_e2e.py)")
    return value


CTXBOX_BIN = os.environ.get("CTXBOX_BIN", "")
pytestmark = pytest.mark.skipif(not CTXBOX_BIN, reason="set CTXBOX_BIN (see the top of test/test_e2e.py)")
ENGINE_DEADLINE_MS = 2_000
"""The sandbox call deadline the sidecar runs engines under."""
PLUGIN_TIMEOUT_MS = 6_000
"""The plugin's own per-method timeout."""
SLOW_TURN_MS = 8_000
"""What a turn may take on a loaded machine besides a hanging engine."""
RUN_TIMEOUT_S = 240
"""No Hermes session of this test may run longer."""


@pytest.fixture(scope="session")
def entry_point_site(tmp_path_factory) -> str:
    """The plugin pip-installed into a folder of its own, as a package with
    the `hermes_agent.plugins` entry point (built from a copy: the checkout
    stays clean)."""
    work = tmp_path_factory.mktemp("ctxbox-hermes-package")
    source = work / "source"
    shutil.copytree(PLUGIN_ROOT, source, ignore=shutil.ignore_patterns("test", "__pycache__", "*.egg-info", "build"))
    site = work / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target", str(site), str(source)],
                   check=True, timeout=300)
    return str(site)


class Hermes:
    """One Hermes home with the plugin, configured for one ctxbox engine."""

    def __init__(self, root, model: FakeModel, engine: str, *, window: int, target: float = 0.5,
                 timeout_ms: int = PLUGIN_TIMEOUT_MS, engine_deadline_ms: int = ENGINE_DEADLINE_MS,
                 ctxbox_toml: str = "", plugin_site: str | None = None, toolsets: tuple[str, ...] = ()) -> None:
        self.root = root
        self.model = model
        self.home = root / "hermes-home"
        self.data_dir = root / "ctxbox-data"
        self.toolsets = list(toolsets)
        self.plugin_site = plugin_site
        (self.home / "plugins").mkdir(parents=True)
        if plugin_site is None:
            # A directory plugin: this checkout's package as the plugin folder.
            os.symlink(os.path.join(PLUGIN_ROOT, "ctxbox_hermes"), self.home / "plugins" / "ctxbox")
        toml = root / "ctxbox.toml"
        toml.write_text(f"[sandbox]\ncallTimeoutMs = {engine_deadline_ms}\n{ctxbox_toml}")
        (self.home / "config.yaml").write_text(
            f"""model:
  default: fake-model
  provider: custom
  base_url: {model.url}
  context_length: 64000
  ollama_num_ctx: 0
context:
  engine: ctxbox
plugins:
  enabled: [ctxbox]
ctxbox:
  engine: {engine}
  ctxbox_bin: {CTXBOX_BIN}
  data_dir: {self.data_dir}
  config_file: {toml}
  call_timeout_ms: {timeout_ms}
  window_tokens: {window}
  target: {target}
""")

    def run(self, turns: list[str], kill_sidecar_after: tuple[int, ...] = ()) -> dict:
        """Runs one session of `turns`; returns the driver's report."""
        report_path = self.root / "report.json"
        spec = self.root / "spec.json"
        spec.write_text(json.dumps({
            "base_url": self.model.url, "turns": turns, "report": str(report_path),
            "toolsets": self.toolsets, "kill_sidecar_after": list(kill_sidecar_after), "ctxbox_bin": CTXBOX_BIN,
        }))
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(self.root), "LANG": "C.UTF-8",
               "HERMES_HOME": str(self.home), "PYTHONDONTWRITEBYTECODE": "1"}
        if self.plugin_site:
            env["PYTHONPATH"] = self.plugin_site
        driver = subprocess.Popen([sys.executable, os.path.join(HERE, "hermes_driver.py"), str(spec)], env=env,
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        try:
            output, _ = driver.communicate(timeout=RUN_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            for pid in sidecars(CTXBOX_BIN, str(driver.pid)):
                os.kill(pid, signal.SIGKILL)
            driver.kill()
            output, _ = driver.communicate()
            pytest.fail(f"the Hermes session ran past {RUN_TIMEOUT_S} s:\n{output[-5000:]}")
        assert report_path.exists(), f"the driver wrote no report (exit {driver.returncode}):\n{output[-5000:]}"
        report = json.loads(report_path.read_text())
        report["output"] = output
        assert driver.returncode == 0, f"the driver failed:\n{output[-5000:]}"
        (self.root / "model-requests.json").write_text(json.dumps(self.model.requests, indent=1))
        return report

    def health(self) -> tuple[int, list]:
        """`ctxbox health --json` for this data directory."""
        shown = subprocess.run([CTXBOX_BIN, "health", "--data-dir", str(self.data_dir), "--json"],
                               capture_output=True, text=True, timeout=60)
        return shown.returncode, json.loads(shown.stdout)


@pytest.fixture
def model(tmp_path):
    tool_file = tmp_path / "notes.txt"
    tool_file.write_text("small file: alpha beta gamma\n")
    served = FakeModel(tool_path=str(tool_file))
    yield served
    served.close()


def check_session(report: dict, turns: list[str]) -> None:
    """Every turn completed with the model's answer, through the plugin,
    and nothing left the machine."""
    assert report["engine"] == "ctxbox" and report["engine_class"] == "CtxboxEngine", report["output"][-3000:]
    assert len(report["turns"]) == len(turns)
    for turn, asked in zip(report["turns"], turns):
        assert not turn["failed"], turn
        assert turn["final"].startswith(f'answer to "{asked}'), turn["final"][:200]
        print(f"# turn {turn['turn']} ({asked[:24]}): {turn['ms']} ms, {turn['messages']} messages, "
              f"served {turn['status']['served']}, fell back {turn['status']['fallbacks']}")
    assert all(address.startswith("('127.0.0.1'") for address in report["connects"]), report["connects"]


def texts(request: dict) -> list[str]:
    """The text of each message of a chat request."""
    out = []
    for message in request["messages"]:
        content = message.get("content")
        out.append(content if isinstance(content, str) else json.dumps(content or ""))
    return out


def check_tool_pairs(request: dict) -> None:
    """Every tool result the model got follows the call it answers."""
    calls: set[str] = set()
    for message in request["messages"]:
        if message["role"] == "assistant":
            calls = {call["id"] for call in message.get("tool_calls") or []}
        elif message["role"] == "tool":
            assert message["tool_call_id"] in calls, f"orphan tool result in {request['messages']}"
        else:
            calls = set()


def alive_sidecars(pids: list[int]) -> list[int]:
    alive = []
    for pid in pids:
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as file:
                if file.read().split(b"\0")[1:2] == [b"serve"]:
                    alive.append(pid)
        except OSError:
            pass
    return alive


def test_keep_recent_trims_the_session_and_survives_a_sigkill(tmp_path, model, entry_point_site):
    model.pad = 3_000
    # Long enough that keep-recent's note outgrows what Hermes holds by a
    # margin: with 9 turns it was within a message of it, and a longer temp
    # path in Hermes's system prompt (pytest-9 → pytest-10) moved Hermes's
    # compressions enough to flip the comparison.
    turns = [f"question {n}" + (" TOOLS 2" if n in (2, 5) else "") for n in range(1, 14)]
    hermes = Hermes(tmp_path, model, "keep-recent", window=6_000, plugin_site=entry_point_site, toolsets=("file",))
    report = hermes.run(turns, kill_sidecar_after=(6,))
    check_session(report, turns)

    # Once the session outgrows the window, the model gets keep-recent's
    # context: its note, the newest turns, not the oldest question. The
    # engine trims the whole session, not just the shorter transcript
    # Hermes holds after a compression: its note counts more messages left
    # out than Hermes ever held at once.
    requests = model.chat_requests()
    left_out = [int(m.group(1)) for r in requests for text in texts(r)
                for m in [re.search(r"\[keep-recent: (\d+) earlier messages", text)] if m]
    assert left_out, "the model saw keep-recent's note"
    assert max(left_out) > max(turn["messages"] for turn in report["turns"]), (left_out, report["turns"])
    for request in requests + [{"messages": report["transcript"]}]:  # and what Hermes kept
        check_tool_pairs(request)
    last = texts(requests[-1])
    oldest = re.compile(r"^question 1(?!\d)|question 1$")  # not "question 10" and on
    assert not any(oldest.search(text) for text in last)
    assert any(text.endswith(turns[-1]) for text in last)
    assert len(requests[-1]["messages"]) < 2 + 2 * len(turns), "the transcript was compressed"

    # SIGKILL after turn 6: every later turn completes, and a new sidecar
    # serves a later compression.
    killed = report["killed"]
    assert len(killed) == 1 and report["turns"][5]["sidecars"] == killed
    after = report["turns"][-1]
    assert after["sidecars"] and after["sidecars"] != killed, "a new sidecar runs"
    assert after["status"]["sidecar_restarts"] >= 1
    served_before = report["turns"][5]["status"]["served"]
    assert after["status"]["served"] > served_before, "the engine served again after the restart"
    assert alive_sidecars(killed + after["sidecars"]) == [], "the sidecar ended with Hermes"

    status, records = hermes.health()
    assert status == 0 and records == [], records


def test_lossless_shows_its_summaries_to_the_model(tmp_path, model):
    model.pad = 300
    turns = [f"question {n} TOOLS 3" for n in range(1, 11)]
    hermes = Hermes(tmp_path, model, "lossless", window=10_000, target=0.6, toolsets=("file",))
    report = hermes.run(turns)
    check_session(report, turns)
    assert report["turns"][-1]["status"]["served"] >= 1

    requests = model.chat_requests()
    for request in requests:
        check_tool_pairs(request)
    summarized = [r for r in requests if any(re.match(r"\[Summary of earlier conversation: messages 1–\d+", text)
                                             for text in texts(r))]
    assert summarized, "the model saw lossless's summaries"
    last = texts(requests[-1])
    assert any("[Summary of earlier conversation" in text for text in last)
    assert not any(text == "question 1 TOOLS 3" for text in last), "the oldest turn is summarized, not sent"
    assert any(text.endswith("question 10 TOOLS 3") for text in last)
    status, records = hermes.health()
    assert status == 0 and records == [], records


def test_lossless_over_ordinary_turns_summarizes_with_hermes_model_and_keeps_the_whole_session(tmp_path, model):
    # Ordinary turns, a few with a tool round, in a window they outgrow: no
    # /compress, nothing forced. The first question holds a word only it has.
    model.pad = 2_000
    model.tool_args["ctxbox_grep"] = {"query": "PELICAN"}
    turns = ["question 1: the code word is PELICAN"]
    turns += [f"question {n}" + (" TOOLS 1" if n % 3 else "") for n in range(2, 27)]
    turns += ["question 27: which code word did I give first? CALL ctxbox_grep"]
    # The window: lossless's fresh tail (32 messages) and its summaries fit
    # the target share, and the turns outgrow the threshold. A roomy engine
    # deadline: each summary is a model call through Hermes.
    hermes = Hermes(tmp_path, model, "lossless", window=20_000, target=0.6, toolsets=("file", "context_engine"),
                    timeout_ms=15_000, engine_deadline_ms=10_000)
    report = hermes.run(turns)
    check_session(report, turns)
    final = report["turns"][-1]
    print(f"# {len(turns)} turns in {sum(turn['ms'] for turn in report['turns'])} ms")

    # Trimmed: Hermes compressed through the engine, and the model's last
    # prompt no longer holds the first question.
    requests = model.chat_requests()
    assert final["status"]["served"] >= 1 and final["status"]["fallbacks"] == 0, final["status"]
    before_grep = requests[-2]  # the last turn's first request, which the model answers with the grep call
    assert texts(before_grep)[-1].endswith(turns[-1])
    assert not any("PELICAN" in text for text in texts(before_grep)), "the first question left the prompt"

    # lossless summarized through the plugin's reverse `complete`, with
    # Hermes's own model, during those ordinary turns; the model saw it.
    asked = model.engine_summary_requests()
    assert asked, "lossless's summaries were asked of Hermes's model"
    assert any(ENGINE_SUMMARY in text for request in requests for text in texts(request))

    # The sidecar holds the whole session, as Hermes made it: every
    # question, every answer and tool call of the model (one per request),
    # every tool result; and never cut one back. (Hermes's session store
    # counts otherwise: an in-place compaction stores the turn's question
    # with the compacted transcript.)
    made = len(turns) + len(requests) + model.tool_calls
    assert final["status"]["session_length"] == made, (final["status"], made)
    assert final["status"]["session_resets"] == 0
    assert final["messages"] < made, "Hermes's own transcript was trimmed"

    # The model's grep call (the engine's tool, as Hermes shows it) finds
    # the first question.
    [found] = tool_results(requests)["ctxbox_grep"]
    assert "PELICAN" in json.loads(found)["result"], found
    status, records = hermes.health()
    assert status == 0 and records == [], records


@pytest.mark.parametrize("name, variable, asked, classifications", [
    ("spin", "CTXBOX_SPIN_WASM", "spin question", ("timeout", "out-of-fuel")),
    ("panicker", "CTXBOX_PANICKER_WASM", "panic", ("panic",)),
])
def test_a_hostile_engine_is_quarantined_and_no_turn_waits(tmp_path, model, name, variable, asked, classifications):
    wasm = need(variable)
    model.pad = 1_500
    turns = [asked] * 4
    hermes = Hermes(tmp_path, model, wasm, window=2_000, ctxbox_toml="[quarantine]\nretryAfterSeconds = 1\n")
    report = hermes.run(turns)
    check_session(report, turns)
    for turn in report["turns"][1:]:
        assert turn["ms"] <= ENGINE_DEADLINE_MS + SLOW_TURN_MS, f"turn {turn['turn']} took {turn['ms']} ms"
    final = report["turns"][-1]["status"]
    assert final["fallbacks"] >= 1 and final["served"] == 0, final
    assert "not the engine" in final["last_fallback"], final

    status, records = hermes.health()
    assert status == 2, "ctxbox health exits 2 while an engine is quarantined"
    record = next((r for r in records if r["engineId"] == name), None)
    assert record and record["classification"] in classifications, records
    assert record["operation"] == "assemble"
    shown = subprocess.run([CTXBOX_BIN, "health", "--data-dir", str(hermes.data_dir)], capture_output=True,
                           text=True, timeout=60)
    assert re.search(rf"{name} \(plugin:serve\)[\s\S]*failed in +assemble", shown.stdout), shown.stdout


def test_a_sidecar_slower_than_the_plugin_timeout_costs_one_timeout_per_compression(tmp_path, model):
    wasm = need("CTXBOX_SLEEPER_WASM")
    model.pad = 1_500
    turns = ["slow question"] * 3
    # The engine may run for a minute; the plugin waits 3 s.
    hermes = Hermes(tmp_path, model, wasm, window=2_000, timeout_ms=3_000, engine_deadline_ms=60_000)
    report = hermes.run(turns)
    check_session(report, turns)
    for turn in report["turns"][1:]:
        assert turn["ms"] <= 3_000 + SLOW_TURN_MS, f"turn {turn['turn']} took {turn['ms']} ms"
    final = report["turns"][-1]["status"]
    # The sidecar answers `deadline-exceeded` just before the plugin would give up.
    assert final["fallbacks"] >= 1 and re.search("deadline-exceeded|timed out", final["last_fallback"]), final
    status, records = hermes.health()
    assert status == 0, f"a call the client gave up on is not held against the engine: {records}"


def tool_results(requests: list[dict]) -> dict[str, list[str]]:
    """The tool results the model got, by the name of the tool called."""
    names: dict[str, str] = {}
    found: dict[str, list[str]] = {}
    for request in requests:
        for message in request["messages"]:
            for call in message.get("tool_calls") or []:
                names[call["id"]] = call["function"]["name"]
            if message["role"] == "tool":
                found.setdefault(names.get(message["tool_call_id"], "?"), []).append(str(message["content"]))
    return {name: sorted(set(results)) for name, results in found.items()}


def test_engine_tools_reach_the_model_and_a_spinning_tool_is_cut_at_the_engine_deadline(tmp_path, model):
    wasm = need("CTXBOX_TOOL_SPINNER_WASM")
    turns = ["echo question CALL ctxbox_echo", "spin question CALL ctxbox_spin", "a question after it"]
    # A window no turn fills: no compression, only the tools. Hermes offers
    # a context engine's tools only with the `context_engine` toolset.
    hermes = Hermes(tmp_path, model, wasm, window=60_000, toolsets=("context_engine",))
    report = hermes.run(turns)
    check_session(report, turns)

    requests = model.chat_requests()
    offered = {tool["function"]["name"] for tool in requests[0].get("tools") or []}
    assert {"ctxbox_echo", "ctxbox_spin"} <= offered, offered
    assert not {"echo", "spin"} & offered, "the engine's names do not shadow Hermes's"
    results = tool_results(requests)
    [echoed] = results["ctxbox_echo"]
    assert json.loads(echoed) == {"result": 'echo {"text":"echo question CALL ctxbox_echo"}',
                                  "servedBy": "tool-spinner"}, echoed
    [spun] = results["ctxbox_spin"]
    assert "error" in json.loads(spun), spun
    spin_turn = report["turns"][1]
    assert spin_turn["ms"] <= ENGINE_DEADLINE_MS + SLOW_TURN_MS, f"the spin turn took {spin_turn['ms']} ms"
    print(f"# spin turn: {spin_turn['ms']} ms; the model read {spun[:200]}")

    status, records = hermes.health()
    assert status == 2, "ctxbox health exits 2 while an engine is quarantined"
    record = next((r for r in records if r["engineId"] == "tool-spinner"), None)
    assert record and record["classification"] in ("timeout", "out-of-fuel"), records


def test_lossless_claws_recall_tool_answers_the_model_from_its_own_database(tmp_path, model):
    """lossless-claw, OpenClaw's context-engine plugin built unmodified into a
    ctxbox engine, in Hermes: its recall tools are offered (`ctxbox_lcm_*`,
    with the `context_engine` toolset) and `ctxbox_lcm_grep` answers the
    model from the conversation the engine keeps in its SQL database."""
    wasm = need("CTXBOX_LOSSLESS_CLAW_WASM")
    cache = os.environ.get("CTXBOX_LOSSLESS_CLAW_CACHE")
    marker = "zanzibar42"
    # Registered and configured as README's "Bring your OpenClaw engine" has
    # it, with the smaller limits a three-turn conversation needs.
    ctxbox_toml = (
        (f"cacheDir = {json.dumps(cache)}\n" if cache else "")
        + "compileTimeoutMs = 1800000\n"
        + f"[plugins.engines.lossless-claw]\npath = {json.dumps(wasm)}\n"
        + "[plugins.entries.lossless-claw]\n"
        + "config = { freshTailCount = 8, freshTailMaxTokens = 3000, leafChunkTokens = 3000 }\n"
        + "limits = { fuelPerCall = 40000000000, callTimeoutMs = 60000, memoryLimitMib = 128 }\n"
    )
    turns = [f"my first question mentions the word {marker}", "a second question",
             "please search for the word of my first question CALL ctxbox_lcm_grep"]
    model.tool_args["ctxbox_lcm_grep"] = {"pattern": marker}
    hermes = Hermes(tmp_path, model, "lossless-claw", window=60_000, toolsets=("context_engine",),
                    ctxbox_toml=ctxbox_toml, timeout_ms=120_000, engine_deadline_ms=60_000)
    report = hermes.run(turns)
    check_session(report, turns)

    requests = model.chat_requests()
    offered = {tool["function"]["name"] for tool in requests[-1].get("tools") or []}
    assert {"ctxbox_lcm_grep", "ctxbox_lcm_describe", "ctxbox_lcm_expand", "ctxbox_lcm_expand_query"} <= offered, offered
    [found] = tool_results(requests)["ctxbox_lcm_grep"]
    assert marker in found and "error" not in json.loads(found), found
    print(f"# lossless-claw in Hermes: ctxbox_lcm_grep answered {found[:300]}")
    status, records = hermes.health()
    assert status == 0, f"nothing quarantined: {records}"
