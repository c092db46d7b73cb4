#!/usr/bin/env bash
# CPU time per request of two fileserver builds, side by side, under one of
# the load harness's plaintext scenarios: the runs alternate A, B, A, B ...
# and the medians are printed with B's ratio to A. For changes of a few
# per cent, which a single harness round on a busy 2-core machine does not
# resolve.
#
#   cargo run --release -p benches --bin loadtest -- --scenario S --keep-temp ...
#   scripts/cpu-ab.sh KEPT S ROUNDS BIN_A BIN_B [SECONDS]
#
# KEPT is the tree the harness kept (`loadtest: kept /tmp/loadtest-...`),
# S one of its plaintext scenarios. Each run starts the daemon with the
# scenario's config and 2 workers, warms it with 1 s of the scenario's wrk
# script (1 thread, 64 connections), then counts the daemon's user and
# system time (`/proc/PID/stat`) over SECONDS (default 4) of it.
set -euo pipefail
kept=$1 scenario=$2 rounds=$3 bin_a=$4 bin_b=$5 secs=${6:-4}
port=18091
tick=$(getconf CLK_TCK)
lua=$(mktemp)
trap 'rm -f "$lua"' EXIT
sed "s/127.0.0.1:[0-9]*/127.0.0.1:$port/" "$kept/$scenario/fileserver.lua" > "$lua"
run() {
  local name=$1 bin=$2
  "$bin" --config "$kept/$scenario/fileserver/fileserver.toml" --root "$kept/root" \
    --listen "127.0.0.1:$port" --admin-listen 127.0.0.1:0 --workers 2 --log-level warn \
    > /dev/null 2>&1 &
  local pid=$!
  for _ in $(seq 50); do
    curl -s -o /dev/null "http://127.0.0.1:$port/" && break
    sleep 0.1
  done
  wrk -t1 -c64 -d1s -s "$lua" "http://127.0.0.1:$port/" > /dev/null
  local u0 s0 u1 s1 n
  read -r u0 s0 < <(awk '{print $14, $15}' "/proc/$pid/stat")
  n=$(wrk -t1 -c64 -d"${secs}s" -s "$lua" "http://127.0.0.1:$port/" | awk '/requests in/ {print $1}')
  read -r u1 s1 < <(awk '{print $14, $15}' "/proc/$pid/stat")
  kill "$pid"
  wait "$pid" 2> /dev/null || true
  awk -v name="$name" -v n="$n" -v u=$((u1 - u0)) -v s=$((s1 - s0)) -v t="$tick" -v d="$secs" \
    'BEGIN { printf "%s req/s %.0f user %.2f sys %.2f us/request %.2f\n", name, n / d, u / t * 1e6 / n, s / t * 1e6 / n, (u + s) / t * 1e6 / n }'
}
out=$(for _ in $(seq "$rounds"); do run A "$bin_a"; run B "$bin_b"; done)
echo "$out"
echo "$out" | awk '
  { v[$1, ++n[$1]] = $NF; r[$1, n[$1]] = $3 }
  function median(k, arr,   i, j, m, t, a) {
    m = n[k]; for (i = 1; i <= m; i++) a[i] = arr[k, i]
    for (i = 2; i <= m; i++) { t = a[i]; for (j = i - 1; j > 0 && a[j] > t; j--) a[j + 1] = a[j]; a[j + 1] = t }
    return (m % 2) ? a[(m + 1) / 2] : (a[m / 2] + a[m / 2 + 1]) / 2
  }
  END {
    a = median("A", v); b = median("B", v)
    printf "median us/request: A %.2f  B %.2f  B/A %.3f   req/s B/A %.3f\n", a, b, b / a, median("B", r) / median("A", r)
  }'
