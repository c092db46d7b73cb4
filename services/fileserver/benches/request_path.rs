//! What the daemon's own stages cost per request, without the socket, the
//! runtime or the file system: parse (httparse), normalize and route the
//! path, the entity-tag, plan (conditionals, ranges) and encode the head,
//! for a 200 of a small cached file, a 304 and a single range.
//!
//! `cargo bench -p fileserver --bench request_path` prints ns per request;
//! `REQPATH_CALLGRIND=<case>:<n>` runs one case n times for
//! `valgrind --tool=callgrind` (`scripts/callgrind-request.sh`), the
//! repeatable figure on a noisy machine.

use fileserver::http::request::parse_request;
use httpfile::encode::{encode_head, Framing};
use httpfile::plan::{self, FileInfo, MediaType, Policy, Route};
use httpfile::{date, path::normalize_path, EntityTag};
use std::hint::black_box;
use std::time::Instant;

const SIZE: u64 = 1024;
const MTIME_NS: i64 = 1_700_000_000_123_456_789;

fn request(case: &str) -> Vec<u8> {
    let etag = EntityTag::of_file(SIZE, MTIME_NS);
    let extra = match case {
        "ok_small" => String::new(),
        "not_modified" => format!("If-None-Match: {}\r\n", etag.as_str()),
        "range" => "Range: bytes=100-199\r\n".to_string(),
        other => panic!("unknown case {other}: ok_small, not_modified, range"),
    };
    // What wrk sends, plus what the case adds.
    format!("GET /static/app.js HTTP/1.1\r\nHost: 127.0.0.1:8080\r\n{extra}\r\n").into_bytes()
}

/// One request through every pure stage; returns the head's length.
fn one(
    req: &[u8],
    path_buf: &mut Vec<u8>,
    ranges: &mut Vec<httpfile::ByteRange>,
    out: &mut Vec<u8>,
) -> usize {
    let mut headers = [httparse::EMPTY_HEADER; 32];
    let Ok(Some(r)) = parse_request(req, &mut headers, 8192) else {
        unreachable!("the case's request parses")
    };
    let policy = Policy {
        cache_control: Some("no-cache"),
        max_ranges: 16,
        dotfiles: false,
    };
    let path = normalize_path(r.target(), path_buf);
    let Route::Serve(_path) = plan::route(&r.head, path, &policy) else {
        unreachable!("the case's path is served")
    };
    let etag = EntityTag::of_file(SIZE, MTIME_NS);
    let info = FileInfo {
        size: SIZE,
        mtime_secs: (MTIME_NS / 1_000_000_000) as u64,
        etag: etag.as_str(),
        media_type: MediaType::of("text/javascript"),
        coding: None,
        vary: true,
    };
    let now = 1_700_000_100;
    let p = plan::file(&r.head, &info, &policy, now, ranges, plan::random_boundary);
    let mut d = [0u8; date::HTTP_DATE_LEN];
    date::fmt_http_date(now, &mut d);
    out.clear();
    let framing = Framing {
        keep_alive: r.keep_alive,
        minor_version: r.minor_version,
    };
    encode_head(&p, framing, &d, out);
    out.len()
}

fn run(case: &str, n: u64) -> u64 {
    let req = request(case);
    let (mut path_buf, mut ranges, mut out) = (
        Vec::with_capacity(128),
        Vec::new(),
        Vec::with_capacity(1024),
    );
    let mut total = 0;
    for _ in 0..n {
        total += one(black_box(&req), &mut path_buf, &mut ranges, &mut out);
    }
    black_box(total) as u64
}

fn main() {
    if let Ok(spec) = std::env::var("REQPATH_CALLGRIND") {
        let (case, n) = spec.split_once(':').expect("REQPATH_CALLGRIND=<case>:<n>");
        run(case, n.parse().expect("a count"));
        return;
    }
    // `cargo bench` passes --bench; a test run (`cargo test --benches`) passes nothing.
    let n = if std::env::args().any(|a| a == "--bench") {
        2_000_000
    } else {
        1000
    };
    for case in ["ok_small", "not_modified", "range"] {
        run(case, n / 10);
        let t = Instant::now();
        run(case, n);
        println!(
            "{case:<13} {:7.1} ns per request",
            t.elapsed().as_nanos() as f64 / n as f64
        );
    }
}
