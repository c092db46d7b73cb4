//! Hostile input against the real daemon on loopback: path traversal corpus
//! (ours in `tests/corpus/traversal.txt` plus Debian wfuzz's
//! `Injections/Traversal.txt` when installed), malformed and smuggling-style
//! request heads, slow clients, and connection floods above `max_connections`.
//!
//! ```text
//!  tmp/secret.txt            <- canary OUTSIDE the root: no byte may ever be served
//!  tmp/root/a.txt, sub/b.txt
//!  tmp/root/escape     -> ../secret.txt      (symlinks pointing out of the root)
//!  tmp/root/escape_dir -> ..
//!  tmp/root/sub/escape_rel -> ../../secret.txt
//! ```

mod common;
mod reliability_support;

use common::{Daemon, Tree, CANARY};
use reliability_support::{
    admin_status, fd_kinds, get, get_once, scrape, summary, wait_until, Client,
};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const A_TXT: &[u8] = b"hello from a.txt, inside the root\n";
const WFUZZ_TRAVERSAL: &str = "/usr/share/wfuzz/wordlist/Injections/Traversal.txt";

fn hostile_tree() -> Tree {
    let t = Tree::new();
    t.write("a.txt", A_TXT);
    t.write("sub/b.txt", b"b\n");
    t.write(".hidden", b"hidden\n");
    t.write("sub/.hidden", b"hidden\n");
    std::os::unix::fs::symlink("../secret.txt", t.root.join("escape")).unwrap();
    std::os::unix::fs::symlink("..", t.root.join("escape_dir")).unwrap();
    std::os::unix::fs::symlink("../../secret.txt", t.root.join("sub/escape_rel")).unwrap();
    t
}

/// Decodes one corpus line: `<XX>` is a raw byte, placeholders substituted.
fn decode_payload(line: &str, canary_abs: &str, canary_name: &str) -> Vec<u8> {
    let line = line
        .replace("{CANARY}", canary_abs)
        .replace("{NAME}", canary_name);
    let b = line.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'<' && i + 3 < b.len() && b[i + 3] == b'>' {
            if let Ok(v) = u8::from_str_radix(&line[i + 1..i + 3], 16) {
                out.push(v);
                i += 4;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    out
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    !needle.is_empty() && hay.windows(needle.len()).any(|w| w == needle)
}

/// Sends one GET with a raw target; returns (status, every byte received).
fn send_target(addr: SocketAddr, target: &[u8]) -> (u16, Vec<u8>) {
    let mut s = TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut req = b"GET ".to_vec();
    req.extend_from_slice(target);
    req.extend_from_slice(b" HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n");
    s.write_all(&req).expect("write");
    let mut all = Vec::new();
    let _ = s.read_to_end(&mut all);
    (common::status_of(&all), all)
}

#[test]
fn hostile_traversal_corpus_never_escapes_root() {
    let t = hostile_tree();
    let d = Daemon::start(&t.root, &["--log-level", "error"]);
    let canary_abs = t.canary.canonicalize().unwrap().display().to_string();
    let canary_abs = canary_abs.trim_start_matches('/').to_string();
    let passwd = std::fs::read("/etc/passwd").unwrap_or_default();
    let passwd_line = passwd
        .split(|&b| b == b'\n')
        .next()
        .unwrap_or_default()
        .to_vec();

    // Control: the daemon does serve files inside the root.
    let ok = get_once(d.http, "/a.txt", Duration::from_secs(10)).expect("control GET");
    assert_eq!((ok.status, ok.body.as_slice()), (200, A_TXT));

    let mut payloads: Vec<(String, Vec<u8>)> = Vec::new();
    let ours = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/corpus/traversal.txt"),
    )
    .expect("tests/corpus/traversal.txt");
    for line in ours.lines() {
        if line.is_empty() || line.starts_with("# ") || line == "#" {
            continue;
        }
        payloads.push((
            format!("corpus:{line}"),
            decode_payload(line, &canary_abs, "secret.txt"),
        ));
    }
    let ours_n = payloads.len();
    let wfuzz = std::fs::read_to_string(WFUZZ_TRAVERSAL).ok();
    if let Some(text) = &wfuzz {
        for line in text
            .lines()
            .map(|l| l.trim_end_matches('\r'))
            .filter(|l| !l.is_empty())
        {
            payloads.push((format!("wfuzz:{line}"), line.as_bytes().to_vec()));
            // The same shapes aimed at our canary instead of system files.
            let mut aimed = line.to_string();
            for sys in [
                "etc/passwd",
                "etc/shadow",
                "etc/hosts",
                "boot.ini",
                "winnt/desktop.ini",
            ] {
                aimed = aimed.replace(sys, &canary_abs);
            }
            if aimed != line {
                payloads.push((format!("wfuzz-canary:{aimed}"), aimed.into_bytes()));
            }
        }
    }
    let mut sent = 0usize;
    let mut by_code = std::collections::BTreeMap::<u16, usize>::new();
    let mut failures = Vec::new();
    let started = Instant::now();
    for (name, p) in &payloads {
        let mut variants = vec![p.clone()];
        if p.first() != Some(&b'/') {
            let mut v = b"/".to_vec();
            v.extend_from_slice(p);
            variants.push(v);
        }
        for v in variants {
            let (status, raw) = send_target(d.http, &v);
            sent += 1;
            *by_code.entry(status).or_default() += 1;
            if !matches!(status, 400 | 403 | 404) {
                failures.push(format!(
                    "{name} (sent {:?}): status {status}",
                    String::from_utf8_lossy(&v)
                ));
            }
            if contains(&raw, CANARY) {
                failures.push(format!("{name}: CANARY BYTES SERVED"));
            }
            if !passwd_line.is_empty() && contains(&raw, &passwd_line) {
                failures.push(format!("{name}: /etc/passwd content served"));
            }
        }
    }
    // Still alive and still serving after the corpus.
    let ok = get_once(d.http, "/a.txt", Duration::from_secs(10)).expect("GET after corpus");
    assert_eq!(ok.status, 200);
    summary(&format!(
        "reliability hostile traversal: payloads={} (ours={ours_n} wfuzz={}) requests={sent} codes={by_code:?} \
         failures={} canary_leaks={} secs={:.1}",
        payloads.len(),
        if wfuzz.is_some() { (payloads.len() - ours_n).to_string() } else { "not-installed".into() },
        failures.len(),
        failures.iter().filter(|f| f.contains("CANARY")).count(),
        started.elapsed().as_secs_f64()
    ));
    assert!(
        failures.is_empty(),
        "{} traversal payloads misanswered:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

struct Case {
    name: &'static str,
    bytes: Vec<u8>,
    /// Status of a valid request pipelined before the bad one, if any.
    first: Option<u16>,
    expect: &'static [u16],
}

fn case(name: &'static str, bytes: impl Into<Vec<u8>>, expect: &'static [u16]) -> Case {
    Case {
        name,
        bytes: bytes.into(),
        first: None,
        expect,
    }
}

fn malformed_cases() -> Vec<Case> {
    let mut v = vec![
        case("no version (HTTP/0.9 style)", "GET /a.txt\r\n\r\n", &[400, 505]),
        case("unknown version", "GET /a.txt HTTP/2.7\r\nHost: t\r\n\r\n", &[400, 505]),
        case("lowercase version", "GET /a.txt http/1.1\r\nHost: t\r\n\r\n", &[400, 505]),
        case("extra token in request line", "GET /a.txt HTTP/1.1 x\r\nHost: t\r\n\r\n", &[400]),
        case("double space in request line", "GET  /a.txt HTTP/1.1\r\nHost: t\r\n\r\n", &[400]),
        case("method with a separator", "G(T /a.txt HTTP/1.1\r\nHost: t\r\n\r\n", &[400]),
        case(
            "TLS ClientHello bytes",
            &b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\x00\x00\r\n\r\n"[..],
            &[400],
        ),
        case("binary garbage", &b"\x00\x01\x02\x03\xff\xfe\r\n\r\n"[..], &[400]),
        case("control byte in target", &b"GET /a\x01.txt HTTP/1.1\r\nHost: t\r\n\r\n"[..], &[400]),
        case("HTTP/1.1 without Host", "GET /a.txt HTTP/1.1\r\n\r\n", &[400]),
        case("two Host fields", "GET /a.txt HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", &[400]),
        case("header line without colon", "GET /a.txt HTTP/1.1\r\nHost: t\r\nNoColon\r\n\r\n", &[400]),
        case("space before colon", "GET /a.txt HTTP/1.1\r\nHost : t\r\n\r\n", &[400]),
        case("separator in header name", "GET /a.txt HTTP/1.1\r\nHost: t\r\nX(y): 1\r\n\r\n", &[400]),
        case("NUL in header value", &b"GET /a.txt HTTP/1.1\r\nHost: t\r\nX: a\x00b\r\n\r\n"[..], &[400]),
        case("obs-fold", "GET /a.txt HTTP/1.1\r\nHost: t\r\nX-A: a\r\n b\r\n\r\n", &[400]),
        case("obs-fold with tab", "GET /a.txt HTTP/1.1\r\nHost: t\r\nX-A: a\r\n\tb\r\n\r\n", &[400]),
        case(
            "Content-Length with Transfer-Encoding",
            "GET /a.txt HTTP/1.1\r\nHost: t\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
            &[400],
        ),
        case(
            "Transfer-Encoding with Content-Length",
            "GET /a.txt HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\nContent-Length: 4\r\n\r\n0\r\n\r\n",
            &[400],
        ),
        case(
            "chunked body on GET",
            "GET /a.txt HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
            &[400],
        ),
        case(
            "conflicting Content-Length",
            "GET /a.txt HTTP/1.1\r\nHost: t\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab",
            &[400],
        ),
        case("negative Content-Length", "GET /a.txt HTTP/1.1\r\nHost: t\r\nContent-Length: -1\r\n\r\n", &[400]),
        case("garbage Content-Length", "GET /a.txt HTTP/1.1\r\nHost: t\r\nContent-Length: 1x\r\n\r\n", &[400]),
        case(
            "huge Content-Length",
            "GET /a.txt HTTP/1.1\r\nHost: t\r\nContent-Length: 99999999999999999999999\r\n\r\n",
            &[400],
        ),
        case("bad percent-encoding %zz", "GET /a%zz HTTP/1.1\r\nHost: t\r\n\r\n", &[400]),
        case("truncated percent-encoding", "GET /a.txt% HTTP/1.1\r\nHost: t\r\n\r\n", &[400]),
        case("one hex digit", "GET /a%4 HTTP/1.1\r\nHost: t\r\n\r\n", &[400]),
        case("decoded path not UTF-8", "GET /%ff%fe HTTP/1.1\r\nHost: t\r\n\r\n", &[400]),
        case("encoded NUL", "GET /a.txt%00 HTTP/1.1\r\nHost: t\r\n\r\n", &[400]),
    ];
    let mut big = b"GET /a.txt HTTP/1.1\r\nHost: t\r\nX-Big: ".to_vec();
    big.extend(std::iter::repeat_n(b'a', 16 * 1024));
    big.extend_from_slice(b"\r\n\r\n");
    v.push(case("one 16 KiB header", big, &[400, 431]));
    let mut many_mid = b"GET /a.txt HTTP/1.1\r\nHost: t\r\n".to_vec();
    for i in 0..20 {
        many_mid.extend_from_slice(format!("X-Pad-{i}: {}\r\n", "b".repeat(500)).as_bytes());
    }
    many_mid.extend_from_slice(b"\r\n");
    v.push(case("10 KiB head in 20 fields", many_mid, &[400, 431]));
    let mut many = b"GET /a.txt HTTP/1.1\r\nHost: t\r\n".to_vec();
    for i in 0..150 {
        many.extend_from_slice(format!("X-{i}: v\r\n").as_bytes());
    }
    many.extend_from_slice(b"\r\n");
    v.push(case("150 header fields", many, &[400, 431]));
    let long_uri = format!("GET /{} HTTP/1.1\r\nHost: t\r\n\r\n", "a".repeat(9000));
    v.push(case("9000-byte target", long_uri, &[414]));
    // Pipelined: a valid request, then garbage. The first is answered in full,
    // the garbage gets 400 and the connection closes.
    v.push(Case {
        name: "pipelined garbage after a valid request",
        bytes: [
            &get("/a.txt").into_bytes()[..],
            b"BLAH\x00\x01 garbage garbage\r\n\r\n",
        ]
        .concat(),
        first: Some(200),
        expect: &[400],
    });
    v.push(Case {
        name: "pipelined CL+TE after a valid request",
        bytes: [
            &get("/a.txt").into_bytes()[..],
            b"GET /a.txt HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
        ]
        .concat(),
        first: Some(200),
        expect: &[400],
    });
    v.push(Case {
        name: "pipelined obs-fold after a valid request",
        bytes: [
            &get("/a.txt").into_bytes()[..],
            b"GET /a.txt HTTP/1.1\r\nHost: t\r\nX: 1\r\n 2\r\n\r\n",
        ]
        .concat(),
        first: Some(200),
        expect: &[400],
    });
    v
}

#[test]
fn hostile_malformed_requests_get_4xx_and_close() {
    let t = hostile_tree();
    let d = Daemon::start(&t.root, &["--log-level", "error"]);
    let before = scrape(d.admin);
    let mut failures = Vec::new();
    let cases = malformed_cases();
    let mut codes = std::collections::BTreeMap::<u16, usize>::new();
    let mut counted_400 = 0u64;
    for c in &cases {
        let mut cl = Client::connect(d.http, Duration::from_secs(10)).expect("connect");
        if let Err(e) = cl.send(&c.bytes) {
            failures.push(format!("{}: write failed: {e}", c.name));
            continue;
        }
        if let Some(first) = c.first {
            match cl.read_response(false) {
                Ok(r) if r.status == first && r.body == A_TXT => {}
                Ok(r) => failures.push(format!(
                    "{}: first response {} {:?}",
                    c.name, r.status, r.body
                )),
                Err(e) => failures.push(format!("{}: first response unreadable: {e}", c.name)),
            }
        }
        match cl.read_response(false) {
            Ok(r) => {
                *codes.entry(r.status).or_default() += 1;
                if r.status == 400 {
                    counted_400 += 1;
                }
                if !c.expect.contains(&r.status) {
                    failures.push(format!(
                        "{}: status {} (want one of {:?})",
                        c.name, r.status, c.expect
                    ));
                }
                match cl.expect_closed(Duration::from_secs(5)) {
                    Ok(true) => {}
                    Ok(false) => failures.push(format!(
                        "{}: connection still open 5 s after {}",
                        c.name, r.status
                    )),
                    Err(e) => failures.push(format!("{}: after {}: {e}", c.name, r.status)),
                }
            }
            Err(e) => failures.push(format!("{}: no parsable response: {e}", c.name)),
        }
    }
    // The daemon survived all of it and still serves.
    let ok =
        get_once(d.http, "/a.txt", Duration::from_secs(10)).expect("GET after malformed input");
    assert_eq!(ok.status, 200);
    let after = scrape(d.admin);
    let metric_400 = after.get0("fileserver_http_requests_total", &[("code", "400")])
        - before.get0("fileserver_http_requests_total", &[("code", "400")]);
    summary(&format!(
        "reliability hostile malformed: cases={} codes={codes:?} failures={} metric_400={metric_400} client_400={counted_400}",
        cases.len(),
        failures.len()
    ));
    assert!(
        failures.is_empty(),
        "malformed-request failures:\n{}",
        failures.join("\n")
    );
    assert_eq!(
        metric_400 as u64, counted_400,
        "/metrics 400 count disagrees with the 400s received"
    );
}

/// Result of one slow client: when the server dropped it and how much it sent.
struct Slow {
    dropped_after: Option<Duration>,
    bytes_sent: usize,
    got_408: bool,
}

/// Dribbles `req` one byte a second (or nothing, when `req` is empty) until the
/// server closes the connection or `limit` passes.
fn slow_client(addr: SocketAddr, req: &'static [u8], limit: Duration) -> Slow {
    let mut s = TcpStream::connect(addr).expect("connect slow client");
    let t0 = Instant::now();
    // The one-second read timeout paces the dribble.
    s.set_read_timeout(Some(Duration::from_secs(1))).unwrap();
    let mut sent = 0;
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    let dropped = |sent: usize, got: &[u8]| Slow {
        dropped_after: Some(t0.elapsed()),
        bytes_sent: sent,
        got_408: got.starts_with(b"HTTP/1.1 408"),
    };
    while t0.elapsed() < limit {
        if sent < req.len() && got.is_empty() {
            if s.write_all(&req[sent..sent + 1]).is_err() {
                return dropped(sent, &got);
            }
            sent += 1;
        }
        match s.read(&mut buf) {
            Ok(0) => return dropped(sent, &got),
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) => {}
            Err(_) => return dropped(sent, &got),
        }
    }
    Slow {
        dropped_after: None,
        bytes_sent: sent,
        got_408: false,
    }
}

#[test]
fn hostile_slow_clients_dropped_at_header_timeout_without_blocking_others() {
    let t = hostile_tree();
    let d = Daemon::start(
        &t.root,
        &[
            "--log-level",
            "error",
            "--set",
            "header_read_timeout=2s",
            "--set",
            "keepalive_timeout=2s",
        ],
    );
    const REQ: &[u8] = b"GET /a.txt HTTP/1.1\r\nHost: slow\r\n\r\n";
    let limit = Duration::from_secs(12);
    let stop = Arc::new(AtomicBool::new(false));
    // Normal traffic meanwhile: fresh connections and a keep-alive one.
    let normal = {
        let stop = stop.clone();
        let addr = d.http;
        std::thread::spawn(move || {
            let (mut served, mut errors, mut worst) = (0u64, Vec::new(), Duration::ZERO);
            let t0 = Instant::now();
            while !stop.load(Ordering::Relaxed)
                && t0.elapsed() < Duration::from_secs(30)
                && served < 100_000
            {
                let r0 = Instant::now();
                // Shorter than the 2 s header timeout: a worker stuck on a
                // slow client until it is dropped would make this time out.
                match get_once(addr, "/a.txt", Duration::from_millis(1500)) {
                    Ok(r) if r.status == 200 && r.body == A_TXT => served += 1,
                    Ok(r) => errors.push(format!("status {}", r.status)),
                    Err(e) => errors.push(e.to_string()),
                }
                worst = worst.max(r0.elapsed());
                std::thread::sleep(Duration::from_millis(20));
            }
            (served, errors, worst)
        })
    };
    let mut slow = Vec::new();
    for i in 0..12 {
        let addr = d.http;
        // Two thirds dribble a request head, one third send nothing at all.
        let req: &'static [u8] = if i % 3 == 2 { b"" } else { REQ };
        slow.push(std::thread::spawn(move || slow_client(addr, req, limit)));
    }
    let results: Vec<Slow> = slow.into_iter().map(|h| h.join().unwrap()).collect();
    stop.store(true, Ordering::Relaxed);
    let (served, errors, worst) = normal.join().unwrap();
    let dropped: Vec<f64> = results
        .iter()
        .filter_map(|r| r.dropped_after.map(|d| d.as_secs_f64()))
        .collect();
    let max_drop = dropped.iter().cloned().fold(0.0, f64::max);
    let min_drop = dropped.iter().cloned().fold(f64::INFINITY, f64::min);
    summary(&format!(
        "reliability hostile slow: slow_clients={} dropped={} drop_secs_min={min_drop:.1} max={max_drop:.1} \
         got_408={} max_bytes_sent={} normal_served={served} normal_errors={} normal_worst_ms={}",
        results.len(),
        dropped.len(),
        results.iter().filter(|r| r.got_408).count(),
        results.iter().map(|r| r.bytes_sent).max().unwrap_or(0),
        errors.len(),
        worst.as_millis()
    ));
    for (i, r) in results.iter().enumerate() {
        let after = r
            .dropped_after
            .unwrap_or_else(|| panic!("slow client {i} was never dropped in {limit:?}"));
        assert!(
            after >= Duration::from_millis(1500) && after <= Duration::from_secs(8),
            "slow client {i} dropped after {after:?}, header_read_timeout is 2 s"
        );
        assert!(
            r.bytes_sent < REQ.len(),
            "slow client {i} got its whole head in before the timeout"
        );
    }
    assert!(
        errors.is_empty(),
        "normal client failed while slow clients were connected: {errors:?}"
    );
    assert!(
        served >= 5,
        "normal client served only {served} requests while slow clients were connected"
    );
}

#[test]
fn hostile_connection_flood_above_max_connections() {
    let t = hostile_tree();
    let max_conns = 16usize;
    let mut d = Daemon::start(
        &t.root,
        &[
            "--log-level",
            "error",
            "--set",
            &format!("max_connections={max_conns}"),
            "--set",
            "header_read_timeout=2s",
            "--set",
            "keepalive_timeout=2s",
        ],
    );
    let pid = d.pid();
    assert_eq!(
        get_once(d.http, "/a.txt", Duration::from_secs(10))
            .unwrap()
            .status,
        200
    );
    let fds_before = fd_kinds(pid, &t.root);

    // Phase 1: idle connections far above the limit.
    let flood_n = 64;
    let mut idle = Vec::new();
    for _ in 0..flood_n {
        idle.push(TcpStream::connect(d.http).expect("connect (kernel backlog accepts)"));
    }
    let mut max_open_seen = 0.0f64;
    let mut max_sockets_seen = 0usize;
    for _ in 0..10 {
        let m = scrape(d.admin);
        max_open_seen = max_open_seen.max(m.must("fileserver_connections_open"));
        std::thread::sleep(Duration::from_millis(100));
        max_sockets_seen = max_sockets_seen.max(fd_kinds(pid, &t.root).sockets);
    }
    // Accepted sockets the daemon holds: the limit, plus one per other
    // worker parked in accept() when the limit was reached, plus 2 for the
    // admin connection of the scrape still closing.
    let socket_bound = fds_before.sockets + max_conns + (d.start.workers.saturating_sub(1)) + 2;
    let healthz = admin_status(d.admin, "/healthz").expect("admin answers during the flood");
    // A real client queued behind the flood is served once idle ones time out.
    let t0 = Instant::now();
    let queued = get_once(d.http, "/a.txt", Duration::from_secs(30));
    let queued_wait = t0.elapsed();
    drop(idle);

    // Phase 2: connect-and-close churn (some with RST), bounded by count and time.
    let churned = Arc::new(AtomicU64::new(0));
    let churners: Vec<_> = (0..4)
        .map(|k| {
            let churned = churned.clone();
            let addr = d.http;
            std::thread::spawn(move || {
                let t0 = Instant::now();
                for i in 0..500 {
                    if t0.elapsed() > Duration::from_secs(20) {
                        break;
                    }
                    if let Ok(s) = TcpStream::connect(addr) {
                        if (i + k) % 2 == 0 {
                            // SO_LINGER 0: close sends RST instead of FIN.
                            let l = libc::linger {
                                l_onoff: 1,
                                l_linger: 0,
                            };
                            // SAFETY: setsockopt on a socket we own, with a
                            // pointer to a live, correctly sized linger struct.
                            unsafe {
                                libc::setsockopt(
                                    std::os::fd::AsRawFd::as_raw_fd(&s),
                                    libc::SOL_SOCKET,
                                    libc::SO_LINGER,
                                    (&l as *const libc::linger).cast(),
                                    std::mem::size_of::<libc::linger>() as libc::socklen_t,
                                );
                            }
                        }
                        churned.fetch_add(1, Ordering::Relaxed);
                    }
                }
            })
        })
        .collect();
    for c in churners {
        c.join().unwrap();
    }

    // Phase 3: a burst of real requests above the limit: all are served.
    let burst: Vec<_> = (0..48)
        .map(|_| {
            let addr = d.http;
            std::thread::spawn(move || get_once(addr, "/a.txt", Duration::from_secs(30)))
        })
        .collect();
    let mut burst_ok = 0;
    let mut burst_err = Vec::new();
    for b in burst {
        match b.join().unwrap() {
            Ok(r) if r.status == 200 && r.body == A_TXT => burst_ok += 1,
            Ok(r) => burst_err.push(format!("status {}", r.status)),
            Err(e) => burst_err.push(e.to_string()),
        }
    }
    let after_ok = get_once(d.http, "/a.txt", Duration::from_secs(10)).map(|r| r.status);
    let idle_again = wait_until(Duration::from_secs(10), || {
        scrape(d.admin).must("fileserver_connections_open") == 0.0
    });
    // No socket or file descriptor left behind by the flood (rings and
    // eventfds created lazily by daemon threads are not counted).
    let fds_ok = wait_until(Duration::from_secs(10), || {
        let k = fd_kinds(pid, &t.root);
        k.sockets <= fds_before.sockets && k.files <= fds_before.files
    });
    let fds_after = fd_kinds(pid, &t.root);
    summary(&format!(
        "reliability hostile flood: max_connections={max_conns} flood={flood_n} max_open_seen={max_open_seen} \
         sockets_during_flood={max_sockets_seen} socket_bound={socket_bound} \
         healthz={healthz} queued_status={:?} queued_wait_ms={} churned={} burst_ok={burst_ok}/48 \
         sockets_before={} sockets_after={} fds_before={} fds_after={}",
        queued.as_ref().map(|r| r.status),
        queued_wait.as_millis(),
        churned.load(Ordering::Relaxed),
        fds_before.sockets,
        fds_after.sockets,
        fds_before.total,
        fds_after.total
    ));
    assert_eq!(healthz, 200, "admin /healthz during the flood");
    assert!(
        max_open_seen <= max_conns as f64,
        "fileserver_connections_open reached {max_open_seen} with max_connections={max_conns}"
    );
    assert!(
        max_sockets_seen <= socket_bound,
        "daemon held {max_sockets_seen} sockets during the flood, bound {socket_bound}"
    );
    assert_eq!(queued.expect("client queued behind the flood").status, 200);
    assert!(burst_err.is_empty(), "burst above the limit: {burst_err:?}");
    assert_eq!(after_ok.expect("GET after the flood"), 200);
    assert!(idle_again, "connections_open did not return to 0");
    assert!(
        fds_ok,
        "daemon fds after the flood {fds_after:?}, before {fds_before:?}"
    );
    assert!(alive(&mut d), "daemon exited during the flood");
}

fn alive(d: &mut Daemon) -> bool {
    d.child
        .as_mut()
        .is_some_and(|c| c.try_wait().ok().flatten().is_none())
}
