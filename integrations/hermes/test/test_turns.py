"""Turns reaching the engine at Hermes's `post_llm_call` hook
(`Bridge.turn_ended` → the session's engine → `Bridge.end_turn`), and the
check of every `length` the sidecar answers, against a fake sidecar that
keeps sessions as `ctxbox serve` does (a `sync` replaces its messages from
`base`) and, told to, once answers a length that is not what it holds."""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time

from ctxbox_hermes.bridge import Bridge
from ctxbox_hermes.config import read_settings
from ctxbox_hermes.sidecar import Sidecar

_SESSIONS_SIDECAR = """
import json, sys
log, lie = sys.argv[1], "lie" in sys.argv[2:]
sessions = {}
def send(message):
    print(json.dumps(message), flush=True)
for line in sys.stdin:
    request = json.loads(line)
    with open(log, "a") as file:
        file.write(line)
    method, params = request.get("method"), request.get("params") or {}
    if method == "hello":
        send({"id": request["id"], "result": {"protocol": 2}})
        continue
    held = sessions.setdefault(params.get("sessionId"), [])
    sync = params.get("sync")
    if sync is not None:
        if sync["base"] > len(held):
            send({"id": request["id"], "error": {"code": "history-mismatch", "message": "resend",
                                                 "data": {"length": len(held)}}})
            continue
        held[sync["base"]:] = sync["messages"]
    length = len(held) + (1 if lie and sync is not None else 0)
    lie = lie and sync is None
    send({"id": request["id"], "result": {"length": length}})
"""


class Agent:
    """What the bridge hands a session's turns to: an engine's `end_turn`."""

    def __init__(self, bridge: Bridge, session_id: str) -> None:
        self.bridge = bridge
        self.session_id = session_id

    def end_turn(self, messages: list[dict]) -> None:
        self.bridge.end_turn(self.session_id, messages, 10_000)


def fake_bridge(*extra: str) -> tuple[Bridge, str]:
    log = tempfile.mktemp(prefix="ctxbox-hermes-sessions-sidecar-", suffix=".jsonl")
    sidecar = Sidecar([sys.executable, "-c", _SESSIONS_SIDECAR, log, *extra])
    bridge = Bridge(read_settings({"engine": "fake-engine", "data_dir": tempfile.mkdtemp(),
                                   "call_timeout_ms": 5_000}), sidecar=sidecar)
    bridge.call("info", {}, time.monotonic() + 5)  # started, as Hermes's bootstrap starts it
    return bridge, log


def syncs(log: str) -> list[tuple[str, int, int]]:
    """Each synced call: its method, the sync's base and how many messages."""
    with open(log) as file:
        requests = [json.loads(line) for line in file]
    return [(r["method"], r["params"]["sync"]["base"], len(r["params"]["sync"]["messages"]))
            for r in requests if "sync" in (r.get("params") or {})]


def conversation(turns: int) -> list[dict]:
    return [message for number in range(1, turns + 1)
            for message in ({"role": "user", "content": f"question {number}"},
                            {"role": "assistant", "content": f"answer {number}"})]


def test_each_turn_reaches_the_sessions_engine_once_and_only_what_is_new():
    bridge, log = fake_bridge()
    agent = Agent(bridge, "s1")
    try:
        bridge.serve("s1", agent, {"model": "fake-model"})
        bridge.turn_ended(session_id="s1", conversation_history=conversation(1), turn_id="t1")
        bridge.turn_ended(session_id="s1", conversation_history=conversation(2), turn_id="t2")
        bridge.turn_ended(session_id="s1", conversation_history=conversation(2), turn_id="t2")  # nothing new
        bridge.turn_ended(session_id="other", conversation_history=conversation(3))  # no agent serves it
        assert syncs(log) == [("afterTurn", 0, 2), ("afterTurn", 2, 2)]
        assert bridge.session_length("s1") == 4
    finally:
        bridge.sidecar.close()
        os.unlink(log)


def test_a_length_that_is_not_the_plugins_is_not_believed_and_the_next_call_resends_it_all():
    bridge, log = fake_bridge("lie")
    agent = Agent(bridge, "s1")
    try:
        bridge.serve("s1", agent, {"model": "fake-model"})
        agent.end_turn(conversation(1))
        assert bridge.session_length("s1") is None, "the sidecar said 3 of 2 messages"
        agent.end_turn(conversation(2))
        assert syncs(log) == [("afterTurn", 0, 2), ("afterTurn", 0, 4)]
        assert bridge.session_length("s1") == 4
    finally:
        bridge.sidecar.close()
        os.unlink(log)
