#!/usr/bin/env bash
# Installs the PostgreSQL server binaries (Debian packages) the shared-store
# tests need, if they are missing. Idempotent. The tests start their own
# throw-away server (initdb into a temp dir, 127.0.0.1 only, stopped when the
# test process ends); this script starts none, and the package's own
# cluster, if the package starts one, is left alone.
set -euo pipefail

if ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then
    echo "== postgresql: $(ls -d /usr/lib/postgresql/*/bin | tr '\n' ' ')already installed"
    exit 0
fi

SUDO=""
if [ "$(id -u)" != 0 ]; then
    SUDO="sudo"
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq postgresql >/dev/null
ls /usr/lib/postgresql/*/bin/initdb >/dev/null
echo "== postgresql: installed $(ls -d /usr/lib/postgresql/*/bin | tr '\n' ' ')"
