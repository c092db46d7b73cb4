#!/usr/bin/env bash
# Instructions per alloc+release pair of each fdtable contender, and per
# lookup (get + guard drop) of fdtable, sharded-slab and the floor, counted by
# valgrind's callgrind: repeatable whatever the machine's load, unlike time.
# Each contender runs N and 2N pairs after the same set-up; the difference
# divided by N is the pair's cost, set-up and process start cancelled out.
#   scripts/callgrind-fdtable.sh [N]      (default 200000; needs valgrind)
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-200000}
command -v valgrind >/dev/null || { echo "needs valgrind (apt-get install valgrind)" >&2; exit 1; }
bin=$(cargo bench -p benches --bench fdtable --no-run --message-format=json 2>/dev/null \
  | python3 -c 'import json,sys
for l in sys.stdin:
    m=json.loads(l)
    if m.get("reason")=="compiler-artifact" and m["target"]["name"]=="fdtable" and m.get("executable"): print(m["executable"])' | tail -1)
[ -x "$bin" ] || { echo "could not build the fdtable bench" >&2; exit 1; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
ir() { # total instructions of one run: contender, pairs
  FDTABLE_CALLGRIND="$1:$2" valgrind --tool=callgrind --callgrind-out-file="$tmp/out" "$bin" >/dev/null 2>"$tmp/err" \
    || { cat "$tmp/err" >&2; exit 1; }
  sed -n 's/^summary: //p' "$tmp/out"
}
printf '%-14s %s\n' contender "instructions per alloc+release pair (N=$n)"
for c in mutex_slab sharded_slab fdtable fdtable_local floor; do
  a=$(ir "$c" "$n"); b=$(ir "$c" $((2 * n)))
  printf '%-14s %s\n' "$c" "$(python3 -c "print(f'{($b - $a) / $n:.1f}')")"
done
printf '%-14s %s\n' contender "instructions per lookup, get + guard drop (N=$n)"
for c in sharded_slab fdtable floor; do
  a=$(ir "get_$c" "$n"); b=$(ir "get_$c" $((2 * n)))
  printf '%-14s %s\n' "$c" "$(python3 -c "print(f'{($b - $a) / $n:.1f}')")"
done
