"""What the plugin and its sidecar cost Hermes, against Hermes's built-in
compressor, on the same recorded session (the sessions of
tests/fixtures/sessions as a Hermes transcript of 100 and 1,600 messages),
with a fake model that answers at once. Two measurements:

* a turn: `AIAgent.run_conversation` continuing the recorded session, in
  Hermes processes per engine taking turns (hermes_driver.py), under a
  window neither engine compresses in: the whole turn, and the time spent
  in the engine's methods (what the plugin adds to a turn that does not
  compress);
* a compression of the same transcript: Hermes's `ContextCompressor`
  (including its summary call to the model) against the plugin's
  `compress` with `keep-recent` — the first one of a session (the whole
  transcript goes to the sidecar) and the next ones (two new messages).

Run with the Hermes venv's python: CTXBOX_BIN=… python test/bench.py
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from fake_model import FakeModel  # noqa: E402
from recorded import recorded_transcript  # noqa: E402

SIZES = (100, 1_600)
TURNS = 12
RUNS = 2
COMPRESSIONS = 15


def main() -> None:
    binary = os.environ.get("CTXBOX_BIN")
    if not binary:
        sys.exit("set CTXBOX_BIN to a built ctxbox")
    root = tempfile.mkdtemp(prefix="ctxbox-hermes-bench-")
    model = FakeModel(pad=200)
    try:
        print(f"median ms; {RUNS * TURNS} turns / {COMPRESSIONS} compressions per figure; "
              f"the fake model answers at once; load average {os.getloadavg()[0]:.1f}")
        print("messages  turn: built-in  ctxbox  in engine: built-in  ctxbox"
              "   compress: built-in  ctxbox first  ctxbox next")
        for size in SIZES:
            history = recorded_transcript(size)
            turns: dict[str, list[dict]] = {"compressor": [], "ctxbox": []}
            for run in range(RUNS):  # alternating, in both orders, so a busy machine weighs on both
                for engine in sorted(turns, reverse=bool(run % 2)):
                    turns[engine] += session_turns(root, model, binary, engine, history)
                    model.requests.clear()  # the recorded bodies would slow the next session
            whole = {engine: statistics.median(t["ms"] for t in done) for engine, done in turns.items()}
            inside = {engine: statistics.median(t["engine_ms"] for t in done) for engine, done in turns.items()}
            builtin_compress, first, following = compress_ms(root, model, binary, history)
            print(f"{len(history):8}  {whole['compressor']:14.0f}  {whole['ctxbox']:6.0f}"
                  f"  {inside['compressor']:19.3f}  {inside['ctxbox']:6.3f}"
                  f"   {builtin_compress:18.1f}  {first:12.1f}  {following:11.1f}")
        print(f"load average {os.getloadavg()[0]:.1f}")
    finally:
        model.close()


def hermes_home(root: str, model: FakeModel, binary: str, engine: str, context_length: int) -> str:
    """A Hermes home using `engine` (`compressor` or `ctxbox` with keep-recent)."""
    home = tempfile.mkdtemp(prefix=f"home-{engine}-", dir=root)
    os.makedirs(os.path.join(home, "plugins"))
    os.symlink(os.path.join(os.path.dirname(HERE), "ctxbox_hermes"), os.path.join(home, "plugins", "ctxbox"))
    with open(os.path.join(home, "config.yaml"), "w") as config:
        config.write(f"""model:
  default: fake-model
  provider: custom
  base_url: {model.url}
  context_length: {context_length}
  ollama_num_ctx: 0
context:
  engine: {engine}
plugins:
  enabled: [ctxbox]
ctxbox:
  engine: keep-recent
  ctxbox_bin: {binary}
  data_dir: {home}/ctxbox-data
""")
    return home


def session_turns(root: str, model: FakeModel, binary: str, engine: str, history: list[dict]) -> list[dict]:
    """The turns (but the first, which warms Hermes up) of a session
    continuing `history`, under a window (four million tokens) in which
    neither engine compresses."""
    home = hermes_home(root, model, binary, engine, 4_000_000)
    report_path = os.path.join(home, "report.json")
    spec = os.path.join(home, "spec.json")
    with open(spec, "w") as file:
        json.dump({"base_url": model.url, "turns": [f"question {n}" for n in range(TURNS + 1)],
                   "report": report_path, "history": history, "ctxbox_bin": binary}, file)
    env = {"PATH": os.environ.get("PATH", ""), "HOME": home, "HERMES_HOME": home, "LANG": "C.UTF-8",
           "PYTHONDONTWRITEBYTECODE": "1"}
    subprocess.run([sys.executable, os.path.join(HERE, "hermes_driver.py"), spec], env=env, check=True,
                   timeout=600, stdout=subprocess.DEVNULL)
    with open(report_path) as file:
        report = json.load(file)
    assert report["engine"] == engine, report["engine"]
    turns = report["turns"][1:]
    assert all(not turn["failed"] for turn in turns)
    assert all(turn["status"]["compression_count"] == 0 for turn in turns), "nothing compresses in this window"
    return turns


def compress_ms(root: str, model: FakeModel, binary: str, history: list[dict]) -> tuple[float, float, float]:
    """Median ms of a compression of `history`: Hermes's built-in, the
    plugin's first of a session, the plugin's next ones."""
    home = hermes_home(root, model, binary, "ctxbox", 64_000)
    os.environ["HERMES_HOME"] = home
    from agent.context_compressor import ContextCompressor

    from ctxbox_hermes.bridge import Bridge
    from ctxbox_hermes.config import read_settings
    from ctxbox_hermes.engine import CtxboxEngine

    runtime = dict(model="fake-model", base_url=model.url, api_key="sk-fake", provider="custom",
                   api_mode="chat_completions")
    builtin = []
    for _ in range(COMPRESSIONS):
        compressor = ContextCompressor(quiet_mode=True, config_context_length=64_000, **runtime)
        started = time.perf_counter()
        compressor.compress(list(history))
        builtin.append(_ms(started))
        assert compressor.compression_count == 1, "the built-in compressor compressed"

    bridge = Bridge(read_settings({"engine": "keep-recent", "ctxbox_bin": binary,
                                   "data_dir": os.path.join(home, "ctxbox-data"), "window_tokens": 16_000}))
    first, following = [], []
    for run in range(COMPRESSIONS):
        engine = CtxboxEngine(bridge)
        engine.update_model(context_length=64_000, **runtime)
        engine.on_session_start(f"bench-{len(history)}-{run}")
        started = time.perf_counter()
        transcript = engine.compress(list(history))
        first.append(_ms(started))
        assert engine.stats["served"] == 1, engine.stats
        transcript = transcript + [{"role": "user", "content": f"next question {run}"},
                                   {"role": "assistant", "content": f"next answer {run}"}]
        started = time.perf_counter()
        engine.compress(transcript)
        following.append(_ms(started))
        assert engine.stats["fallbacks"] == 0, engine.stats
        engine.on_session_end(f"bench-{len(history)}-{run}", transcript)
    bridge.sidecar.close()
    return statistics.median(builtin), statistics.median(first), statistics.median(following)


def _ms(started: float) -> float:
    return (time.perf_counter() - started) * 1000


if __name__ == "__main__":
    main()
