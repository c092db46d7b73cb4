"""An HTTP/3 client for the tests, on aioquic (an implementation
independent of quinn and h3): one QUIC connection, the given requests sent
on it at once, one JSON line per response on stdout, in the order given:

  {"path": ..., "status": 200, "headers": {"content-type": ...},
   "length": N, "sha256": HEX, "text": first 4 KiB as text,
   "reset": false, "alpn": "h3"}

Usage: h3client.py --port P --ca CA.pem [--server-name localhost]
                   [--header "Name: value"]... [--method GET] PATH...

`--header` applies to every request. A path may carry its own headers
after a tab: "/a.txt\tRange: bytes=0-9\tIf-None-Match: \"x\"".
Set --goaway-wait S to keep the connection open S seconds after the last
response and report whether the server sent GOAWAY ({"goaway": true}).
"""

import argparse
import asyncio
import hashlib
import json
import ssl
import sys
import time

from aioquic.asyncio import connect
from aioquic.asyncio.protocol import QuicConnectionProtocol
from aioquic.h3.connection import H3_ALPN, H3Connection
from aioquic.h3.events import DataReceived, HeadersReceived
from aioquic.quic.configuration import QuicConfiguration
from aioquic.quic.events import ConnectionTerminated, StreamReset


def new_result():
    return {"headers": [], "sha256": hashlib.sha256(), "length": 0, "head": b""}


class HeadAwareH3(H3Connection):
    """aioquic checks every response's Content-Length against its body,
    HEAD's too, whose Content-Length is the GET's (RFC 9110 9.3.2)."""

    head_streams = set()

    def _check_content_length(self, stream):
        if stream.stream_id not in self.head_streams:
            super()._check_content_length(stream)


class Client(QuicConnectionProtocol):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.h3 = HeadAwareH3(self._quic)
        self.waiters = {}
        self.results = {}
        self.terminated = None

    def quic_event_received(self, event):
        if isinstance(event, ConnectionTerminated):
            self.terminated = event
            for sid, fut in list(self.waiters.items()):
                if not fut.done():
                    r = self.results.setdefault(sid, new_result())
                    r["reset"] = True
                    fut.set_result(r)
            return
        if isinstance(event, StreamReset):
            fut = self.waiters.get(event.stream_id)
            r = self.results.setdefault(event.stream_id, new_result())
            r["reset"] = True
            if fut and not fut.done():
                fut.set_result(r)
        for e in self.h3.handle_event(event):
            sid = getattr(e, "stream_id", None)
            if sid is None:
                continue
            r = self.results.setdefault(sid, new_result())
            if isinstance(e, HeadersReceived):
                r["headers"] += [(k.decode(), v.decode()) for k, v in e.headers]
            elif isinstance(e, DataReceived):
                # Hashed as it comes: a large body is never held whole.
                r["sha256"].update(e.data)
                r["length"] += len(e.data)
                if len(r["head"]) < 4096:
                    r["head"] += e.data[: 4096 - len(r["head"])]
            if getattr(e, "stream_ended", False):
                r["finished_at"] = time.time()
                fut = self.waiters.get(sid)
                if fut and not fut.done():
                    fut.set_result(r)

    async def request(self, method, authority, path, headers):
        sid = self._quic.get_next_available_stream_id()
        if method == "HEAD":
            self.h3.head_streams.add(sid)
        fields = [
            (b":method", method.encode()),
            (b":scheme", b"https"),
            (b":authority", authority.encode()),
            (b":path", path.encode()),
            (b"user-agent", b"aioquic-test"),
        ] + [(k.strip().lower().encode(), v.strip().encode()) for k, v in headers]
        self.h3.send_headers(sid, fields, end_stream=True)
        fut = self._loop.create_future()
        self.waiters[sid] = fut
        self.transmit()
        return await asyncio.wait_for(fut, 120)


def report(path, r):
    headers = {}
    status = None
    for k, v in r["headers"]:
        if k == ":status":
            status = int(v)
        else:
            headers[k] = v if k not in headers else headers[k] + ", " + v
    return {
        "path": path,
        "status": status,
        "headers": headers,
        "length": r["length"],
        "sha256": r["sha256"].hexdigest(),
        "text": r["head"].decode("utf-8", "replace"),
        "reset": bool(r.get("reset")),
        "finished_at": r.get("finished_at"),
    }


async def main():
    p = argparse.ArgumentParser()
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--ca", required=True)
    p.add_argument("--server-name", default="localhost")
    p.add_argument("--method", default="GET")
    p.add_argument("--header", action="append", default=[])
    p.add_argument("--goaway-wait", type=float, default=0)
    p.add_argument("paths", nargs="+")
    a = p.parse_args()
    config = QuicConfiguration(is_client=True, alpn_protocols=H3_ALPN)
    config.load_verify_locations(a.ca)
    config.verify_mode = ssl.CERT_REQUIRED
    config.server_name = a.server_name
    common = [h.split(":", 1) for h in a.header]
    authority = f"{a.server_name}:{a.port}"
    async with connect(a.host, a.port, configuration=config, create_protocol=Client) as client:
        print(json.dumps({"alpn": client._quic.tls.alpn_negotiated}), flush=True)
        jobs = []
        for spec in a.paths:
            path, *own = spec.split("\t")
            headers = common + [h.split(":", 1) for h in own]
            jobs.append(client.request(a.method, authority, path, headers))
        for path, r in zip([s.split("\t")[0] for s in a.paths], await asyncio.gather(*jobs)):
            print(json.dumps(report(path, r)), flush=True)
        if a.goaway_wait:
            deadline = asyncio.get_event_loop().time() + a.goaway_wait
            while client.terminated is None and asyncio.get_event_loop().time() < deadline:
                await asyncio.sleep(0.05)
            print(json.dumps({"terminated": client.terminated is not None}), flush=True)


if __name__ == "__main__":
    try:
        asyncio.run(main())
    except Exception as e:  # one line the test can show
        print(json.dumps({"error": repr(e)}), flush=True)
        sys.exit(1)
