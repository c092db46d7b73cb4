#!/usr/bin/env bash
# Instructions per request of the daemon's pure stages (parse, route, the
# entity-tag, plan, encode; services/fileserver/benches/request_path.rs) for
# a 200 of a small cached file, a 304 and a single range, counted by
# valgrind's callgrind: repeatable whatever the machine's load.
#   scripts/callgrind-request.sh [N]      (default 100000; needs valgrind)
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-100000}
. scripts/callgrind-lib.sh
bin=$(bench_bin fileserver request_path)
printf '%-14s %s\n' case "instructions per request (N=$n)"
for c in ok_small not_modified range; do
  v=$(per_op "$bin" REQPATH_CALLGRIND "$c" "$n"); printf '%-14s %s\n' "$c" "$v"
done
