#!/usr/bin/env bash
# Runs every fuzz target for SECONDS (default 15) each, starting from the
# checked-in seeds in fuzz/corpus/<target>/; new inputs go to a scratch
# corpus, never into the clone. Fails on the first crash, leaving the input
# that crashed in fuzz/artifacts/<target>/ (add it to the corpus: the test
# suite then replays it on every `cargo test`). Prints the executions run.
# Needs cargo-fuzz (installed by .ci/run under ~/.cache/ctxbox/tools); runs
# on stable Rust (`--sanitizer none`: the targets are safe Rust, so a crash
# is a panic, which libFuzzer catches without a sanitizer). The seed is
# fixed (FUZZ_SEED, default 1) so a CI run explores the same way each time;
# set another to explore further.
set -euo pipefail
cd "$(dirname "$0")"
seconds="${1:-15}"
export CARGO_TARGET_DIR="${CTXBOX_FUZZ_TARGET_DIR:-$HOME/.cache/ctxbox/fuzz-target}"
scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT
targets=$(sed -n 's/^name = "\([a-z_]*\)"$/\1/p' Cargo.toml | grep -v '^ctxbox-fuzz$')
cargo fuzz build --sanitizer none
for target in $targets; do
  mkdir -p "$scratch/$target" "artifacts/$target"
  log="$scratch/$target.log"
  if ! cargo fuzz run --sanitizer none "$target" "$scratch/$target" "corpus/$target" -- \
      -max_total_time="$seconds" -seed="${FUZZ_SEED:-1}" -rss_limit_mb=2048 -timeout=10 -print_final_stats=1 \
      -artifact_prefix="artifacts/$target/" >"$log" 2>&1; then
    tail -n 40 "$log"
    echo "fuzz: $target CRASHED; the input is in fuzz/artifacts/$target/" >&2
    exit 1
  fi
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
  echo "fuzz: $target: ${runs:-?} executions in ${seconds} s, no crash"
done
