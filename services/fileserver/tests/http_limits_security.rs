//! Never outside the root, malformed input, limits and timeouts, against the
//! real daemon with raw sockets (like `curl --path-as-is`).

mod common;

use common::{client, raw, status_of, Daemon, Tree, CANARY};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

fn assert_no_canary(resp: &[u8], what: &str) {
    assert!(
        !contains(resp, CANARY),
        "{what}: canary bytes served:\n{}",
        String::from_utf8_lossy(resp)
    );
}

fn get_raw(d: &Daemon, target: &str) -> Vec<u8> {
    let req = format!("GET {target} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    raw(d.http, req.as_bytes(), Duration::from_secs(5))
}

fn closed_after(d: &Daemon, req: &[u8]) -> (u16, bool) {
    let mut s = TcpStream::connect(d.http).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s.write_all(req).unwrap();
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    let mut closed = false;
    loop {
        match s.read(&mut buf) {
            Ok(0) => {
                closed = true;
                break;
            }
            Ok(n) => out.extend_from_slice(&buf[..n]),
            Err(_) => break,
        }
    }
    (status_of(&out), closed)
}

#[test]
fn traversal_attempts_never_leave_the_root() {
    let tree = Tree::new();
    tree.write("a.txt", b"inside");
    tree.write("sub/b.txt", b"inside b");
    let d = Daemon::start(&tree.root, &[]);
    let targets = [
        "/../secret.txt",
        "/sub/../../secret.txt",
        "/%2e%2e/secret.txt",
        "/%2E%2E/secret.txt",
        "/..%2fsecret.txt",
        "/..%2Fsecret.txt",
        "/sub/..%2f..%2fsecret.txt",
        "/%2e%2e%2fsecret.txt",
        "/.%2e/secret.txt",
        "/sub/%2e%2e/%2e%2e/secret.txt",
        "/..\\secret.txt",
        "/sub\\..\\..\\secret.txt",
        "/%252e%252e/secret.txt",
        "/..%00/secret.txt",
        "/a.txt%00.html",
        "//../secret.txt",
        "/./../secret.txt",
        "http://x/../secret.txt",
        "http://x/%2e%2e/secret.txt",
        "/%c0%ae%c0%ae/secret.txt",
        "/..;/secret.txt",
        "/....//secret.txt",
        "/sub/../../../../../../../../etc/passwd",
        "/%2F..%2F..%2Fsecret.txt",
        "/secret.txt",
        "/../root/../secret.txt",
    ];
    for t in targets {
        let resp = get_raw(&d, t);
        assert_no_canary(&resp, t);
        let code = status_of(&resp);
        assert!([400, 403, 404].contains(&code), "{t}: {code}");
    }
    // `..` in any form is a 400 and the connection closes.
    for t in [
        "/../secret.txt",
        "/%2e%2e/secret.txt",
        "/sub/..%2F..%2Fsecret.txt",
    ] {
        let (code, closed) = closed_after(
            &d,
            format!("GET {t} HTTP/1.1\r\nHost: x\r\n\r\n").as_bytes(),
        );
        assert_eq!((code, closed), (400, true), "{t}");
    }
    // Inside the root still works after all that.
    assert_eq!(d.get_text("/sub/b.txt"), "inside b");
}

#[test]
fn symlinks_in_and_out_of_root() {
    let tree = Tree::new();
    tree.write("a.txt", b"inside");
    tree.write("d/x.txt", b"x in d");
    let r = &tree.root;
    std::os::unix::fs::symlink("a.txt", r.join("link_in")).unwrap();
    std::os::unix::fs::symlink("d", r.join("dir_in")).unwrap();
    std::os::unix::fs::symlink("../secret.txt", r.join("link_out")).unwrap();
    std::os::unix::fs::symlink(&tree.canary, r.join("abs_out")).unwrap();
    std::os::unix::fs::symlink(tree.dir.path(), r.join("dir_out")).unwrap();
    std::os::unix::fs::symlink("/etc/passwd", r.join("passwd")).unwrap();

    let d = Daemon::start(&tree.root, &[]); // within_root (default)
    let c = client();
    assert_eq!(
        c.get(d.url("/link_in")).send().unwrap().text().unwrap(),
        "inside"
    );
    assert_eq!(
        c.get(d.url("/dir_in/x.txt"))
            .send()
            .unwrap()
            .text()
            .unwrap(),
        "x in d"
    );
    for t in [
        "/link_out",
        "/abs_out",
        "/dir_out/secret.txt",
        "/passwd",
        "/dir_out/root/a.txt",
    ] {
        let resp = get_raw(&d, t);
        assert_no_canary(&resp, t);
        assert!(!contains(&resp, b"root:x:0:0"), "{t}");
        let code = status_of(&resp);
        assert!(code == 403 || code == 404, "{t}: {code}");
    }
    drop(d);

    let d = Daemon::start(&tree.root, &["--set", "symlinks=deny"]);
    for t in [
        "/link_in",
        "/dir_in/x.txt",
        "/link_out",
        "/abs_out",
        "/dir_out/secret.txt",
    ] {
        let resp = get_raw(&d, t);
        assert_no_canary(&resp, t);
        let code = status_of(&resp);
        assert!(code == 403 || code == 404, "deny {t}: {code}");
    }
    assert_eq!(status_of(&get_raw(&d, "/a.txt")), 200);
    drop(d);

    let d = Daemon::start(&tree.root, &["--set", "symlinks=follow"]);
    assert_eq!(status_of(&get_raw(&d, "/link_in")), 200);
    for t in ["/link_out", "/abs_out", "/dir_out/secret.txt", "/passwd"] {
        let resp = get_raw(&d, t);
        assert_no_canary(&resp, t);
        assert!(!contains(&resp, b"root:x:0:0"), "follow {t}");
    }
}

#[test]
fn special_files_are_not_served() {
    let tree = Tree::new();
    let fifo = tree.root.join("fifo");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: mkfifo with a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
    let d = Daemon::start(&tree.root, &[]);
    let t0 = Instant::now();
    let code = status_of(&get_raw(&d, "/fifo"));
    assert!(code == 403 || code == 404, "fifo: {code}");
    assert!(
        t0.elapsed() < Duration::from_secs(4),
        "a FIFO must not block a worker"
    );
}

#[test]
fn malformed_requests_get_400_and_close() {
    let tree = Tree::new();
    tree.write("a.txt", b"inside");
    let d = Daemon::start(&tree.root, &[]);
    let cases: &[(&str, &[u8])] = &[
        (
            "TE and CL",
            b"GET /a.txt HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\nabc",
        ),
        ("obs-fold", b"GET /a.txt HTTP/1.1\r\nHost: x\r\nX-Long: a\r\n  folded\r\n\r\n"),
        ("bad percent", b"GET /a%zz.txt HTTP/1.1\r\nHost: x\r\n\r\n"),
        ("truncated percent", b"GET /a.txt% HTTP/1.1\r\nHost: x\r\n\r\n"),
        ("NUL", b"GET /a.txt%00 HTTP/1.1\r\nHost: x\r\n\r\n"),
        ("garbage line", b"GARBAGE\r\n\r\n"),
        ("no version", b"GET /a.txt\r\nHost: x\r\n\r\n"),
        ("bad version", b"GET /a.txt HTTP/9.9\r\nHost: x\r\n\r\n"),
        ("space in target", b"GET /a b HTTP/1.1\r\nHost: x\r\n\r\n"),
        ("missing host", b"GET /a.txt HTTP/1.1\r\n\r\n"),
        ("two hosts", b"GET /a.txt HTTP/1.1\r\nHost: x\r\nHost: y\r\n\r\n"),
        ("bad content-length", b"GET /a.txt HTTP/1.1\r\nHost: x\r\nContent-Length: 1x\r\n\r\n"),
        ("body on GET", b"GET /a.txt HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello"),
        ("chunked body on GET", b"GET /a.txt HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"),
        ("bad header name", b"GET /a.txt HTTP/1.1\r\nHost: x\r\nBad Header: y\r\n\r\n"),
        ("not origin form", b"GET a.txt HTTP/1.1\r\nHost: x\r\n\r\n"),
        ("non-utf8 path", b"GET /%ff%fe HTTP/1.1\r\nHost: x\r\n\r\n"),
    ];
    for (what, req) in cases {
        let (code, closed) = closed_after(&d, req);
        assert_eq!(code, 400, "{what}");
        assert!(closed, "{what}: connection must close");
    }
    // Still serving.
    assert_eq!(d.get_text("/a.txt"), "inside");
}

#[test]
fn header_size_and_count_limits() {
    let tree = Tree::new();
    tree.write("a.txt", b"inside");
    let d = Daemon::start(
        &tree.root,
        &["--set", "max_headers=10", "--set", "max_header_bytes=1024"],
    );
    let mut req = String::from("GET /a.txt HTTP/1.1\r\nHost: x\r\n");
    for i in 0..11 {
        req.push_str(&format!("X-{i}: v\r\n"));
    }
    req.push_str("\r\n");
    assert_eq!(
        closed_after(&d, req.as_bytes()),
        (431, true),
        "too many headers"
    );
    let big = format!(
        "GET /a.txt HTTP/1.1\r\nHost: x\r\nX-Big: {}\r\n\r\n",
        "a".repeat(2000)
    );
    assert_eq!(
        closed_after(&d, big.as_bytes()),
        (431, true),
        "head too large"
    );
    // A target longer than the limit gets 414 (RFC 9112 section 3), whole
    // or still arriving, and is counted under that code.
    let long_target = format!("GET /{} HTTP/1.1\r\nHost: x\r\n\r\n", "a".repeat(2000));
    assert_eq!(closed_after(&d, long_target.as_bytes()), (414, true));
    assert_eq!(
        closed_after(&d, &long_target.as_bytes()[..1500]),
        (414, true)
    );
    let m = d.metrics();
    assert_eq!(
        common::metric_sum(&m, "fileserver_http_requests_total", &[("code", "414")]),
        Some(2.0),
        "{m}"
    );
    // An unterminated head larger than the limit also gets 431 without waiting for the rest.
    let partial = format!(
        "GET /a.txt HTTP/1.1\r\nHost: x\r\nX-Big: {}",
        "a".repeat(2000)
    );
    let t0 = Instant::now();
    assert_eq!(closed_after(&d, partial.as_bytes()), (431, true));
    assert!(t0.elapsed() < Duration::from_secs(4));
    // Within limits is fine.
    let mut ok = String::from("GET /a.txt HTTP/1.1\r\nHost: x\r\nConnection: close\r\n");
    for i in 0..8 {
        ok.push_str(&format!("X-{i}: v\r\n"));
    }
    ok.push_str("\r\n");
    assert_eq!(
        status_of(&raw(d.http, ok.as_bytes(), Duration::from_secs(5))),
        200
    );
}

#[test]
fn header_read_timeout_gives_408() {
    let tree = Tree::new();
    tree.write("a.txt", b"inside");
    let d = Daemon::start(&tree.root, &["--set", "header_read_timeout=300ms"]);
    let mut s = TcpStream::connect(d.http).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s.write_all(b"GET /a.txt HTTP/1.1\r\nHost: x\r\n").unwrap();
    let t0 = Instant::now();
    let mut out = Vec::new();
    s.read_to_end(&mut out).unwrap();
    assert_eq!(status_of(&out), 408);
    assert!(t0.elapsed() < Duration::from_secs(3), "{:?}", t0.elapsed());
    // Dribbling bytes does not extend the deadline (slowloris).
    let mut s = TcpStream::connect(d.http).unwrap();
    s.set_read_timeout(Some(Duration::from_millis(50))).unwrap();
    let t0 = Instant::now();
    let mut closed = false;
    for b in b"GET /a.txt HTTP/1.1\r\nHost: xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx".iter() {
        if s.write_all(&[*b]).is_err() {
            closed = true;
            break;
        }
        let mut buf = [0u8; 256];
        if let Ok(n) = s.read(&mut buf) {
            if n == 0 || status_of(&buf[..n]) == 408 {
                closed = true;
                break;
            }
        }
    }
    assert!(closed, "slowloris connection must be cut");
    assert!(t0.elapsed() < Duration::from_secs(3), "{:?}", t0.elapsed());
    // A connection that sends nothing is closed too.
    let mut s = TcpStream::connect(d.http).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut out = Vec::new();
    let t0 = Instant::now();
    let _ = s.read_to_end(&mut out);
    assert!(t0.elapsed() < Duration::from_secs(3));
}

#[test]
fn keepalive_idle_timeout_closes() {
    let tree = Tree::new();
    tree.write("a.txt", b"inside");
    let d = Daemon::start(&tree.root, &["--set", "keepalive_timeout=300ms"]);
    let mut s = TcpStream::connect(d.http).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s.write_all(b"GET /a.txt HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    let t0 = Instant::now();
    let mut out = Vec::new();
    s.read_to_end(&mut out).unwrap();
    assert_eq!(status_of(&out), 200);
    assert!(String::from_utf8_lossy(&out).ends_with("inside"));
    let e = t0.elapsed();
    assert!(
        e >= Duration::from_millis(250) && e < Duration::from_secs(3),
        "{e:?}"
    );
}

/// Reads one response with a `Content-Length` from `s`, keeping what
/// follows it in `rest`; its status and body.
fn read_response(s: &mut TcpStream, rest: &mut Vec<u8>) -> (u16, Vec<u8>) {
    let mut chunk = [0u8; 65536];
    loop {
        if let Some(end) = rest.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&rest[..end]).to_ascii_lowercase();
            let len: usize = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length: "))
                .map_or(0, |v| v.trim().parse().unwrap());
            if rest.len() >= end + 4 + len {
                let status = status_of(rest);
                let body = rest[end + 4..end + 4 + len].to_vec();
                rest.drain(..end + 4 + len);
                return (status, body);
            }
        }
        let n = s.read(&mut chunk).unwrap();
        assert!(n > 0, "closed: {}", String::from_utf8_lossy(rest));
        rest.extend_from_slice(&chunk[..n]);
    }
}

/// A connection that waits for its next request gives its read and write
/// buffers back to the worker's spares (`spares`) and takes them again
/// when bytes come: a head of the full `max_header_bytes`, pipelined
/// requests and a head sent in two parts are served as on a connection
/// that never waited, and the keep-alive timeout still runs from the
/// start of the wait (its timer is moved only to an earlier deadline).
#[test]
fn an_idle_connection_serves_again_after_giving_back_its_buffers() {
    let tree = Tree::new();
    tree.write("a.txt", b"inside");
    let big = vec![b'b'; 100_000];
    tree.write("b.bin", &big);
    let d = Daemon::start(&tree.root, &["--set", "keepalive_timeout=2s"]);
    let mut s = TcpStream::connect(d.http).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut rest = Vec::new();
    let idle = || std::thread::sleep(Duration::from_millis(300));
    s.write_all(b"GET /b.bin HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    assert_eq!(read_response(&mut s, &mut rest), (200, big.clone()));
    idle();
    // 8192 bytes of head, the default limit, in a buffer taken anew.
    let head = "GET /a.txt HTTP/1.1\r\nHost: x\r\nX-Pad: \r\n\r\n";
    let pad = "p".repeat(8192 - head.len());
    let full = format!("GET /a.txt HTTP/1.1\r\nHost: x\r\nX-Pad: {pad}\r\n\r\n");
    assert_eq!(full.len(), 8192);
    s.write_all(full.as_bytes()).unwrap();
    assert_eq!(read_response(&mut s, &mut rest), (200, b"inside".to_vec()));
    idle();
    s.write_all(b"GET /a.txt HTTP/1.1\r\nHost: x\r\n\r\nGET /b.bin HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    assert_eq!(read_response(&mut s, &mut rest), (200, b"inside".to_vec()));
    assert_eq!(read_response(&mut s, &mut rest), (200, big));
    idle();
    s.write_all(b"GET /a.txt HTTP/1.1\r\n").unwrap();
    idle();
    s.write_all(b"Host: x\r\n\r\n").unwrap();
    assert_eq!(read_response(&mut s, &mut rest), (200, b"inside".to_vec()));
    // The wait that gives the buffers back does not restart the timeout.
    let t0 = Instant::now();
    let mut buf = [0u8; 16];
    assert!(matches!(s.read(&mut buf), Ok(0) | Err(_)));
    let e = t0.elapsed();
    assert!(
        e >= Duration::from_millis(1800) && e < Duration::from_millis(2800),
        "{e:?}"
    );
}

/// Resident set size of `pid` in KiB.
fn rss_kb(pid: i32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .unwrap();
    line.trim().trim_end_matches("kB").trim().parse().unwrap()
}

/// Keep-alive connections that wait for their next request hold neither a
/// read nor a write buffer, nor the state of the answer they had: what a
/// client costs between requests is its connection's task. 2000 clients
/// each ask for a file and keep the connection; the daemon grows by less
/// than 6 KiB per connection: 3.5-4.7 KiB in this debug build (3.3 KiB in
/// a release build; nginx, about 0.5 KiB). Before the spares and the
/// boxed answer, 8.7 KiB (8.8 KiB in a release build).
#[test]
fn idle_keep_alive_connections_hold_no_buffers() {
    const CLIENTS: usize = 2000;
    let tree = Tree::new();
    tree.write("page.html", &vec![b'p'; 6000]);
    let d = Daemon::start(&tree.root, &["--set", "max_connections=4096"]);
    let get = b"GET /page.html HTTP/1.1\r\nHost: x\r\n\r\n";
    let answer = |s: &mut TcpStream| {
        let mut rest = Vec::new();
        let (status, body) = read_response(s, &mut rest);
        assert_eq!((status, body.len()), (200, 6000));
    };
    // The file cached, the worker's spares and runtime warm.
    for _ in 0..3 {
        let mut s = TcpStream::connect(d.http).unwrap();
        s.write_all(get).unwrap();
        answer(&mut s);
    }
    std::thread::sleep(Duration::from_millis(200));
    let before = rss_kb(d.pid());
    let mut clients = Vec::with_capacity(CLIENTS);
    for _ in 0..CLIENTS {
        let s = TcpStream::connect(d.http).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        clients.push(s);
    }
    for s in &mut clients {
        s.write_all(get).unwrap();
    }
    for s in &mut clients {
        answer(s);
    }
    let per_connection = (rss_kb(d.pid()) - before) * 1024 / CLIENTS as u64;
    eprintln!("RSS per idle keep-alive connection: {per_connection} bytes");
    assert!(
        per_connection < 6144,
        "{per_connection} bytes per connection"
    );
}

#[test]
fn max_connections_pauses_accepting() {
    let tree = Tree::new();
    tree.write("a.txt", b"inside");
    let d = Daemon::start(&tree.root, &["--set", "max_connections=2"]);
    let mut c1 = TcpStream::connect(d.http).unwrap();
    let mut c2 = TcpStream::connect(d.http).unwrap();
    for c in [&mut c1, &mut c2] {
        c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        c.write_all(b"GET /a.txt HTTP/1.1\r\nHost: x\r\n\r\n")
            .unwrap();
        let mut buf = [0u8; 1024];
        let n = c.read(&mut buf).unwrap();
        assert_eq!(status_of(&buf[..n]), 200);
    }
    // Third client: the kernel queues it, the server does not serve it yet.
    let mut c3 = TcpStream::connect(d.http).unwrap();
    c3.write_all(b"GET /a.txt HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .unwrap();
    c3.set_read_timeout(Some(Duration::from_millis(700)))
        .unwrap();
    let mut buf = [0u8; 1024];
    assert!(c3.read(&mut buf).is_err(), "served beyond max_connections");
    drop(c1);
    c3.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut out = Vec::new();
    c3.read_to_end(&mut out).unwrap();
    assert_eq!(status_of(&out), 200);
    drop(c2);
}

#[test]
fn shrinking_file_never_gets_a_mismatched_body() {
    let tree = Tree::new();
    let big = vec![b'z'; 48 << 20];
    let path = tree.write("big.bin", &big);
    drop(big);
    let d = Daemon::start(&tree.root, &[]);
    let mut s = TcpStream::connect(d.http).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(b"GET /big.bin HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    let mut buf = vec![0u8; 65536];
    let n = s.read(&mut buf).unwrap();
    let head = String::from_utf8_lossy(&buf[..n]).to_string();
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert!(head.contains(&format!("Content-Length: {}", 48 << 20)));
    let mut got = n - (head.find("\r\n\r\n").unwrap() + 4);
    std::fs::File::options()
        .write(true)
        .open(&path)
        .unwrap()
        .set_len(1 << 20)
        .unwrap();
    let closed = loop {
        match s.read(&mut buf) {
            Ok(0) => break true,
            Ok(k) => got += k,
            Err(_) => break false,
        }
    };
    assert!(closed, "the connection must be closed, not left hanging");
    assert!(
        got < 48 << 20,
        "a shrunk file cannot produce the full declared body"
    );
    // A new request in the cache-validity window also never gets a wrong-length body.
    let mut s = TcpStream::connect(d.http).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(b"GET /big.bin HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .unwrap();
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    let text_end = out.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
    let head = String::from_utf8_lossy(&out[..text_end]).to_string();
    let cl: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("Content-Length: "))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let body = out.len() - text_end;
    assert!(body <= cl, "body longer than Content-Length");
    if body == cl {
        assert_eq!(cl, 1 << 20, "complete response must describe the new file");
    }
}

#[test]
fn file_rewritten_in_place_is_not_served_with_stale_length() {
    let tree = Tree::new();
    let v1 = vec![b'1'; 100_000];
    let path = tree.write("doc.bin", &v1);
    // A long validity window: only the per-response check can notice.
    let d = Daemon::start(&tree.root, &["--set", "cache.valid=60s"]);
    let c = client();
    let r = c.get(d.url("/doc.bin")).send().unwrap();
    let etag1 = r.headers()["etag"].to_str().unwrap().to_string();
    assert_eq!(&r.bytes().unwrap()[..], &v1[..]);
    // Same inode, new length and bytes.
    let v2 = vec![b'2'; 150_000];
    std::thread::sleep(Duration::from_millis(20)); // a different mtime tick
    let mut f = std::fs::File::options().write(true).open(&path).unwrap();
    f.write_all(&v2).unwrap();
    drop(f);
    let r = c.get(d.url("/doc.bin")).send().unwrap();
    assert_ne!(
        r.headers()["etag"].to_str().unwrap(),
        etag1,
        "validator must change"
    );
    assert_eq!(r.headers()["content-length"].to_str().unwrap(), "150000");
    assert_eq!(&r.bytes().unwrap()[..], &v2[..]);
}

/// The documented rule of `within_root` (config comments, operations guide):
/// the kernel's `RESOLVE_BENEATH` refuses every absolute symlink, even one
/// whose target lies inside the root; relative links that stay beneath the
/// root are followed. `follow` reads an absolute target from the root.
#[test]
fn within_root_follows_relative_links_and_refuses_absolute_ones() {
    let tree = Tree::new();
    tree.write("a.txt", b"inside");
    let r = &tree.root;
    std::os::unix::fs::symlink("a.txt", r.join("rel")).unwrap();
    std::os::unix::fs::symlink(r.join("a.txt"), r.join("abs_in")).unwrap();
    std::os::unix::fs::symlink("/a.txt", r.join("rooted")).unwrap();
    let d = Daemon::start(&tree.root, &[]);
    assert_eq!(d.get_text("/rel"), "inside");
    assert_eq!(status_of(&get_raw(&d, "/abs_in")), 403);
    assert_eq!(status_of(&get_raw(&d, "/rooted")), 403);
    drop(d);
    let d = Daemon::start(&tree.root, &["--set", "symlinks=follow"]);
    assert_eq!(
        d.get_text("/rooted"),
        "inside",
        "absolute target read from the root"
    );
    assert_eq!(d.get_text("/rel"), "inside");
    let config = include_str!("../../../config/fileserver.toml");
    assert!(
        config.contains("absolute symlinks are refused"),
        "the config comment states the kernel's rule"
    );
}

/// A connection's read buffer starts small (`conn`, `HEAD_BUF_START`) and
/// grows for a long head: at the default limit a head of exactly 8192
/// bytes on a new connection is served, one byte more is refused with 431.
#[test]
fn a_head_grows_its_buffer_to_the_limit_and_no_further() {
    let tree = Tree::new();
    tree.write("a.txt", b"inside");
    let d = Daemon::start(&tree.root, &[]);
    let head = |len: usize| {
        let bare = "GET /a.txt HTTP/1.1\r\nHost: x\r\nConnection: close\r\nX-Pad: \r\n\r\n";
        let pad = "p".repeat(len - bare.len());
        format!("GET /a.txt HTTP/1.1\r\nHost: x\r\nConnection: close\r\nX-Pad: {pad}\r\n\r\n")
    };
    for len in [2047, 2048, 2049, 4097, 8192] {
        let mut s = TcpStream::connect(d.http).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        s.write_all(head(len).as_bytes()).unwrap();
        let mut rest = Vec::new();
        assert_eq!(
            read_response(&mut s, &mut rest),
            (200, b"inside".to_vec()),
            "a head of {len} bytes"
        );
    }
    assert_eq!(closed_after(&d, head(8193).as_bytes()), (431, true));
}
