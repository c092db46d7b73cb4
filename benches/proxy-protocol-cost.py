#!/usr/bin/env python3
"""The daemon's CPU time per request behind HAProxy in TCP mode, with PROXY
protocol v2 (HAProxy `send-proxy-v2`, the daemon's `proxy_protocol`) against
without, in alternating rounds; prints every round and the medians.

Two shapes: keep-alive (wrk -c32: one header per connection, the usual
case behind a balancer) and a connection per request (`Connection: close`:
one header per request, the worst case).

With `--server nginx` the same rounds measure nginx (one worker, its
`listen ... proxy_protocol`), the peer's cost of the same header: behind
HAProxy the header comes in a TCP segment of its own, so part of the cost
is the kernel's, whichever server reads it.

Usage: benches/proxy-protocol-cost.py [--bin target/release/fileserver]
                                       [--server fileserver|nginx]
                                       [--rounds 5] [--seconds 5]
Needs haproxy, wrk and, for --server nginx, nginx (scripts/install-deps.sh).
Loopback only; each round stops by itself after --seconds.
"""

import argparse
import os
import re
import socket
import statistics
import subprocess
import tempfile
import time

TICK = os.sysconf("SC_CLK_TCK")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cpu_seconds(pid):
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def wait_port(port, timeout=10):
    end = time.time() + timeout
    while time.time() < end:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    raise SystemExit(f"nothing listens on {port}")


def nginx_cmd(root, port, proxy):
    """nginx serving `root` on `port` with one worker, as the harness runs it
    (sendfile, open_file_cache, no access log)."""
    conf = os.path.join(root, "..", f"nginx-{port}.conf")
    with open(conf, "w") as f:
        f.write(f"""daemon off;
master_process off;
worker_processes 1;
pid {conf}.pid;
error_log stderr crit;
events {{ worker_connections 4096; }}
http {{
  access_log off;
  sendfile on;
  tcp_nopush on;
  open_file_cache max=1000 inactive=60s;
  default_type application/octet-stream;
  client_body_temp_path {root}/../tmp;
  proxy_temp_path {root}/../tmp;
  fastcgi_temp_path {root}/../tmp;
  uwsgi_temp_path {root}/../tmp;
  scgi_temp_path {root}/../tmp;
  server {{
    listen 127.0.0.1:{port}{' proxy_protocol' if proxy else ''};
    root {root};
  }}
}}
""")
    return ["nginx", "-c", conf, "-p", os.path.join(root, "..")]


def round_(args, root, proxy, close):
    dport, hport, aport = free_port(), free_port(), free_port()
    if args.server == "nginx":
        # No master: the one process is the worker, whose CPU is counted.
        cmd = nginx_cmd(root, dport, proxy)
    else:
        cmd = [args.bin, "--root", root, "--listen", f"127.0.0.1:{dport}",
               "--admin-listen", f"127.0.0.1:{aport}", "--workers", "1", "--log-level", "warn"]
        if proxy:
            cmd += ["--set", "proxy_protocol=127.0.0.1"]
    daemon = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    cfg = os.path.join(root, "..", f"haproxy-{hport}.cfg")
    with open(cfg, "w") as f:
        f.write(f"""global
  maxconn 4096
defaults
  mode tcp
  timeout connect 5s
  timeout client 30s
  timeout server 30s
frontend in
  bind 127.0.0.1:{hport}
  default_backend daemon
backend daemon
  server d 127.0.0.1:{dport}{' send-proxy-v2' if proxy else ''}
""")
    haproxy = subprocess.Popen(["haproxy", "-db", "-f", cfg],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_port(dport)
        wait_port(hport)
        wrk = ["wrk", "-t1", "-c32", f"-d{args.seconds}s"]
        if close:
            wrk += ["-H", "Connection: close"]
        before = cpu_seconds(daemon.pid)
        out = subprocess.run(wrk + [f"http://127.0.0.1:{hport}/f0.bin"],
                             capture_output=True, text=True, check=True).stdout
        used = cpu_seconds(daemon.pid) - before
        requests = int(re.search(r"(\d+) requests in", out).group(1))
        errors = re.search(r"Socket errors:.*|Non-2xx.*", out)
        if errors:
            raise SystemExit(f"wrk saw errors ({'proxy' if proxy else 'plain'}): {errors.group(0)}")
        return used / requests * 1e6, requests / args.seconds
    finally:
        haproxy.terminate()
        daemon.terminate()
        haproxy.wait()
        daemon.wait()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--bin", default="target/release/fileserver")
    p.add_argument("--server", choices=("fileserver", "nginx"), default="fileserver")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--seconds", type=int, default=5)
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = os.path.join(tmp, "root")
        os.mkdir(root)
        os.mkdir(os.path.join(tmp, "tmp"))
        for i in range(8):
            with open(os.path.join(root, f"f{i}.bin"), "wb") as f:
                f.write(os.urandom(4096))
        for close in (False, True):
            shape = "a connection per request" if close else "keep-alive"
            cpu = {False: [], True: []}
            for r in range(args.rounds):
                # Alternate which goes first, so drift favours neither.
                for proxy in ((False, True) if r % 2 == 0 else (True, False)):
                    us, rate = round_(args, root, proxy, close)
                    cpu[proxy].append(us)
                    print(f"{shape:26} round {r + 1} {'proxy' if proxy else 'plain':5}: "
                          f"{us:7.2f} us CPU/request, {rate:9.0f} req/s", flush=True)
            plain, proxy = statistics.median(cpu[False]), statistics.median(cpu[True])
            print(f"{args.server}, {shape}: median {plain:.2f} us plain, {proxy:.2f} us with PROXY v2: "
                  f"ratio {proxy / plain:.3f}", flush=True)


if __name__ == "__main__":
    main()
