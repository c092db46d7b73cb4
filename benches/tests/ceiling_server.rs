//! The harness's ceiling server, started as the harness starts it: the
//! tree's bytes from memory and by sendfile, its own ETag's 304, 404 and no
//! way out of the root, and pipelined requests answered in order; and over
//! HTTP/3, driven by h3load as the http3 group drives it.

use std::fs;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::Command;
use std::time::Duration;

use benches::loadtest::http;
use benches::loadtest::loadgen::{h3load_args, H3loadErrors, H3loadSummary};
use benches::loadtest::scenario::Scenario;
use benches::loadtest::servers::{start_ceiling, CEILING};
use benches::loadtest::tls;
use benches::loadtest::tree::{self, LARGE_PATH, LARGE_SIZE, SMALL_SIZE};

#[test]
fn serves_the_tree_with_one_recv_and_send_per_request() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    fs::create_dir_all(root.join("small")).unwrap();
    let (a, b) = (tree::small_path(3), tree::small_path(4));
    for (path, len) in [
        (a.as_str(), SMALL_SIZE),
        (b.as_str(), SMALL_SIZE),
        (LARGE_PATH, LARGE_SIZE),
    ] {
        let file = root.join(path.trim_start_matches('/'));
        fs::write(file, tree::contents(path, len)).unwrap();
    }
    fs::write(dir.path().join("outside.txt"), b"not served").unwrap();
    let bin = std::path::Path::new(env!("CARGO_BIN_EXE_ceiling-server"));
    let server = start_ceiling(bin, &dir.path().join(CEILING), &root, 2, None).unwrap();
    assert_eq!(server.name, CEILING);

    let r = http::get(server.addr, &a, &[]).unwrap();
    assert_eq!(r.status, 200);
    assert_eq!(r.body, tree::contents(&a, SMALL_SIZE));
    let etag = r.header("etag").unwrap().to_string();
    // The 1 MiB file goes by sendfile.
    let r = http::get(server.addr, LARGE_PATH, &[]).unwrap();
    assert_eq!(r.status, 200);
    assert!(r.body == tree::contents(LARGE_PATH, LARGE_SIZE));

    let r = http::get(server.addr, &a, &[("If-None-Match", &etag)]).unwrap();
    assert_eq!((r.status, r.body.len()), (304, 0));
    let r = http::get(server.addr, &a, &[("If-None-Match", "\"other\"")]).unwrap();
    assert_eq!(r.status, 200);

    for path in [
        "/small/missing.bin",
        "/small",
        "/../outside.txt",
        "/small/../../outside.txt",
    ] {
        assert_eq!(
            http::get(server.addr, path, &[]).unwrap().status,
            404,
            "{path}"
        );
    }

    // Two requests in one write, the second closing: both answered in
    // order, then the connection ends.
    let mut conn = TcpStream::connect(server.addr).unwrap();
    conn.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let pipelined = format!(
        "GET {a} HTTP/1.1\r\nHost: x\r\n\r\nGET {b} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    );
    conn.write_all(pipelined.as_bytes()).unwrap();
    let mut raw = Vec::new();
    conn.read_to_end(&mut raw).unwrap();
    let second = raw
        .windows(b"HTTP/1.1 200".len())
        .rposition(|w| w == b"HTTP/1.1 200")
        .unwrap();
    assert!(second > 0, "two responses");
    let first = http::parse_response(&raw[..second]).unwrap();
    assert_eq!(first.body, tree::contents(&a, SMALL_SIZE));
    let last = http::parse_response(&raw[second..]).unwrap();
    assert_eq!(last.body, tree::contents(&b, SMALL_SIZE));
}

#[test]
fn serves_http3_to_h3load_with_the_right_bytes_and_no_way_out() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    let small = tree::write_sample(&root, 10).unwrap();
    fs::write(dir.path().join("outside.txt"), b"not served").unwrap();
    let cert = tls::generate(dir.path()).unwrap();
    let bin = std::path::Path::new(env!("CARGO_BIN_EXE_ceiling-server"));
    let server = start_ceiling(bin, &dir.path().join(CEILING), &root, 2, Some(&cert)).unwrap();

    let small_paths = small.join("\n");
    // (paths, streams per connection, body bytes each; 0: a 404 each)
    let runs = [
        (Scenario::H3Small, small_paths.as_str(), 8, SMALL_SIZE),
        (Scenario::H3Large, LARGE_PATH, 1, LARGE_SIZE),
        (
            Scenario::H3Small,
            "/small/missing.bin\n/../outside.txt",
            2,
            0,
        ),
    ];
    for (i, (scenario, paths, streams, body_len)) in runs.into_iter().enumerate() {
        let list = dir.path().join(format!("{i}.paths"));
        fs::write(&list, paths).unwrap();
        let mut args = h3load_args(scenario, server.addr, 2, streams, 1, &list);
        args.extend(["--requests".to_string(), "200".to_string()]);
        let out = Command::new(env!("CARGO_BIN_EXE_h3load"))
            .args(&args)
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{i}: {stdout}");
        let s: H3loadSummary = serde_json::from_str(&stdout).unwrap();
        assert!(s.requests > 0, "{i}: {s:?}");
        assert_eq!(s.errors, H3loadErrors::default(), "{i}: {s:?}");
        assert_eq!(s.body_bytes, s.requests * body_len as u64, "{i}: {s:?}");
        let answered = if body_len == 0 {
            s.status.client_error
        } else {
            s.status.success
        };
        assert_eq!(answered, s.requests, "{i}: {s:?}");
    }
}
