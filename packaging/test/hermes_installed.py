"""One Hermes session through the plugin as a user installs it: run with
the python of a venv that holds Hermes Agent and the two wheels
(`pip install --find-links OUTDIR 'ctxbox-hermes[binary]'`), by
packaging/ci.sh. Hermes's config.yaml names no `ctxbox_bin` and PATH holds
no ctxbox: the plugin must find the binary the `ctxbox-bin` wheel put in the
venv's bin/. Four turns against a loopback fake model, in a window small
enough that the engine compresses; exits non-zero unless every turn
completed, the engine served, and the sidecar was that binary.

    python hermes_installed.py WORKDIR
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig

HERE = os.path.dirname(os.path.abspath(__file__))
HERMES_TESTS = os.path.join(HERE, "..", "..", "integrations", "hermes", "test")
sys.path.insert(0, HERMES_TESTS)

from fake_model import FakeModel  # noqa: E402


def main(work: str) -> None:
    binary = os.path.join(sysconfig.get_path("scripts"), "ctxbox")
    assert os.access(binary, os.X_OK), f"the ctxbox-bin wheel put no ctxbox in {binary}"
    import ctxbox_hermes  # the installed wheel, not the checkout

    assert "site-packages" in ctxbox_hermes.__file__, ctxbox_hermes.__file__
    home = os.path.join(work, "hermes-home")
    os.makedirs(home, exist_ok=True)
    model = FakeModel(pad=3_000)
    try:
        with open(os.path.join(home, "config.yaml"), "w", encoding="utf-8") as file:
            file.write(f"""model:
  default: fake-model
  provider: custom
  base_url: {model.url}
  context_length: 64000
context:
  engine: ctxbox
plugins:
  enabled: [ctxbox]
ctxbox:
  engine: keep-recent
  data_dir: {work}/ctxbox-data
  window_tokens: 3000
""")
        turns = [f"question {n}" for n in range(1, 7)]
        report_path = os.path.join(work, "report.json")
        spec = os.path.join(work, "spec.json")
        with open(spec, "w", encoding="utf-8") as file:
            json.dump({"base_url": model.url, "turns": turns, "report": report_path, "ctxbox_bin": binary}, file)
        env = {"PATH": "/usr/bin:/bin", "HOME": work, "LANG": "C.UTF-8", "HERMES_HOME": home,
               "PYTHONDONTWRITEBYTECODE": "1"}
        done = subprocess.run([sys.executable, os.path.join(HERMES_TESTS, "hermes_driver.py"), spec], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=300)
        output = done.stdout
        assert done.returncode == 0, f"the Hermes session failed:\n{output[-5000:]}"
        with open(report_path, encoding="utf-8") as file:
            report = json.load(file)
    finally:
        model.close()
    assert report["engine_class"] == "CtxboxEngine", output[-3000:]
    for turn, asked in zip(report["turns"], turns):
        assert not turn["failed"] and turn["final"].startswith(f'answer to "{asked}'), turn
    last = report["turns"][-1]
    assert last["status"]["session_length"] >= 2 * len(turns), f"the sidecar did not get every turn: {last['status']}"
    assert last["status"]["served"] > 0, f"the engine never served: {last['status']}\n{output[-3000:]}"
    assert any(turn["sidecars"] for turn in report["turns"]), "no sidecar ran from the wheel's binary"
    assert "ctxbox:" not in output, f"the plugin complained on the console:\n{output[-3000:]}"
    print(f"hermes_installed: {len(turns)} turns, served {last['status']['served']}, "
          f"fell back {last['status']['fallbacks']}, binary {binary}")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
