"""Runs one Hermes Agent session the way Hermes's CLI does (an `AIAgent`
with a SQLite session store, each turn continuing the last), in a process
of its own, and writes what happened as JSON. Run by test_e2e.py and
bench.py with the Hermes venv's python:

    python hermes_driver.py SPEC.json

SPEC: `base_url` (the fake model), `turns` (user messages), `report` (where
the JSON goes, rewritten after every turn), optional `toolsets`,
`kill_sidecar_after` (turns after which the `ctxbox serve` child is killed
with SIGKILL), `ctxbox_bin` (to recognise it), `history` (a transcript the
session starts from). HERMES_HOME names the Hermes home to use.
"""

from __future__ import annotations

import functools
import json
import os
import signal
import sys
import time


def main(spec_path: str) -> None:
    connects: set[str] = set()
    sys.addaudithook(lambda event, args: connects.add(repr(args[1])) if event == "socket.connect" else None)
    with open(spec_path, encoding="utf-8") as file:
        spec = json.load(file)
    started = time.monotonic()
    from hermes_state import SessionDB
    from run_agent import AIAgent

    agent = AIAgent(base_url=spec["base_url"], api_key="sk-fake", provider="custom", model="fake-model",
                    quiet_mode=True, skip_context_files=True, skip_memory=True, platform="cli",
                    enabled_toolsets=spec.get("toolsets") or [], session_db=SessionDB())
    engine = agent.context_compressor
    spent = timed_engine(engine)
    report: dict = {"engine": engine.name, "engine_class": type(engine).__name__,
                    "startup_ms": _ms(started), "turns": [], "killed": []}
    history = spec.get("history")
    for number, text in enumerate(spec["turns"], 1):
        begun = time.monotonic()
        spent["ms"] = 0.0
        result = agent.run_conversation(text, conversation_history=history)
        history = result["messages"]
        report["turns"].append({
            "turn": number, "ms": _ms(begun), "engine_ms": round(spent["ms"], 3),
            "final": result.get("final_response"),
            "failed": bool(result.get("failed")), "error": result.get("error"),
            "messages": len(history), "status": _plain(engine.get_status()),
            "sidecars": sidecars(spec.get("ctxbox_bin")),
        })
        if number in spec.get("kill_sidecar_after", []):
            for pid in sidecars(spec.get("ctxbox_bin")):
                os.kill(pid, signal.SIGKILL)
                report["killed"].append(pid)
        _write(spec["report"], report)
    agent.shutdown_memory_provider(history)
    agent.close()
    report["transcript"] = history
    report["connects"] = sorted(connects)
    _write(spec["report"], report)


def timed_engine(engine) -> dict:
    """Adds up the time spent in the context engine's per-turn methods
    (in `["ms"]`), whichever engine it is."""
    spent = {"ms": 0.0}

    def timed(method):
        @functools.wraps(method)  # keeps the signature Hermes inspects
        def run(*args, **kwargs):
            started = time.perf_counter()
            try:
                return method(*args, **kwargs)
            finally:
                spent["ms"] += (time.perf_counter() - started) * 1000
        return run

    for name in ("should_compress", "should_defer_preflight_to_real_usage", "update_from_response", "compress"):
        method = getattr(engine, name, None)
        if callable(method):
            setattr(engine, name, timed(method))
    return spent


def sidecars(ctxbox_bin, pid: str = "self") -> list[int]:
    """The `ctxbox serve` children of process `pid` (this one by default)."""
    found = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return []
    for task in tasks:
        try:
            with open(f"/proc/{pid}/task/{task}/children") as file:
                children = [int(pid) for pid in file.read().split()]
        except OSError:
            continue
        for pid in children:
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as file:
                    argv = file.read().split(b"\0")
            except OSError:
                continue
            if ctxbox_bin and argv[0].decode() == ctxbox_bin and argv[1:2] == [b"serve"]:
                found.append(pid)
    return sorted(set(found))


def _ms(since: float) -> int:
    return int((time.monotonic() - since) * 1000)


def _plain(value):
    return json.loads(json.dumps(value, default=str))


def _write(path: str, report: dict) -> None:
    with open(path + ".tmp", "w", encoding="utf-8") as file:
        json.dump(report, file, ensure_ascii=False, default=str)
    os.replace(path + ".tmp", path)


if __name__ == "__main__":
    main(sys.argv[1])
