#!/usr/bin/env bash
# Tests the Hermes plugin against the real Hermes Agent 0.19.0:
#   1. hermes-agent 0.19.0 and pytest from PyPI, into a venv cached outside
#      the clone ($CTXBOX_HERMES_VENV, default ~/.cache/ctxbox/hermes/venv);
#      quick when already there, rebuilt when its python is gone (a venv
#      only links to the interpreter it was made with).
#   2. The unit tests, then the end-to-end test (test/test_e2e.py).
# Takes the ctxbox binary and the test engines from the environment, or,
# when CTXBOX_BIN is unset, builds them (`cargo build -p ctxbox-host`,
# `cargo test -p ctxbox-tests --test all --no-run`) under $CARGO_TARGET_DIR
# (default <clone>/target) and finds them there:
#   CTXBOX_BIN            a built ctxbox (e.g. target/debug/ctxbox)
#   CTXBOX_SPIN_WASM      the `spin` test engine
#   CTXBOX_PANICKER_WASM  the `panicker` test engine
#   CTXBOX_SLEEPER_WASM   optional: the `sleeper` test engine
#   CTXBOX_TOOL_SPINNER_WASM optional: the `tool_spinner` test engine (engine tools)
#   CTXBOX_LOSSLESS_CLAW_WASM optional: lossless-claw built into an engine (its
#                         recall tools), with CTXBOX_LOSSLESS_CLAW_CACHE its
#                         compile cache (.ci/lossless-claw-env.sh)
# The venv is made with $CTXBOX_HERMES_PYTHON, else the first python3.13,
# python3.12, python3.11 or python3 on PATH that Hermes supports (3.11-3.13).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
venv="${CTXBOX_HERMES_VENV:-$HOME/.cache/ctxbox/hermes/venv}"
hermes_version="0.19.0"
pytest_version="8.3.5"

if [[ -z "${CTXBOX_BIN:-}" ]]; then
  target="${CARGO_TARGET_DIR:-$repo/target}"
  echo "ci.sh: building ctxbox and the test engines"
  (cd "$repo" && cargo build -p ctxbox-host --bin ctxbox && cargo test -p ctxbox-tests --test all --no-run)
  # The test engines' components: <target>/wasm-guests/<clone folder name>/… (see guest-build).
  find_engine() {
    find "$target/wasm-guests/$(basename "$repo")" -path "*/release/$1.wasm" 2>/dev/null | head -n 1
  }
  CTXBOX_BIN="$target/debug/ctxbox"
  CTXBOX_SPIN_WASM="$(find_engine spin)"
  CTXBOX_PANICKER_WASM="$(find_engine panicker)"
  CTXBOX_SLEEPER_WASM="$(find_engine sleeper)"
  CTXBOX_TOOL_SPINNER_WASM="$(find_engine tool_spinner)"
  export CTXBOX_SLEEPER_WASM CTXBOX_TOOL_SPINNER_WASM
  # lossless-claw (an OpenClaw plugin built into an engine), for its recall tools.
  source "$repo/.ci/lossless-claw-env.sh"
fi
: "${CTXBOX_BIN:?set CTXBOX_BIN to a built ctxbox}"
: "${CTXBOX_SPIN_WASM:?set CTXBOX_SPIN_WASM to the spin test engine}"
: "${CTXBOX_PANICKER_WASM:?set CTXBOX_PANICKER_WASM to the panicker test engine}"
for file in "$CTXBOX_BIN" "$CTXBOX_SPIN_WASM" "$CTXBOX_PANICKER_WASM" ${CTXBOX_SLEEPER_WASM:+"$CTXBOX_SLEEPER_WASM"} \
    ${CTXBOX_TOOL_SPINNER_WASM:+"$CTXBOX_TOOL_SPINNER_WASM"}; do
  [[ -f "$file" ]] || { echo "ci.sh: $file does not exist" >&2; exit 1; }
done
export CTXBOX_BIN CTXBOX_SPIN_WASM CTXBOX_PANICKER_WASM

supported() { "$1" -c 'import sys; sys.exit(not ((3, 11) <= sys.version_info[:2] <= (3, 13)))' 2>/dev/null; }

if ! "$venv/bin/python" -c 'import sys' 2>/dev/null; then
  base="${CTXBOX_HERMES_PYTHON:-}"
  if [[ -z "$base" ]]; then
    for candidate in python3.13 python3.12 python3.11 python3; do
      if command -v "$candidate" >/dev/null && supported "$candidate"; then base="$candidate"; break; fi
    done
  fi
  [[ -n "$base" ]] && supported "$base" || { echo "ci.sh: Hermes needs Python 3.11-3.13; set CTXBOX_HERMES_PYTHON" >&2; exit 1; }
  echo "ci.sh: making the Hermes venv at $venv with $base"
  rm -rf "$venv"
  mkdir -p "$(dirname "$venv")"
  "$base" -m venv "$venv"
fi
installed() {
  "$venv/bin/python" - "$hermes_version" "$pytest_version" <<'EOF' 2>/dev/null
import sys
from importlib.metadata import version
sys.exit(not (version("hermes-agent") == sys.argv[1] and version("pytest") == sys.argv[2]))
EOF
}
if ! installed; then
  echo "ci.sh: installing hermes-agent==$hermes_version and pytest==$pytest_version into $venv"
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check \
    "hermes-agent==$hermes_version" "pytest==$pytest_version"
fi

cd "$here"
# Nothing written into the checkout: no bytecode, no pytest cache.
export PYTHONDONTWRITEBYTECODE=1
pytest=("$venv/bin/python" -m pytest -p no:cacheprovider)

echo "ci.sh: unit tests"
"${pytest[@]}" -q test --ignore=test/test_e2e.py

echo "ci.sh: end-to-end test against hermes-agent $hermes_version"
started=$(date +%s)
"${pytest[@]}" -q -s test/test_e2e.py
echo "ci.sh: end-to-end test took $(( $(date +%s) - started )) s"
