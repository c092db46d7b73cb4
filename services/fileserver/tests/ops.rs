//! Operations against the real daemon: start line, config precedence and
//! check-config, graceful shutdown with a request in flight, SIGHUP reload
//! (valid and invalid), /metrics content, health, access log, sd_notify and
//! systemd socket activation.

mod common;
mod reliability_support;

use common::{bin, client, metric, raw, status_of, Daemon, Tree};
use reliability_support::Client;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::Command;
use std::time::{Duration, Instant};

#[test]
fn start_line_reports_addresses_root_workers_backend_fd_limit() {
    let tree = Tree::new();
    let d = Daemon::start(&tree.root, &[]);
    assert!(d.http.ip().is_loopback() && d.http.port() != 0);
    assert!(d.admin.ip().is_loopback() && d.admin.port() != 0);
    assert_ne!(d.http, d.admin);
    assert_eq!(d.start.workers, 2);
    assert!(
        ["uring", "blocking"].contains(&d.start.backend.as_str()),
        "{}",
        d.start.backend
    );
    assert!(d.start.fd_limit > 0);
    assert_eq!(d.start.root, std::fs::canonicalize(&tree.root).unwrap());
}

#[test]
fn check_config_accepts_default_and_explains_each_error() {
    let default = concat!(env!("CARGO_MANIFEST_DIR"), "/../../config/fileserver.toml");
    let out = Command::new(bin())
        .args(["check-config", default])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.toml");
    // Writes `text` as the config, runs check-config on it, expects exit 2
    // and returns what it printed on stderr.
    let rejected = |text: &str| -> String {
        std::fs::write(&bad, text).unwrap();
        let out = Command::new(bin())
            .arg("check-config")
            .arg(&bad)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{text}");
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let err = rejected(
        "listen = \"not an address\"\nworkers = 5000\nheader_read_timeout = \"ten seconds\"\nio_backend = \"magic\"\n[cache]\nvalid = \"1 fortnight\"\n",
    );
    for key in [
        "`listen`",
        "`workers`",
        "`header_read_timeout`",
        "`io_backend`",
        "`cache.valid`",
    ] {
        assert!(err.contains(key), "missing {key} in:\n{err}");
    }
    let err = rejected("unknown_key = 1\nmax_ranges = \"many\"\n[cache]\nmax_entries = -1\n");
    for key in [
        "`unknown_key`: unknown key",
        "`max_ranges`: expected integer",
        "`cache.max_entries`",
    ] {
        assert!(err.contains(key), "missing {key} in:\n{err}");
    }
    rejected("this is [not toml");
}

#[test]
fn daemon_refuses_bad_config_with_its_key() {
    let tree = Tree::new();
    let cfg = tree.dir.path().join("c.toml");
    std::fs::write(&cfg, "bogus = true\n").unwrap();
    let out = Command::new(bin())
        .args(common::base_args(&tree.root))
        .arg("--config")
        .arg(&cfg)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("`bogus`: unknown key"));
    let out = Command::new(bin())
        .args(common::base_args(&tree.root))
        .env("FILESERVER_MAX_RANGES", "lots")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("`max_ranges`"));
}

#[test]
fn precedence_flags_over_env_over_file() {
    let tree = Tree::new();
    tree.write("a.txt", b"x");
    let cfg = tree.dir.path().join("c.toml");
    std::fs::write(&cfg, "cache_control = \"from-file\"\nmax_ranges = 3\n").unwrap();
    let cc = |d: &Daemon| {
        client()
            .get(d.url("/a.txt"))
            .send()
            .unwrap()
            .headers()
            .get("cache-control")
            .unwrap()
            .to_str()
            .unwrap()
            .to_string()
    };
    let mut cmd = Command::new(bin());
    cmd.args(common::base_args(&tree.root))
        .arg("--config")
        .arg(&cfg);
    let d = Daemon::spawn(cmd);
    assert_eq!(cc(&d), "from-file");
    drop(d);
    let mut cmd = Command::new(bin());
    cmd.args(common::base_args(&tree.root))
        .env("FILESERVER_CONFIG", &cfg)
        .env("FILESERVER_CACHE_CONTROL", "from-env");
    let d = Daemon::spawn(cmd);
    assert_eq!(cc(&d), "from-env");
    drop(d);
    let mut cmd = Command::new(bin());
    cmd.args(common::base_args(&tree.root))
        .args(["--set", "cache_control=from-flag"])
        .arg("--config")
        .arg(&cfg)
        .env("FILESERVER_CACHE_CONTROL", "from-env");
    let d = Daemon::spawn(cmd);
    assert_eq!(cc(&d), "from-flag");
    // Env for the root and workers works too (flags in base_args win for those).
    drop(d);
    let mut cmd = Command::new(bin());
    cmd.args(["--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0"])
        .env("FILESERVER_ROOT", &tree.root)
        .env("FILESERVER_WORKERS", "1");
    let d = Daemon::spawn(cmd);
    assert_eq!(d.start.workers, 1);
    assert_eq!(d.get_text("/a.txt"), "x");
}

#[test]
fn health_and_readiness() {
    let tree = Tree::new();
    let d = Daemon::start(&tree.root, &[]);
    let r = client().get(d.admin_url("/healthz")).send().unwrap();
    assert_eq!(r.status(), 200);
    let r = client().get(d.admin_url("/readyz")).send().unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(
        client().get(d.admin_url("/nope")).send().unwrap().status(),
        404
    );
}

/// The admin listener answers through the encoder every listener uses:
/// `Server` and `Date` on each answer, `Allow` on a 405, no body for HEAD,
/// the exposition format's type for `/metrics`, and a 400 for a bad head.
#[test]
fn admin_answers_read_like_every_other_listener() {
    let tree = Tree::new();
    let d = Daemon::start(&tree.root, &[]);
    let raw = |req: &str| {
        let got = raw(d.admin, req.as_bytes(), Duration::from_secs(5));
        String::from_utf8_lossy(&got).into_owned()
    };
    let get = raw("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n");
    assert!(get.starts_with("HTTP/1.1 200 OK\r\n"), "{get}");
    for field in [
        "Server: fileserver\r\n",
        "Date: ",
        "Cache-Control: no-store\r\n",
    ] {
        assert!(get.contains(field), "{field:?} in {get}");
    }
    assert!(get.ends_with("\r\n\r\nok\n"), "{get}");
    let head = raw("HEAD /healthz HTTP/1.1\r\nHost: x\r\n\r\n");
    assert!(
        head.contains("Content-Length: 3\r\n") && head.ends_with("\r\n\r\n"),
        "{head}"
    );
    let post = raw("POST /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n");
    assert!(
        post.starts_with("HTTP/1.1 405 ") && post.contains("Allow: GET, HEAD\r\n"),
        "{post}"
    );
    let metrics = raw("GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
    assert!(
        metrics.contains("Content-Type: text/plain; version=0.0.4; charset=utf-8\r\n"),
        "{metrics}"
    );
    let bad = raw("GET /healthz HTTP/1.1\r\n\r\n");
    assert!(bad.starts_with("HTTP/1.1 400 "), "{bad}");
}

const NAMES: &[&str] = &[
    "fileserver_cache_hits_total",
    "fileserver_cache_misses_total",
    "fileserver_cache_negative_hits_total",
    "fileserver_cache_evictions_total",
    "fileserver_cache_unadmitted_total",
    "fileserver_cache_revalidations_total",
    "fileserver_cache_invalidations_total",
    "fileserver_cache_entries",
    "fileserver_watch_dirs",
    "fileserver_watch_events_total",
    "fileserver_watch_resets_total",
    "fileserver_census_dirs",
    "fileserver_census_scans_total",
    "fileserver_contention_total",
    "fileserver_fds_open",
    "fileserver_fd_budget",
    "fileserver_fd_allocations_total",
    "fileserver_fd_releases_total",
    "fileserver_fd_stale_total",
    "fileserver_deferred_release_queue_depth",
    "fileserver_emfile_recoveries_total",
    "fileserver_backend_ops_total",
    "fileserver_read_bytes_total",
    "fileserver_reaper_batches_total",
    "fileserver_http_requests_total",
    "fileserver_http_response_body_bytes_total",
    "fileserver_http_request_duration_seconds",
    "fileserver_connections_open",
];

#[test]
fn metrics_names_help_and_counts_move() {
    let tree = Tree::new();
    tree.write("a.txt", b"0123456789");
    let d = Daemon::start(&tree.root, &[]);
    let c = client();
    // Make every series exist once.
    c.get(d.url("/a.txt")).send().unwrap();
    c.get(d.url("/missing")).send().unwrap();
    // A daemon that has not yet used one 10 ms tick of CPU reads 0 below:
    // serve until it has (these requests come before the counts compared).
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while metric(&d.metrics(), "process_cpu_seconds_total").unwrap_or(0.0) == 0.0
        && std::time::Instant::now() < deadline
    {
        for _ in 0..200 {
            c.get(d.url("/a.txt")).send().unwrap();
        }
    }
    // Duration samples are flushed by each worker every 100 ms.
    std::thread::sleep(Duration::from_millis(400));
    let before = d.metrics();
    for name in NAMES {
        assert!(
            before.contains(&format!("# HELP {name} ")),
            "no HELP for {name}:\n{before}"
        );
        assert!(
            before.lines().any(|l| l.starts_with(name)),
            "no samples for {name}"
        );
    }
    let version = env!("CARGO_PKG_VERSION");
    let build = before
        .lines()
        .find(|l| l.starts_with("fileserver_build_info{"))
        .unwrap_or_else(|| panic!("no fileserver_build_info:\n{before}"));
    assert!(
        build.starts_with(&format!(
            "fileserver_build_info{{version=\"{version}\",commit=\""
        )) && build.ends_with("} 1")
            && !build.contains("commit=\"\""),
        "{build}"
    );
    for process in [
        "process_resident_memory_bytes",
        "process_open_fds",
        "process_max_fds",
        "process_start_time_seconds",
        "process_threads",
    ] {
        assert!(
            metric(&before, process).unwrap_or(0.0) > 0.0,
            "{process}:\n{before}"
        );
    }
    // CPU time keeps its fraction (it was cut to whole seconds: 0 for a
    // daemon that just started) and is typed a counter.
    let cpu = metric(&before, "process_cpu_seconds_total").unwrap();
    assert!(cpu > 0.0 && cpu.fract() != 0.0, "{cpu}");
    assert!(before.contains("# TYPE process_cpu_seconds_total counter\n"));
    assert!(before.contains("fileserver_io_backend_info{backend="));
    assert!(before.contains("fileserver_contention_total{component=\"fdtable\"}"));
    assert!(before.contains("fileserver_contention_total{component=\"pathcache\"}"));
    assert!(before.contains("fileserver_fd_releases_total{path=\"close\"}"));
    assert!(before.contains("fileserver_fd_releases_total{path=\"deferred\"}"));
    assert!(
        before.contains(
            "fileserver_http_request_duration_seconds_bucket{site=\"default\",le=\"0.001\"}"
        ),
        "explicit buckets"
    );
    // A series by its exact name, or summed over its labels (`site`).
    let m = |t: &str, s: &str| {
        metric(t, s)
            .or_else(|| common::metric_sum(t, s, &[]))
            .unwrap_or(0.0)
    };
    for _ in 0..5 {
        assert_eq!(
            c.get(d.url("/a.txt")).send().unwrap().text().unwrap(),
            "0123456789"
        );
    }
    for _ in 0..3 {
        assert_eq!(c.get(d.url("/missing")).send().unwrap().status(), 404);
    }
    c.head(d.url("/a.txt")).send().unwrap();
    // Duration samples are flushed by each worker every 100 ms.
    std::thread::sleep(Duration::from_millis(400));
    let after = d.metrics();
    let delta = |s: &str| m(&after, s) - m(&before, s);
    let requests = |t: &str, labels: &[(&str, &str)]| {
        common::metric_sum(t, "fileserver_http_requests_total", labels).unwrap_or(0.0)
    };
    let requests_delta =
        |labels: &[(&str, &str)]| requests(&after, labels) - requests(&before, labels);
    assert_eq!(requests_delta(&[("code", "200")]), 6.0);
    assert_eq!(requests_delta(&[("code", "200"), ("method", "GET")]), 5.0);
    assert_eq!(requests_delta(&[("code", "200"), ("method", "HEAD")]), 1.0);
    assert_eq!(requests_delta(&[("code", "404")]), 3.0);
    let not_found_body = "404 Not Found\n".len() as f64;
    assert_eq!(
        delta("fileserver_http_response_body_bytes_total"),
        50.0 + 3.0 * not_found_body,
        "5 x 10 bytes + three 404 bodies; HEAD sends none"
    );
    assert!(
        delta("fileserver_cache_hits_total") >= 5.0,
        "{}",
        delta("fileserver_cache_hits_total")
    );
    assert!(delta("fileserver_cache_negative_hits_total") >= 1.0);
    assert_eq!(delta("fileserver_http_request_duration_seconds_count"), 9.0);
    assert!(m(&after, "fileserver_fds_open") >= 1.0);
    // connections_open follows open client connections.
    let mut s = TcpStream::connect(d.http).unwrap();
    s.write_all(b"GET /a.txt HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    let mut buf = [0u8; 512];
    let _ = s.read(&mut buf).unwrap();
    let open = m(&d.metrics(), "fileserver_connections_open");
    assert!(open >= 1.0, "{open}");
    drop(s);
    drop(c); // its pooled keep-alive connections too
    let deadline = Instant::now() + Duration::from_secs(3);
    while m(&d.metrics(), "fileserver_connections_open") != 0.0 {
        assert!(
            Instant::now() < deadline,
            "connections_open did not return to 0"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Browsers accept codings on every request: a file with no precompressed
/// sibling is served from one lookup once its directory's census is taken
/// (no negative entry per coding), a sibling added later is served within
/// `cache.negative_ttl`, and the census shows in /metrics.
#[test]
fn precompressed_siblings_are_learned_from_one_listing() {
    let tree = Tree::new();
    for i in 0..20 {
        tree.write(&format!("d/f{i:02}.css"), format!("plain {i}").as_bytes());
    }
    tree.write("d/f00.css.gz", b"GZ-00");
    let d = Daemon::start(&tree.root, &["--set", "cache.negative_ttl=200ms"]);
    let c = client();
    let get = |path: &str| {
        let r = c
            .get(d.url(path))
            .header("Accept-Encoding", "gzip, deflate, br, zstd")
            .send()
            .unwrap();
        let coding = r
            .headers()
            .get("content-encoding")
            .map(|v| v.to_str().unwrap().to_owned());
        (coding, r.text().unwrap())
    };
    assert_eq!(get("/d/f00.css"), (Some("gzip".into()), "GZ-00".into()));
    let m = |t: &str, s: &str| metric(t, s).unwrap_or(0.0);
    let before = d.metrics();
    for round in 0..3 {
        for i in 1..20 {
            assert_eq!(
                get(&format!("/d/f{i:02}.css")),
                (None, format!("plain {i}")),
                "{round}"
            );
        }
    }
    let after = d.metrics();
    let delta = |s: &str| m(&after, s) - m(&before, s);
    assert_eq!(
        delta("fileserver_cache_negative_hits_total"),
        0.0,
        "no sibling looked up"
    );
    assert_eq!(
        delta("fileserver_cache_misses_total"),
        19.0,
        "each file loaded once"
    );
    assert_eq!(m(&after, "fileserver_census_scans_total"), 1.0);
    assert_eq!(m(&after, "fileserver_census_dirs"), 1.0);
    tree.write("d/f01.css.br", b"BR-01");
    std::thread::sleep(Duration::from_millis(600));
    assert_eq!(get("/d/f01.css"), (Some("br".into()), "BR-01".into()));
}

/// `inline_opens = false` sends every open through the I/O backend (for
/// roots whose `open` may block); files and misses are served the same, on
/// both backends, and the start line still names the backend.
#[test]
fn inline_opens_off_serves_the_same() {
    let tree = Tree::new();
    tree.write("a.txt", b"0123456789");
    tree.write("sub/b.txt", b"bee");
    for backend in ["blocking", "auto"] {
        let d = Daemon::start(
            &tree.root,
            &["--io-backend", backend, "--set", "inline_opens=false"],
        );
        let expected: &[&str] = if backend == "blocking" {
            &["blocking"]
        } else {
            &["uring", "blocking"]
        };
        assert!(
            expected.contains(&d.start.backend.as_str()),
            "{backend}: start line says {}",
            d.start.backend
        );
        let c = client();
        for _ in 0..2 {
            assert_eq!(
                c.get(d.url("/a.txt")).send().unwrap().text().unwrap(),
                "0123456789",
                "{backend}"
            );
            assert_eq!(
                c.get(d.url("/sub/b.txt")).send().unwrap().text().unwrap(),
                "bee",
                "{backend}"
            );
            assert_eq!(c.get(d.url("/missing")).send().unwrap().status(), 404);
        }
    }
}

/// A client connection whose receive buffer stays at 64 KiB: a download it
/// does not read stays in flight. With autotuning the buffer grows to
/// `net.ipv4.tcp_rmem`'s maximum (32 MiB on some hosts), and a 32 MiB
/// response then fits in it whole: the server was done before the test's
/// signal, exited, and the next admin request was reset.
fn connect_small_window(addr: std::net::SocketAddr) -> TcpStream {
    use rustix::net::{sockopt, AddressFamily, SocketType};
    let family = if addr.is_ipv4() {
        AddressFamily::INET
    } else {
        AddressFamily::INET6
    };
    let fd = rustix::net::socket(family, SocketType::STREAM, None).unwrap();
    sockopt::set_socket_recv_buffer_size(&fd, 64 * 1024).unwrap();
    rustix::net::connect(&fd, &addr).unwrap();
    TcpStream::from(fd)
}

/// Once the start line is out, the daemon accepts connections, so a
/// SIGTERM from then on must drain them, not end the process at once.
/// The handlers were installed a few steps after the line, on the main
/// thread's runtime: on a loaded machine a SIGTERM sent on seeing the line
/// (as `graceful_shutdown_finishes_in_flight_response` sends one) found
/// the default action and killed the daemon mid-response (2 runs in 25
/// with two busy loops beside it; this test failed 4 in 20 so).
#[test]
fn signals_are_handled_from_the_start_line_on() {
    let tree = Tree::new();
    let d = Daemon::start(&tree.root, &[]);
    let status = std::fs::read_to_string(format!("/proc/{}/status", d.pid())).unwrap();
    let caught = status
        .lines()
        .find_map(|l| l.strip_prefix("SigCgt:"))
        .map(|m| u64::from_str_radix(m.trim(), 16).unwrap())
        .unwrap();
    for (name, sig) in [
        ("SIGTERM", libc::SIGTERM),
        ("SIGINT", libc::SIGINT),
        ("SIGHUP", libc::SIGHUP),
    ] {
        assert!(
            caught & (1 << (sig - 1)) != 0,
            "{name} has its default action when the start line is out (SigCgt {caught:x})"
        );
    }
}

#[test]
fn graceful_shutdown_finishes_in_flight_response() {
    let tree = Tree::new();
    let big: Vec<u8> = (0..(32usize << 20)).map(|i| (i % 253) as u8).collect();
    tree.write("big.bin", &big);
    tree.write("a.txt", b"x");
    let mut d = Daemon::start(&tree.root, &[]);
    // An idle keep-alive connection: must be closed at shutdown, not waited for.
    let mut idle = TcpStream::connect(d.http).unwrap();
    idle.write_all(b"GET /a.txt HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    let mut buf = vec![0u8; 1 << 16];
    let _ = idle.read(&mut buf).unwrap();
    // Idle long enough to have given back its buffers: from then on only
    // the keep-alive deadline (60 s) or the stop wakes it.
    std::thread::sleep(Duration::from_millis(300));
    // The in-flight request: read only the start, so the server is blocked on us.
    let mut s = connect_small_window(d.http);
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    s.write_all(b"GET /big.bin HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    let mut got = Vec::new();
    let n = s.read(&mut buf).unwrap();
    got.extend_from_slice(&buf[..n]);
    d.signal(libc::SIGTERM);
    // Readiness flips while the response is still being sent.
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let r = client().get(d.admin_url("/readyz")).send().unwrap();
        if r.status() == 503 {
            break;
        }
        assert!(Instant::now() < deadline, "readyz never went 503");
        std::thread::sleep(Duration::from_millis(20));
    }
    // No new connections are served.
    if let Ok(mut c) = TcpStream::connect(d.http) {
        c.set_read_timeout(Some(Duration::from_millis(500)))
            .unwrap();
        let _ = c.write_all(b"GET /a.txt HTTP/1.1\r\nHost: x\r\n\r\n");
        let mut b = [0u8; 64];
        assert!(
            !matches!(c.read(&mut b), Ok(n) if n > 0),
            "served a new connection after SIGTERM"
        );
    }
    // The idle connection gets closed.
    idle.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    assert_eq!(idle.read(&mut buf).unwrap(), 0);
    // The in-flight response completes, byte for byte, then the connection closes.
    loop {
        match s.read(&mut buf) {
            Ok(0) => break,
            Ok(k) => got.extend_from_slice(&buf[..k]),
            Err(e) => panic!("in-flight response cut: {e} after {} bytes", got.len()),
        }
    }
    let head_end = got.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
    assert!(String::from_utf8_lossy(&got[..head_end]).contains("Content-Length: 33554432"));
    assert_eq!(got.len() - head_end, big.len());
    assert!(got[head_end..] == big[..], "body corrupted");
    let st = d
        .wait_exit(Duration::from_secs(10))
        .expect("exit after shutdown");
    assert!(st.success(), "{st:?}");
}

#[test]
fn shutdown_timeout_bounds_a_stalled_client() {
    let tree = Tree::new();
    tree.write("big.bin", &vec![7u8; 32 << 20]);
    let mut d = Daemon::start(&tree.root, &["--set", "shutdown_timeout=500ms"]);
    let mut s = connect_small_window(d.http);
    s.write_all(b"GET /big.bin HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    let mut buf = [0u8; 1024];
    let _ = s.read(&mut buf).unwrap();
    std::thread::sleep(Duration::from_millis(200));
    let t0 = Instant::now();
    d.signal(libc::SIGINT);
    let st = d.wait_exit(Duration::from_secs(10)).expect("exit");
    assert!(st.success(), "{st:?}");
    assert!(t0.elapsed() < Duration::from_secs(5), "{:?}", t0.elapsed());
}

#[test]
fn a_download_cut_by_shutdown_timeout_is_in_the_access_log() {
    let tree = Tree::new();
    tree.write("big.bin", &vec![7u8; 32 << 20]);
    let mut d = Daemon::start(
        &tree.root,
        &[
            "--set",
            "shutdown_timeout=300ms",
            "--access-log",
            "stdout",
            "--set",
            "access_log_format=json",
        ],
    );
    let mut s = connect_small_window(d.http);
    s.write_all(b"GET /big.bin HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    let mut buf = [0u8; 1024];
    let _ = s.read(&mut buf).unwrap();
    std::thread::sleep(Duration::from_millis(200));
    d.signal(libc::SIGTERM);
    assert!(d
        .wait_exit(Duration::from_secs(10))
        .expect("exit")
        .success());
    // Logged like an abandoned download: status, the bytes that went out,
    // and not completed.
    let line = d.json_log_line("target", &serde_json::json!("/big.bin"));
    assert_eq!(line["status"], 200, "{line}");
    assert_eq!(line["completed"], false, "{line}");
    let sent = line["bytes"].as_u64().unwrap();
    assert!(sent < 32 << 20, "{line}");
}

/// A daemon on `tree` with a config file `c.toml` holding `text`, which
/// a test rewrites before a SIGHUP.
fn with_config_file(tree: &Tree, text: &str) -> (Daemon, std::path::PathBuf) {
    let cfg = tree.dir.path().join("c.toml");
    std::fs::write(&cfg, text).unwrap();
    let mut cmd = Command::new(bin());
    cmd.args(common::base_args(&tree.root))
        .arg("--config")
        .arg(&cfg);
    (Daemon::spawn(cmd), cfg)
}

#[test]
fn sighup_reload_valid_and_invalid() {
    let tree = Tree::new();
    tree.write("a.txt", b"x");
    for i in 0..30 {
        tree.write(&format!("f{i}.txt"), b"y");
    }
    let (d, cfg) = with_config_file(&tree, "cache_control = \"first\"\n");
    // A keep-alive connection opened before the reload.
    let mut s = TcpStream::connect(d.http).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let ask = |s: &mut TcpStream| -> String {
        s.write_all(b"GET /a.txt HTTP/1.1\r\nHost: x\r\n\r\n")
            .unwrap();
        let mut buf = [0u8; 2048];
        let n = s.read(&mut buf).unwrap();
        String::from_utf8_lossy(&buf[..n]).to_string()
    };
    assert!(ask(&mut s).contains("Cache-Control: first\r\n"));
    let c = client();
    for i in 0..30 {
        assert_eq!(
            c.get(d.url(&format!("/f{i}.txt"))).send().unwrap().status(),
            200
        );
    }
    let entries = |d: &Daemon| metric(&d.metrics(), "fileserver_cache_entries").unwrap_or(-1.0);
    assert!(entries(&d) >= 30.0, "{}", entries(&d));
    std::fs::write(
        &cfg,
        "cache_control = \"second\"\nmax_ranges = 1\n[cache]\nmax_entries = 10\n",
    )
    .unwrap();
    d.reload();
    // [cache] applies in place: the lower bound evicts unused entries now.
    assert!(
        d.stderr_text().contains("reload: cache settings applied"),
        "{}",
        d.stderr_text()
    );
    assert!(entries(&d) <= 10.0, "cache entries {} > 10", entries(&d));
    for i in 0..30 {
        assert_eq!(
            c.get(d.url(&format!("/f{i}.txt"))).send().unwrap().status(),
            200
        );
        assert!(entries(&d) <= 10.0, "bound held after f{i}");
    }
    // Same connection, new settings.
    assert!(ask(&mut s).contains("Cache-Control: second\r\n"));
    let r = client()
        .get(d.url("/a.txt"))
        .header("Range", "bytes=0-0,0-0")
        .send()
        .unwrap();
    assert_eq!(r.status(), 200, "max_ranges=1 applied");
    // Invalid config: reported with its key, old config kept, connections kept.
    std::fs::write(&cfg, "cache_control = \"third\"\nmax_ranges = \"x\"\n").unwrap();
    d.signal(libc::SIGHUP);
    assert!(
        d.wait_stderr("reload rejected", Duration::from_secs(5)),
        "{}",
        d.stderr_text()
    );
    assert!(d.stderr_text().contains("`max_ranges`"));
    assert!(ask(&mut s).contains("Cache-Control: second\r\n"));
    assert_eq!(
        status_of(&raw(
            d.http,
            b"GET /a.txt HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
            Duration::from_secs(5)
        )),
        200
    );
}

/// A reload that changes a key read only at start (its mark in the
/// config's table file) names it, keeps its started value, and takes the
/// rest of the file.
#[test]
fn sighup_reload_keeps_restart_keys_and_names_them() {
    let tree = Tree::new();
    tree.write("a.txt", b"x");
    let (d, cfg) = with_config_file(&tree, "cache_control = \"first\"\n");
    let other = tempfile::tempdir().unwrap();
    std::fs::write(
        &cfg,
        format!(
            "cache_control = \"second\"\nroot = {:?}\ninline_opens = false\n[http3]\nidle_timeout = \"5s\"\n",
            other.path()
        ),
    )
    .unwrap();
    d.reload();
    let log = d.stderr_text();
    for key in ["inline_opens", "http3"] {
        assert!(
            log.contains(&format!(
                "reload: `{key}` changed but only takes effect after a restart"
            )),
            "{key}: {log}"
        );
    }
    // `root` comes from the command line here, which a file does not move.
    assert!(!log.contains("`root` changed"), "{log}");
    let r = client().get(d.url("/a.txt")).send().unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(r.headers()["cache-control"], "second");
}

/// The access log file's text once it has `n` lines (5 s at most).
fn wait_lines(log: &std::path::Path, n: usize) -> String {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let t = std::fs::read_to_string(log).unwrap_or_default();
        if t.lines().count() >= n {
            return t;
        }
        assert!(Instant::now() < deadline, "access log not written: {t:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn access_log_combined_and_json() {
    let tree = Tree::new();
    tree.write("a.txt", b"0123456789");
    let log = tree.dir.path().join("access.log");
    let d = Daemon::start(&tree.root, &["--access-log", log.to_str().unwrap()]);
    client()
        .get(d.url("/a.txt"))
        .header("User-Agent", "tester/1")
        .send()
        .unwrap();
    client().get(d.url("/nope")).send().unwrap();
    let text = wait_lines(&log, 2);
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines[0].starts_with("127.0.0.1 - - ["), "{}", lines[0]);
    assert!(
        lines[0].contains("\"GET /a.txt HTTP/1.1\" 200 10 \"-\" \"tester/1\""),
        "{}",
        lines[0]
    );
    assert!(
        lines[1].contains("\"GET /nope HTTP/1.1\" 404"),
        "{}",
        lines[1]
    );
    drop(d);

    let d = Daemon::start(
        &tree.root,
        &["--access-log", "stdout", "--set", "access_log_format=json"],
    );
    client().get(d.url("/a.txt")).send().unwrap();
    let v = d.json_log_line("target", &"/a.txt".into());
    assert_eq!(v["status"], 200);
    assert_eq!(v["target"], "/a.txt");
    assert_eq!(v["bytes"], 10);
    // Which site, over what, by whom, to the millisecond.
    assert_eq!(v["scheme"], "http");
    assert_eq!(v["host"], d.http.to_string());
    assert!(v["user"].is_null());
    let ms = v["time_ms"].as_u64().unwrap();
    assert_eq!(ms / 1000, v["time"].as_u64().unwrap());
    client()
        .get(d.url("/b.txt"))
        .basic_auth("alice", Some("wrong"))
        .header("Host", "Site.Example")
        .send()
        .unwrap();
    let v = d.json_log_line("target", &"/b.txt".into());
    assert_eq!(
        (v["user"].as_str(), v["host"].as_str()),
        (Some("alice"), Some("Site.Example"))
    );
}

/// The combined line names the user a Basic `Authorization` gives (never
/// its password), and vhost_combined starts with the Host, over HTTP/1.1
/// and h2c alike.
#[test]
fn access_log_names_the_user_and_the_host() {
    let tree = Tree::new();
    tree.write("a.txt", b"0123456789");
    let log = tree.dir.path().join("access.log");
    let d = Daemon::start(
        &tree.root,
        &[
            "--access-log",
            log.to_str().unwrap(),
            "--set",
            "access_log_format=vhost_combined",
        ],
    );
    client()
        .get(d.url("/a.txt"))
        .basic_auth("bob", Some("s3cret"))
        .header("Host", "docs.example")
        .send()
        .unwrap();
    let h2c = reqwest::blocking::Client::builder()
        .http2_prior_knowledge()
        .no_proxy()
        .build()
        .unwrap();
    h2c.get(d.url("/a.txt?h2"))
        .basic_auth("carol", None::<&str>)
        .send()
        .unwrap();
    let text = wait_lines(&log, 2);
    let lines: Vec<&str> = text.lines().collect();
    assert!(
        lines[0].starts_with("docs.example 127.0.0.1 - bob ["),
        "{}",
        lines[0]
    );
    assert!(!text.contains("s3cret"), "{text}");
    let h2 = format!("{} 127.0.0.1 - carol [", d.http);
    assert!(lines[1].starts_with(&h2), "{}", lines[1]);
    assert!(
        lines[1].contains("\"GET /a.txt?h2 HTTP/2.0\" 200"),
        "{}",
        lines[1]
    );
}

#[test]
fn access_log_names_the_client_only_behind_trusted_proxies() {
    let tree = Tree::new();
    tree.write("a.txt", b"0123456789");
    let send = |d: &Daemon, path: &str| {
        client()
            .get(d.url(path))
            .header("X-Forwarded-For", "198.51.100.9, 203.0.113.7, 10.1.2.3")
            .send()
            .unwrap();
    };
    let json_log = ["--access-log", "stdout", "--set", "access_log_format=json"];
    let d = Daemon::start(&tree.root, &json_log);
    send(&d, "/a.txt");
    let v = d.json_log_line("target", &"/a.txt".into());
    assert_eq!(
        v["remote"], "127.0.0.1",
        "headers from an untrusted peer count: {v}"
    );
    drop(d);
    let mut args = json_log.to_vec();
    args.extend(["--set", "trusted_proxies=127.0.0.1,10.0.0.0/8"]);
    let d = Daemon::start(&tree.root, &args);
    send(&d, "/a.txt");
    let v = d.json_log_line("target", &"/a.txt".into());
    assert_eq!(v["remote"], "203.0.113.7", "{v}");
    assert_eq!(v["peer"], "127.0.0.1", "{v}");
    let out = Command::new(bin())
        .args(common::base_args(&tree.root))
        .args(["--set", "trusted_proxies=10.0.0.0/40"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("`trusted_proxies`"));
}

#[test]
fn access_log_off_by_default() {
    let tree = Tree::new();
    tree.write("a.txt", b"0123456789");
    let d = Daemon::start(&tree.root, &[]);
    client().get(d.url("/a.txt")).send().unwrap();
    std::thread::sleep(Duration::from_millis(300));
    assert!(d.stdout.lock().unwrap().is_empty());
}

#[test]
fn sd_notify_ready_and_stopping() {
    let tree = Tree::new();
    let sock_path = tree.dir.path().join("notify.sock");
    let sock = std::os::unix::net::UnixDatagram::bind(&sock_path).unwrap();
    sock.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut cmd = Command::new(bin());
    cmd.args(common::base_args(&tree.root))
        .env("NOTIFY_SOCKET", &sock_path);
    let mut d = Daemon::spawn(cmd);
    let mut buf = [0u8; 256];
    let n = sock.recv(&mut buf).unwrap();
    assert_eq!(&buf[..n], b"READY=1");
    d.signal(libc::SIGTERM);
    let n = sock.recv(&mut buf).unwrap();
    assert_eq!(&buf[..n], b"STOPPING=1");
    assert!(d.wait_exit(Duration::from_secs(10)).unwrap().success());
}

#[test]
fn systemd_socket_activation() {
    use std::os::fd::AsRawFd;
    use std::os::unix::process::CommandExt;
    let tree = Tree::new();
    tree.write("a.txt", b"activated");
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let fd = listener.as_raw_fd();
    let mut cmd = Command::new("/bin/sh");
    cmd.arg("-c")
        .arg("export LISTEN_PID=$$ LISTEN_FDS=1; exec \"$0\" \"$@\"")
        .arg(bin())
        .args([
            "--root",
            tree.root.to_str().unwrap(),
            "--admin-listen",
            "127.0.0.1:0",
            "--workers",
            "2",
        ]);
    // SAFETY: only async-signal-safe calls (dup2, fcntl) between fork and exec.
    unsafe {
        cmd.pre_exec(move || {
            if libc::dup2(fd, 3) < 0 {
                return Err(std::io::Error::last_os_error());
            }
            libc::fcntl(3, libc::F_SETFD, 0);
            Ok(())
        });
    }
    let d = Daemon::spawn(cmd);
    assert_eq!(d.http, addr, "the inherited socket is used, not --listen");
    for _ in 0..10 {
        assert_eq!(d.get_text("/a.txt"), "activated");
    }
}

#[test]
fn no_arguments_serves_cwd_on_8080_with_admin_on_8081() {
    // The documented defaults can only be checked when those ports are free
    // on this machine (a benchmark or a developer's daemon may hold them).
    for port in [8080, 8081] {
        if std::net::TcpListener::bind(("127.0.0.1", port)).is_err() {
            eprintln!("SKIP: 127.0.0.1:{port} is in use");
            return;
        }
    }
    let tree = Tree::new();
    tree.write("hello.txt", b"from cwd");
    let mut cmd = Command::new(bin());
    cmd.current_dir(&tree.root);
    for (k, _) in std::env::vars().filter(|(k, _)| k.starts_with("FILESERVER_")) {
        cmd.env_remove(k);
    }
    let d = Daemon::spawn(cmd);
    assert_eq!(d.http, "127.0.0.1:8080".parse().unwrap());
    assert_eq!(d.admin, "127.0.0.1:8081".parse().unwrap());
    assert_eq!(d.start.root, std::fs::canonicalize(&tree.root).unwrap());
    assert_eq!(
        d.start.workers,
        std::thread::available_parallelism().unwrap().get()
    );
    assert_eq!(d.get_text("/hello.txt"), "from cwd");
    assert_eq!(d.healthz(), 200);
}

/// Bodies sent from a descriptor (no copy in memory): small ones are read
/// into the response batch behind their head, larger ones go by sendfile.
/// Pipelined or not, each arrives whole and is logged with its length.
#[test]
fn bodies_sent_from_descriptors_arrive_whole_and_are_logged() {
    let tree = Tree::new();
    let pattern = |n: usize| (0..n).map(|i| (i * 7 % 251) as u8).collect::<Vec<u8>>();
    let small = pattern(10_000);
    let big = pattern(1 << 20);
    tree.write("small.bin", &small);
    tree.write("big.bin", &big);
    let d = Daemon::start(
        &tree.root,
        &[
            "--access-log",
            "stdout",
            "--set",
            "access_log_format=json",
            "--set",
            "cache.small_file_max=0",
        ],
    );
    let reqs = b"GET /small.bin HTTP/1.1\r\nHost: x\r\n\r\n\
GET /big.bin HTTP/1.1\r\nHost: x\r\nRange: bytes=4096-8191\r\n\r\n\
GET /big.bin HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
    let mut c = Client::connect(d.http, Duration::from_secs(10)).unwrap();
    c.send(reqs).unwrap();
    let r: Vec<_> = (0..3).map(|_| c.read_response(false).unwrap()).collect();
    assert!(
        c.expect_closed(Duration::from_secs(10)).unwrap(),
        "still open"
    );
    assert_eq!(r[0].status, 200);
    assert_eq!(r[0].body, small);
    assert_eq!(r[1].status, 206);
    assert_eq!(r[1].body, &big[4096..8192]);
    assert_eq!(r[2].body, big);
    let deadline = Instant::now() + Duration::from_secs(10);
    let logged = loop {
        let lines: Vec<serde_json::Value> = d
            .stdout
            .lock()
            .unwrap()
            .iter()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect();
        if lines.len() >= 3 {
            break lines;
        }
        assert!(Instant::now() < deadline, "access log: {lines:?}");
        std::thread::sleep(Duration::from_millis(20));
    };
    let sent: Vec<(u64, u64)> = logged
        .iter()
        .map(|v| (v["status"].as_u64().unwrap(), v["bytes"].as_u64().unwrap()))
        .collect();
    assert_eq!(sent, [(200, 10_000), (206, 4096), (200, 1 << 20)]);
}

#[test]
fn a_403_for_a_symlink_out_of_the_root_says_why_and_logs_it() {
    let tree = Tree::new();
    std::os::unix::fs::symlink(&tree.canary, tree.root.join("out")).unwrap();
    let d = Daemon::start(&tree.root, &[]);
    // The target's path (the root's own path is in the start line).
    let outside = tree.canary.display().to_string();
    let h2c = reqwest::blocking::Client::builder()
        .http2_prior_knowledge()
        .no_proxy()
        .build()
        .unwrap();
    // The engine of its own and servedir's (h2c) say the same.
    for c in [client(), h2c] {
        let r = c.get(d.url("/out")).send().unwrap();
        assert_eq!(r.status(), 403);
        let body = r.text().unwrap();
        assert!(
            body.contains("a symlink on this path leads outside the served directory"),
            "{body:?}"
        );
        assert!(
            !body.contains(&outside) && !body.contains("secret"),
            "{body}"
        );
    }
    // One log line at the default level, naming the request, not the target.
    assert!(
        d.wait_stderr("403 forbidden", Duration::from_secs(5)),
        "{}",
        d.stderr_text()
    );
    let log = d.stderr_text();
    let line = log.lines().find(|l| l.contains("403 forbidden")).unwrap();
    assert!(line.contains("/out") && line.contains("WARN"), "{line}");
    assert!(!log.contains(&outside) && !log.contains("secret"), "{log}");
}

/// Every metric docs/operations.md lists is on the first scrape of a daemon
/// that has served nothing yet (the TLS ones with a TLS listener only), so
/// a dashboard or an `absent()` alert never reads a quiet daemon as a
/// missing one. The request-duration histogram used to appear only after
/// the first request.
#[test]
fn the_first_scrape_has_every_documented_metric() {
    let doc = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../docs/operations.md"
    ))
    .unwrap();
    let reference = doc
        .split("## Metrics reference")
        .nth(1)
        .expect("a metrics reference");
    let mut documented = Vec::new();
    let mut tls_only = false;
    for line in reference.lines() {
        if line.starts_with("## ") {
            break;
        }
        if let Some(section) = line.strip_prefix("### ") {
            // `### TLS (only with `tls_listen`)`, `### ACME (only with `[acme]`)`.
            tls_only = section.contains("only with");
        }
        if let Some(rest) = line.strip_prefix("| `fileserver_") {
            let name = format!("fileserver_{}", &rest[..rest.find('`').unwrap()]);
            if !tls_only {
                documented.push(name);
            }
        }
    }
    assert!(documented.len() > 30, "{documented:?}");
    let tree = Tree::new();
    let d = Daemon::start(&tree.root, &[]);
    let first = d.metrics();
    let missing: Vec<&String> = documented
        .iter()
        .filter(|name| {
            !first
                .lines()
                .any(|l| !l.starts_with('#') && l.starts_with(name.as_str()))
        })
        .collect();
    assert!(missing.is_empty(), "not on the first scrape: {missing:?}");
}
