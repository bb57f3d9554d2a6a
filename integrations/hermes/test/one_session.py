"""One Hermes Agent session with the plugin serving a given ctxbox engine,
for tests outside pytest (integrations/openclaw/test/both-runtimes.mjs runs
the same `.wasm` file in OpenClaw and here). The Hermes home, the loopback
fake model and the driver process are test_e2e.py's (`Hermes`,
`FakeModel`, hermes_driver.py); run with the Hermes venv's python:

    CTXBOX_BIN=… python one_session.py ENGINE WORK_DIR OUT.json TURN…

ENGINE: a `.wasm` path or a bundled engine. WORK_DIR: an empty directory for
the Hermes home and the sidecar's data. Writes OUT.json: `turns` (each with
`final` and the engine's status: `served_by`, `served`, `fallbacks`, …),
`health` (`ctxbox health --json`'s exit status and records) and
`model_requests` (how many requests the fake model got). The window is small
(2,000 tokens) and the answers long, so Hermes compresses from the second
turn and the engine serves it. Exits non-zero if the session failed.
"""

from __future__ import annotations

import json
import pathlib
import sys

from fake_model import FakeModel
from test_e2e import Hermes


def main(engine: str, work: str, out: str, turns: list[str]) -> None:
    model = FakeModel(pad=6_000)
    try:
        hermes = Hermes(pathlib.Path(work), model, engine, window=2_000)
        report = hermes.run(turns)
        status, records = hermes.health()
        result = {
            "engine": report["engine"],
            "turns": [{"final": turn["final"], "failed": turn["failed"], "ms": turn["ms"],
                       "status": turn["status"]} for turn in report["turns"]],
            "connects": report["connects"],
            "health": {"status": status, "records": records},
            "model_requests": len(model.requests),
        }
    finally:
        model.close()
    pathlib.Path(out).write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    if len(sys.argv) < 5:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:])
