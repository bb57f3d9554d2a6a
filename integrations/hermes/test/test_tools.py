"""Protocol 2 and the engine's tools, against tiny fake sidecars (Python
processes speaking the protocol) and, with CTXBOX_BIN and
CTXBOX_TOOL_SPINNER_WASM set, the real `ctxbox serve`: the `hello`
negotiation (falling back to protocol 1), `tools` as Hermes's schemas
named `ctxbox_…`, `callTool` in the session, and every failure as an empty
list or an error result within the call timeout, never an exception."""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time

import pytest

from ctxbox_hermes import tools
from ctxbox_hermes.bridge import Bridge
from ctxbox_hermes.config import read_settings
from ctxbox_hermes.sidecar import Sidecar

CTXBOX_BIN = os.environ.get("CTXBOX_BIN")
TOOL_SPINNER_WASM = os.environ.get("CTXBOX_TOOL_SPINNER_WASM")

# A protocol-2 sidecar (argv: the file it logs each request to, the highest
# protocol it speaks). Its engine offers `echo`, `fail` and `hang`, and one
# tool named so that a model API would refuse it; `hang` never answers.
_FAKE_SIDECAR = """
import json, sys
log, newest = sys.argv[1], int(sys.argv[2])
TOOLS = [
    {"name": "echo", "description": "Answers its arguments.", "parameters": {"type": "object"}},
    {"name": "fail", "description": "", "parameters": {"type": "object"}},
    {"name": "hang", "description": "Never answers.", "parameters": {"type": "object"}},
    {"name": "bad name!", "description": "", "parameters": {"type": "object"}},
]
def send(message):
    print(json.dumps(message), flush=True)
for line in sys.stdin:
    request = json.loads(line)
    method, params = request.get("method"), request.get("params") or {}
    if "method" not in request:  # an answer to a reverse request
        with open(log, "a") as file:
            file.write(json.dumps({"answer": request}) + "\\n")
        continue
    with open(log, "a") as file:
        file.write(json.dumps(request) + "\\n")
    if method == "hello":
        asked = params.get("protocol")
        if asked > newest and newest == 1:
            send({"id": request["id"], "error": {"code": "unsupported-protocol", "message": "no",
                                                 "data": {"supported": [1]}}})
        else:
            send({"id": request["id"], "result": {"protocol": min(asked, newest)}})
            if params.get("client") and "srv" in sys.argv[3:]:
                send({"id": "srv-1", "method": "complete", "params": {"messages": []}})
    elif method == "cancel":
        continue
    elif method == "tools" and newest >= 2:
        send({"id": request["id"], "result": {"tools": TOOLS, "servedBy": params.get("engine")}})
    elif method == "callTool" and newest >= 2:
        name = params["name"]
        if name == "hang":
            continue
        if name == "echo":
            answer = {"content": "echo " + json.dumps(params["arguments"]), "isError": False}
        else:
            answer = {"content": "the tool failed: no such luck", "isError": True}
        send({"id": request["id"], "result": {**answer, "servedBy": params.get("engine")}})
    else:
        send({"id": request["id"], "error": {"code": "unknown-method", "message": method}})
"""


class Fake:
    """A bridge over `_FAKE_SIDECAR`, and what the sidecar was sent."""

    def __init__(self, newest: int = 2, timeout_ms: int = 2_000, *extra: str) -> None:
        self.log = tempfile.mktemp(prefix="ctxbox-hermes-fake-sidecar-", suffix=".jsonl")
        sidecar = Sidecar([sys.executable, "-c", _FAKE_SIDECAR, self.log, str(newest), *extra])
        self.bridge = Bridge(read_settings({"engine": "fake-engine", "data_dir": tempfile.mkdtemp(),
                                            "call_timeout_ms": timeout_ms}), sidecar=sidecar)

    def sent(self, method: str | None = None) -> list[dict]:
        try:
            with open(self.log) as file:
                lines = [json.loads(line) for line in file]
        except FileNotFoundError:
            return []
        return [line for line in lines if method is None or line.get("method") == method]

    def close(self) -> None:
        self.bridge.sidecar.close()
        if os.path.exists(self.log):
            os.unlink(self.log)


@pytest.fixture
def fake():
    made: list[Fake] = []

    def make(*args, **kwargs) -> Fake:
        made.append(Fake(*args, **kwargs))
        return made[-1]

    yield make
    for each in made:
        each.close()


def test_hello_asks_for_protocol_2_and_declares_no_capability(fake):
    sidecar = fake()
    tools.tool_schemas(sidecar.bridge)
    [hello] = sidecar.sent("hello")
    assert hello["params"]["protocol"] == 2 and hello["params"]["capabilities"] == []
    assert sidecar.bridge.sidecar.protocol == 2


def test_the_engines_tools_are_offered_as_ctxbox_prefixed_bare_schemas(fake):
    sidecar = fake()
    schemas = tools.tool_schemas(sidecar.bridge)
    assert [schema["name"] for schema in schemas] == ["ctxbox_echo", "ctxbox_fail", "ctxbox_hang"]
    assert schemas[0] == {"name": "ctxbox_echo", "description": "Answers its arguments.",
                          "parameters": {"type": "object"}}
    assert schemas[1]["description"], "a tool without a description gets one"
    assert sidecar.sent("tools")[0]["params"] == {"engine": "fake-engine"}


def test_the_listed_names_are_what_hermes_shows_and_never_asked_for(fake):
    sidecar = fake()
    assert tools.listed_names(sidecar.bridge) == [], "nothing listed yet"
    assert sidecar.sent("tools") == [], "and the sidecar was not asked"
    tools.tool_schemas(sidecar.bridge)
    assert tools.listed_names(sidecar.bridge) == ["ctxbox_echo", "ctxbox_fail", "ctxbox_hang"]


def test_a_description_names_the_engines_other_tools_as_hermes_shows_them():
    names = ["grep", "expand"]
    assert tools.shown_names("Finds messages; read one with `expand`.", names) == \
        "Finds messages; read one with `ctxbox_expand`."
    # Only the engine's own names, only in backticks: prose and other code stay.
    assert tools.shown_names("Use grep or `sed`, then `expand` it.", names) == \
        "Use grep or `sed`, then `ctxbox_expand` it."


def test_the_list_is_asked_once_per_sidecar_process_and_again_after_a_failed_call(fake):
    sidecar = fake()
    first = tools.tool_schemas(sidecar.bridge)
    assert tools.tool_schemas(sidecar.bridge) == first
    assert len(sidecar.sent("tools")) == 1, "cached"
    tools.call_tool(sidecar.bridge, "s1", "ctxbox_fail", {})
    tools.tool_schemas(sidecar.bridge)
    assert len(sidecar.sent("tools")) == 2, "a failed tool may mean a quarantine: asked again"


def test_a_call_is_forwarded_in_the_session_under_the_engines_name(fake):
    sidecar = fake()
    sidecar.bridge.rename("old-session", "new-session")
    answer = json.loads(tools.call_tool(sidecar.bridge, "new-session", "ctxbox_echo", {"text": "hi"}))
    assert answer == {"result": 'echo {"text": "hi"}', "servedBy": "fake-engine"}
    [call] = sidecar.sent("callTool")
    assert call["params"] == {"engine": "fake-engine", "sessionId": "old-session", "name": "echo",
                              "arguments": {"text": "hi"}}, "exactly callTool's parameters"


def test_a_failed_tool_is_an_error_result(fake):
    sidecar = fake()
    answer = json.loads(tools.call_tool(sidecar.bridge, "s1", "ctxbox_fail", {}))
    assert answer == {"error": "the tool failed: no such luck", "servedBy": "fake-engine"}


def test_a_name_without_the_prefix_is_not_sent(fake):
    sidecar = fake()
    answer = json.loads(tools.call_tool(sidecar.bridge, "s1", "echo", {}))
    assert "Unknown context engine tool: echo" in answer["error"]
    assert sidecar.sent("callTool") == []


def test_a_tool_that_never_answers_costs_one_call_timeout_and_is_cancelled(fake):
    sidecar = fake(timeout_ms=1_000)
    tools.tool_schemas(sidecar.bridge)  # started
    started = time.monotonic()
    answer = json.loads(tools.call_tool(sidecar.bridge, "s1", "ctxbox_hang", {}))
    took = time.monotonic() - started
    assert "ctxbox could not run ctxbox_hang" in answer["error"] and "timed out" in answer["error"]
    assert 0.9 <= took < 2, took
    deadline = time.monotonic() + 2
    while not sidecar.sent("cancel") and time.monotonic() < deadline:
        time.sleep(0.02)
    [call] = sidecar.sent("callTool")
    assert call["deadlineMs"] <= 1_000, "the sidecar is told to give up first"
    assert sidecar.sent("cancel")[0]["params"] == {"target": call["id"]}


def test_a_protocol_1_sidecar_is_spoken_to_in_1_and_offers_no_tools(fake):
    sidecar = fake(newest=1)
    assert tools.tool_schemas(sidecar.bridge) == []
    assert [hello["params"]["protocol"] for hello in sidecar.sent("hello")] == [2, 1]
    assert "capabilities" not in sidecar.sent("hello")[1]["params"]
    assert sidecar.bridge.sidecar.protocol == 1
    assert sidecar.bridge.sidecar.pid is not None, "the refused hello did not cost the process"


def test_a_reverse_request_is_refused_at_once(fake):
    sidecar = fake(2, 2_000, "srv")
    tools.tool_schemas(sidecar.bridge)
    deadline = time.monotonic() + 2
    while not any("answer" in line for line in sidecar.sent()) and time.monotonic() < deadline:
        time.sleep(0.02)
    [answer] = [line["answer"] for line in sidecar.sent() if "answer" in line]
    assert answer["id"] == "srv-1" and answer["error"]["code"] == "unavailable"


def test_a_missing_sidecar_offers_nothing_and_answers_errors_fast():
    bridge = Bridge(read_settings({"engine": "keep-recent", "ctxbox_bin": "/nonexistent/ctxbox",
                                   "data_dir": tempfile.mkdtemp(), "call_timeout_ms": 1_000}))
    started = time.monotonic()
    assert tools.tool_schemas(bridge) == []
    answer = json.loads(tools.call_tool(bridge, "s1", "ctxbox_grep", {"pattern": "x"}))
    assert "ctxbox could not run ctxbox_grep" in answer["error"]
    assert time.monotonic() - started < 1
    bridge.sidecar.close()


def test_a_sidecar_that_never_answers_costs_the_listing_one_call_timeout():
    sidecar = Sidecar([sys.executable, "-c", "import time; time.sleep(120)"])
    bridge = Bridge(read_settings({"engine": "keep-recent", "data_dir": tempfile.mkdtemp(),
                                   "call_timeout_ms": 800}), sidecar=sidecar)
    started = time.monotonic()
    assert tools.tool_schemas(bridge) == []
    assert time.monotonic() - started < 2
    answer = json.loads(tools.call_tool(bridge, "s1", "ctxbox_echo", {}))
    assert "error" in answer
    assert time.monotonic() - started < 3.5
    sidecar.close()


@pytest.mark.skipif(not (CTXBOX_BIN and TOOL_SPINNER_WASM), reason="set CTXBOX_BIN and CTXBOX_TOOL_SPINNER_WASM")
def test_the_real_sidecar_runs_tool_spinner_and_cuts_its_spin_at_the_engine_deadline(tmp_path):
    toml = tmp_path / "ctxbox.toml"
    toml.write_text("[sandbox]\ncallTimeoutMs = 1000\n")
    bridge = Bridge(read_settings({"engine": TOOL_SPINNER_WASM, "ctxbox_bin": CTXBOX_BIN,
                                   "data_dir": str(tmp_path / "data"), "config_file": str(toml),
                                   "call_timeout_ms": 8_000}))
    try:
        names = [schema["name"] for schema in tools.tool_schemas(bridge)]
        assert names == ["ctxbox_echo", "ctxbox_spin"] and bridge.sidecar.protocol == 2
        echoed = json.loads(tools.call_tool(bridge, "s1", "ctxbox_echo", {"text": "hello"}))
        assert echoed["result"] == 'echo {"text":"hello"}' and echoed["servedBy"] == "tool-spinner"
        started = time.monotonic()
        spun = json.loads(tools.call_tool(bridge, "s1", "ctxbox_spin", {}))
        assert "error" in spun and time.monotonic() - started < 6, spun
        assert tools.tool_schemas(bridge) == [], "the quarantined engine offers no tools"
    finally:
        bridge.sidecar.close()
