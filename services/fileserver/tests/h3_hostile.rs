//! Hostile HTTP/3 clients (`tests/h3attack.py`, raw QUIC and HTTP/3 on
//! aioquic) against a real daemon: each bound of docs/operations.md's
//! "HTTP/2 and HTTP/3 bounds" that HTTP/3 holds by its own code, seen from
//! the client. `H3_HOSTILE_BIN` runs them against another binary.

mod common;
mod reliability_support;

use common::tls::TestCa;
use common::{bin, metric_sum, Daemon, Tree};
use reliability_support::rss_kb;
use serde_json::Value;
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

struct Fixture {
    _tree: Tree,
    ca: TestCa,
    ca_file: PathBuf,
    d: Daemon,
    port: u16,
}

/// A daemon with HTTPS and HTTP/3 on `small.txt` and a 64 MiB file.
fn fixture(extra: &[&str]) -> Fixture {
    let tree = Tree::new();
    tree.write("small.txt", b"small over HTTP/3\n");
    // Sparse: made in no time, read as zeros.
    let big = std::fs::File::create(tree.root.join("big.bin")).unwrap();
    big.set_len(64 << 20).unwrap();
    let ca = TestCa::new();
    let ca_file = ca.ca_file();
    let daemon = std::env::var_os("H3_HOSTILE_BIN").map_or_else(bin, PathBuf::from);
    let mut cmd = Command::new(daemon);
    cmd.args(common::base_args(&tree.root))
        .args(ca.args())
        .args(["--log-level", "warn", "--set", "http3.enabled=true"])
        .args(extra);
    let d = Daemon::spawn(cmd);
    let port = d.start.https.expect("https= in the start line").port();
    Fixture {
        _tree: tree,
        ca,
        ca_file,
        d,
        port,
    }
}

fn python() -> PathBuf {
    common::test_python()
}

fn script(name: &str) -> PathBuf {
    common::test_script(name)
}

impl Fixture {
    /// `h3attack.py CMD --port P --ca CA ARGS...`: one JSON object per
    /// line it prints.
    fn attack(&self, cmd: &str, args: &[&str]) -> Vec<Value> {
        let out = Command::new(python())
            .arg(script("h3attack.py"))
            .args([cmd, "--port", &self.port.to_string(), "--ca"])
            .arg(&self.ca_file)
            .args(args)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "h3attack {cmd} {args:?} failed: {text}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        text.lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    /// `h3attack.py streams` in `mode`: one JSON object per connection.
    fn streams(&self, mode: &str, args: &[&str]) -> Vec<Value> {
        self.attack("streams", &[&["--mode", mode], args].concat())
    }

    /// `h3attack.py wire --case CASE`: how the connection ended, its
    /// streams' resets and the statuses it got.
    fn wire(&self, case: &str) -> Value {
        self.attack("wire", &["--case", case]).remove(0)
    }

    /// One HTTP/3 GET with tests/h3client.py (aioquic): its status.
    fn h3_get(&self, path: &str) -> Option<u64> {
        let out = Command::new(python())
            .arg(script("h3client.py"))
            .args(["--port", &self.port.to_string(), "--ca"])
            .arg(&self.ca_file)
            .arg(path)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        let answer: Value = serde_json::from_str(text.lines().nth(1)?).ok()?;
        answer["status"].as_u64()
    }

    fn counter(&self, name: &str, labels: &[(&str, &str)]) -> f64 {
        metric_sum(&self.d.metrics(), name, labels).unwrap_or(0.0)
    }
}

/// Spoofed-looking Initials, one from each of 600 source ports, against
/// `max_connections = 32`: under load each gets a Retry, so none holds a
/// slot or handshake state, and while they are outstanding an HTTPS client
/// on TCP and an HTTP/3 client are both served. (Before, each Initial took
/// a connection slot for the whole handshake timeout, and slots taken
/// stop the TCP accept loops: TCP clients waited it out.)
#[test]
fn an_initial_flood_from_many_ports_leaves_tcp_and_quic_served() {
    let f = fixture(&[
        "--set",
        "max_connections=32",
        "--set",
        "tls_handshake_timeout=20s",
    ]);
    let mut flood = Command::new(python())
        .arg(script("h3attack.py"))
        .args(["flood", "--port", &f.port.to_string()])
        .args(["--count", "600", "--hold", "6"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(flood.stdout.take().unwrap()).lines();
    let sent: Value = serde_json::from_str(&lines.next().unwrap().unwrap()).unwrap();
    assert_eq!(sent["sent"], 600);
    let t0 = Instant::now();
    let tcp =
        f.ca.client(false)
            .get(format!("https://localhost:{}/small.txt", f.port))
            .timeout(Duration::from_secs(4))
            .send();
    let tcp_took = t0.elapsed();
    let tcp = tcp.map(|r| r.status().as_u16());
    assert!(matches!(tcp, Ok(200)), "TCP during the flood: {tcp:?}");
    assert!(tcp_took < Duration::from_secs(2), "TCP took {tcp_took:?}");
    assert_eq!(f.h3_get("/small.txt"), Some(200), "HTTP/3 during the flood");
    let replies: Value = serde_json::from_str(&lines.next().unwrap().unwrap()).unwrap();
    assert!(flood.wait().unwrap().success());
    let retried = f.counter("fileserver_quic_incoming_total", &[("result", "retry")]);
    let began = f.counter("fileserver_quic_incoming_total", &[("result", "accepted")]);
    eprintln!("flood: {replies}, retried {retried}, handshakes begun {began}");
    // Past a quarter of max_handshakes (256) every unproven address is
    // retried; the client's Initial after its Retry is proven, and begun.
    assert!(
        began <= 64.0 + 2.0,
        "handshakes begun for the flood: {began}"
    );
    assert!(retried >= 600.0 - 64.0, "retried: {retried}");
    assert!(replies["retry"].as_u64().unwrap() >= 600 - 64, "{replies}");
}

/// `address_validation = "always"`: every new address proves itself with
/// a Retry first, and the client is served after it.
#[test]
fn always_validating_addresses_still_serves_clients() {
    let f = fixture(&["--set", "http3.address_validation=always"]);
    // The series are there, at 0, before any event.
    let m = f.d.metrics();
    for (name, label, value) in [
        ("fileserver_quic_incoming_total", "result", "refused"),
        ("fileserver_http3_timer_resets_total", "timer", "send"),
    ] {
        assert_eq!(metric_sum(&m, name, &[(label, value)]), Some(0.0), "{name}");
    }
    assert_eq!(f.h3_get("/small.txt"), Some(200));
    assert_eq!(f.h3_get("/small.txt"), Some(200));
    assert_eq!(
        f.counter("fileserver_quic_incoming_total", &[("result", "retry")]),
        2.0
    );
}

/// Streams whose HEADERS frame never ends are reset with
/// H3_REQUEST_INCOMPLETE at `header_read_timeout`, however many, and the
/// connection goes on serving. (Before, they were held until the client
/// went away.)
#[test]
fn http3_streams_whose_head_never_ends_are_reset_at_the_header_timeout() {
    let f = fixture(&["--set", "header_read_timeout=1s"]);
    let got = f.streams("silent", &["--streams", "40", "--wait", "3.5"]);
    let c = &got[0];
    assert_eq!(c["resets"]["269"], 40, "H3_REQUEST_INCOMPLETE: {c}");
    let first = c["first_reset_s"].as_f64().unwrap();
    assert!((0.9..2.5).contains(&first), "first reset at {first} s");
    assert_eq!(
        f.counter(
            "fileserver_http3_timer_resets_total",
            &[("timer", "header_read")]
        ),
        40.0
    );
    assert_eq!(f.h3_get("/small.txt"), Some(200));
}

/// A request body is never read: once the head is in the server asks the
/// client to stop sending it (STOP_SENDING H3_NO_ERROR) and answers,
/// before the answer is done (here it cannot be: the client opens no
/// window). (Before, the stop came only when the answer was done and its
/// stream dropped.)
#[test]
fn http3_request_bodies_are_stopped_after_the_head() {
    let f = fixture(&[]);
    let got = f.streams(
        "body",
        &[
            "--streams",
            "8",
            "--wait",
            "1.5",
            "--path",
            "/big.bin",
            "--never-read",
        ],
    );
    let c = &got[0];
    assert_eq!(c["stop_sending"], 8, "{c}");
    assert_eq!(c["status"]["200"], 8, "{c}");
}

/// Answers on streams whose window the client never opens are reset with
/// H3_REQUEST_CANCELLED at `send_timeout`, and what the daemon holds for
/// them meanwhile is bounded by the send budgets: 16 connections x 32
/// streams of a 64 MiB file. (Before, nothing ended them and each held a
/// read of the file.)
#[test]
fn http3_answers_a_client_never_reads_are_reset_at_the_send_timeout() {
    let f = fixture(&["--set", "send_timeout=3s"]);
    let pid = f.d.pid();
    let before = rss_kb(pid);
    let peak = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(before));
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let watch = {
        let (peak, done) = (peak.clone(), done.clone());
        std::thread::spawn(move || {
            while !done.load(std::sync::atomic::Ordering::Relaxed) {
                peak.fetch_max(rss_kb(pid), std::sync::atomic::Ordering::Relaxed);
                std::thread::sleep(Duration::from_millis(50));
            }
        })
    };
    let got = f.streams(
        "closed",
        &[
            "--streams",
            "32",
            "--connections",
            "16",
            "--wait",
            "6",
            "--path",
            "/big.bin",
        ],
    );
    done.store(true, std::sync::atomic::Ordering::Relaxed);
    watch.join().unwrap();
    let growth = peak.load(std::sync::atomic::Ordering::Relaxed) - before;
    eprintln!("16 x 32 unread 64 MiB answers: rss before={before} KiB peak=+{growth} KiB");
    // One clock per connection: every answer waiting on the client ends
    // at once, those waiting for the budget too.
    for c in &got {
        assert_eq!(c["resets"]["268"], 32, "H3_REQUEST_CANCELLED: {c}");
        let first = c["first_reset_s"].as_f64().unwrap();
        let last = c["last_reset_s"].as_f64().unwrap();
        assert!(
            2.5 < first && last < 4.5,
            "reset from {first} s to {last} s"
        );
    }
    // The file data read and waiting is within `[http2] send_budget` (16
    // MiB) whatever the number of streams; QUIC holds each stream's window
    // (16 KiB here). Before, each stream held a read (128 KiB): 81 MiB.
    assert!(growth < 32 * 1024, "grew {growth} KiB");
    assert_eq!(
        f.counter("fileserver_http3_timer_resets_total", &[("timer", "send")]),
        512.0
    );
    assert_eq!(f.h3_get("/small.txt"), Some(200));
}

/// Framing and QPACK a client gets wrong (aioquic writing the raw bytes):
/// what RFC 9114 makes the connection's error closes it with the RFC's
/// code; a malformed request resets only its stream; a head over
/// `max_field_section_size` is answered 431 unread; unknown frames and
/// stream types are ignored. After a stream's error the connection still
/// answers a plain GET.
#[test]
fn http3_framing_errors_get_the_rfc_codes_and_spare_the_connection_when_they_may() {
    let f = fixture(&[]);
    let closed = |case: &str, code: u64| {
        let got = f.wire(case);
        assert_eq!(got["closed"], code, "{case}: {got}");
    };
    closed("data-first", 0x105); // H3_FRAME_UNEXPECTED
    closed("control-data", 0x105);
    closed("second-control", 0x103); // H3_STREAM_CREATION_ERROR
    closed("dynamic-ref", 0x200); // QPACK_DECOMPRESSION_FAILED

    let got = f.wire("malformed");
    assert_eq!(got["closed"], Value::Null, "{got}");
    assert_eq!(got["resets"]["270"], 1, "H3_MESSAGE_ERROR: {got}");
    assert_eq!(got["status"]["200"], 1, "{got}");

    let got = f.wire("big-head");
    assert_eq!(got["closed"], Value::Null, "{got}");
    assert_eq!(got["status"]["431"], 1, "{got}");
    assert_eq!(got["status"]["200"], 1, "{got}");

    let got = f.wire("grease");
    assert_eq!(got["closed"], Value::Null, "{got}");
    assert_eq!(got["status"]["200"], 2, "{got}");
}

/// A head too large to read, after a GET on the same connection: its 431
/// is logged without a request line, not with the GET's (the connection
/// reuses request heads; one left unread must still be emptied).
#[test]
fn an_unread_http3_head_is_logged_as_unread_not_as_the_last_request() {
    let f = fixture(&["--access-log", "stdout", "--set", "access_log_format=json"]);
    let got = f.wire("get-then-big-head");
    assert_eq!(got["status"]["431"], 1, "{got}");
    assert_eq!(got["status"]["200"], 2, "{got}");
    let line = f.d.json_log_line("status", &Value::from(431));
    assert_ne!(line["target"], "/small.txt", "{line}");
    assert_ne!(line["method"], "GET", "{line}");
}
