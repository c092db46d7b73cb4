//! Limits that keep one client from taking the server:
//! `max_connections_per_client` at accept on the plaintext listener
//! (HTTP/1.1 and h2c) and the HTTPS one (before TLS, so HTTP/1.1 and
//! HTTP/2 alike), with a second client address (127.0.0.2, which loopback
//! also answers from) served meanwhile (HTTP/3's is in `tests/http3.rs`);
//! and `limit_rate` on every TCP listener, a paced HTTP/2 stream beside
//! one that is not.
#![cfg(target_os = "linux")]

mod common;
mod reliability_support;

use common::tls::TestCa;
use common::{metric_sum, Daemon, Tree};
use std::io::{Read, Write};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpStream};
use std::time::{Duration, Instant};

const OTHER: IpAddr = IpAddr::V4(Ipv4Addr::new(127, 0, 0, 2));

/// A TCP connection to `to` from `from` (port chosen by the kernel).
fn connect_from(from: IpAddr, to: SocketAddr) -> TcpStream {
    use rustix::net::{bind, connect, socket, AddressFamily, SocketType};
    let fd = socket(AddressFamily::INET, SocketType::STREAM, None).unwrap();
    bind(&fd, &SocketAddr::new(from, 0)).unwrap();
    connect(&fd, &to).unwrap();
    let s = TcpStream::from(fd);
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s
}

/// One keep-alive HTTP/1.1 exchange on `s`: the status.
fn ask(s: &mut TcpStream) -> u16 {
    s.write_all(b"GET /a.txt HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    let mut buf = [0u8; 4096];
    let n = s.read(&mut buf).unwrap();
    common::status_of(&buf[..n])
}

/// Whether the server closed `s` without a byte (within 5 s).
fn closed_unserved(s: &mut TcpStream) -> bool {
    let _ = s.write_all(b"GET /a.txt HTTP/1.1\r\nHost: x\r\n\r\n");
    let mut buf = [0u8; 64];
    match s.read(&mut buf) {
        Ok(0) => true,
        Err(e) => e.kind() == std::io::ErrorKind::ConnectionReset,
        Ok(_) => false,
    }
}

fn refused(d: &Daemon) -> f64 {
    metric_sum(
        &d.metrics(),
        "fileserver_connections_refused_total",
        &[("reason", "per_client")],
    )
    .unwrap_or(-1.0)
}

fn tree() -> Tree {
    let tree = Tree::new();
    tree.write("a.txt", b"hello");
    tree
}

#[test]
fn the_plaintext_listener_closes_a_clients_connection_over_its_share() {
    let tree = tree();
    let d = Daemon::start(&tree.root, &["--max-connections-per-client", "2"]);
    assert_eq!(refused(&d), 0.0, "the series is there before any refusal");
    let mut a = connect_from(IpAddr::V4(Ipv4Addr::LOCALHOST), d.http);
    let mut b = connect_from(IpAddr::V4(Ipv4Addr::LOCALHOST), d.http);
    assert_eq!((ask(&mut a), ask(&mut b)), (200, 200));
    let mut third = connect_from(IpAddr::V4(Ipv4Addr::LOCALHOST), d.http);
    assert!(closed_unserved(&mut third), "a third connection was served");
    assert_eq!(refused(&d), 1.0);
    // Another client meanwhile: HTTP/1.1 and h2c.
    let mut other = connect_from(OTHER, d.http);
    assert_eq!(ask(&mut other), 200);
    drop(other);
    let h2c = reqwest::blocking::Client::builder()
        .local_address(OTHER)
        .http2_prior_knowledge()
        .no_proxy()
        .build()
        .unwrap();
    assert_eq!(h2c.get(d.url("/a.txt")).send().unwrap().status(), 200);
    // A connection that ends gives its place back.
    drop(a);
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let mut again = connect_from(IpAddr::V4(Ipv4Addr::LOCALHOST), d.http);
        if !closed_unserved(&mut again) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the closed connection's place never came back"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(ask(&mut b), 200);
}

#[test]
fn the_https_listener_refuses_before_tls_and_an_h2_connection_counts_once() {
    let tree = tree();
    let ca = TestCa::new();
    let (d, https) = ca.https_daemon(&tree.root, &["--max-connections-per-client", "1"]);
    // One HTTP/2 connection carrying many streams is one connection.
    let h2 = ca.client(true);
    for _ in 0..20 {
        assert_eq!(
            h2.get(format!("https://localhost:{}/a.txt", https.port()))
                .send()
                .unwrap()
                .status(),
            200
        );
    }
    // A second connection from the same address: closed at accept,
    // before a byte of TLS.
    let mut raw = connect_from(IpAddr::V4(Ipv4Addr::LOCALHOST), https);
    let mut buf = [0u8; 16];
    let n = raw.read(&mut buf).unwrap_or(0);
    assert_eq!(n, 0, "the server answered a refused connection");
    assert!(refused(&d) >= 1.0);
    // Another address at the same moment: HTTPS with HTTP/1.1 and HTTP/2.
    for http2 in [false, true] {
        let b = reqwest::blocking::Client::builder()
            .use_rustls_tls()
            .tls_built_in_root_certs(false)
            .add_root_certificate(reqwest::Certificate::from_pem(ca.ca_pem.as_bytes()).unwrap())
            .local_address(OTHER)
            .no_proxy();
        let b = if http2 {
            b.http2_prior_knowledge()
        } else {
            b.http1_only()
        };
        let c = b.build().unwrap();
        let url = format!("https://localhost:{}/a.txt", https.port());
        assert_eq!(c.get(url).send().unwrap().status(), 200, "http2={http2}");
    }
}

#[test]
fn trusted_proxies_are_not_limited() {
    let tree = tree();
    let d = Daemon::start(
        &tree.root,
        &[
            "--max-connections-per-client",
            "1",
            "--set",
            "trusted_proxies=127.0.0.1",
        ],
    );
    let mut held: Vec<TcpStream> = (0..4)
        .map(|_| connect_from(IpAddr::V4(Ipv4Addr::LOCALHOST), d.http))
        .collect();
    for s in &mut held {
        assert_eq!(ask(s), 200, "a proxy's connections are many clients'");
    }
    assert_eq!(refused(&d), 0.0);
}

const BIG: usize = 4 << 20;
const RATE: u64 = 2 << 20;

/// The time a paced body of `len` bytes takes at `RATE` after `after`
/// free bytes (and the first slice, a tenth of a second of the rate).
fn paced_time(len: usize, after: u64) -> Duration {
    let free = after + RATE / 10;
    Duration::from_secs_f64((len as u64).saturating_sub(free) as f64 / RATE as f64)
}

fn assert_paced(took: Duration, len: usize, after: u64, what: &str) {
    let want = paced_time(len, after);
    assert!(
        took >= want.mul_f64(0.9) && took <= want.mul_f64(1.1) + Duration::from_millis(150),
        "{what}: {took:?} for {len} bytes, want {want:?}"
    );
}

/// How long `url`'s whole body (`BIG` bytes) takes to come.
fn download(c: &reqwest::blocking::Client, url: &str) -> Duration {
    let t0 = Instant::now();
    let body = c.get(url).send().unwrap().bytes().unwrap();
    assert_eq!(body.len(), BIG);
    t0.elapsed()
}

fn big_tree() -> Tree {
    let tree = tree();
    tree.write("big.bin", &vec![7u8; BIG]);
    tree
}

#[test]
fn a_paced_download_takes_its_rate_on_http1_and_https() {
    let tree = big_tree();
    let ca = TestCa::new();
    let rate = RATE.to_string();
    let (d, https) = ca.https_daemon(&tree.root, &["--limit-rate", &rate]);
    let plain = common::client();
    assert_paced(download(&plain, &d.url("/big.bin")), BIG, 0, "HTTP/1.1");
    let url = format!("https://localhost:{}/big.bin", https.port());
    assert_paced(download(&ca.client(false), &url), BIG, 0, "HTTPS HTTP/1.1");
    // The first limit_rate_after bytes go at full speed.
    drop(d);
    let d = Daemon::start(
        &tree.root,
        &["--limit-rate", &rate, "--set", "limit_rate_after=2097152"],
    );
    let took = download(&plain, &d.url("/big.bin"));
    assert_paced(took, BIG, 2 << 20, "HTTP/1.1 after 2 MiB");
}

/// On one HTTP/2 connection (h2c), a paced download does not hold back
/// the other streams: a small file asked meanwhile comes at once.
#[test]
fn a_paced_http2_stream_does_not_hold_back_its_neighbours() {
    let tree = big_tree();
    let rate = RATE.to_string();
    let d = Daemon::start(&tree.root, &["--limit-rate", &rate]);
    let h2c = reqwest::blocking::Client::builder()
        .http2_prior_knowledge()
        .no_proxy()
        .build()
        .unwrap();
    let url = d.url("/big.bin");
    let big = {
        let (c, url) = (h2c.clone(), url.clone());
        std::thread::spawn(move || {
            let t0 = Instant::now();
            let body = c.get(url).send().unwrap().bytes().unwrap();
            (body.len(), t0.elapsed())
        })
    };
    std::thread::sleep(Duration::from_millis(300));
    for _ in 0..5 {
        let t0 = Instant::now();
        let r = h2c.get(d.url("/a.txt")).send().unwrap();
        assert_eq!(r.version(), reqwest::Version::HTTP_2);
        assert_eq!(r.bytes().unwrap().as_ref(), b"hello");
        assert!(
            t0.elapsed() < Duration::from_millis(300),
            "{:?}",
            t0.elapsed()
        );
    }
    let (len, took) = big.join().unwrap();
    assert_eq!(len, BIG);
    assert_paced(took, BIG, 0, "HTTP/2");
}

/// `n` requests from distinct client addresses (`X-Forwarded-For` from
/// loopback, a trusted proxy), pipelined 100 at a time on one connection,
/// starting at address number `from`; the number answered 200.
fn distinct_clients(d: &Daemon, from: u32, n: u32) -> u32 {
    let mut s = TcpStream::connect(d.http).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut ok = 0;
    let mut i = from;
    while i < from + n {
        let batch = 100.min(from + n - i);
        let mut reqs = Vec::new();
        for k in 0..batch {
            let ip = std::net::Ipv4Addr::from(0x0a00_0000 + i + k);
            reqs.extend_from_slice(
                format!("GET /a.txt HTTP/1.1\r\nHost: x\r\nX-Forwarded-For: {ip}\r\n\r\n")
                    .as_bytes(),
            );
        }
        s.write_all(&reqs).unwrap();
        let (mut got, mut buf, mut seen) = (0, vec![0u8; 1 << 16], Vec::new());
        while got < batch {
            let k = s.read(&mut buf).unwrap();
            assert!(k > 0, "closed after {got} of a batch");
            seen.extend_from_slice(&buf[..k]);
            got = seen.windows(9).filter(|w| w == b"HTTP/1.1 ").count() as u32;
        }
        ok += seen.windows(12).filter(|w| w == b"HTTP/1.1 200").count() as u32;
        i += batch;
    }
    ok
}

/// A rate limit on every path keyed by client: 100 000 distinct client
/// addresses, each within its rate, are all served, and the process does
/// not grow with them (the limiter's table is fixed; 20 000 first so
/// every page of it the scan can touch is touched).
#[test]
fn memory_stays_flat_under_100_000_client_addresses() {
    let tree = tree();
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("c.toml");
    std::fs::write(
        &cfg,
        "trusted_proxies = [\"127.0.0.1\"]\n[[rules]]\npath = \"/**\"\nrate_limit = { rate = \"5/s\", burst = 2 }\n",
    )
    .unwrap();
    let d = Daemon::start(&tree.root, &["--config", cfg.to_str().unwrap()]);
    assert_eq!(distinct_clients(&d, 0, 20_000), 20_000);
    let warm = reliability_support::rss_kb(d.pid());
    assert_eq!(distinct_clients(&d, 20_000, 80_000), 80_000);
    let after = reliability_support::rss_kb(d.pid());
    assert!(
        after <= warm + 2048,
        "RSS grew from {warm} KiB to {after} KiB over 80 000 more clients"
    );
    // The limit still holds for one client that keeps asking.
    let mut s = TcpStream::connect(d.http).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut statuses = Vec::new();
    for _ in 0..4 {
        s.write_all(b"GET /a.txt HTTP/1.1\r\nHost: x\r\nX-Forwarded-For: 10.0.0.1\r\n\r\n")
            .unwrap();
        let mut buf = [0u8; 4096];
        let n = s.read(&mut buf).unwrap();
        statuses.push(common::status_of(&buf[..n]));
    }
    assert!(statuses.contains(&429), "{statuses:?}");
}

/// A reload that leaves the rules as they were keeps their rate limits'
/// state: a client over its rate is still refused after it, and the
/// refusals counted before are still counted.
#[test]
fn a_reload_is_no_way_around_a_rate_limit() {
    let tree = tree();
    tree.write("b.txt", b"other");
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("c.toml");
    let rule = "[[rules]]\npath = \"/a.txt\"\nrate_limit = { rate = \"1/m\", burst = 1 }\n";
    std::fs::write(&cfg, format!("cache_control = \"first\"\n{rule}")).unwrap();
    let d = Daemon::start(&tree.root, &["--config", cfg.to_str().unwrap()]);
    let get = || common::client().get(d.url("/a.txt")).send().unwrap();
    assert_eq!(get().status(), 200);
    assert_eq!(get().status(), 429);
    let counted = || {
        let m = d.metrics();
        common::metric(
            &m,
            "fileserver_rate_limited_total{site=\"default\",rule=\"1\"}",
        )
    };
    assert_eq!(counted(), Some(1.0));
    std::fs::write(&cfg, format!("cache_control = \"second\"\n{rule}")).unwrap();
    d.reload();
    assert_eq!(get().status(), 429, "the reload refilled the bucket");
    let other = common::client().get(d.url("/b.txt")).send().unwrap();
    assert_eq!(
        other.headers()["cache-control"],
        "second",
        "the reload did not apply"
    );
    assert_eq!(counted(), Some(2.0));
}
