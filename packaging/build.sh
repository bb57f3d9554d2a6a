#!/usr/bin/env bash
# Builds what users install, into OUTDIR (created; files of the same names
# replaced):
#   ctxbox-<version>-<target>.tar.gz        the release binary, LICENSE, README
#   ctxbox-openclaw-<os>-<cpu>-<version>.tgz the binary as an npm package
#                                           (@ctxbox/openclaw-<os>-<cpu>, with os/cpu set)
#   ctxbox-openclaw-<version>.tgz            the OpenClaw plugin (@ctxbox/openclaw), whose
#                                           optional dependencies are the platform packages
#                                           (esbuild's pattern): npm installs the one that fits
#   ctxbox_bin-<version>-py3-none-<plat>.whl the binary as a platform wheel (into the venv's bin/)
#   ctxbox_hermes-<version>-py3-none-any.whl the Hermes plugin (extra `binary` = ctxbox-bin)
#   SHA256SUMS                               of every file above
#
#   packaging/build.sh OUTDIR
#
# Environment:
#   TARGET      the Rust target (default: x86_64/aarch64-unknown-linux-musl on
#               Linux when musl-gcc is there, else …-linux-gnu; the host's on macOS)
#   CTXBOX_BIN  package this already-built release binary instead of building
#               one (e.g. the one the end-to-end tests used); it must be TARGET's
#   CARGO_TARGET_DIR  as cargo reads it (default: <repo>/target)
#   GLIBC_MAX   the newest glibc a gnu binary may need (default 2.31; CI,
#               packaging the debug binary its tests used to check the
#               install path, sets this machine's)
# Needs: cargo with TARGET and wasm32-wasip2 (the bundled engines), node/npm,
# python3 (≥ 3.9, with pip for the plugin wheel). On Linux the binary is
# checked to be static (musl) or to need at most glibc 2.31 (gnu).
set -euo pipefail

[[ $# -eq 1 ]] || { echo "usage: packaging/build.sh OUTDIR" >&2; exit 2; }
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/.." && pwd)"
mkdir -p "$1"
out="$(cd "$1" && pwd)"
version="$(sed -n 's/^version = "\(.*\)"$/\1/p' "$repo/Cargo.toml" | head -n 1)"
[[ -n "$version" ]] || { echo "build.sh: no version in Cargo.toml" >&2; exit 1; }
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
say() { echo "build.sh: $*"; }

arch="$(uname -m)"; [[ "$arch" == arm64 ]] && arch=aarch64
case "$(uname -s)" in
  Linux)
    if [[ -z "${TARGET:-}" ]]; then
      if command -v musl-gcc >/dev/null; then TARGET="$arch-unknown-linux-musl"; else TARGET="$arch-unknown-linux-gnu"; fi
    fi
    ;;
  Darwin) TARGET="${TARGET:-$arch-apple-darwin}" ;;
  *) echo "build.sh: unsupported OS $(uname -s)" >&2; exit 1 ;;
esac
case "$TARGET" in
  x86_64-*) npm_cpu=x64 ;;
  aarch64-*) npm_cpu=arm64 ;;
  *) echo "build.sh: unsupported target $TARGET" >&2; exit 1 ;;
esac
case "$TARGET" in
  *-linux-musl) npm_os=linux; wheel_tag="manylinux_2_17_${TARGET%%-*}.musllinux_1_1_${TARGET%%-*}" ;;
  *-linux-gnu) npm_os=linux; glibc_max="${GLIBC_MAX:-2.31}"; wheel_tag="manylinux_${glibc_max//./_}_${TARGET%%-*}" ;;
  x86_64-apple-darwin) npm_os=darwin; wheel_tag="macosx_10_12_x86_64" ;;
  aarch64-apple-darwin) npm_os=darwin; wheel_tag="macosx_11_0_arm64" ;;
esac

# 1. The release binary.
if [[ -n "${CTXBOX_BIN:-}" ]]; then
  say "packaging $CTXBOX_BIN as $TARGET"
  built="$CTXBOX_BIN"
else
  say "building ctxbox $version for $TARGET (release)"
  started=$(date +%s)
  (cd "$repo" && cargo build --release --locked -p ctxbox-host --bin ctxbox --target "$TARGET")
  say "release build took $(( $(date +%s) - started )) s"
  built="${CARGO_TARGET_DIR:-$repo/target}/$TARGET/release/ctxbox"
fi
[[ -x "$built" ]] || { echo "build.sh: no binary at $built" >&2; exit 1; }
bin="$work/ctxbox"
cp "$built" "$bin"
# Line tables are for developers' backtraces; users get a smaller file.
strip "$bin" 2>/dev/null || say "strip failed; packaging the binary as built"
[[ "$("$bin" --version)" == "ctxbox $version" ]] || { echo "build.sh: $bin is not ctxbox $version" >&2; exit 1; }

# 2. It runs on any current Linux: static, or glibc ≤ GLIBC_MAX (2.31).
case "$TARGET" in
  *-linux-musl)
    if readelf -l "$bin" | grep -q INTERP || readelf -d "$bin" 2>/dev/null | grep -q NEEDED; then
      echo "build.sh: the musl binary is not static:" >&2; readelf -d "$bin" >&2; exit 1
    fi
    say "static (musl): no interpreter, no shared library"
    ;;
  *-linux-gnu)
    newest="$(objdump -T "$bin" | grep -o 'GLIBC_[0-9.]*' | sed 's/GLIBC_//' | sort -V | tail -n 1)"
    libs="$(readelf -d "$bin" | sed -n 's/.*Shared library: \[\(.*\)\]/\1/p' | tr '\n' ' ')"
    say "needs glibc $newest; shared libraries: $libs"
    if [[ "$(printf '%s\n%s\n' "$newest" "$glibc_max" | sort -V | tail -n 1)" != "$glibc_max" ]]; then
      echo "build.sh: the binary needs glibc $newest, newer than $glibc_max (build on an older system, or for musl)" >&2; exit 1
    fi
    ;;
esac

# 3. The release tarball.
name="ctxbox-$version-$TARGET"
mkdir -p "$work/$name"
cp "$bin" "$repo/LICENSE" "$work/$name/"
cat > "$work/$name/README.md" <<README
# ctxbox $version ($TARGET)

Runs AI-agent context engines as sandboxed WebAssembly components.
Put \`ctxbox\` on your PATH, then \`ctxbox doctor\` checks the installation
and \`ctxbox --help\` lists the commands. The OpenClaw and Hermes plugins
are installed on their own (they bring this binary): see the project's
README.md. Licence: MIT (LICENSE).
README
tar -C "$work" -czf "$out/$name.tar.gz" "$name"
say "wrote $name.tar.gz"

# 4. npm: the platform package, then the plugin.
platform="$work/npm-platform"
mkdir -p "$platform/bin"
cp "$bin" "$platform/bin/ctxbox"
cp "$repo/LICENSE" "$platform/"
cat > "$platform/package.json" <<JSON
{
  "name": "@ctxbox/openclaw-$npm_os-$npm_cpu",
  "version": "$version",
  "description": "The ctxbox binary for $npm_os $npm_cpu, found by the @ctxbox/openclaw plugin",
  "license": "MIT",
  "repository": "https://github.com/ctxbox/ctxbox",
  "os": ["$npm_os"],
  "cpu": ["$npm_cpu"],
  "files": ["bin/ctxbox", "LICENSE"],
  "preferUnplugged": true
}
JSON
echo "The ctxbox $version binary for $npm_os $npm_cpu; installed by @ctxbox/openclaw as an optional dependency." > "$platform/README.md"
(cd "$platform" && npm pack --silent --pack-destination "$out" >/dev/null)
say "wrote ctxbox-openclaw-$npm_os-$npm_cpu-$version.tgz"

plugin="$work/npm-plugin"
mkdir -p "$plugin"
(cd "$repo/integrations/openclaw" && tar -cf - --exclude=node_modules --exclude=dist .) | tar -C "$plugin" -xf -
cp "$repo/LICENSE" "$plugin/"
(cd "$plugin" && npm ci --silent --no-audit --no-fund && npm run --silent build)
node - "$plugin/package.json" "$version" <<'NODE'
const fs = require("node:fs");
const [path, version] = process.argv.slice(2);
const pkg = JSON.parse(fs.readFileSync(path, "utf8"));
pkg.version = version;
pkg.files = [...new Set([...pkg.files, "LICENSE"])];
pkg.optionalDependencies = Object.fromEntries(
  ["linux-x64", "linux-arm64", "darwin-x64", "darwin-arm64"].map((platform) => [`@ctxbox/openclaw-${platform}`, version]),
);
fs.writeFileSync(path, JSON.stringify(pkg, null, 2) + "\n");
NODE
(cd "$plugin" && npm pack --silent --pack-destination "$out" >/dev/null)
say "wrote ctxbox-openclaw-$version.tgz"

# 5. Python: the binary's platform wheel, then the plugin's wheel (built
# from a copy with the LICENSE beside it: the checkout stays as it is).
python3 "$here/binary_wheel.py" "$bin" "$version" "$wheel_tag" "$repo/LICENSE" "$out" >/dev/null
say "wrote ctxbox_bin-$version-py3-none-$wheel_tag.whl"
hermes="$work/hermes"
(cd "$repo/integrations/hermes" && tar -cf - --exclude=__pycache__ --exclude=test .) | (mkdir -p "$hermes" && tar -C "$hermes" -xf -)
cp "$repo/LICENSE" "$hermes/"
python3 -m pip wheel --quiet --disable-pip-version-check --no-deps -w "$out" "$hermes"
chmod 644 "$out/ctxbox_hermes-$version-py3-none-any.whl"
say "wrote ctxbox_hermes-$version-py3-none-any.whl"

# 6. Checksums of everything in OUTDIR.
sha256() { if command -v sha256sum >/dev/null; then sha256sum "$@"; else shasum -a 256 "$@"; fi; }
(
  cd "$out"
  rm -f SHA256SUMS
  files=()
  for file in *; do [[ -f "$file" ]] && files+=("$file"); done
  sha256 "${files[@]}" > SHA256SUMS.new && mv SHA256SUMS.new SHA256SUMS
)
say "wrote SHA256SUMS"
ls -l "$out"
