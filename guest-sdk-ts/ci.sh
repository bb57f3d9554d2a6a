#!/usr/bin/env bash
# Installs the TypeScript SDK's pinned tools and runs its tests:
#   guest-sdk-ts/ci.sh                 # install, then the SDK's node tests
#   guest-sdk-ts/ci.sh --install-only  # install only (what the Rust tests need)
#
# `npm ci` from the checked-in lockfiles (exact versions: jco 1.35.0,
# componentize-js 0.22.0, TypeScript 5.9.3, preview2-shim 0.25.0) into
# guest-sdk-ts/node_modules and examples/ts-lossless/node_modules; npm's
# download cache lives outside the clone ($CTXBOX_NPM_CACHE, default
# ~/.cache/ctxbox/npm), so later runs are quick and work offline. Skipped when
# node_modules already matches its lockfile. Needs Node 20 or later.
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

echo "guest-sdk-ts/ci.sh: SDK unit tests"
started=$(date +%s)
(cd "$here" && node --test test/)
echo "guest-sdk-ts/ci.sh: SDK unit tests took $(( $(date +%s) - started )) s"
