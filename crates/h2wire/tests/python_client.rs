//! A real client: Python's h2 (Debian's python3-h2; scripts/install-deps.sh)
//! over loopback TCP against a Connection driven by a plain blocking loop.
//! It sends several requests at once with Huffman-coded and indexed
//! fields, reads a 1 MiB answer through its own flow control (the server
//! waits on its WINDOW_UPDATEs), and checks every answer.

use std::io::{Read as _, Write as _};
use std::net::{TcpListener, TcpStream};
use std::process::Command;
use std::time::Instant;

use h2wire::{Config, Connection, Event};

const BIG: usize = 1 << 20;

fn body_for(path: &[u8]) -> Vec<u8> {
    if path == b"/big" {
        (0..BIG).map(|i| (i % 251) as u8).collect()
    } else {
        [b"you asked for ".as_slice(), path].concat()
    }
}

/// Serves one connection until the client closes it.
fn serve(mut sock: TcpStream) {
    let mut conn = Connection::new(Config::default(), Instant::now());
    // Answers still to send: stream, body, sent so far.
    let mut pending: Vec<(u32, Vec<u8>, usize)> = Vec::new();
    let mut buf = vec![0u8; 16384];
    loop {
        while let Some(ev) = conn.next_event() {
            match ev {
                Event::Request(req) => {
                    let body = body_for(req.path().unwrap());
                    let ua = req
                        .fields()
                        .find(|(n, _)| *n == b"user-agent")
                        .map(|(_, v)| v.to_vec())
                        .unwrap_or_default();
                    let len = body.len().to_string();
                    conn.send_headers(req.stream(), false, |b| {
                        b.status(200)
                            .field(b"content-length", len.as_bytes())
                            .field(b"x-user-agent", &ua);
                    });
                    pending.push((req.stream(), body, 0));
                    conn.recycle(req);
                }
                Event::Reset(id) => pending.retain(|p| p.0 != id),
            }
        }
        pending.retain_mut(|(id, body, sent)| loop {
            let n = conn
                .window(*id)
                .min(conn.max_frame())
                .min(body.len() - *sent);
            if n == 0 && *sent < body.len() {
                return true;
            }
            let end = *sent + n == body.len();
            conn.send_data(*id, &body[*sent..*sent + n], end);
            *sent += n;
            if end {
                return false;
            }
        });
        let out = std::mem::take(conn.output());
        sock.write_all(&out).unwrap();
        let n = match sock.read(&mut buf) {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        if conn.receive(&buf[..n], Instant::now()).is_err() {
            let _ = sock.write_all(conn.output());
            return;
        }
    }
}

const CLIENT: &str = r#"
import json, socket, sys
import h2.connection, h2.config, h2.events
sock = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
c = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
c.initiate_connection()
c.update_settings({h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: 32768})
sock.sendall(c.data_to_send())
paths = ["/a", "/big", "/%E2%9C%93?q=1", "/b"]
streams = {}
for p in paths:
    sid = c.get_next_available_stream_id()
    c.send_headers(sid, [(":method", "GET"), (":scheme", "https"), (":authority", "localhost"),
                         (":path", p), ("user-agent", "h2-test/" + p), ("accept", "*/*")],
                   end_stream=True)
    streams[sid] = {"path": p, "body": b"", "headers": {}}
sock.sendall(c.data_to_send())
done = 0
while done < len(paths):
    data = sock.recv(65536)
    if not data:
        break
    for ev in c.receive_data(data):
        if isinstance(ev, h2.events.ResponseReceived):
            streams[ev.stream_id]["headers"] = {k.decode(): v.decode() for k, v in ev.headers}
        elif isinstance(ev, h2.events.DataReceived):
            streams[ev.stream_id]["body"] += ev.data
            c.acknowledge_received_data(ev.flow_controlled_length, ev.stream_id)
        elif isinstance(ev, h2.events.StreamEnded):
            done += 1
    sock.sendall(c.data_to_send())
c.close_connection()
sock.sendall(c.data_to_send())
sock.close()
print(json.dumps([{"path": s["path"], "headers": s["headers"], "len": len(s["body"]),
                   "head": s["body"][:40].hex(), "sum": sum(s["body"]) } for s in streams.values()]))
"#;

#[test]
fn python_h2_gets_every_answer_through_flow_control() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let server = std::thread::spawn(move || serve(listener.accept().unwrap().0));
    let out = Command::new("/usr/bin/python3")
        .args(["-c", CLIENT, &port.to_string()])
        .output()
        .expect("/usr/bin/python3 (scripts/install-deps.sh installs it)");
    assert!(
        out.status.success(),
        "python3 with h2 (python3-h2): {}",
        String::from_utf8_lossy(&out.stderr)
    );
    server.join().unwrap();
    let got: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let got = got.as_array().unwrap();
    assert_eq!(got.len(), 4);
    for s in got {
        let path = s["path"].as_str().unwrap();
        let want = body_for(path.as_bytes());
        let headers = &s["headers"];
        assert_eq!(headers[":status"], "200", "{path}");
        assert_eq!(headers["content-length"], want.len().to_string(), "{path}");
        assert_eq!(headers["x-user-agent"], format!("h2-test/{path}"));
        assert_eq!(s["len"], want.len() as u64, "{path}");
        let sum: u64 = want.iter().map(|&b| u64::from(b)).sum();
        assert_eq!(s["sum"], sum, "{path}");
    }
}
