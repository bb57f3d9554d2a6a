# Sourced by the integrations' ci.sh with $repo (the clone) and $target (its
# cargo target dir) set: exports where lossless-claw, the OpenClaw plugin the
# end-to-end tests run, comes from.
#   CTXBOX_LOSSLESS_CLAW_SUBJECT  the test subject (read-only): under
#                                 $CTXBOX_SUBJECTS, else the first
#                                 shared/subjects above the clone
#   CTXBOX_LOSSLESS_CLAW_WASM     the Rust tests' build of it (the newest:
#                                 tests/src/typescript.rs marks the one a run
#                                 used), so `cargo test` must have run
#   CTXBOX_LOSSLESS_CLAW_CACHE    those tests' compile cache beside it
lossless_claw_subjects="${CTXBOX_SUBJECTS:-}"
lossless_claw_dir="$repo"
while [[ -z "$lossless_claw_subjects" && "$lossless_claw_dir" != "/" ]]; do
  [[ -d "$lossless_claw_dir/shared/subjects" ]] && lossless_claw_subjects="$lossless_claw_dir/shared/subjects"
  lossless_claw_dir="$(dirname "$lossless_claw_dir")"
done
[[ -n "$lossless_claw_subjects" ]] || { echo "no shared/subjects above $repo (set CTXBOX_SUBJECTS)" >&2; exit 1; }
CTXBOX_LOSSLESS_CLAW_SUBJECT="$lossless_claw_subjects/lossless-claw-1.0.0-beta.4"
CTXBOX_LOSSLESS_CLAW_WASM="$(ls -t "$target"/debug/build/ctxbox-tests-*/out/ts-engines/lossless_claw-*.wasm 2>/dev/null | head -n 1)"
[[ -n "$CTXBOX_LOSSLESS_CLAW_WASM" ]] || { echo "the Rust tests left no lossless-claw build under $target (run cargo test first)" >&2; exit 1; }
CTXBOX_LOSSLESS_CLAW_CACHE="$(dirname "$CTXBOX_LOSSLESS_CLAW_WASM")/compiled"
export CTXBOX_LOSSLESS_CLAW_SUBJECT CTXBOX_LOSSLESS_CLAW_WASM CTXBOX_LOSSLESS_CLAW_CACHE
