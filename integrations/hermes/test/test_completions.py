"""The sidecar's reverse `complete`, answered with Hermes's compression
model (`completions.py`): the request checked and turned into Hermes's
auxiliary call, the answer read back, every failure an error answer; the
real auxiliary client of Hermes against the loopback fake model; and the
sidecar client answering a fake sidecar's `complete` in a thread of its
own, by the same id, or not at all once cancelled."""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from types import SimpleNamespace

import pytest

from ctxbox_hermes import completions
from ctxbox_hermes.sidecar import ReverseError, Sidecar
from fake_model import ENGINE_SUMMARY, FakeModel

RUNTIME = {"model": "fake-model", "provider": "custom", "base_url": "http://127.0.0.1:9/v1", "api_key": "sk-fake",
           "api_mode": "", "context_length": 64_000}
REQUEST = {"sessionId": "s1", "engine": "lossless", "purpose": "summarize", "systemPrompt": "You summarize.",
           "messages": [{"role": "user", "content": "<content>\nquestion 1\n</content>"}], "maxTokens": 500}


class Recorder:
    """A stand-in for Hermes's `call_llm`, recording its arguments."""

    def __init__(self, text: str = "a summary", error: Exception | None = None) -> None:
        self.calls: list[dict] = []
        self.text = text
        self.error = error

    def __call__(self, **kwargs):
        self.calls.append(kwargs)
        if self.error is not None:
            raise self.error
        message = SimpleNamespace(content=self.text)
        usage = SimpleNamespace(prompt_tokens=120, completion_tokens=30)
        return SimpleNamespace(choices=[SimpleNamespace(message=message)], usage=usage, model="fake-model")


def test_a_request_becomes_hermes_compression_call_within_the_deadline():
    model = Recorder("<think>hmm</think>\na summary")
    answer = completions.complete(REQUEST, RUNTIME, time.monotonic() + 5, model)
    assert answer == {"text": "a summary", "inputTokens": 120, "outputTokens": 30, "model": "fake-model"}
    [call] = model.calls
    assert call["task"] == "compression", "auxiliary.compression's settings apply, as to Hermes's own summaries"
    assert call["main_runtime"] == {"model": "fake-model", "provider": "custom", "base_url": "http://127.0.0.1:9/v1",
                                    "api_key": "sk-fake", "api_mode": ""}
    assert call["messages"] == [{"role": "system", "content": "You summarize."},
                                {"role": "user", "content": "<content>\nquestion 1\n</content>"}]
    assert call["max_tokens"] == 500
    assert 0 < call["timeout"] <= 5


@pytest.mark.parametrize("params, field", [
    ({"messages": []}, "`messages`"),
    ({"messages": [{"role": "tool", "content": "x"}]}, "`messages[0].role`"),
    ({"messages": [{"role": "user", "content": ["x"]}]}, "`messages[0].content`"),
    ({**REQUEST, "systemPrompt": 3}, "`systemPrompt`"),
    ({**REQUEST, "maxTokens": 0}, "`maxTokens`"),
    ({**REQUEST, "maxTokens": True}, "`maxTokens`"),
])
def test_a_malformed_request_fails_naming_its_field(params, field):
    model = Recorder()
    with pytest.raises(ReverseError) as raised:
        completions.complete(params, RUNTIME, time.monotonic() + 5, model)
    assert raised.value.code == "failed" and field in raised.value.message
    assert model.calls == [], "the model is not asked"


def test_no_model_no_time_a_failing_or_silent_model_are_error_answers():
    with pytest.raises(ReverseError, match="unavailable: Hermes has not named"):
        completions.complete(REQUEST, None, time.monotonic() + 5, Recorder())
    with pytest.raises(ReverseError, match="cancelled: no time"):
        completions.complete(REQUEST, RUNTIME, time.monotonic() - 1, Recorder())
    with pytest.raises(ReverseError, match="unavailable: No LLM provider configured"):
        completions.complete(REQUEST, RUNTIME, time.monotonic() + 5,
                             Recorder(error=RuntimeError("No LLM provider configured for task=compression")))
    with pytest.raises(ReverseError, match="failed: TimeoutError: slow"):
        completions.complete(REQUEST, RUNTIME, time.monotonic() + 5, Recorder(error=TimeoutError("slow")))
    with pytest.raises(ReverseError, match="failed: the model answered no text"):
        completions.complete(REQUEST, RUNTIME, time.monotonic() + 5, Recorder("  "))


def test_hermes_own_auxiliary_client_asks_the_agents_model(monkeypatch, tmp_path):
    monkeypatch.setenv("HERMES_HOME", str(tmp_path))
    served = FakeModel()
    try:
        runtime = {**RUNTIME, "base_url": served.url}
        request = {**REQUEST, "systemPrompt": "You summarize conversation history for ctxbox's lossless engine."}
        answer = completions.complete(request, runtime, time.monotonic() + 30)
        assert answer["text"] == ENGINE_SUMMARY and answer["model"] == "fake-model"
        [asked] = served.engine_summary_requests()
        assert asked["model"] == "fake-model" and not asked.get("stream")
        assert asked["messages"][-1]["content"] == "<content>\nquestion 1\n</content>"
    finally:
        served.close()


# A sidecar that, once a client declaring `complete` said hello, asks it for
# a completion (`srv-1`), then for another it cancels at once (`srv-2`), and
# logs every line the client sends.
_ASKING_SIDECAR = """
import json, sys
log = sys.argv[1]
def send(message):
    print(json.dumps(message), flush=True)
for line in sys.stdin:
    request = json.loads(line)
    with open(log, "a") as file:
        file.write(json.dumps(request) + "\\n")
    if request.get("method") == "hello":
        send({"id": request["id"], "result": {"protocol": 2}})
        if "complete" in request["params"].get("capabilities", []):
            send({"id": "srv-1", "method": "complete", "deadlineMs": 5000,
                  "params": {"sessionId": "s1", "messages": [{"role": "user", "content": "first"}]}})
            send({"id": "srv-2", "method": "complete", "deadlineMs": 5000,
                  "params": {"sessionId": "s1", "messages": [{"role": "user", "content": "slow"}]}})
            send({"id": None, "method": "cancel", "params": {"target": "srv-2"}})
            # Hostile lines: an id that is not a string, a cancel of nothing.
            send({"id": ["srv-3"], "method": "complete", "params": {}})
            send({"id": None, "method": "cancel", "params": {"target": {"x": 1}}})
    elif "method" in request:
        send({"id": request["id"], "result": {}})
"""


def test_the_client_declares_complete_and_answers_by_id_unless_cancelled():
    log = tempfile.mktemp(prefix="ctxbox-hermes-asking-sidecar-", suffix=".jsonl")
    asked: list[tuple[dict, float]] = []

    def handle(params: dict, deadline: float) -> dict:
        asked.append((params, deadline))
        if params["messages"][0]["content"] == "slow":
            time.sleep(0.5)  # the cancel arrives meanwhile
        return {"text": "answer to " + params["messages"][0]["content"]}

    sidecar = Sidecar([sys.executable, "-c", _ASKING_SIDECAR, log], reverse={"complete": handle})
    try:
        started = time.monotonic()
        sidecar.call("info", {}, 5)
        deadline = time.monotonic() + 5
        while len(asked) < 2 and time.monotonic() < deadline:
            time.sleep(0.02)
        time.sleep(1)  # time for the slow answer, which must not come
        sidecar.call("info", {}, 5)
        with open(log) as file:
            lines = [json.loads(line) for line in file]
    finally:
        sidecar.close()
        if os.path.exists(log):
            os.unlink(log)
    assert lines[0]["method"] == "hello" and lines[0]["params"]["capabilities"] == ["complete"]
    answers = [line for line in lines if "method" not in line]
    assert answers == [{"id": "srv-1", "result": {"text": "answer to first"}}], lines
    assert sorted(params["messages"][0]["content"] for params, _ in asked) == ["first", "slow"]
    for _, deadline in asked:
        assert started < deadline <= time.monotonic() + 5, "the request's deadlineMs, from when it came"
