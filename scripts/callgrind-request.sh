#!/usr/bin/env bash
# Instructions per request of the daemon's pure stages (parse, route, the
# entity-tag, plan, encode; services/fileserver/benches/request_path.rs) for
# a 200 of a small cached file, a 304 and a single range, counted by
# valgrind's callgrind: repeatable whatever the machine's load. Each case
# runs N and 2N requests; the difference divided by N is one request.
#   scripts/callgrind-request.sh [N]      (default 100000; needs valgrind)
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-100000}
command -v valgrind >/dev/null || { echo "needs valgrind (apt-get install valgrind)" >&2; exit 1; }
bin=$(cargo bench -p fileserver --bench request_path --no-run --message-format=json 2>/dev/null \
  | python3 -c 'import json,sys
for l in sys.stdin:
    m=json.loads(l)
    if m.get("reason")=="compiler-artifact" and m["target"]["name"]=="request_path" and m.get("executable"): print(m["executable"])' | tail -1)
[ -x "$bin" ] || { echo "could not build the request_path bench" >&2; exit 1; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
ir() { # total instructions of one run: case, requests
  REQPATH_CALLGRIND="$1:$2" valgrind --tool=callgrind --callgrind-out-file="$tmp/out" "$bin" >/dev/null 2>"$tmp/err" \
    || { cat "$tmp/err" >&2; exit 1; }
  sed -n 's/^summary: //p' "$tmp/out"
}
printf '%-14s %s\n' case "instructions per request (N=$n)"
for c in ok_small not_modified range; do
  a=$(ir "$c" "$n"); b=$(ir "$c" $((2 * n)))
  printf '%-14s %s\n' "$c" "$(python3 -c "print(f'{($b - $a) / $n:.1f}')")"
done
