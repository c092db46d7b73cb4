//! The service in an axum router on loopback, with real files and a real
//! HTTP client: nesting under a prefix, the fallback, streamed and cached
//! bodies, and a client that goes away mid-body releasing the file.

use servedir::{FileManager, ServeDir};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::time::{Duration, Instant};

struct App {
    addr: SocketAddr,
    fm: FileManager,
    rt: Option<tokio::runtime::Runtime>,
}

impl Drop for App {
    fn drop(&mut self) {
        if let Some(rt) = self.rt.take() {
            rt.shutdown_background();
        }
    }
}

/// An axum app: `/api` answers "api", files nested at `/static`, and what
/// is not found there answered by a fallback.
fn start(root: &Path) -> App {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let fm = FileManager::new(filemanager::Config::new(root)).unwrap();
    let fallback = tower::service_fn(|req: http::Request<axum::body::Body>| async move {
        let body = format!("fallback for {}", req.uri().path());
        Ok::<_, std::convert::Infallible>(http::Response::new(servedir::Body::full(body)))
    });
    let files = ServeDir::new(fm.clone()).base("/static").fallback(fallback);
    let app = axum::Router::new()
        .route("/api", axum::routing::get(|| async { "api" }))
        .nest_service("/static", files);
    let listener = rt
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .unwrap();
    let addr = listener.local_addr().unwrap();
    rt.spawn(async move { axum::serve(listener, app).await });
    App {
        addr,
        fm,
        rt: Some(rt),
    }
}

fn client() -> reqwest::blocking::Client {
    reqwest::blocking::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .no_proxy()
        .build()
        .unwrap()
}

fn pattern(n: usize) -> Vec<u8> {
    (0..n).map(|i| (i * 31 % 251) as u8).collect()
}

#[test]
fn nested_under_a_prefix_with_a_fallback() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a.txt"), "hello").unwrap();
    std::fs::create_dir(dir.path().join("docs")).unwrap();
    std::fs::write(dir.path().join("docs/index.html"), "<p>docs</p>").unwrap();
    let app = start(dir.path());
    let url = |p: &str| format!("http://{}{p}", app.addr);
    let c = client();
    assert_eq!(c.get(url("/api")).send().unwrap().text().unwrap(), "api");
    let r = c.get(url("/static/a.txt")).send().unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(r.headers()["content-type"], "text/plain; charset=utf-8");
    assert_eq!(r.headers()["accept-ranges"], "bytes");
    assert!(r.headers()["etag"].to_str().unwrap().starts_with('"'));
    assert_eq!(r.text().unwrap(), "hello");
    // The redirect names the mount point; the query survives it.
    let r = c.get(url("/static/docs?x=1")).send().unwrap();
    assert_eq!(r.status(), 301);
    assert_eq!(r.headers()["location"], "/static/docs/?x=1");
    let r = c.get(url("/static/docs/")).send().unwrap();
    assert_eq!(r.text().unwrap(), "<p>docs</p>");
    // Not found: the fallback answers, with the path it was asked.
    let r = c.get(url("/static/missing.txt")).send().unwrap();
    assert_eq!(r.text().unwrap(), "fallback for /missing.txt");
    // Not a file question at all: 405 with Allow, no fallback.
    let r = c.delete(url("/static/a.txt")).send().unwrap();
    assert_eq!(r.status(), 405);
    assert_eq!(r.headers()["allow"], "GET, HEAD, OPTIONS");
}

#[test]
fn streamed_and_cached_bodies_and_ranges() {
    let dir = tempfile::tempdir().unwrap();
    let big = pattern(3 * 1024 * 1024 + 17); // streamed in chunks
    let small = pattern(2000); // cached bytes
    std::fs::write(dir.path().join("big.bin"), &big).unwrap();
    std::fs::write(dir.path().join("small.bin"), &small).unwrap();
    let app = start(dir.path());
    let url = |p: &str| format!("http://{}{p}", app.addr);
    let c = client();
    for _ in 0..3 {
        assert_eq!(
            c.get(url("/static/big.bin"))
                .send()
                .unwrap()
                .bytes()
                .unwrap(),
            big
        );
        assert_eq!(
            c.get(url("/static/small.bin"))
                .send()
                .unwrap()
                .bytes()
                .unwrap(),
            small
        );
    }
    let r = c
        .get(url("/static/big.bin"))
        .header("Range", "bytes=1000000-1000009")
        .send()
        .unwrap();
    assert_eq!(r.status(), 206);
    assert_eq!(
        r.headers()["content-range"],
        "bytes 1000000-1000009/3145745"
    );
    assert_eq!(r.bytes().unwrap(), &big[1_000_000..1_000_010]);
    let r = c
        .get(url("/static/small.bin"))
        .header("Range", "bytes=0-1,-2")
        .send()
        .unwrap();
    assert_eq!(r.status(), 206);
    let ct = r.headers()["content-type"].to_str().unwrap().to_string();
    let body = r.bytes().unwrap();
    let boundary = ct.split("boundary=").nth(1).unwrap();
    assert_eq!(boundary.len(), 32);
    let text = String::from_utf8_lossy(&body);
    assert_eq!(text.matches(boundary).count(), 3, "{text}");
    assert!(text.contains("Content-Range: bytes 1998-1999/2000"));
}

/// Descriptors of this process open on `path`.
fn fds_on(path: &Path) -> usize {
    std::fs::read_dir("/proc/self/fd")
        .unwrap()
        .filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
        .filter(|target| target == path)
        .count()
}

#[test]
fn a_client_gone_mid_body_releases_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().canonicalize().unwrap().join("big.bin");
    std::fs::write(&path, pattern(16 * 1024 * 1024)).unwrap();
    let app = start(dir.path());
    for _ in 0..4 {
        let mut s = TcpStream::connect(app.addr).unwrap();
        s.write_all(b"GET /static/big.bin HTTP/1.1\r\nHost: x\r\n\r\n")
            .unwrap();
        let mut buf = [0u8; 65536];
        let mut got = 0;
        while got < 200_000 {
            got += s.read(&mut buf).unwrap();
        }
        drop(s); // mid-body
    }
    // The cache keeps one descriptor while the entry lives; drop the entry
    // and every response's reference must be gone with it.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        app.fm.invalidate("big.bin");
        app.fm.reap();
        let open = fds_on(&path);
        if open == 0 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{open} descriptor(s) still open on the file after the clients left"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_file_rewritten_mid_body_never_arrives_complete_and_mixed() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("big.bin");
    let old = pattern(8 * 1024 * 1024);
    std::fs::write(&path, &old).unwrap();
    let app = start(dir.path());
    let mut s = TcpStream::connect(app.addr).unwrap();
    s.write_all(b"GET /static/big.bin HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 65536];
    while got.len() < 1024 * 1024 {
        let n = s.read(&mut buf).unwrap();
        assert!(n > 0, "closed early");
        got.extend_from_slice(&buf[..n]);
    }
    // Rewrite in place: same size, other bytes, a new mtime.
    std::thread::sleep(Duration::from_millis(20));
    let new: Vec<u8> = old.iter().map(|b| b ^ 0xff).collect();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .unwrap()
        .write_all(&new)
        .unwrap();
    loop {
        match s.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => got.extend_from_slice(&buf[..n]),
        }
    }
    let head_end = got.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
    let body = &got[head_end..];
    assert!(
        body.len() < old.len() || body == &old[..],
        "a complete body of {} bytes that is not the old file",
        body.len()
    );
}
