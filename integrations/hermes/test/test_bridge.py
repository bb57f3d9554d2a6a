"""The sidecar's supervision and the compression pipeline, without Hermes's
agent loop: real processes (a missing binary, one that never answers, and,
with CTXBOX_BIN set, the real `ctxbox serve`, killed with SIGKILL halfway)."""

from __future__ import annotations

import json
import os
import signal
import sys
import tempfile
import time

import pytest

from ctxbox_hermes.bridge import Bridge, CompressRequest
from ctxbox_hermes.config import read_settings
from ctxbox_hermes.messages import NOTE_KEY, from_openclaw, to_openclaw
from ctxbox_hermes.prompt import check_tool_pairs, is_real_user
from ctxbox_hermes.sidecar import Sidecar, SidecarError, SidecarUnavailable
from recorded import recorded_transcript
from test_messages import HERMES_MESSAGES

CTXBOX_BIN = os.environ.get("CTXBOX_BIN")
needs_ctxbox = pytest.mark.skipif(not CTXBOX_BIN, reason="set CTXBOX_BIN to a built ctxbox")


class Spy:
    """Records what the bridge's sidecar is asked."""

    def __init__(self, sidecar: Sidecar) -> None:
        self.calls: list[tuple[str, dict]] = []
        self._call = sidecar.call
        sidecar.call = self.call  # type: ignore[method-assign]

    def call(self, method: str, params: dict, timeout_s: float):
        self.calls.append((method, params))
        return self._call(method, params, timeout_s)

    def methods(self) -> list[str]:
        return [method for method, _ in self.calls]


def bridge_for(engine: str, timeout_ms: int = 10_000, binary: str | None = CTXBOX_BIN) -> Bridge:
    data_dir = tempfile.mkdtemp(prefix="ctxbox-hermes-test-")
    return Bridge(read_settings({"engine": engine, "ctxbox_bin": binary or "/nonexistent/ctxbox",
                                 "data_dir": data_dir, "call_timeout_ms": timeout_ms}))


def spied_keep_recent(messages: int) -> tuple[Bridge, "Host", "Spy", list[dict]]:
    """A keep-recent bridge, its host, a spy on its sidecar, and a recorded
    transcript of about `messages` messages."""
    bridge = bridge_for("keep-recent")
    return bridge, Host(), Spy(bridge.sidecar), recorded_transcript(messages)


class Host:
    """The host's compressions, recording what they were given: `instead`
    leaves the messages as they are, `within` keeps the newest four."""

    def __init__(self) -> None:
        self.instead_calls: list[list[dict]] = []
        self.within_calls: list[list[dict]] = []

    def compress(self, bridge: Bridge, session: str, messages: list[dict], budget: int):
        return bridge.compress(session, messages, CompressRequest(token_budget=budget),
                               within=self.within, instead=self.instead)

    def instead(self, messages: list[dict]) -> list[dict]:
        self.instead_calls.append(messages)
        return messages

    def within(self, messages: list[dict]) -> list[dict]:
        self.within_calls.append(messages)
        return messages[-4:]


def test_a_missing_binary_fails_fast_and_backs_off():
    sidecar = Sidecar(["/nonexistent/ctxbox", "serve"], initial_backoff_s=5)
    started = time.monotonic()
    with pytest.raises(SidecarUnavailable, match="cannot run /nonexistent/ctxbox"):
        sidecar.call("hello", {}, 2)
    with pytest.raises(SidecarUnavailable, match="restarting"):
        sidecar.call("hello", {}, 2)
    assert time.monotonic() - started < 1
    sidecar.close()


def test_a_sidecar_that_never_answers_costs_one_call_timeout():
    sidecar = Sidecar([sys.executable, "-c", "import time; time.sleep(120)"])
    started = time.monotonic()
    with pytest.raises(SidecarUnavailable):
        sidecar.call("info", {}, 0.8)
    took = time.monotonic() - started
    assert 0.7 <= took < 2.5, took
    sidecar.close()


def test_a_sidecar_that_stops_reading_cannot_hold_a_call_past_its_timeout():
    # Answers `hello`, then reads nothing more: a large request fills the pipe.
    stalled = ("import json, sys, time; hello = json.loads(sys.stdin.readline()); "
               "print(json.dumps({'id': hello['id'], 'result': {'protocol': 1}}), flush=True); time.sleep(120)")
    sidecar = Sidecar([sys.executable, "-c", stalled])
    started = time.monotonic()
    with pytest.raises(SidecarUnavailable, match="timed out"):
        sidecar.call("assemble", {"sync": {"messages": ["x" * 4_000_000]}}, 1.5)
    took = time.monotonic() - started
    assert took < 3, took
    sidecar.close()


# Answers `hello`, then `code` to the first `busy` calls and a result after.
_BUSY_SIDECAR = """
import json, sys
code, busy = sys.argv[1], int(sys.argv[2])
calls = 0
for line in sys.stdin:
    request = json.loads(line)
    if request.get("method") == "hello":
        answer = {"protocol": 1}
    elif request.get("method") == "cancel":
        continue
    else:
        calls += 1
        if calls <= busy:
            print(json.dumps({"id": request["id"], "error": {"code": code, "message": "try later"}}), flush=True)
            continue
        answer = {"calls": calls}
    print(json.dumps({"id": request["id"], "result": answer}), flush=True)
"""


@pytest.mark.parametrize("code", ["session-busy", "overloaded"])
def test_a_busy_or_overloaded_answer_is_retried_within_the_call(code):
    sidecar = Sidecar([sys.executable, "-c", _BUSY_SIDECAR, code, "2"])
    assert sidecar.call("info", {}, 5) == {"calls": 3}
    sidecar.close()


def test_retries_stop_when_the_calls_time_is_up():
    sidecar = Sidecar([sys.executable, "-c", _BUSY_SIDECAR, "overloaded", "1000000"])
    started = time.monotonic()
    with pytest.raises(SidecarError, match=r"overloaded: try later \(tried \d+ times\)"):
        sidecar.call("info", {}, 1.0)
    assert time.monotonic() - started < 1.5
    sidecar.close()


def test_other_errors_are_not_retried():
    sidecar = Sidecar([sys.executable, "-c", _BUSY_SIDECAR, "engine-unknown", "1"])
    with pytest.raises(SidecarError, match="engine-unknown"):
        sidecar.call("info", {}, 5)
    assert sidecar.call("info", {}, 5) == {"calls": 2}
    sidecar.close()


def test_compress_falls_back_within_the_timeout_when_the_sidecar_cannot_run():
    bridge = bridge_for("keep-recent", timeout_ms=1_000, binary="/nonexistent/ctxbox")
    messages = [from_openclaw(to_openclaw(m)) for m in HERMES_MESSAGES[1:5]]
    host = Host()
    started = time.monotonic()
    outcome = host.compress(bridge, "s", messages, 100)
    assert outcome.served_by == "fallback" and "cannot run" in outcome.reason
    assert outcome.messages is messages and host.instead_calls == [messages] and not host.within_calls
    assert time.monotonic() - started < 1.5


@needs_ctxbox
def test_every_hermes_shape_is_accepted_and_comes_back_byte_for_byte():
    bridge = bridge_for("keep-recent")
    host = Host()
    sent = [to_openclaw(m) for m in HERMES_MESSAGES]
    answer = bridge.call("assemble", {"sessionId": "shapes", "sync": {"base": 0, "messages": sent}},
                         time.monotonic() + 10)
    assert answer["servedBy"] == "keep-recent"
    assert answer["messages"] == sent, "the server keeps every message's JSON as sent"
    assert [from_openclaw(m) for m in answer["messages"]] == HERMES_MESSAGES
    bridge.sidecar.close()


@needs_ctxbox
def test_keep_recent_compresses_a_recorded_session_and_syncs_only_what_is_new():
    bridge, host, spy, history = spied_keep_recent(100)
    outcome = host.compress(bridge, "kr", history, 4_000)
    assert outcome.served_by == "keep-recent", outcome.reason
    transcript = outcome.messages
    assert len(transcript) < len(history)
    assert str(transcript[0]["content"]).startswith("[keep-recent: "), transcript[0]
    assert transcript[-1] == history[-1]
    check_tool_pairs(transcript, history)
    latest_user = next(m for m in reversed(history) if is_real_user(m))
    assert any(str(m["content"]).endswith(str(latest_user["content"])) for m in transcript if m["role"] == "user")
    first_sync = spy.calls[1][1]["sync"]  # [0] is `info`
    assert spy.methods()[:3] == ["info", "afterTurn", "assemble"]
    assert first_sync["base"] == 0 and len(first_sync["messages"]) == len(history)

    # Hermes continues with the transcript plus a turn: only the turn is sent.
    turn = [{"role": "user", "content": "one more question"}, {"role": "assistant", "content": "one more answer"}]
    spy.calls.clear()
    again = host.compress(bridge, "kr", transcript + turn, 4_000)
    sync = spy.calls[0][1]["sync"]
    assert spy.methods() == ["afterTurn", "assemble"]
    assert sync["base"] == len(history) and [from_openclaw(m) for m in sync["messages"]] == turn
    assert again.messages[-2:] == turn
    assert not host.within_calls and not host.instead_calls, "keep-recent fits the budget itself"
    bridge.sidecar.close()


@needs_ctxbox
def test_after_sigkill_the_session_is_resent_and_the_engine_serves_again():
    bridge = bridge_for("keep-recent")
    host = Host()
    spy = Spy(bridge.sidecar)
    history = recorded_transcript(60)
    assert host.compress(bridge, "k", history, 3_000).served_by == "keep-recent"
    pid = bridge.sidecar.pid
    os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while (bridge.sidecar.pid in (None, pid)) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert bridge.sidecar.pid not in (None, pid), "a new sidecar runs"
    assert bridge.sidecar.deaths == 1
    spy.calls.clear()
    outcome = host.compress(bridge, "k", history, 3_000)
    assert outcome.served_by == "keep-recent", outcome.reason
    syncs = [params["sync"]["base"] for method, params in spy.calls if "sync" in params]
    assert syncs == [0, len(history)], "a new sidecar gets the whole session, once"
    bridge.sidecar.close()


@needs_ctxbox
def test_a_sidecar_that_lost_the_session_gets_it_again():
    bridge = bridge_for("keep-recent")
    host = Host()
    spy = Spy(bridge.sidecar)
    history = recorded_transcript(40)
    host.compress(bridge, "lost", history, 100_000)
    bridge.call("closeSession", {"sessionId": "lost"}, time.monotonic() + 5)  # behind the plugin's back
    spy.calls.clear()
    outcome = host.compress(bridge, "lost", history, 2_000)
    assert outcome.served_by == "keep-recent", outcome.reason
    syncs = [params["sync"]["base"] for method, params in spy.calls if "sync" in params]
    assert syncs == [len(history), 0, len(history)], "history-mismatch, then the whole session again"
    bridge.sidecar.close()


@needs_ctxbox
def test_lossless_compacts_and_shows_its_summaries():
    bridge = bridge_for("lossless")
    host = Host()
    spy = Spy(bridge.sidecar)
    history = recorded_transcript(120)
    outcome = host.compress(bridge, "ll", history, 16_000)
    assert outcome.served_by == "lossless", outcome.reason
    assert "compact" in spy.methods(), "lossless owns compaction"
    notes = [m for m in outcome.messages if NOTE_KEY in m or "[Summary of earlier conversation" in str(m["content"])]
    assert notes, json.dumps(outcome.messages[:2])[:500]
    assert "[Summary of earlier conversation: messages 1–" in str(outcome.messages[0]["content"])
    check_tool_pairs(outcome.messages, history)
    assert not host.within_calls, "an engine that owns compaction decides alone"
    bridge.sidecar.close()


@needs_ctxbox
def test_an_engine_that_leaves_compaction_to_its_host_gets_it_over_the_budget():
    # `delegating` elides stale tool output but trims nothing: over the
    # budget, the rest is the host's (Hermes's compressor, in the plugin).
    bridge = bridge_for("delegating")
    host = Host()
    history = recorded_transcript(100)
    outcome = host.compress(bridge, "dl", history, 4_000)
    assert outcome.served_by == "delegating" and outcome.delegated
    [engines_prompt] = host.within_calls
    assert len(engines_prompt) == len(history) and engines_prompt != history
    assert any(str(m.get("content")).startswith("[Output elided") for m in engines_prompt)
    assert outcome.messages == engines_prompt[-4:]
    roomy = host.compress(bridge, "dl2", recorded_transcript(100), 10_000_000)
    assert not roomy.delegated and len(host.within_calls) == 1
    bridge.sidecar.close()


@needs_ctxbox
def test_a_session_that_fits_comes_back_as_the_very_list():
    bridge = bridge_for("keep-recent")
    host = Host()
    history = recorded_transcript(30)
    outcome = host.compress(bridge, "fits", history, 10_000_000)
    assert outcome.served_by == "keep-recent" and outcome.messages is history
    bridge.sidecar.close()


@needs_ctxbox
def test_a_leading_system_message_stays_and_is_not_shown_to_the_engine():
    bridge = bridge_for("keep-recent")
    host = Host()
    spy = Spy(bridge.sidecar)
    system = {"role": "system", "content": "You are Hermes. " * 500}
    history = recorded_transcript(60)
    outcome = host.compress(bridge, "sys", [system] + history, 3_000)
    assert outcome.served_by == "keep-recent", outcome.reason
    assert outcome.messages[0] is system and len(outcome.messages) < len(history)
    sent = spy.calls[1][1]["sync"]["messages"]
    assert len(sent) == len(history) and all(m["role"] != "custom" for m in sent)
    bridge.sidecar.close()


@needs_ctxbox
def test_closing_a_session_forgets_it_in_the_sidecar():
    bridge = bridge_for("keep-recent")
    host = Host()
    host.compress(bridge, "gone", recorded_transcript(20), 100_000)
    assert bridge.call("health", {}, time.monotonic() + 5)["sessions"] == 1
    bridge.close_session("gone")
    assert bridge.call("health", {}, time.monotonic() + 5)["sessions"] == 0
    bridge.sidecar.close()


@needs_ctxbox
def test_the_real_sidecar_keeps_the_session_through_a_projection_and_takes_a_rewind_as_a_reset():
    bridge, host, spy, history = spied_keep_recent(60)
    turn = [{"role": "user", "content": "one more question"}, {"role": "assistant", "content": "one more answer"}]
    shortened = host.compress(bridge, "p", history, 3_000).messages
    assert len(shortened) < len(history)
    assert host.compress(bridge, "p", shortened + turn, 3_000).served_by == "keep-recent"

    # A retry on the transcript Hermes had before: a projection, every
    # message held. The sidecar keeps the whole session (it would refuse a
    # shorter sync), and the engine serves.
    spy.calls.clear()
    outcome = host.compress(bridge, "p", history, 3_000)
    assert outcome.served_by == "keep-recent", outcome.reason
    assert [params["sync"]["base"] for _, params in spy.calls if "sync" in params] == [len(history) + 2] * 2
    assert bridge.session_length("p") == len(history) + 2 and bridge.session_resets("p") == 0

    # A rewind: Hermes goes on from the middle of the history. The sidecar
    # accepts it as a reset and holds what Hermes's branch holds.
    spy.calls.clear()
    rewound = history[:30] + [{"role": "user", "content": "a different question"}]
    outcome = host.compress(bridge, "p", rewound, 3_000)
    assert outcome.served_by == "keep-recent", outcome.reason
    [first, *_] = [params["sync"] for _, params in spy.calls if "sync" in params]
    assert first["reset"] is True and first["base"] == 30
    assert bridge.session_length("p") == 31 and bridge.session_resets("p") == 1
    bridge.sidecar.close()
