#!/usr/bin/env python3
"""Writes the seed inputs of the fuzz targets into fuzz/corpus/<target>/seed-*,
in each target's input format, from the byte strings of the crates' tests:
RFC 7541 Appendix C and the decoder's unit tests (hpack), the frames of
crates/h2wire/tests/rules.rs, services/fileserver/tests/corpus/fuzz_regressions.txt
and the parser's unit tests (HTTP/1.1 heads), crates/httpfile/tests/corpus/
fuzz_regressions.txt and the conditional and Accept-Encoding unit tests,
and the PROXY protocol reader's unit tests (proxy_header).
siterules_compile reads `arbitrary`'s format, which is not written by hand:
its corpus grows from its dictionary (fuzz/dict/siterules_compile.dict, the
globs, placeholders and values of config/fileserver.toml's rules and the
crate's tests).

Run from anywhere: python3 fuzz/seeds.py. Deterministic; existing seed-*
files are replaced, other corpus files are left alone.
"""

import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def write(target, name, data):
    d = os.path.join(HERE, "corpus", target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "seed-" + name), "wb") as f:
        f.write(data)


def unescape(s):
    """The \\xNN and \\\\ escapes of the fuzz_regressions.txt files."""
    out = bytearray()
    i = 0
    b = s.encode()
    while i < len(b):
        if b[i : i + 2] == b"\\x":
            out.append(int(b[i + 2 : i + 4], 16))
            i += 4
        elif b[i : i + 2] == b"\\\\":
            out.append(0x5C)
            i += 2
        else:
            out.append(b[i])
            i += 1
    return bytes(out)


def regressions(path, kind):
    with open(os.path.join(ROOT, path), encoding="utf-8") as f:
        for line in f:
            line = line.rstrip("\n")
            if line.startswith(kind + " "):
                yield unescape(line[len(kind) + 1 :])


# ---- hpack_decode: [limit selector] then records (u16 BE: block length,
# or 0x8000 | new limit).

def hx(s):
    return bytes.fromhex("".join(s.split()))


def blocks(limit_sel, *items):
    out = bytearray([limit_sel])
    for it in items:
        if isinstance(it, int):
            out += struct.pack(">H", 0x8000 | it)
        else:
            out += struct.pack(">H", len(it)) + it
    return bytes(out)


C3 = [
    "8286 8441 0f77 7777 2e65 7861 6d70 6c65 2e63 6f6d",
    "8286 84be 5808 6e6f 2d63 6163 6865",
    "8287 85bf 400a 6375 7374 6f6d 2d6b 6579 0c63 7573 746f 6d2d 7661 6c75 65",
]
C4 = [
    "8286 8441 8cf1 e3c2 e5f2 3a6b a0ab 90f4 ff",
    "8286 84be 5886 a8eb 1064 9cbf",
    "8287 85bf 4088 25a8 49e9 5ba9 7d7f 8925 a849 e95b b8e8 b4bf",
]
C5 = [
    "4803 3330 3258 0770 7269 7661 7465 611d 4d6f 6e2c 2032 3120 4f63 7420 3230 3133"
    "2032 303a 3133 3a32 3120 474d 546e 1768 7474 7073 3a2f 2f77 7777 2e65 7861 6d70"
    "6c65 2e63 6f6d",
    "4803 3330 37c1 c0bf",
    "88c1 611d 4d6f 6e2c 2032 3120 4f63 7420 3230 3133 2032 303a 3133 3a32 3220 474d"
    "54c0 5a04 677a 6970 7738 666f 6f3d 4153 444a 4b48 514b 425a 584f 5157 454f 5049"
    "5541 5851 5745 4f49 553b 206d 6178 2d61 6765 3d33 3630 303b 2076 6572 7369 6f6e"
    "3d31",
]
C6 = [
    "4882 6402 5885 aec3 771a 4b61 96d0 7abe 9410 54d4 44a8 2005 9504 0b81 66e0 82a6"
    "2d1b ff6e 919d 29ad 1718 63c7 8f0b 97c8 e9ae 82ae 43d3",
    "4883 640e ffc1 c0bf",
    "88c1 6196 d07a be94 1054 d444 a820 0595 040b 8166 e084 a62d 1bff c05a 839b d9ab"
    "77ad 94e7 821d d7f2 e6c7 b335 dfdf cd5b 3960 d5af 2708 7f36 72c1 ab27 0fb5 291f"
    "9587 3160 65c0 03ed 4ee5 b106 3d50 07",
]


def h2_block(path, extra=()):
    """crates/h2wire/tests/support: GET path on https://a, literal fields."""
    b = bytearray([0x82, 0x87, 0x01, 0x01, ord("a"), 0x04, len(path)]) + path.encode()
    for n, v in extra:
        b += bytes([0x00, len(n)]) + n.encode() + bytes([len(v)]) + v.encode()
    return bytes(b)


def hpack_seeds():
    write("hpack_decode", "c3", blocks(0x08, *map(hx, C3)))
    write("hpack_decode", "c4", blocks(0x00, *map(hx, C4)))
    write("hpack_decode", "c5", blocks(0x09, *map(hx, C5)))
    write("hpack_decode", "c6", blocks(0x01, *map(hx, C6)))
    # C.6 with a table too small for what it indexes.
    write("hpack_decode", "c6-small", blocks(0x02, *map(hx, C6[:2])))
    write("hpack_decode", "size-updates",
          blocks(0x00, bytes([0x20, 0x82]), bytes([0x82, 0x20]), bytes([0x3F, 0xE2, 0x1F])))
    write("hpack_decode", "lowered-limit",
          blocks(0x00, 100, bytes([0x82]), 100, bytes([0x3F, 0x45, 0x82]), bytes([0x82]), 4096))
    write("hpack_decode", "bad-indexes",
          blocks(0x00, bytes([0x80]), bytes([0xBE]), bytes([0x0F, 0x2F, 0x01, ord("x")])))
    write("hpack_decode", "truncated",
          blocks(0x00, bytes([0x00, 0x05, ord("a"), ord("b")]),
                 bytes([0x04, 0x7F, 0xFF, 0xFF, 0xFF, 0x0F])))
    write("hpack_decode", "never-indexed",
          blocks(0x08, b"\x10\x01k\x01v\x1f\x08\x01x", bytes([0xBE])))
    write("hpack_decode", "h2-requests",
          blocks(0x08, h2_block("/index.html"), h2_block("/b", [("accept", "*/*")]),
                 h2_block("/x", [("content-length", "5"), ("range", "bytes=0-1")])))


# ---- h2wire_frames: [config] then operations. A receive is [0x00, n] and
# n octets (the preface comes first from the client's stream, not the input).

PREFACE_LEN = 24


def frame(kind, flags, stream, payload=b""):
    return struct.pack(">I", len(payload))[1:] + bytes([kind, flags]) + struct.pack(">I", stream) + payload


DATA, HEADERS, PRIORITY, RST, SETTINGS, PUSH, PING, GOAWAY, WU, CONT = range(10)


def get(stream, path, end=True):
    return frame(HEADERS, 0x4 | (1 if end else 0), stream, h2_block(path))


def receive(data, first=False):
    """Receive operations for `data`, in pieces of at most 255 octets (the
    first one also takes the preface)."""
    out = bytearray()
    room = 255 - (PREFACE_LEN if first else 0)
    while True:
        piece, data = data[:room], data[room:]
        out += bytes([0x00, len(piece) + (PREFACE_LEN if first else 0)]) + piece
        first = False
        room = 255
        if not data:
            return bytes(out)


HELLO = frame(SETTINGS, 0, 0)
ANSWER = bytes([0x04, 0x00, 0x20])  # the first open stream: 200, 1 KiB of body
TICK = bytes([0x07, 0x40])
SHUTDOWN = bytes([0x07, 0x03])


def conversation(cfg, *parts):
    return bytes([cfg]) + b"".join(parts)


def h2_seeds():
    t = "h2wire_frames"
    write(t, "get-answered", conversation(0, receive(HELLO + get(1, "/index.html"), True), ANSWER))
    write(t, "continuation", conversation(
        0, receive(HELLO + frame(HEADERS, 0x1, 3, h2_block("/b", [("accept", "*/*")]))
                   + frame(CONT, 0x4, 3), True), ANSWER, ANSWER))
    write(t, "body-then-reset", conversation(
        0, receive(HELLO + get(1, "/a", end=False), True),
        receive(frame(DATA, 0, 1, b"hello")), ANSWER,
        receive(frame(RST, 0, 1, struct.pack(">I", 8))), TICK, TICK))
    settings = b"".join(struct.pack(">HI", i, v) for i, v in
                        [(1, 0), (2, 0), (3, 10), (4, 100), (5, 16384), (6, 1024)])
    write(t, "control-frames", conversation(
        0, receive(frame(SETTINGS, 0, 0, settings) + frame(PING, 0, 0, b"12345678")
                   + frame(WU, 0, 0, struct.pack(">I", 1000)) + frame(SETTINGS, 1, 0), True),
        receive(get(1, "/w")), ANSWER, receive(frame(WU, 0, 1, struct.pack(">I", 5000))),
        bytes([0x05, 0x41])))
    rapid = b"".join(get(i, "/r", end=False) + frame(RST, 0, i, struct.pack(">I", 8))
                     for i in range(1, 60, 2))
    write(t, "rapid-reset", conversation(1, receive(HELLO + rapid, True)))
    write(t, "content-length-mismatch", conversation(
        0, receive(HELLO + frame(HEADERS, 0x4, 1, h2_block("/u", [("content-length", "3")]))
                   + frame(DATA, 0x1, 1, b"toolong"), True), ANSWER))
    write(t, "self-dependency", conversation(
        0, receive(HELLO + frame(HEADERS, 0x25, 1, struct.pack(">I", 1) + b"\x10" + h2_block("/p"))
                   + frame(PRIORITY, 0, 3, struct.pack(">I", 3) + b"\x10"), True)))
    write(t, "goaway-and-shutdown", conversation(
        0, receive(HELLO + get(1, "/g", end=False) + frame(GOAWAY, 0, 0, bytes(8)), True),
        SHUTDOWN, ANSWER))
    write(t, "bad-preface", b"\x80\x00\x12GET / HTTP/1.1\r\n\r\n")  # no preface given
    write(t, "push-promise", conversation(0, receive(HELLO + frame(PUSH, 0x4, 1, bytes(4)), True)))
    padded = frame(HEADERS, 0x0D, 1, b"\x03" + h2_block("/pad") + b"\x00\x00\x00")
    write(t, "padded", conversation(2, receive(HELLO + padded, True), ANSWER))
    ones = bytes([0x00, PREFACE_LEN + len(HELLO)]) + HELLO + b"".join(
        bytes([0x00, 1, b]) for b in get(1, "/one") + get(3, "/two"))
    write(t, "byte-at-a-time", conversation(0, ones, ANSWER, ANSWER))
    many = b"".join(get(i, "/m") for i in range(1, 12, 2))
    write(t, "refused-streams", conversation(1, receive(HELLO + many, True), ANSWER, TICK))
    big = frame(HEADERS, 0x5, 1, h2_block("/h", [("x-long", "v" * 200)]))
    write(t, "large-answer-head", conversation(0, receive(HELLO + big, True), bytes([0x04, 0x7F, 0xFF])))


# ---- http1_head: [limits] then the read buffer. 0x3C: 8192-octet heads,
# 16 header slots.

def http1_seeds():
    t = "http1_head"
    for i, req in enumerate(regressions("services/fileserver/tests/corpus/fuzz_regressions.txt", "request")):
        write(t, "regression-%02d" % i, b"\x3c" + req)
    heads = [
        b"GET /a HTTP/1.1\r\nHost: x\r\n\r\nGET /b",
        b"GET /docs/a%20b.txt HTTP/1.1\r\nHost: x\r\nRange: bytes=-10\r\n\r\n",
        b"GET / HTTP/1.0\r\n\r\n",
        b"GET / HTTP/1.1\r\nHost: a\r\nX: a\r\n b\r\n\r\n",
        b"GET / HTTP/1.1\r\nHost: a\r\nConnection: Close\r\n\r\n",
        b"HEAD /f HTTP/1.1\r\nHost: example.com:8080\r\nIf-None-Match: \"a\", W/\"b\"\r\n"
        b"If-Modified-Since: Thu, 01 Jan 1970 00:10:00 GMT\r\nAccept-Encoding: gzip, br;q=0.8\r\n"
        b"User-Agent: fuzz\r\nReferer: http://r/\r\n\r\n",
        b"GET /x HTTP/1.1\r\nHost: a\r\nForwarded: for=192.0.2.60;proto=http, for=\"[2001:db8::1]:80\"\r\n"
        b"X-Forwarded-For: 203.0.113.7, 10.0.0.2\r\n\r\n",
        b"OPTIONS * HTTP/1.1\r\nHost: a\r\nOrigin: https://app.example\r\n"
        b"Access-Control-Request-Method: GET\r\nAccess-Control-Request-Headers: range\r\n\r\n",
        b"GET / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\nhello",
        b"GET / HTTP/1.1\r\nHost: a\r\nConnection: keep-alive, Upgrade\r\nIf-Range: \"x\"\r\n"
        b"If-Match: *\r\nIf-Unmodified-Since: Sun, 06 Nov 1994 08:49:37 GMT\r\nAuthorization: Basic dTpw\r\n\r\n",
    ]
    for i, h in enumerate(heads):
        write(t, "head-%02d" % i, b"\x3c" + h)
    long_target = b"GET /" + b"a" * 100 + b" HTTP/1.1\r\nHost: x\r\n\r\n"
    write(t, "414", b"\x01" + long_target)  # 64-octet heads
    write(t, "431", b"\x01" + b"GET / HTTP/1.1\r\nHost: x\r\nX: " + b"a" * 100 + b"\r\n\r\n")
    write(t, "too-many-headers", b"\x04" + b"GET / HTTP/1.1\r\nHost: x\r\nA: 1\r\nB: 2\r\n\r\n")


# ---- httpfile_headers: 16 octets of parameters, then lines: Range,
# If-Match, If-None-Match, If-Modified-Since, If-Unmodified-Since, If-Range,
# Accept-Encoding, the entity-tag's opaque part.

def params(length=100, max_ranges=16, method=0, present=0xFFFF, time_from=0, delta=0, flags=0):
    p = struct.pack("<Q", length)
    p += bytes([0, max_ranges, method]) + struct.pack("<H", present)
    p += bytes([delta & 0xFF, time_from, flags])
    assert len(p) == 16
    return p


def lines(*values):
    return b"\n".join(values)


def httpfile_seeds():
    t = "httpfile_headers"
    for i, r in enumerate(regressions("crates/httpfile/tests/corpus/fuzz_regressions.txt", "range")):
        write(t, "range-%02d" % i, params(present=0x0001) + r)
    for i, r in enumerate([b"bytes=0-9", b"bytes=90-", b"bytes=-10", b"bytes=0-0, 5-9",
                           b"bytes=200-300, 0-1", b"bytes=0-99,0-99"]):
        write(t, "range-case-%d" % i, params(present=0x0001) + r)
    ims = b"Thu, 01 Jan 1970 00:10:00 GMT"
    write(t, "if-match-fails", params(present=0x0086) + lines(b"", b"\"nope\"", b"\"abc\"", b"", b"", b"", b"", b"abc"))
    write(t, "if-none-match", params(present=0x0084) + lines(b"", b"", b"\"abc\"", b"", b"", b"", b"", b"abc"))
    write(t, "if-modified-since", params(present=0x0088, time_from=0) + lines(b"", b"", b"", ims, b"", b"", b"", b"abc"))
    write(t, "if-modified-since-later", params(present=0x0088, time_from=0, delta=1)
          + lines(b"", b"", b"", ims, b"", b"", b"", b"abc"))
    write(t, "if-unmodified-since", params(present=0x0090, time_from=1, delta=5)
          + lines(b"", b"", b"", b"", b"Sun, 06 Nov 1994 08:49:37 GMT", b"", b"", b"abc"))
    write(t, "if-range-tag", params(present=0x00A1) + lines(b"bytes=0-1", b"", b"", b"", b"", b"\"abc\"", b"", b"abc"))
    write(t, "if-range-date", params(present=0x0021, time_from=2)
          + lines(b"bytes=5-", b"", b"", b"", b"", b"Sunday, 06-Nov-94 08:49:37 GMT"))
    write(t, "if-range-weak", params(present=0x00A1) + lines(b"bytes=0-1", b"", b"", b"", b"", b"W/\"abc\"", b"", b"abc"))
    for i, ae in enumerate([b"gzip, br;q=0.8, *;q=0", b"identity;q=0", b"br;q=1.000, zstd;q=0.5, x-gzip",
                            b"*", b"gzip;q=0.5, identity;q=0.6", b"BR;Q=0.001,gzip;q=1.0", b"zstd;q=1.5"]):
        write(t, "accept-encoding-%d" % i, params(present=0x0040) + lines(b"", b"", b"", b"", b"", b"", ae))
    write(t, "multipart", params(length=1000, present=0x0081, flags=1)
          + lines(b"bytes=0-0,9-999", b"", b"", b"", b"", b"", b"", b"64-6553f100"))
    write(t, "head-206", params(method=1, present=0x0001) + b"bytes=-1")
    write(t, "options", params(method=2, present=0x0001) + b"bytes=0-1")


def proxy_seeds():
    """The headers of services/fileserver/src/http/proxy_protocol.rs's
    unit tests and tests/proxy_protocol.rs, each complete."""
    t = "proxy_header"
    write(t, "v1-tcp4", b"PROXY TCP4 203.0.113.7 192.0.2.1 51000 443\r\nGET / HTTP/1.1\r\n")
    write(t, "v1-tcp6", b"PROXY TCP6 2001:db8::7 2001:db8::1 4000 443\r\n")
    write(t, "v1-unknown", b"PROXY UNKNOWN\r\n")
    sig = b"\r\n\r\n\x00\r\nQUIT\n"
    v4 = bytes([203, 0, 113, 7, 192, 0, 2, 1]) + struct.pack(">HH", 51000, 443)
    write(t, "v2-tcp4", sig + bytes([0x21, 0x11]) + struct.pack(">H", len(v4)) + v4)
    write(t, "v2-local", sig + bytes([0x20, 0x00, 0x00, 0x00]))


def main():
    hpack_seeds()
    h2_seeds()
    http1_seeds()
    httpfile_seeds()
    proxy_seeds()
    total = 0
    for root, _, files in os.walk(os.path.join(HERE, "corpus")):
        total += sum(os.path.getsize(os.path.join(root, f)) for f in files)
    print("fuzz/corpus: %d octets" % total)


if __name__ == "__main__":
    main()
