#!/usr/bin/env python3
"""Runs the real fileserver the way deploy/systemd starts it, without a
systemd manager: systemd-socket-activate (from the systemd package) binds one
listener per socket unit in the service's Sockets= and passes them as
LISTEN_FDS with the units' FileDescriptorName= as LISTEN_FDNAMES; a unix
datagram socket plays NOTIFY_SOCKET, and WATCHDOG_USEC is the unit's
WatchdogSec=.

  check_activation.py BIN

Takes ExecStart's arguments from fileserver.service, with the config path
pointed at config/fileserver.toml and the root at a temp dir. --listen and
--admin-listen point at ports nobody serves, so every response below can only
come through a passed socket. Requires, in order: READY=1; a GET through the
"http" socket and a /metrics scrape through the "admin" socket are served; a
WATCHDOG=1 ping within WatchdogSec=; SIGHUP gives RELOADING=1 with
MONOTONIC_USEC= in one datagram, then READY=1 (the notify-reload handshake);
SIGTERM (the unit's KillSignal) gives STOPPING=1 and exit 0 within the unit's
TimeoutStopSec.
"""
import os
import pathlib
import re
import shlex
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

UNITS = pathlib.Path("deploy/systemd")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def unit_value(text, key):
    m = re.search(rf"^{key}=(.*)$", text, re.M)
    return m.group(1).strip() if m else None


def seconds(value):
    m = re.fullmatch(r"(\d+)s?", value)
    if not m:
        raise SystemExit(f"cannot read {value!r} as seconds")
    return int(m.group(1))


def fd_names(unit):
    """FileDescriptorName= of each socket unit in Sockets=, in that order."""
    sockets = " ".join(re.findall(r"^Sockets=(.*)$", unit, re.M)).split()
    if not sockets:
        raise SystemExit("fileserver.service has no Sockets=")
    names = []
    for s in sockets:
        name = unit_value((UNITS / s).read_text(), "FileDescriptorName")
        if not name:
            raise SystemExit(f"{s} has no FileDescriptorName=")
        names.append(name)
    if sorted(names) != ["admin", "http"]:
        raise SystemExit(f"socket names {names}, want one http and one admin")
    return names


class Notify:
    def __init__(self, path):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(path)

    def next(self, timeout, skip_pings=True):
        """The next datagram's fields (skipping WATCHDOG=1 pings)."""
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise SystemExit(f"no sd_notify message within {timeout} s")
            self.sock.settimeout(left)
            try:
                fields = self.sock.recv(4096).decode().splitlines()
            except socket.timeout:
                raise SystemExit(f"no sd_notify message within {timeout} s")
            if skip_pings and fields == ["WATCHDOG=1"]:
                continue
            return fields


def get(url):
    with urllib.request.urlopen(url, timeout=30) as r:
        return r.status, r.read()


def main():
    binary = sys.argv[1]
    unit = (UNITS / "fileserver.service").read_text()
    exec_start = shlex.split(unit_value(unit, "ExecStart"))
    stop_timeout = seconds(unit_value(unit, "TimeoutStopSec"))
    watchdog = seconds(unit_value(unit, "WatchdogSec") or "0")
    if watchdog <= 0:
        raise SystemExit("fileserver.service has no WatchdogSec=")
    names = fd_names(unit)
    with tempfile.TemporaryDirectory() as tmp:
        root = pathlib.Path(tmp, "www")
        root.mkdir()
        (root / "index.html").write_text("hello from a socket-activated fileserver\n")
        args = [a.replace("/etc/fileserver/fileserver.toml", os.path.abspath("config/fileserver.toml"))
                 .replace("/srv/www", str(root)) for a in exec_start[1:]]
        ports = {name: free_port() for name in names}
        notify = Notify(os.path.join(tmp, "notify.sock"))
        env = {k: v for k, v in os.environ.items()
               if not k.startswith("FILESERVER_") and not k.startswith("WATCHDOG_")}
        env["NOTIFY_SOCKET"] = notify.sock.getsockname()
        # systemd sets WATCHDOG_PID too; here the pid is not known before the
        # start, and an absent WATCHDOG_PID means "for whoever reads it".
        env["WATCHDOG_USEC"] = str(watchdog * 1_000_000)
        cmd = ["systemd-socket-activate"]
        for name in names:
            cmd += ["-l", f"127.0.0.1:{ports[name]}"]
        cmd += [f"--fdname={':'.join(names)}", "-E", "NOTIFY_SOCKET", "-E", "WATCHDOG_USEC",
                binary, *args, "--listen", "127.0.0.1:1", "--admin-listen", "127.0.0.1:1"]
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                start_new_session=True)
        try:
            # systemd-socket-activate binds, says so once per socket, and
            # starts the program at the first connection.
            for _ in names:
                line = proc.stdout.readline().decode()
                if not line.startswith("Listening on"):
                    raise SystemExit(f"systemd-socket-activate: {line!r}")
            result = {}

            def fetch():
                try:
                    result["status"], result["body"] = get(f"http://127.0.0.1:{ports['http']}/index.html")
                except Exception as e:  # reported below
                    result["error"] = e

            t = threading.Thread(target=fetch)
            t.start()
            ready = notify.next(30, skip_pings=False)
            if "READY=1" not in ready:
                raise SystemExit(f"first sd_notify message is {ready!r}, want READY=1")
            t.join(30)
            if result.get("status") != 200 or b"socket-activated" not in result.get("body", b""):
                raise SystemExit(f"GET through the activated http socket: {result}")
            status, metrics = get(f"http://127.0.0.1:{ports['admin']}/metrics")
            if status != 200 or not re.search(rb"^fileserver_up 1$", metrics, re.M):
                raise SystemExit(f"/metrics through the activated admin socket: {status} {metrics[:300]!r}")
            # The first ping comes WatchdogSec/2 after READY=1: systemd
            # wants one within WatchdogSec.
            ping = notify.next(watchdog, skip_pings=False)
            if ping != ["WATCHDOG=1"]:
                raise SystemExit(f"after READY=1 sd_notify sent {ping!r}, want WATCHDOG=1")
            proc.send_signal(signal.SIGHUP)
            reloading = notify.next(30)
            if len(reloading) != 2 or reloading[0] != "RELOADING=1" or \
                    not re.fullmatch(r"MONOTONIC_USEC=\d+", reloading[1]):
                raise SystemExit(f"after SIGHUP sd_notify sent {reloading!r}, "
                                 "want RELOADING=1 and MONOTONIC_USEC= in one message")
            ready = notify.next(30)
            if "READY=1" not in ready:
                raise SystemExit(f"after RELOADING=1 sd_notify sent {ready!r}, want READY=1")
            reload_status = next((f for f in ready if f.startswith("STATUS=")), "")
            proc.send_signal(signal.SIGTERM)
            stopping = notify.next(30)
            if "STOPPING=1" not in stopping:
                raise SystemExit(f"after SIGTERM sd_notify sent {stopping!r}, want STOPPING=1")
            code = proc.wait(stop_timeout)
            if code != 0:
                raise SystemExit(f"exit code {code} after SIGTERM")
        except BaseException:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
            out = proc.communicate()[0].decode(errors="replace")
            print(out[-3000:])
            raise
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
    print(f"READY=1, http+admin served via LISTEN_FDNAMES={':'.join(names)}, "
          f"WATCHDOG=1 within {watchdog} s, RELOADING=1+MONOTONIC_USEC -> READY=1 "
          f"({reload_status}), STOPPING=1, exit 0 ({shlex.join(exec_start[:1] + args)})")


if __name__ == "__main__":
    main()
