#!/usr/bin/env bash
# Installs headless Chromium (Debian's `chromium` package) for the test that
# opens `ctxbox compare`'s report in a real browser, if it is missing.
# Idempotent. The test starts Chromium itself (headless, a throw-away
# profile, the page from file://) and ends it; this script starts nothing.
set -euo pipefail

if command -v chromium >/dev/null 2>&1; then
    echo "== chromium: $(chromium --version 2>/dev/null || echo present) already installed"
    exit 0
fi

SUDO=""
if [ "$(id -u)" != 0 ]; then
    SUDO="sudo"
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq chromium >/dev/null
command -v chromium >/dev/null
echo "== chromium: installed $(chromium --version 2>/dev/null)"
