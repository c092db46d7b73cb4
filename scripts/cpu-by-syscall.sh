#!/usr/bin/env bash
# A server's CPU per request split by system call, under one of the load
# harness's wrk scripts: where fileserver and a peer spend their time, side
# by side, in the same units as the harness's CPU column.
#
#   scripts/cpu-by-syscall.sh PIDS PORT LUA [SECONDS]
#
# PIDS is the server's process ids, comma-separated (every worker process
# of a peer); PORT where it listens; LUA the scenario's wrk script from a
# kept harness tree (`$KEPT/$S/fileserver.lua`, `$KEPT/$S/h2o.lua`, ...;
# the script's own address is ignored). It samples the processes with
# `perf record -g` (cpu-clock, 1500 Hz) over SECONDS (default 3) of
# `wrk -t1 -c64` (`CONNS=4096` in the environment for more connections),
# then prints µs per request for each system call (the frame under
# `do_syscall_64`, so a send's loopback delivery counts to the send) and
# for user space. Sampling, not counting: run it a few times and compare
# the larger rows only.
set -euo pipefail
pids=$1 port=$2 lua=$3 secs=${4:-3}
hz=1500
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
sed "s/127.0.0.1:[0-9]*/127.0.0.1:$port/" "$lua" > "$dir/load.lua"
perf record -q -F "$hz" -g -p "$pids" -o "$dir/perf.data" -- sleep "$secs" > /dev/null 2>&1 &
rec=$!
requests=$(wrk -t1 -c"${CONNS:-64}" -d"${secs}s" -s "$dir/load.lua" "http://127.0.0.1:$port/" |
  awk '/requests in/ {print $1}')
wait $rec
perf script -i "$dir/perf.data" 2> /dev/null | python3 -c '
import collections, sys
requests, hz = float(sys.argv[1]), float(sys.argv[2])
rows, stack = collections.Counter(), []
def flush():
    if not stack:
        return
    key = "user"
    for i, frame in enumerate(stack):
        if frame in ("x64_sys_call", "do_syscall_64"):
            key = stack[i - 1].replace("__x64_sys_", "").replace("__do_sys_", "") if i else "syscall entry"
            break
        if frame.startswith(("asm_", "entry_SYSCALL")):
            key = "kernel, other"
    rows[key] += 1
for line in sys.stdin:
    if not line.strip():
        flush()
        stack = []
    elif line[0] in " \t":
        parts = line.split(None, 1)
        if len(parts) == 2:
            stack.append(parts[1].rsplit(" (", 1)[0].split("+0x")[0])
flush()
us = 1e6 / hz / requests
print(f"requests {requests:.0f}  total {sum(rows.values()) * us:.2f} us/request")
for key, n in rows.most_common(14):
    print(f"{n * us:7.2f}  {key}")
' "$requests" "$hz"
