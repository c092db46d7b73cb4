#!/usr/bin/env bash
# Runs the loom model checks of every crate with custom synchronization.
# Bounded so CI stays fast (3 preemptions: under a second per crate here);
# raise LOOM_MAX_PREEMPTIONS locally for a deeper search.
set -euo pipefail
cd "$(dirname "$0")/.."
export RUSTFLAGS="--cfg loom ${RUSTFLAGS:-}"
export LOOM_MAX_PREEMPTIONS="${LOOM_MAX_PREEMPTIONS:-3}"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-target}/loom"
for crate in announce fdtable pathcache; do
  if [ -f "crates/$crate/tests/loom.rs" ]; then
    cargo test --release -p "fdwarden-$crate" --test loom -- --test-threads=2
  fi
done
# Models kept beside the code they check (crate-private types).
cargo test --release -p fdwarden-pathcache --lib -- copy::loom_tests
