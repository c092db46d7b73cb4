#!/usr/bin/env python3
"""Runs the real fileserver the way deploy/systemd starts it, without a
systemd manager: systemd-socket-activate (from the systemd package) binds the
listener like fileserver.socket and passes it as LISTEN_FDS; a unix datagram
socket plays NOTIFY_SOCKET for Type=notify.

  check_activation.py BIN

Takes ExecStart's arguments from fileserver.service, with the config path
pointed at config/fileserver.toml and the root at a temp dir, and an admin port
that is free. Requires: READY=1 arrives, a GET through the passed socket is
served, SIGTERM (the unit's KillSignal) sends STOPPING=1 and exits 0 within
the unit's TimeoutStopSec.
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
import urllib.request


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    binary = sys.argv[1]
    unit = pathlib.Path("deploy/systemd/fileserver.service").read_text()
    exec_start = shlex.split(re.search(r"^ExecStart=(.*)$", unit, re.M).group(1))
    stop_timeout = int(re.search(r"^TimeoutStopSec=(\d+)s?$", unit, re.M).group(1))
    with tempfile.TemporaryDirectory() as tmp:
        root = pathlib.Path(tmp, "www")
        root.mkdir()
        (root / "index.html").write_text("hello from a socket-activated fileserver\n")
        args = [a.replace("/etc/fileserver/fileserver.toml", os.path.abspath("config/fileserver.toml"))
                 .replace("/srv/www", str(root)) for a in exec_start[1:]]
        port, admin = free_port(), free_port()
        notify_path = os.path.join(tmp, "notify.sock")
        notify = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        notify.bind(notify_path)
        notify.settimeout(30)
        env = {k: v for k, v in os.environ.items() if not k.startswith("FILESERVER_")}
        env["NOTIFY_SOCKET"] = notify_path
        # listen points at a port nobody serves: the response below can only
        # come through the passed socket.
        cmd = ["systemd-socket-activate", "-l", f"127.0.0.1:{port}", "-E", "NOTIFY_SOCKET",
               binary, *args, "--admin-listen", f"127.0.0.1:{admin}", "--listen", "127.0.0.1:1"]
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                start_new_session=True)
        try:
            # systemd-socket-activate binds, says so, and starts the program at
            # the first connection.
            line = proc.stdout.readline().decode()
            if not line.startswith("Listening on"):
                raise SystemExit(f"systemd-socket-activate: {line!r}")
            result = {}

            def fetch():
                try:
                    with urllib.request.urlopen(f"http://127.0.0.1:{port}/index.html", timeout=30) as r:
                        result["status"], result["body"] = r.status, r.read()
                except Exception as e:  # reported below
                    result["error"] = e

            t = threading.Thread(target=fetch)
            t.start()
            ready = notify.recv(4096).decode()
            if "READY=1" not in ready.split("\n"):
                raise SystemExit(f"first sd_notify message is {ready!r}, want READY=1")
            t.join(30)
            if result.get("status") != 200 or b"socket-activated" not in result.get("body", b""):
                raise SystemExit(f"GET through the activated socket: {result}")
            proc.send_signal(signal.SIGTERM)
            stopping = notify.recv(4096).decode()
            if "STOPPING=1" not in stopping.split("\n"):
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
    print(f"READY=1, served via LISTEN_FDS, STOPPING=1, exit 0 ({shlex.join(exec_start[:1] + args)})")


if __name__ == "__main__":
    main()
