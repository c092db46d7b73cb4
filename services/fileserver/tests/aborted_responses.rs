//! Every response that got a status line is logged and counted, with the
//! body bytes actually written: downloads the client abandons midway (what
//! wget killed, aria2c closing a segment or Chromium dropping `Range: 0-`
//! look like on the wire) and requests rejected before they are parsed.

mod common;

use common::{client, metric, Daemon, Tree};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

const BIG: usize = 64 << 20;

fn json_log_daemon(tree: &Tree) -> Daemon {
    Daemon::start(
        &tree.root,
        &["--access-log", "stdout", "--set", "access_log_format=json"],
    )
}

/// Calls `probe` until it returns `Some` (10 s at most; `what` names the wait).
fn poll<T>(what: impl Fn() -> String, mut probe: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(v) = probe() {
            return v;
        }
        assert!(Instant::now() < deadline, "{}", what());
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Polls `/metrics` until `series` reaches `want` (counters are summed at
/// scrape time and durations flushed every 100 ms).
fn wait_metric(d: &Daemon, series: &str, want: f64) -> String {
    poll(
        || format!("{series} never reached {want}:\n{}", d.metrics()),
        || {
            let text = d.metrics();
            (metric(&text, series) == Some(want)).then_some(text)
        },
    )
}

/// Sends `head`, reads about `read` bytes of the answer, then closes with
/// the rest unread (the kernel answers further data with a reset).
fn read_part_and_close(d: &Daemon, head: &str, read: usize) -> usize {
    let mut s = TcpStream::connect(d.http).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(head.as_bytes()).unwrap();
    let mut buf = vec![0u8; 64 * 1024];
    let mut got = 0;
    while got < read {
        match s.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => got += n,
        }
    }
    drop(s);
    got
}

#[test]
fn an_abandoned_download_is_logged_and_counted_with_the_bytes_sent() {
    let tree = Tree::new();
    tree.write("big.bin", &vec![7u8; BIG]);
    tree.write("small.txt", b"0123456789");
    let d = json_log_daemon(&tree);
    let got = read_part_and_close(&d, "GET /big.bin HTTP/1.1\r\nHost: x\r\n\r\n", 1 << 20);
    assert!(got >= 1 << 20, "read {got}");
    let line = d.json_log_line("target", &"/big.bin".into());
    assert_eq!(line["status"], 200, "{line}");
    assert_eq!(line["completed"], false, "{line}");
    let bytes = line["bytes"].as_u64().unwrap();
    assert!(
        bytes > 0 && bytes < BIG as u64,
        "bytes actually written, not the declared length: {line}"
    );
    let text = wait_metric(&d, "fileserver_http_responses_aborted_total", 1.0);
    assert_eq!(
        metric(
            &text,
            "fileserver_http_requests_total{code=\"200\",method=\"GET\"}"
        ),
        Some(1.0)
    );
    assert_eq!(
        metric(&text, "fileserver_http_response_body_bytes_total"),
        Some(bytes as f64),
        "the body counter moves by what the log says was sent"
    );
    wait_metric(&d, "fileserver_http_request_duration_seconds_count", 1.0);

    // A complete response after it: logged as completed, nothing aborted.
    assert_eq!(
        client()
            .get(d.url("/small.txt"))
            .send()
            .unwrap()
            .text()
            .unwrap(),
        "0123456789"
    );
    let line = d.json_log_line("target", &"/small.txt".into());
    assert_eq!(line["completed"], true, "{line}");
    assert_eq!(line["bytes"], 10);
    let text = wait_metric(
        &d,
        "fileserver_http_requests_total{code=\"200\",method=\"GET\"}",
        2.0,
    );
    assert_eq!(
        metric(&text, "fileserver_http_responses_aborted_total"),
        Some(1.0)
    );
}

#[test]
fn an_abandoned_open_ended_range_is_logged_as_206() {
    let tree = Tree::new();
    tree.write("big.bin", &vec![1u8; BIG]);
    let d = json_log_daemon(&tree);
    read_part_and_close(
        &d,
        "GET /big.bin HTTP/1.1\r\nHost: x\r\nRange: bytes=0-\r\n\r\n",
        256 << 10,
    );
    let line = d.json_log_line("target", &"/big.bin".into());
    assert_eq!(line["status"], 206, "{line}");
    assert_eq!(line["completed"], false, "{line}");
    assert!(line["bytes"].as_u64().unwrap() < BIG as u64, "{line}");
    wait_metric(
        &d,
        "fileserver_http_requests_total{code=\"206\",method=\"GET\"}",
        1.0,
    );
    wait_metric(&d, "fileserver_http_responses_aborted_total", 1.0);
}

#[test]
fn a_rejected_request_head_is_logged() {
    let tree = Tree::new();
    let d = json_log_daemon(&tree);
    let resp = common::raw(
        d.http,
        b"GET /x HTTP/1.1\r\nHost: a\r\nContent-Length: 1x\r\n\r\n",
        Duration::from_secs(5),
    );
    assert_eq!(common::status_of(&resp), 400);
    let line = d.json_log_line("status", &400.into());
    assert_eq!(line["completed"], true, "{line}");
    assert!(line["bytes"].as_u64().unwrap() > 0, "{line}");
    // Rejected before its method was known.
    wait_metric(
        &d,
        "fileserver_http_requests_total{code=\"400\",method=\"other\"}",
        1.0,
    );
}

/// A precondition failure sends a short text body like every error: its
/// bytes are counted and logged as sent, whichever path planned it.
#[test]
fn a_412_body_is_counted_as_sent() {
    let tree = Tree::new();
    tree.write("small.txt", b"0123456789");
    let d = json_log_daemon(&tree);
    let r = client()
        .get(d.url("/small.txt"))
        .header("If-Match", "\"not-the-tag\"")
        .send()
        .unwrap();
    assert_eq!(r.status(), 412);
    let body = r.bytes().unwrap();
    assert!(!body.is_empty());
    let line = d.json_log_line("status", &412.into());
    assert_eq!(line["bytes"], body.len(), "{line}");
}
