#!/usr/bin/env bash
# Builds the keep-recent-py engine (src/) into a WebAssembly component that the
# ctxbox host loads, with componentize-py, against the contract in ../../wit.
#
#   examples/python-engine/build.sh [OUTPUT.wasm]
#   examples/python-engine/build.sh --install-only   # the tools, no component
#
# Two steps:
#  1. componentize-py turns src/ into a component. Its CPython runtime
#     (wasi-libc) imports wasi:filesystem/* and wasi:sockets/*, which the host
#     refuses ("engines get no filesystem", "no network access").
#  2. wasm-tools composes it with a generated "deny" component that exports
#     those interfaces with functions that trap, so the result imports only
#     what the sandbox grants (wasi:io, clocks, random, cli and ctxbox:engine).
#     The engine never touches files or sockets: everything it imports is
#     imported at build time (componentize-py pre-initializes the interpreter),
#     so the stubs are never called; if they were, the call would trap and the
#     host would quarantine the engine, as it does for any trap.
#
# Installs nothing globally. Tools go under the build directory, created on
# first use (needs PyPI and crates.io once):
#   $CARGO_TARGET_DIR/python-engine/venv    componentize-py (pip, pinned)
#   $CARGO_TARGET_DIR/python-engine/tools   wasm-tools (cargo install, pinned)
# ($CARGO_TARGET_DIR defaults to <repo>/target.) The component goes to
# OUTPUT.wasm, by default $CARGO_TARGET_DIR/python-engine/keep_recent_py.wasm.
#
# Environment:
#   COMPONENTIZE_PY    a componentize-py executable to use instead of the venv's
#   WASM_TOOLS         a wasm-tools executable to use instead of the tools dir's
#   PYTHON             the interpreter for the venv (default: python3)
#   CTXBOX_NO_INSTALL  if set, install nothing: exit with status 3 when a tool
#                      is missing (the tests crate's build script sets it)
set -euo pipefail

COMPONENTIZE_PY_VERSION=0.25.1
WASM_TOOLS_VERSION=1.263.0

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
build_dir=${CARGO_TARGET_DIR:-$root/target}/python-engine
install_only=
if [[ ${1:-} == --install-only ]]; then
    install_only=1
    shift
fi
out=${1:-$build_dir/keep_recent_py.wasm}
venv=$build_dir/venv
tools=$build_dir/tools

missing() {
    echo "$1 is not installed; run $here/build.sh once without CTXBOX_NO_INSTALL (it installs it under $build_dir)" >&2
    exit 3
}

# Whether "$1" runs and reports version "$2".
has_version() {
    "$1" --version 2>/dev/null | grep -q " $2\$"
}

componentize_py=${COMPONENTIZE_PY:-$venv/bin/componentize-py}
if ! has_version "$componentize_py" "$COMPONENTIZE_PY_VERSION"; then
    [[ -z ${COMPONENTIZE_PY:-} ]] || { echo "$COMPONENTIZE_PY is not componentize-py $COMPONENTIZE_PY_VERSION" >&2; exit 1; }
    [[ -z ${CTXBOX_NO_INSTALL:-} ]] || missing "componentize-py $COMPONENTIZE_PY_VERSION"
    echo "installing componentize-py $COMPONENTIZE_PY_VERSION into $venv" >&2
    "${PYTHON:-python3}" -m venv "$venv"
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check "componentize-py==$COMPONENTIZE_PY_VERSION"
fi

wasm_tools=${WASM_TOOLS:-$tools/bin/wasm-tools}
if ! has_version "$wasm_tools" "$WASM_TOOLS_VERSION"; then
    [[ -z ${WASM_TOOLS:-} ]] || { echo "$WASM_TOOLS is not wasm-tools $WASM_TOOLS_VERSION" >&2; exit 1; }
    [[ -z ${CTXBOX_NO_INSTALL:-} ]] || missing "wasm-tools $WASM_TOOLS_VERSION"
    echo "installing wasm-tools $WASM_TOOLS_VERSION into $tools (a few minutes, once)" >&2
    # Only the two subcommands used here: a much shorter build than the default.
    # Flags meant for an outer cargo build must not leak into this one.
    env -u RUSTFLAGS -u CARGO_ENCODED_RUSTFLAGS -u CARGO_BUILD_TARGET -u CARGO_MAKEFLAGS \
        -u MAKEFLAGS -u MFLAGS -u CARGO_TARGET_DIR \
        cargo install --locked --quiet --root "$tools" --no-default-features \
        --features component,compose "wasm-tools@$WASM_TOOLS_VERSION"
fi

if [[ -n $install_only ]]; then
    echo "componentize-py $COMPONENTIZE_PY_VERSION and wasm-tools $WASM_TOOLS_VERSION are installed" >&2
    exit 0
fi

# Work next to the output (not in $build_dir, which the tests crate's build
# script watches for tools being installed).
mkdir -p "$(dirname "$out")"
stage=$(mktemp -d "$(dirname "$out")/.stage.XXXXXX")
trap 'rm -rf "$stage"' EXIT

# 1. The Python component. Built from a copy of src/ so no __pycache__ or
# stray file of the checkout ends up in it; VIRTUAL_ENV unset so no
# site-packages are added (the engine has no dependencies).
mkdir "$stage/src"
cp "$here"/src/*.py "$stage/src/"
(
    cd "$stage/src"
    env -u VIRTUAL_ENV "$componentize_py" --quiet -d "$root/wit" -w context-engine \
        componentize keep_recent_py -p "$stage/src" -o "$stage/python.wasm"
)

# 2. The deny component: a world exporting every wasi:filesystem and
# wasi:sockets interface the Python component imports, at the versions it
# imports them, whose functions trap (`embed --dummy`).
"$wasm_tools" component wit "$stage/python.wasm" --out-dir "$stage/wit" >/dev/null
rm "$stage/wit"/*.wit # the Python component's own world; deps/ stays
denied=$("$wasm_tools" component wit "$stage/python.wasm" |
    sed -n 's/^  import \(wasi:\(filesystem\|sockets\)\/[^;]*\);$/\1/p')
{
    echo "package ctxbox:deny-wasi;"
    echo "world deny {"
    for interface in $denied; do
        echo "  export $interface;"
    done
    echo "}"
} >"$stage/wit/deny.wit"
if [[ -n $denied ]]; then
    "$wasm_tools" component embed --dummy "$stage/wit" -w deny -o "$stage/deny-core.wasm"
    "$wasm_tools" component new "$stage/deny-core.wasm" -o "$stage/deny.wasm"
    # `compose` is deprecated upstream in favour of `wac plug`, but it is pinned
    # here and needs no second tool.
    if ! log=$("$wasm_tools" compose "$stage/python.wasm" -d "$stage/deny.wasm" -o "$stage/engine.wasm" 2>&1); then
        echo "$log" >&2
        exit 1
    fi
else
    cp "$stage/python.wasm" "$stage/engine.wasm"
fi

# The result must import nothing the host refuses (host/src/sandbox/load.rs).
refused=$("$wasm_tools" component wit "$stage/engine.wasm" |
    sed -n 's/^  import \([^;]*\);$/\1/p' | grep -Ev '^(wasi:(io|clocks|random|cli)|ctxbox:engine)/' || true)
if [[ -n $refused ]]; then
    echo "the component still imports what the ctxbox host refuses:" $refused >&2
    exit 1
fi

# Moved into place last, so a reader never sees half a component.
mv "$stage/engine.wasm" "$out"
echo "built $out ($(wc -c <"$out") bytes)" >&2
