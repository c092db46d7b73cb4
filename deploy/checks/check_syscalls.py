#!/usr/bin/env python3
"""Checks the unit's SystemCallFilter= against the system calls the real
daemon makes: runs fileserver under strace -f with a NOTIFY_SOCKET and a
watchdog, serves hits, misses, a 404, a HEAD, a range and a /metrics scrape,
reloads it with SIGHUP (RELOADING=1 ... READY=1), takes a few WATCHDOG=1
pings, stops it with SIGTERM, and requires every
traced system call to be allowed by fileserver.service (its allow lists,
groups expanded with `systemd-analyze syscall-filter`, minus its ~deny lists).

  check_syscalls.py BIN

A call missing from the filter would kill the service with SIGSYS... or, with
SystemCallErrorNumber=EPERM as set here, fail with EPERM in production only.
io_uring operations run in the kernel and do not show up as separate calls;
the io_uring_* calls themselves do.
"""
import os
import pathlib
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request


def expand(name, seen=None):
    """A syscall group (@x) or a single call -> set of call names."""
    if not name.startswith("@"):
        return {name}
    seen = seen if seen is not None else set()
    if name in seen:
        return set()
    seen.add(name)
    out = subprocess.run(["systemd-analyze", "syscall-filter", name], check=True,
                         capture_output=True, text=True).stdout
    calls = set()
    for line in out.splitlines()[1:]:
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        calls |= expand(line, seen)
    return calls


def allowed_calls(unit_text):
    allow, deny = set(), set()
    for value in re.findall(r"^SystemCallFilter=(.*)$", unit_text, re.M):
        value = value.strip()
        target = allow
        if value.startswith("~"):
            target, value = deny, value[1:]
        for item in value.split():
            target |= expand(item)
    return allow - deny, deny


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    binary = sys.argv[1]
    allowed, denied = allowed_calls(pathlib.Path("deploy/systemd/fileserver.service").read_text())
    if not allowed:
        raise SystemExit("no SystemCallFilter= allow list in fileserver.service")
    with tempfile.TemporaryDirectory() as tmp:
        root = pathlib.Path(tmp, "www")
        root.mkdir()
        (root / "index.html").write_text("hello\n")
        (root / "big.bin").write_bytes(os.urandom(1 << 20))
        http, admin = free_port(), free_port()
        log = os.path.join(tmp, "strace.log")
        env = {k: v for k, v in os.environ.items() if not k.startswith("FILESERVER_")}
        notify = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        notify.bind(os.path.join(tmp, "notify.sock"))
        notify.settimeout(30)
        env["NOTIFY_SOCKET"] = notify.getsockname()
        env["WATCHDOG_USEC"] = "200000"
        env.pop("WATCHDOG_PID", None)
        proc = subprocess.Popen(["strace", "-f", "-qq", "-o", log, binary, "--root", str(root),
                                 "--listen", f"127.0.0.1:{http}", "--admin-listen", f"127.0.0.1:{admin}",
                                 "--workers", "2", "--log-level", "warn"],
                                env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                start_new_session=True)
        try:
            deadline = time.time() + 60
            while True:
                try:
                    urllib.request.urlopen(f"http://127.0.0.1:{admin}/readyz", timeout=2).read()
                    break
                except Exception:
                    if proc.poll() is not None or time.time() > deadline:
                        raise SystemExit("daemon under strace did not become ready: "
                                         + proc.stderr.read().decode(errors="replace")[-2000:])
                    time.sleep(0.2)
            base = f"http://127.0.0.1:{http}"
            for _ in range(3):
                urllib.request.urlopen(base + "/index.html", timeout=10).read()
                urllib.request.urlopen(base + "/big.bin", timeout=10).read()
            req = urllib.request.Request(base + "/big.bin", headers={"Range": "bytes=10-20,100-200"})
            urllib.request.urlopen(req, timeout=10).read()
            urllib.request.urlopen(urllib.request.Request(base + "/index.html", method="HEAD"), timeout=10).read()
            try:
                urllib.request.urlopen(base + "/missing", timeout=10)
            except urllib.error.HTTPError as e:
                if e.code != 404:
                    raise
            urllib.request.urlopen(f"http://127.0.0.1:{admin}/metrics", timeout=10).read()
            # Signal the daemon itself (strace's child), not strace.
            children = pathlib.Path(f"/proc/{proc.pid}/task/{proc.pid}/children").read_text().split()
            if len(children) != 1:
                raise SystemExit(f"strace has children {children}, want the daemon only")
            os.kill(int(children[0]), signal.SIGHUP)
            # Then RELOADING=1, READY=1 and two more pings (recv times out
            # after 30 s if one never comes).
            for want in ["RELOADING=1", "READY=1", "WATCHDOG=1", "WATCHDOG=1"]:
                while want not in notify.recv(4096).decode().splitlines():
                    pass
            os.kill(int(children[0]), signal.SIGTERM)
            code = proc.wait(60)
            if code != 0:
                raise SystemExit(f"daemon under strace exited {code} on SIGTERM")
        finally:
            # strace and the daemon share a new process group: end both.
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait()
        used = set()
        for line in pathlib.Path(log).read_text(errors="replace").splitlines():
            m = re.match(r"^\d+\s+([a-z_0-9]+)\(", line)
            if m:
                used.add(m.group(1))
    # execve is made by strace itself to start the daemon (systemd execs it
    # before the filter applies).
    used.discard("execve")
    if not used:
        raise SystemExit("strace recorded no system calls")
    # Denied with EPERM (SystemCallErrorNumber) and handled: cachestat is the
    # daemon's first choice for a page-cache check and falls back to
    # preadv2(RWF_NOWAIT) on EPERM (crates/filemanager/src/residency.rs).
    # This strace may not know its name (x86-64 number 451 = 0x1c3).
    unit = pathlib.Path("deploy/systemd/fileserver.service").read_text()
    eperm = re.search(r"^SystemCallErrorNumber=EPERM$", unit, re.M) is not None
    handled_when_denied = {"cachestat", "syscall_0x1c3"} if eperm else set()
    bad = sorted(used - allowed - handled_when_denied)
    if bad:
        why = {c: ("denied by ~" if c in denied else "not in the allow list") for c in bad}
        raise SystemExit("system calls the daemon makes but fileserver.service forbids: "
                         + ", ".join(f"{c} ({w})" for c, w in why.items()))
    print(f"{len(used)} distinct system calls, all allowed: {' '.join(sorted(used))}")


if __name__ == "__main__":
    main()
