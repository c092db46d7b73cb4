//! The harness's ceiling server, started as the harness starts it: the
//! tree's bytes from memory and by sendfile, its own ETag's 304, 404 and no
//! way out of the root, and pipelined requests answered in order.

use std::fs;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use benches::loadtest::http;
use benches::loadtest::servers::{start_ceiling, CEILING};
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
    let server = start_ceiling(bin, &dir.path().join(CEILING), &root, 2).unwrap();
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
