#!/usr/bin/env bash
# Coverage-guided fuzzing with cargo-fuzz (libFuzzer, AddressSanitizer) of
# the targets in fuzz/fuzz_targets: the HPACK decoder, the HTTP/2
# connection, the daemon's HTTP/1.1 head parser and PROXY header reader,
# httpfile's field readings and siterules (what each checks:
# CONTRIBUTING.md, "Fuzzing"). Each target
# runs for SECONDS against its committed corpus (fuzz/corpus/<target>,
# read only) and what earlier runs on this machine found
# ($CARGO_TARGET_DIR/fuzz/corpus/<target>, where new inputs go), with its
# dictionary if it has one; then once over fuzz/regressions/<target>.
# Prints each target's execs, coverage and corpus (libFuzzer's final
# `#N DONE cov: ...` line) and exits non-zero if any target crashed, timed
# out or ran out of memory, with the artifact's path in the output.
#
# Usage: scripts/fuzz-libfuzzer.sh [SECONDS_PER_TARGET]   (default 20)
#   FUZZ_TARGETS="hpack_decode http1_head"   only these targets
#   FUZZ_SEED=N     libFuzzer's random seed
#   FUZZ_RUNS=N     run N inputs per target instead of SECONDS, from a
#                   fresh work corpus: CI's step. With FUZZ_SEED every
#                   machine mutates the same way from the same corpus (not
#                   bit for bit: the standard HashMap's random keys move
#                   coverage a little), so a run that passed here almost
#                   always passes there; findings come from timed runs
#   FUZZ_MERGE=1    afterwards, merge into fuzz/corpus a minimal set of the
#                   inputs that reach new edges (fuzz/README.md)
#
# Needs a nightly toolchain and cargo-fuzz; installs them when missing (as
# scripts/miri.sh does). Where that is not possible the check is skipped
# with a notice (exit 0): every other step of CI still runs.
set -uo pipefail
cd "$(dirname "$0")/.."
secs=${1:-20}
if ! rustup run nightly rustc --version >/dev/null 2>&1; then
  if ! rustup toolchain install nightly --profile minimal >/dev/null 2>&1; then
    echo "fuzz: SKIPPED (could not install a nightly toolchain here)"
    exit 0
  fi
fi
if ! cargo fuzz --version >/dev/null 2>&1; then
  if ! cargo install --locked cargo-fuzz >/dev/null 2>&1; then
    echo "fuzz: SKIPPED (could not install cargo-fuzz here)"
    exit 0
  fi
fi
target_dir="${CARGO_TARGET_DIR:-target}/fuzz"
work="$target_dir/corpus"
budget=("-max_total_time=$secs")
if [ -n "${FUZZ_RUNS:-}" ]; then
  # What earlier runs found here would make this run differ from CI's.
  work=$(mktemp -d "${TMPDIR:-/tmp}/fuzz-corpus.XXXXXX")
  trap 'rm -rf "$work"' EXIT
  budget=("-runs=$FUZZ_RUNS")
fi
logs="$target_dir/logs"
mkdir -p "$work" "$logs"
targets=${FUZZ_TARGETS:-$(cargo +nightly fuzz list)}
# Two cores: cargo's jobs stay within them.
if ! CARGO_BUILD_JOBS=${CARGO_BUILD_JOBS:-2} cargo +nightly fuzz build --target-dir "$target_dir"; then
  echo "fuzz: the targets did not build"
  exit 1
fi
bin="$target_dir/x86_64-unknown-linux-gnu/release"
failed=()
summary=()
for t in $targets; do
  mkdir -p "$work/$t" "fuzz/corpus/$t"
  dict=()
  [ -f "fuzz/dict/$t.dict" ] && dict=("-dict=fuzz/dict/$t.dict")
  [ -n "${FUZZ_SEED:-}" ] && dict+=("-seed=$FUZZ_SEED")
  log="$logs/$t.log"
  echo "=== fuzz $t (${budget[*]})"
  # -timeout: one input running 10 s is a finding (a quadratic or worse
  # path); -rss_limit_mb: so is a process over 2 GiB.
  cargo +nightly fuzz run --target-dir "$target_dir" "$t" "$work/$t" "fuzz/corpus/$t" -- \
    "${budget[@]}" -rss_limit_mb=2048 -timeout=10 -print_final_stats=1 \
    "${dict[@]}" >"$log" 2>&1
  rc=$?
  done_line=$(grep -E '^#[0-9]+[[:space:]]+DONE' "$log" | tail -1)
  echo "${done_line:-(no DONE line)}"
  if [ $rc -ne 0 ]; then
    grep -m1 -A1 'panicked at' "$log"
    grep -E 'ERROR: libFuzzer|ERROR: AddressSanitizer|SUMMARY|Test unit written|Base64' "$log" | head -20
    echo "=== FAILED: fuzz $t (exit $rc); full log: $log"
    failed+=("$t")
    summary+=("$t: FAILED ${done_line}")
    continue
  fi
  if compgen -G "fuzz/regressions/$t/*" >/dev/null; then
    if ! "$bin/$t" fuzz/regressions/"$t"/* >"$logs/$t.regressions.log" 2>&1; then
      grep -E 'panicked at|Running:' "$logs/$t.regressions.log" | tail -4
      echo "=== FAILED: fuzz $t on fuzz/regressions/$t; log: $logs/$t.regressions.log"
      failed+=("$t (regressions)")
      summary+=("$t: FAILED on fuzz/regressions/$t")
      continue
    fi
  fi
  if [ "${FUZZ_MERGE:-0}" = 1 ]; then
    "$bin/$t" -merge=1 -use_counters=0 "fuzz/corpus/$t" "$work/$t" >"$logs/$t.merge.log" 2>&1 ||
      echo "fuzz: merging $t's corpus failed: $logs/$t.merge.log"
  fi
  summary+=("$t: ok ${done_line}")
done
echo "=== fuzz summary (${budget[*]} per target)"
printf '%s\n' "${summary[@]}"
if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzz: crashes in: ${failed[*]} (inputs under fuzz/artifacts/)"
  exit 1
fi
