#!/usr/bin/env bash
# Instructions per pathcache hit (`get` + drop of the reference, and the
# borrowed `get_with`) and per dashmap / quick_cache get + clone, cycling
# over 1000 cached paths as the `pathcache_hit` benchmark does, counted by
# valgrind's callgrind: repeatable whatever the machine's load, unlike time.
#   scripts/callgrind-pathcache.sh [N]      (default 200000; needs valgrind)
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-200000}
. scripts/callgrind-lib.sh
bin=$(bench_bin benches pathcache)
printf '%-17s %s\n' contender "instructions per hit (N=$n)"
for c in dashmap quick_cache pathcache pathcache_borrow; do
  v=$(per_op "$bin" PATHCACHE_CALLGRIND "$c" "$n"); printf '%-17s %s\n' "$c" "$v"
done
