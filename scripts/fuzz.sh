#!/usr/bin/env bash
# Time-bounded fuzzing of the pure HTTP pieces with their proptest targets:
# the file semantics and planner (crates/httpfile/tests/fuzz.rs), the HPACK
# decoder (crates/hpack/tests/properties.rs), the HTTP/2 connection
# (crates/h2wire/tests/properties.rs), HTTP/3's readers and QPACK
# (crates/h3wire/tests/properties.rs) and the daemon's request
# parser (services/fileserver/tests/reliability_fuzz.rs),
# in rounds with fresh random seeds, starting rounds until SECONDS have passed (the last round runs to
# its end). The normal test run uses 1000 cases per target;
# this runs many more. A failure stops the loop with proptest's minimal input:
# add it to the tests/corpus/fuzz_regressions.txt of the crate it came from.
#
# Usage: scripts/fuzz.sh [SECONDS]      (default 120)
#   FUZZ_CASES=N                        cases per target per round (default 20000)
#
# This is the stable-toolchain fuzzing, in the ordinary test harness.
# Coverage-guided fuzzing with cargo-fuzz/libFuzzer (nightly) of the same
# pieces and siterules is scripts/fuzz-libfuzzer.sh (fuzz/README.md).
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-120}
export FUZZ_CASES=${FUZZ_CASES:-20000}
cargo test -q -p fdwarden-httpfile --test fuzz --no-run
cargo test -q -p fdwarden-hpack --test properties --no-run
cargo test -q -p fdwarden-h2wire --test properties --no-run
cargo test -q -p fdwarden-h3wire --test properties --no-run
cargo test -q -p fileserver --test reliability_fuzz --no-run
end=$(( $(date +%s) + secs ))
rounds=0
while [ "$(date +%s)" -lt "$end" ]; do
    cargo test -q -p fdwarden-httpfile --test fuzz -- --test-threads=2
    cargo test -q -p fdwarden-hpack --test properties -- --test-threads=2
    cargo test -q -p fdwarden-h2wire --test properties -- --test-threads=2
    cargo test -q -p fdwarden-h3wire --test properties -- --test-threads=2
    cargo test -q -p fileserver --test reliability_fuzz -- --test-threads=2
    rounds=$((rounds + 1))
done
echo "fuzz.sh: ${rounds} round(s) of ${FUZZ_CASES} cases per target in ${secs}s: no failure"
