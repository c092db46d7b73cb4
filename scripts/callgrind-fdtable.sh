#!/usr/bin/env bash
# Instructions per alloc+release pair of each fdtable contender, per
# lookup (get + guard drop) of fdtable, sharded-slab and the floor, and per
# scoped lookup (fdtable's get_with and its announcing floor), counted by
# valgrind's callgrind: repeatable whatever the machine's load, unlike time.
# Each contender runs N and 2N pairs after the same set-up; the difference
# divided by N is the pair's cost, set-up and process start cancelled out.
#   scripts/callgrind-fdtable.sh [N]      (default 200000; needs valgrind)
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-200000}
. scripts/callgrind-lib.sh
bin=$(bench_bin benches fdtable)
printf '%-14s %s\n' contender "instructions per alloc+release pair (N=$n)"
for c in mutex_slab sharded_slab fdtable fdtable_local floor; do
  v=$(per_op "$bin" FDTABLE_CALLGRIND "$c" "$n"); printf '%-14s %s\n' "$c" "$v"
done
printf '%-14s %s\n' contender "instructions per lookup, get + guard drop (N=$n)"
for c in sharded_slab fdtable floor; do
  v=$(per_op "$bin" FDTABLE_CALLGRIND "get_$c" "$n"); printf '%-14s %s\n' "$c" "$v"
done
printf '%-14s %s\n' contender "instructions per scoped lookup, get_with (N=$n)"
for c in fdtable floor_xchg; do
  v=$(per_op "$bin" FDTABLE_CALLGRIND "get_with_$c" "$n"); printf '%-14s %s\n' "$c" "$v"
done
