//! PROXY protocol (v1 and v2) before HTTP and before TLS, from the peers
//! of `proxy_protocol` only: the client it names is what the access log,
//! the rules and the per-client limits see; a missing, malformed or late
//! header closes the connection unserved (and is counted), and a header
//! from any other peer is not read (it is then a bad request).

mod common;

use common::tls::TestCa;
use common::{metric_sum, read_until_close, status_of, Daemon, Tree};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::Command;
use std::time::{Duration, Instant};

fn v2(src: [u8; 4], port: u16) -> Vec<u8> {
    let mut h = b"\r\n\r\n\0\r\nQUIT\n".to_vec();
    h.extend_from_slice(&[0x21, 0x11, 0, 12]);
    h.extend_from_slice(&src);
    h.extend_from_slice(&[127, 0, 0, 1]);
    h.extend_from_slice(&port.to_be_bytes());
    h.extend_from_slice(&443u16.to_be_bytes());
    h
}

/// `header` then a GET of /a.txt on a new connection: the raw response
/// (empty when the server closed the connection unserved).
fn ask(addr: SocketAddr, header: &[u8]) -> Vec<u8> {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s.write_all(header).unwrap();
    let _ = s.write_all(b"GET /a.txt HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    read_until_close(&mut s)
}

fn refused(d: &Daemon) -> f64 {
    metric_sum(
        &d.metrics(),
        "fileserver_connections_refused_total",
        &[("reason", "proxy_protocol")],
    )
    .unwrap_or(-1.0)
}

fn site() -> (Tree, std::path::PathBuf) {
    let tree = Tree::new();
    tree.write("a.txt", b"hello");
    tree.write("private/b.txt", b"secret");
    let cfg = tree.dir.path().join("c.toml");
    std::fs::write(
        &cfg,
        "proxy_protocol = [\"127.0.0.1\"]\nproxy_protocol_timeout = \"500ms\"\n\
         access_log = \"stdout\"\naccess_log_format = \"json\"\n\
         [[rules]]\npath = \"/private/**\"\ndeny = [\"203.0.113.0/24\"]\n",
    )
    .unwrap();
    (tree, cfg)
}

#[test]
fn the_named_client_is_logged_and_judged_by_the_rules() {
    let (tree, cfg) = site();
    let d = Daemon::start(&tree.root, &["--config", cfg.to_str().unwrap()]);
    let v1 = b"PROXY TCP4 203.0.113.7 127.0.0.1 51000 8080\r\n";
    assert_eq!(status_of(&ask(d.http, v1)), 200);
    let line = d.json_log_line("remote", &serde_json::json!("203.0.113.7"));
    assert_eq!(line["status"], 200, "{line}");
    // The rules see it too: its network is denied /private.
    let mut s = TcpStream::connect(d.http).unwrap();
    s.write_all(&v2([203, 0, 113, 9], 4000)).unwrap();
    s.write_all(b"GET /private/b.txt HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .unwrap();
    assert_eq!(status_of(&read_until_close(&mut s)), 403);
    let mut s = TcpStream::connect(d.http).unwrap();
    s.write_all(&v2([198, 51, 100, 9], 4000)).unwrap();
    s.write_all(b"GET /private/b.txt HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .unwrap();
    assert_eq!(status_of(&read_until_close(&mut s)), 200);
    d.json_log_line("remote", &serde_json::json!("198.51.100.9"));
    // curl's own header (v1, its real addresses).
    let out = Command::new("curl")
        .args([
            "-s",
            "-o",
            "/dev/null",
            "-w",
            "%{http_code}",
            "--haproxy-protocol",
        ])
        .arg(d.url("/a.txt"))
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout), "200");
    assert_eq!(refused(&d), 0.0);
}

#[test]
fn before_tls_too() {
    let (tree, cfg) = site();
    let ca = TestCa::new();
    let (d, https) = ca.https_daemon(&tree.root, &["--config", cfg.to_str().unwrap()]);
    let mut tcp = TcpStream::connect(https).unwrap();
    tcp.write_all(b"PROXY TCP4 192.0.2.44 127.0.0.1 5000 443\r\n")
        .unwrap();
    let mut tls = ca.connect_over(tcp);
    tls.write_all(b"GET /a.txt HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
        .unwrap();
    let mut resp = Vec::new();
    let _ = tls.read_to_end(&mut resp);
    assert_eq!(status_of(&resp), 200);
    d.json_log_line("remote", &serde_json::json!("192.0.2.44"));
}

#[test]
fn a_missing_malformed_or_late_header_is_refused() {
    let (tree, cfg) = site();
    let d = Daemon::start(&tree.root, &["--config", cfg.to_str().unwrap()]);
    assert!(
        ask(d.http, b"").is_empty(),
        "a request without a header was served"
    );
    assert!(ask(d.http, b"PROXY TCP4 1.2.3.4 5.6.7.8 99999 1\r\n").is_empty());
    let mut bad_v2 = v2([1, 2, 3, 4], 1);
    bad_v2[13] = 0x51;
    assert!(ask(d.http, &bad_v2).is_empty());
    // Half a header, then nothing: closed at proxy_protocol_timeout.
    let mut s = TcpStream::connect(d.http).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s.write_all(b"PROXY TCP4 1.2.").unwrap();
    let t0 = Instant::now();
    let mut buf = [0u8; 16];
    assert_eq!(s.read(&mut buf).unwrap_or(0), 0);
    let waited = t0.elapsed();
    assert!(
        waited >= Duration::from_millis(400) && waited < Duration::from_secs(3),
        "{waited:?}"
    );
    assert_eq!(refused(&d), 4.0);
}

#[test]
fn a_peer_outside_the_list_sends_no_header() {
    let tree = Tree::new();
    tree.write("a.txt", b"hello");
    let d = Daemon::start(&tree.root, &["--set", "proxy_protocol=10.0.0.0/8"]);
    // Its header is not read: it is a bad request line.
    let resp = ask(d.http, b"PROXY TCP4 203.0.113.7 127.0.0.1 51000 8080\r\n");
    assert_eq!(status_of(&resp), 400);
    assert_eq!(status_of(&ask(d.http, b"")), 200);
}

#[test]
fn per_client_limits_count_the_named_client() {
    let tree = Tree::new();
    tree.write("a.txt", b"hello");
    let d = Daemon::start(
        &tree.root,
        &[
            "--set",
            "proxy_protocol=127.0.0.1",
            "--max-connections-per-client",
            "1",
        ],
    );
    let open = |src: [u8; 4]| {
        let mut s = TcpStream::connect(d.http).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        s.write_all(&v2(src, 1000)).unwrap();
        s.write_all(b"GET /a.txt HTTP/1.1\r\nHost: x\r\n\r\n")
            .unwrap();
        let mut buf = [0u8; 1024];
        let n = s.read(&mut buf).unwrap_or(0);
        (s, status_of(&buf[..n]))
    };
    let (_held, first) = open([203, 0, 113, 7]);
    assert_eq!(first, 200);
    let (_, second) = open([203, 0, 113, 7]);
    assert_eq!(second, 0, "the same client's second connection was served");
    let (_, other) = open([203, 0, 113, 8]);
    assert_eq!(other, 200);
}

/// What follows the header in the same segment is the first request, read
/// with the header and served: pipelined requests after a v2 header, and
/// h2c with prior knowledge after curl's header.
#[test]
fn the_bytes_after_the_header_are_the_first_request() {
    let (tree, cfg) = site();
    let d = Daemon::start(&tree.root, &["--config", cfg.to_str().unwrap()]);
    let mut head = v2([198, 51, 100, 7], 4000);
    head.extend_from_slice(b"GET /a.txt HTTP/1.1\r\nHost: x\r\n\r\nGET /a.txt HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    let answer = String::from_utf8_lossy(&ask(d.http, &head)).to_string();
    assert_eq!(answer.matches("HTTP/1.1 200").count(), 2, "{answer}");
    let out = Command::new("curl")
        .args([
            "-s",
            "-o",
            "/dev/null",
            "-w",
            "%{http_version} %{http_code}",
        ])
        .args(["--haproxy-protocol", "--http2-prior-knowledge"])
        .arg(d.url("/a.txt"))
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout), "2 200");
}

/// A v2 header longer than the request buffer a connection starts with
/// (2 KiB; `conn::HEAD_BUF_START`): 4000 octets of TLVs, as a balancer
/// that sends its own metadata may. The buffer grows for it, the client
/// is named, the request after it answered.
#[test]
fn a_header_longer_than_the_first_buffer_is_read_whole() {
    let (tree, cfg) = site();
    let d = Daemon::start(&tree.root, &["--config", cfg.to_str().unwrap()]);
    let mut head = v2([198, 51, 100, 23], 4000);
    let tlv = 3997u16;
    head[14..16].copy_from_slice(&(12 + 3 + tlv).to_be_bytes());
    head.push(0xE0); // PP2_TYPE_MIN_CUSTOM
    head.extend_from_slice(&tlv.to_be_bytes());
    head.extend(std::iter::repeat_n(b'm', tlv as usize));
    assert_eq!(head.len(), 16 + 12 + 3 + 3997);
    assert_eq!(status_of(&ask(d.http, &head)), 200);
    d.json_log_line("remote", &serde_json::json!("198.51.100.23"));
}
