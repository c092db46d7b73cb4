#!/usr/bin/env bash
# Instructions per request of the whole daemon under one of the load
# harness's scenarios, counted by valgrind's callgrind: repeatable whatever
# the machine's load, so two builds can be compared a few hundred
# instructions apart.
#
#   cargo run --release -p benches --bin loadtest -- --scenario S --keep-temp ...
#   scripts/callgrind-daemon.sh KEPT S BIN [SECONDS]
#
# KEPT is the tree the harness kept (`loadtest: kept /tmp/loadtest-...`),
# S one of its scenarios, BIN a fileserver binary. One worker, the portable
# backend (valgrind has no openat2 or io_uring), `cache.valid=1h` so that
# no revalidation lands in the count. Plaintext scenarios run the
# harness's wrk script on 4 connections for SECONDS (default 10) after
# 10 s of warm-up; tls_*_h2 runs h2load -c4 -m10 for 20000 then 50000
# requests. Prints the requests, the total and the instructions per
# request, and leaves the profile in target/callgrind-daemon.out for
# callgrind_annotate.
set -euo pipefail
cd "$(dirname "$0")/.."
kept=$1 scenario=$2 bin=$3 secs=${4:-10}
out=target/callgrind-daemon
mkdir -p "$out"
rm -f "$out"/callgrind.out.*
port=18090 tls_port=18443
args=(--config "$kept/$scenario/fileserver/fileserver.toml" --root "$kept/root"
  --listen "127.0.0.1:$port" --admin-listen 127.0.0.1:0 --workers 1
  --set cache.valid=1h --log-level warn)
case $scenario in
tls_*_h2) args+=(--tls-listen "127.0.0.1:$tls_port" --tls-cert "$kept/chain.pem"
  --tls-key "$kept/key.pem") ;;
tls_*) echo "only the plaintext and tls_*_h2 scenarios" >&2; exit 2 ;;
esac
FILESERVER_IO_BACKEND=portable valgrind --tool=callgrind --dump-instr=no \
  --callgrind-out-file="$out/callgrind.out.%p" "$bin" "${args[@]}" \
  > "$out/daemon.log" 2>&1 &
vg=$!
trap 'kill $vg 2>/dev/null || true' EXIT
for _ in $(seq 120); do
  curl -s -o /dev/null "http://127.0.0.1:$port/" && break
  sleep 0.5
done
case $scenario in
tls_*_h2)
  sed "s/127.0.0.1:[0-9]*/127.0.0.1:$tls_port/" "$kept/$scenario/fileserver.uris" > "$out/uris"
  h2load -t1 -c4 -m10 -n 20000 -i "$out/uris" > /dev/null
  callgrind_control -z $vg > /dev/null 2>&1
  h2load -t1 -c4 -m10 -n 50000 -i "$out/uris" > "$out/load.out"
  requests=$(awk '/^requests:/ {print $8}' "$out/load.out") ;;
*)
  lua=$kept/$scenario/fileserver.lua
  wrk -t1 -c4 -d10s -s "$lua" "http://127.0.0.1:$port/" > /dev/null
  callgrind_control -z $vg > /dev/null 2>&1
  wrk -t1 -c4 -d"${secs}s" -s "$lua" "http://127.0.0.1:$port/" > "$out/load.out"
  requests=$(awk '/requests in/ {print $1}' "$out/load.out") ;;
esac
callgrind_control -d $vg > /dev/null 2>&1
sleep 1
kill $vg
wait $vg 2>/dev/null || true
profile=$(ls "$out"/callgrind.out.*.1)
total=$(callgrind_annotate "$profile" 2>/dev/null | awk '/PROGRAM TOTALS/ {gsub(",", "", $1); print $1}')
mv "$profile" target/callgrind-daemon.out
echo "$scenario requests $requests instructions $total per request $((total / requests))"
