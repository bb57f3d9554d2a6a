"""The engine as Hermes sees it (its `ContextEngine` class, without the agent
loop): thresholds and budgets, deep copies sharing the sidecar, the
fallback to Hermes's own compressor, and the session lifecycle against the
real sidecar when CTXBOX_BIN is set."""

from __future__ import annotations

import copy
import json
import os
import tempfile
import time

import pytest

pytest.importorskip("agent.context_engine", reason="needs hermes-agent installed")

import agent.context_compressor  # noqa: E402,F401  (imported by Hermes before any engine runs)
from agent.context_engine import ContextEngine  # noqa: E402
from agent.model_metadata import estimate_messages_tokens_rough  # noqa: E402

from ctxbox_hermes.bridge import Bridge  # noqa: E402
from ctxbox_hermes.config import read_settings  # noqa: E402
from ctxbox_hermes.engine import CtxboxEngine  # noqa: E402
from fake_model import FakeModel  # noqa: E402
from recorded import recorded_transcript  # noqa: E402

CTXBOX_BIN = os.environ.get("CTXBOX_BIN")


@pytest.fixture(autouse=True)
def hermes_home(monkeypatch) -> str:
    """A Hermes home of its own: no user config or keys leak in."""
    home = tempfile.mkdtemp(prefix="ctxbox-hermes-home-")
    monkeypatch.setenv("HERMES_HOME", home)
    return home


def engine(binary: str = "/nonexistent/ctxbox", base_url: str = "http://127.0.0.1:9/v1",
           **settings) -> CtxboxEngine:
    raw = {"engine": "keep-recent", "ctxbox_bin": binary,
           "data_dir": tempfile.mkdtemp(prefix="ctxbox-hermes-test-"), **settings}
    built = CtxboxEngine(Bridge(read_settings(raw)))
    built.update_model(model="fake-model", context_length=64_000, base_url=base_url,
                       api_key="sk-fake", provider="custom", api_mode="chat_completions")
    return built


def test_it_is_a_hermes_context_engine_and_offers_no_tools_without_a_sidecar():
    built = engine()
    assert isinstance(built, ContextEngine) and built.name == "ctxbox"
    assert built.get_tool_schemas() == []
    assert "Unknown context engine tool: lcm_grep" in json.loads(built.handle_tool_call("lcm_grep", {}))["error"]


def test_compression_fires_at_the_threshold_of_the_configured_window():
    small = engine(window_tokens=8_000, threshold=0.75, target=0.5)
    assert small.context_length == 64_000, "Hermes's 64K floor applies to the model, not the window"
    assert small.threshold_tokens == 6_000
    assert not small.should_compress(5_999) and small.should_compress(6_000)
    messages = [{"role": "user", "content": "x" * 4_000}]
    own = estimate_messages_tokens_rough(messages)  # about 1,000
    assert small._budget(messages, current_tokens=3_000) == 4_000 - (3_000 - own), "system prompt and tools come off"
    assert small._budget(messages, current_tokens=None) == 4_000
    assert small._budget(messages, current_tokens=50_000) == 1_000, "never below a quarter of the target"
    default = engine()
    assert default.window_tokens == 64_000 and default.threshold_tokens == 48_000
    default.update_model(model="other", context_length=200_000)
    assert default.threshold_tokens == 150_000


def test_deep_copies_share_the_sidecar_and_keep_their_own_state():
    original = engine()
    original.stats["served"] = 3
    copied = copy.deepcopy(original)
    assert copied._bridge is original._bridge and copied._bridge.sidecar is original._bridge.sidecar
    copied.stats["served"] = 7
    assert original.stats["served"] == 3
    assert copied._hermes is not original._hermes and copied._hermes.runtime == original._hermes.runtime


def test_without_a_sidecar_hermes_own_compressor_answers_at_once():
    built = engine(window_tokens=2_000, call_timeout_ms=2_000)
    built.on_session_start("s1", platform="cli")
    messages = [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}]
    started = time.monotonic()
    assert built.compress(messages, current_tokens=5_000) == messages
    assert time.monotonic() - started < 1.5
    assert built.stats["fallbacks"] == 1
    assert "the sidecar" in built.stats["last_fallback"]  # cannot run it, or waits to try again
    assert built._hermes.last is None, "below Hermes's own threshold its compressor is not run"
    assert built._last_compression_made_progress is False
    assert not built.should_compress(10_000), "no second attempt before the next response"
    built.update_from_response({"prompt_tokens": 10_000, "completion_tokens": 5, "total_tokens": 10_005})
    assert built.last_prompt_tokens == 10_000 and built.should_compress(10_000)

    # Past the built-in compressor's own threshold (54,400 at 64K), or on
    # /compress, it runs; with nothing old enough to summarize it changes nothing.
    assert built.compress(messages, current_tokens=60_000) == messages
    assert type(built._hermes.last).__name__ == "ContextCompressor"
    assert built._hermes.last.threshold_tokens == 54_400
    built.compress(messages, current_tokens=5_000, force=True)
    assert built._hermes.last is not None


@pytest.mark.skipif(not CTXBOX_BIN, reason="set CTXBOX_BIN to a built ctxbox")
def test_the_session_lives_across_compaction_boundaries_and_ends_with_hermes():
    built = engine(CTXBOX_BIN, window_tokens=6_000)
    health = lambda: built._bridge.call("health", {}, time.monotonic() + 5)  # noqa: E731
    built.on_session_start("s1", platform="cli", model="fake-model")
    deadline = time.monotonic() + 10
    while health()["sessions"] != 1 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert health()["sessions"] == 1, "bootstrap opened the session in the background"

    history = recorded_transcript(80)
    compressed = built.compress(history, current_tokens=40_000)
    assert len(compressed) < len(history) and built.stats["served"] == 1, built.stats
    assert all("_db_persisted" not in message for message in compressed)
    # Hermes's compaction path: memory commit (on_session_end), then the
    # boundary, possibly under a new session id. The session goes on.
    built.on_session_end("s1", history)
    built.on_session_start("s2", boundary_reason="compression", old_session_id="s1")
    assert health()["sessions"] == 1
    assert built._bridge.session_key("s2") == "s1"
    more = compressed + [{"role": "user", "content": "and now?"}, {"role": "assistant", "content": "now this"}]
    built.update_from_response({"prompt_tokens": 100})
    again = built.compress(more, current_tokens=40_000)
    assert again[-2:] == more[-2:] and built.stats["served"] + built.stats["unchanged"] == 2, built.stats

    built.on_session_start("s2", boundary_reason="compression", old_session_id="s2")  # in place
    built.on_session_end("s2", again)
    assert health()["sessions"] == 0, "a real end closes the session"

    # /new: Hermes resets the engine, then starts the next session.
    built.on_session_start("s3")
    built.compress(recorded_transcript(20), current_tokens=40_000)
    assert health()["sessions"] == 1
    built.on_session_reset()
    assert health()["sessions"] == 0 and built.compression_count == 0
    built._bridge.sidecar.close()


@pytest.mark.skipif(not CTXBOX_BIN, reason="set CTXBOX_BIN to a built ctxbox")
def test_what_an_engine_leaves_to_its_host_hermes_compresses_within_the_window(hermes_home):
    model = FakeModel()
    try:
        with open(os.path.join(hermes_home, "config.yaml"), "w") as config:
            config.write(f"model:\n  default: fake-model\n  provider: custom\n  base_url: {model.url}\n"
                         "  context_length: 64000\n")
        built = engine(CTXBOX_BIN, base_url=model.url, engine="delegating", window_tokens=16_000)
        built.on_session_start("d1")
        history = recorded_transcript(100)
        compressed = built.compress(history, current_tokens=90_000)
        assert built.stats["served"] == 1 and built.stats["delegated"] == 1, built.stats
        assert any(str(m.get("content")).startswith("[CONTEXT COMPACTION") for m in compressed), \
            "Hermes's compressor summarized what delegating left over the budget"
        assert any(str(m.get("content")).startswith("[Output elided") for m in compressed), "after the engine's own work"
        assert [r for r in model.requests if not r.get("stream")], "one summary request to the model"
        assert estimate_messages_tokens_rough(compressed) < estimate_messages_tokens_rough(history) // 4
        built._bridge.sidecar.close()
    finally:
        model.close()


def test_a_turn_reaches_the_bridge_unless_it_is_hermes_background_review():
    from hermes_cli.plugins import clear_thread_tool_whitelist, set_thread_tool_whitelist

    built = engine()
    built.on_session_start("s-review")
    ended: list[tuple[str, int]] = []
    built._bridge.end_turn = lambda session, messages, budget: ended.append((session, len(messages)))
    turn = [{"role": "user", "content": "question"}, {"role": "assistant", "content": "answer"}]
    built._bridge.turn_ended(session_id="s-review", conversation_history=turn)
    # The review fork shares the session id; Hermes whitelists its thread's tools.
    set_thread_tool_whitelist({"memory", "skill_manage"})
    try:
        built._bridge.turn_ended(session_id="s-review", conversation_history=turn + turn)
    finally:
        clear_thread_tool_whitelist()
    assert ended == [("s-review", 2)]
    built._bridge.sidecar.close()
