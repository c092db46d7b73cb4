"""Hostile HTTP/3 clients for tests/h3_hostile.rs, on aioquic (raw QUIC and
HTTP/3 frames, independent of the server's quinn and h3).

  flood --port P --count N --hold S
      One QUIC Initial from each of N UDP sockets (N source ports), as a
      spoofed flood would send them: never answered. Prints {"sent": N}
      once they are out, then, after S seconds of reading what comes back,
      {"retry": R, "initial": I}: how many sockets got a Retry, and how
      many got the server's Initial (a handshake it began).

  streams --port P --ca CA --mode MODE --streams N --wait S [--connections C]
          [--path PATH]
      C connections (default 1), each with N request streams, then S
      seconds of listening; one JSON line per connection:
      {"resets": {CODE: n}, "stop_sending": n, "status": {CODE: n},
       "first_reset_s": t, "last_reset_s": t, "bytes": n}
      MODE silent: each stream sends the first octets of a HEADERS frame
                   and nothing more (a head that never ends).
      MODE body:   GET PATH with a body that is never finished: the head,
                   then 16 KiB of DATA, and the stream left open.
      MODE closed: GET PATH with the request ended, and no flow-control
                   credit ever given back: the client never reads.
      --never-read gives no credit back in any mode.

  wire --port P --ca CA --case CASE
      One connection that breaks HTTP/3's framing or QPACK as CASE says,
      then, on a fresh stream, a plain GET of /small.txt; one JSON line:
      {"closed": CODE or null, "resets": {CODE: n}, "status": {CODE: n}}
      CASE data-first:     a request stream that opens with DATA
           dynamic-ref:    a field section that needs a dynamic table
           malformed:      a request with a `connection` field
           second-control: a second control stream
           control-data:   DATA on the control stream
           big-head:       a 20 KiB field value (over max_field_section_size)
           get-then-big-head: a GET, then the big head on the same connection
           grease:         an unknown frame before HEADERS and a stream of
                           an unknown type (both to be ignored)
"""

import argparse
import asyncio
import json
import socket
import ssl
import time

from aioquic.asyncio import connect
from aioquic.asyncio.protocol import QuicConnectionProtocol
from aioquic.h3.connection import H3_ALPN, H3Connection
from aioquic.h3.events import DataReceived, HeadersReceived
from aioquic.quic.configuration import QuicConfiguration
from aioquic.quic.connection import QuicConnection
from aioquic.quic.events import ConnectionTerminated, StopSendingReceived, StreamReset


def flood(args):
    socks = []
    for _ in range(args.count):
        conf = QuicConfiguration(is_client=True, alpn_protocols=H3_ALPN)
        conf.server_name = "localhost"
        quic = QuicConnection(configuration=conf)
        addr = ("127.0.0.1", args.port)
        quic.connect(addr, now=time.time())
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.bind(("127.0.0.1", 0))
        s.setblocking(False)
        for data, _ in quic.datagrams_to_send(now=time.time()):
            s.sendto(data, addr)
        socks.append(s)
    print(json.dumps({"sent": len(socks)}), flush=True)
    retry = initial = 0
    seen = set()
    end = time.time() + args.hold
    while time.time() < end:
        for i, s in enumerate(socks):
            while True:
                try:
                    data = s.recv(65536)
                except BlockingIOError:
                    break
                if i in seen or not data or not data[0] & 0x80:
                    continue
                seen.add(i)
                kind = (data[0] & 0x30) >> 4
                if kind == 3:
                    retry += 1
                elif kind == 0:
                    initial += 1
        time.sleep(0.05)
    print(json.dumps({"retry": retry, "initial": initial}), flush=True)


class Attacker(QuicConnectionProtocol):
    def __init__(self, *a, closed=False, **kw):
        super().__init__(*a, **kw)
        self.h3 = H3Connection(self._quic)
        self.t0 = time.time()
        self.resets = {}
        self.first_reset = None
        self.last_reset = None
        self.stop_sending = 0
        self.status = {}
        self.bytes = 0
        self.closed = None
        if closed:
            # Never give credit back: the window stays where it started.
            self._quic._write_stream_limits = lambda **kw: None
            self._quic._write_connection_limits = lambda **kw: None

    def quic_event_received(self, event):
        if isinstance(event, ConnectionTerminated):
            self.closed = event.error_code
        if isinstance(event, StreamReset):
            code = str(event.error_code)
            self.resets[code] = self.resets.get(code, 0) + 1
            if self.first_reset is None:
                self.first_reset = time.time() - self.t0
            self.last_reset = time.time() - self.t0
        elif isinstance(event, StopSendingReceived):
            self.stop_sending += 1
        for e in self.h3.handle_event(event):
            if isinstance(e, HeadersReceived):
                for k, v in e.headers:
                    if k == b":status":
                        c = v.decode()
                        self.status[c] = self.status.get(c, 0) + 1
            elif isinstance(e, DataReceived):
                self.bytes += len(e.data)


async def one_connection(args):
    conf = QuicConfiguration(is_client=True, alpn_protocols=H3_ALPN)
    conf.load_verify_locations(args.ca)
    conf.server_name = "localhost"
    conf.verify_mode = ssl.CERT_REQUIRED
    conf.idle_timeout = args.wait + 30
    closed = args.mode == "closed" or args.never_read
    if closed:
        conf.max_stream_data = 16384
        conf.max_data = 1 << 20
    async with connect(
        "127.0.0.1",
        args.port,
        configuration=conf,
        create_protocol=lambda *a, **kw: Attacker(*a, closed=closed, **kw),
        wait_connected=True,
    ) as client:
        quic = client._quic
        headers = [
            (b":method", b"GET"),
            (b":scheme", b"https"),
            (b":authority", b"localhost"),
            (b":path", args.path.encode()),
        ]
        for _ in range(args.streams):
            sid = quic.get_next_available_stream_id()
            if args.mode == "silent":
                # HEADERS, a length of 100, one octet of it.
                quic.send_stream_data(sid, b"\x01\x40\x64\x00")
            elif args.mode == "body":
                client.h3.send_headers(sid, headers)
                client.h3.send_data(sid, b"x" * 16384, end_stream=False)
            else:
                client.h3.send_headers(sid, headers, end_stream=True)
        client.transmit()
        await asyncio.sleep(args.wait)
        return {
            "resets": client.resets,
            "stop_sending": client.stop_sending,
            "status": client.status,
            "first_reset_s": client.first_reset,
            "last_reset_s": client.last_reset,
            "bytes": client.bytes,
        }


GET = [
    (b":method", b"GET"),
    (b":scheme", b"https"),
    (b":authority", b"localhost"),
    (b":path", b"/small.txt"),
]


async def wire(args):
    conf = QuicConfiguration(is_client=True, alpn_protocols=H3_ALPN)
    conf.load_verify_locations(args.ca)
    conf.server_name = "localhost"
    conf.verify_mode = ssl.CERT_REQUIRED
    async with connect(
        "127.0.0.1",
        args.port,
        configuration=conf,
        create_protocol=Attacker,
        wait_connected=True,
    ) as client:
        quic, h3 = client._quic, client.h3
        sid = quic.get_next_available_stream_id()
        case = args.case
        if case == "data-first":
            quic.send_stream_data(sid, b"\x00\x02hi", end_stream=True)
        elif case == "dynamic-ref":
            # Required Insert Count 1, then an indexed dynamic field.
            quic.send_stream_data(sid, b"\x01\x03\x02\x00\x80", end_stream=True)
        elif case == "malformed":
            h3.send_headers(sid, GET + [(b"connection", b"close")], end_stream=True)
        elif case == "second-control":
            uni = quic.get_next_available_stream_id(is_unidirectional=True)
            quic.send_stream_data(uni, b"\x00\x04\x00")
        elif case == "control-data":
            quic.send_stream_data(h3._local_control_stream_id, b"\x00\x02hi")
        elif case == "big-head":
            h3.send_headers(sid, GET + [(b"x-big", b"~" * 20480)], end_stream=True)
        elif case == "get-then-big-head":
            h3.send_headers(sid, GET, end_stream=True)
            client.transmit()
            await asyncio.sleep(0.3)
            big = quic.get_next_available_stream_id()
            h3.send_headers(big, GET + [(b"x-big", b"~" * 20480)], end_stream=True)
        elif case == "grease":
            uni = quic.get_next_available_stream_id(is_unidirectional=True)
            quic.send_stream_data(uni, b"\x21grease")
            quic.send_stream_data(sid, b"\x21\x06grease")
            h3.send_headers(sid, GET, end_stream=True)
        client.transmit()
        await asyncio.sleep(0.5)
        if client.closed is None:
            h3.send_headers(quic.get_next_available_stream_id(), GET, end_stream=True)
            client.transmit()
            await asyncio.sleep(0.5)
        print(json.dumps({"closed": client.closed, "resets": client.resets,
                          "status": client.status}), flush=True)


async def streams(args):
    results = await asyncio.gather(*[one_connection(args) for _ in range(args.connections)])
    for r in results:
        print(json.dumps(r), flush=True)


def main():
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="cmd", required=True)
    f = sub.add_parser("flood")
    f.add_argument("--port", type=int, required=True)
    f.add_argument("--count", type=int, required=True)
    f.add_argument("--hold", type=float, required=True)
    s = sub.add_parser("streams")
    s.add_argument("--port", type=int, required=True)
    s.add_argument("--ca", required=True)
    s.add_argument("--mode", choices=["silent", "body", "closed"], required=True)
    s.add_argument("--streams", type=int, required=True)
    s.add_argument("--wait", type=float, required=True)
    s.add_argument("--connections", type=int, default=1)
    s.add_argument("--path", default="/small.txt")
    s.add_argument("--never-read", action="store_true")
    w = sub.add_parser("wire")
    w.add_argument("--port", type=int, required=True)
    w.add_argument("--ca", required=True)
    w.add_argument("--case", required=True)
    args = p.parse_args()
    if args.cmd == "flood":
        flood(args)
    elif args.cmd == "wire":
        asyncio.run(wire(args))
    else:
        asyncio.run(streams(args))


if __name__ == "__main__":
    main()
