//! HTTP/3 with clients independent of the server's stack: aioquic (Python,
//! its own QUIC and HTTP/3; `tests/h3client.py`) and headless Chromium
//! forced onto QUIC. The semantics are checked by asking the same daemon
//! the same questions over HTTP/3 and over HTTPS with HTTP/2, whose
//! answers the `http_semantics` suite checks rule by rule: every answer
//! must be the same (status, every header but `Date`, the body). Then what
//! is HTTP/3's own: `Alt-Svc` on HTTPS, counting and logging, the idle
//! timeout from `[http3]`, and GOAWAY at SIGTERM.

mod common;

use common::tls::TestCa;
use common::{bin, metric_sum, Daemon, Tree};
use serde_json::Value;
use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn pattern(n: usize) -> Vec<u8> {
    (0..n).map(|i| (i * 13 % 251) as u8).collect()
}

fn python() -> PathBuf {
    common::test_python()
}

fn client_script() -> PathBuf {
    common::test_script("h3client.py")
}

struct Fixture {
    tree: Tree,
    ca: TestCa,
    ca_file: PathBuf,
    d: Daemon,
    https: SocketAddr,
}

fn fixture(extra: &[&str]) -> Fixture {
    let tree = Tree::new();
    tree.write("small.txt", b"hello over HTTP/3\n");
    tree.write("large.bin", &pattern(3 << 20));
    tree.write("dir/index.html", b"<h1>dir</h1>");
    tree.write("empty/readme.txt", b"no index");
    tree.write(".hidden", b"dot");
    tree.write("app.js", b"console.log('plain');");
    tree.write("app.js.gz", b"GZ-BYTES");
    tree.write("app.js.br", b"BR-BYTES");
    tree.write("page.html", "<p>compress me</p>\n".repeat(200).as_bytes());
    tree.write("a b.txt", b"space");
    let ca = TestCa::new();
    let ca_file = ca.ca_file();
    let mut args = vec!["--set", "http3.enabled=true", "--browse"];
    args.extend_from_slice(extra);
    let (d, https) = ca.https_daemon(&tree.root, &args);
    Fixture {
        tree,
        ca,
        ca_file,
        d,
        https,
    }
}

/// One request: method, path, headers.
type Ask<'a> = (&'a str, &'a str, Vec<(&'a str, String)>);

impl Fixture {
    /// The requests of `asks` with one `method`, at once on one HTTP/3
    /// connection; one JSON object per answer, in order.
    fn h3(&self, method: &str, asks: &[(&str, Vec<(&str, String)>)]) -> Vec<Value> {
        self.h3_lines(method, asks, &[])[..asks.len()].to_vec()
    }

    /// What h3client printed after the ALPN line: the answers, then what
    /// `extra` asked for (`--goaway-wait`: whether the connection ended).
    fn h3_lines(
        &self,
        method: &str,
        asks: &[(&str, Vec<(&str, String)>)],
        extra: &[&str],
    ) -> Vec<Value> {
        let specs: Vec<String> = asks
            .iter()
            .map(|(path, headers)| {
                let mut spec = path.to_string();
                for (k, v) in headers {
                    spec.push_str(&format!("\t{k}: {v}"));
                }
                spec
            })
            .collect();
        let out = Command::new(python())
            .arg(client_script())
            .args(["--port", &self.https.port().to_string()])
            .arg("--ca")
            .arg(&self.ca_file)
            .args(["--method", method])
            .args(extra)
            .args(&specs)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        let lines: Vec<Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert!(
            out.status.success(),
            "h3client failed: {text}\n{}\ndaemon:\n{}",
            String::from_utf8_lossy(&out.stderr),
            self.d.stderr_text()
        );
        assert_eq!(lines[0]["alpn"], "h3", "{text}");
        lines[1..].to_vec()
    }

    /// The same request over HTTPS with HTTP/2 (reqwest), as h3client
    /// reports an answer.
    fn h2(&self, ask: &Ask<'_>) -> Value {
        let (method, path, headers) = ask;
        let mut rb = self.ca.client(true).request(
            method.parse().unwrap(),
            format!("https://localhost:{}{path}", self.https.port()),
        );
        for (k, v) in headers {
            rb = rb.header(*k, v);
        }
        let r = rb.send().unwrap();
        assert_eq!(r.version(), reqwest::Version::HTTP_2);
        let status = r.status().as_u16();
        let mut h = serde_json::Map::new();
        for (k, v) in r.headers() {
            h.insert(k.to_string(), v.to_str().unwrap().into());
        }
        let body = r.bytes().unwrap();
        serde_json::json!({"status": status, "headers": h, "length": body.len(), "sha256": sha256(&body)})
    }
}

fn sha256(b: &[u8]) -> String {
    ring::digest::digest(&ring::digest::SHA256, b)
        .as_ref()
        .iter()
        .map(|x| format!("{x:02x}"))
        .collect()
}

/// What must match between two answers: status, headers but `Date`'s
/// value (its second may differ; that it is there is checked apart) and
/// HTTP/2's `Alt-Svc`, body; a multipart body's boundary is random, so
/// there only the type before it.
fn comparable(v: &Value) -> Value {
    let mut headers = v["headers"].as_object().unwrap().clone();
    headers.remove("date");
    headers.remove("alt-svc");
    let multipart = headers
        .get("content-type")
        .and_then(Value::as_str)
        .is_some_and(|t| t.starts_with("multipart/byteranges"));
    if multipart {
        headers.insert("content-type".into(), "multipart/byteranges".into());
        headers.remove("content-length");
    }
    serde_json::json!({
        "status": v["status"],
        "headers": headers,
        "length": if multipart { Value::Null } else { v["length"].clone() },
        "sha256": if multipart { Value::Null } else { v["sha256"].clone() },
    })
}

#[test]
fn every_answer_over_http3_equals_the_answer_over_http2() {
    let f = fixture(&[]);
    let etag = f.h2(&("GET", "/small.txt", vec![]))["headers"]["etag"]
        .as_str()
        .unwrap()
        .to_string();
    let h = |pairs: &[(&'static str, &str)]| -> Vec<(&'static str, String)> {
        let mut v: Vec<(&str, String)> = vec![("accept", "*/*".into())];
        v.extend(pairs.iter().map(|(k, x)| (*k, x.to_string())));
        v
    };
    let asks: Vec<Ask<'_>> = vec![
        ("GET", "/small.txt", h(&[])),
        ("HEAD", "/small.txt", h(&[])),
        ("GET", "/large.bin", h(&[])),
        ("HEAD", "/large.bin", h(&[])),
        ("GET", "/large.bin", h(&[("range", "bytes=100-199")])),
        ("GET", "/large.bin", h(&[("range", "bytes=-50")])),
        ("GET", "/large.bin", h(&[("range", "bytes=999999999-")])),
        ("GET", "/large.bin", h(&[("range", "bytes=0-9,20-29")])),
        ("GET", "/small.txt", h(&[("if-none-match", &etag)])),
        ("HEAD", "/small.txt", h(&[("if-none-match", &etag)])),
        ("GET", "/small.txt", h(&[("if-none-match", "\"other\"")])),
        (
            "GET",
            "/small.txt",
            h(&[("if-modified-since", "Fri, 01 Jan 2100 00:00:00 GMT")]),
        ),
        ("GET", "/small.txt", h(&[("if-match", "\"nope\"")])),
        (
            "GET",
            "/small.txt",
            h(&[("if-range", "\"nope\""), ("range", "bytes=0-4")]),
        ),
        (
            "GET",
            "/small.txt",
            h(&[("if-range", &etag), ("range", "bytes=0-4")]),
        ),
        ("GET", "/dir", h(&[])),
        ("GET", "/dir/", h(&[])),
        ("GET", "/.hidden", h(&[])),
        ("GET", "/nope", h(&[])),
        ("GET", "/a%20b.txt", h(&[])),
        ("GET", "/app.js", h(&[("accept-encoding", "gzip")])),
        ("GET", "/app.js", h(&[("accept-encoding", "br, gzip")])),
        ("GET", "/page.html", h(&[("accept-encoding", "gzip")])),
        ("GET", "/page.html", h(&[("accept-encoding", "zstd")])),
        ("GET", "/empty/", h(&[])),
        ("GET", "/empty/", h(&[("accept", "application/json")])),
        ("POST", "/small.txt", h(&[])),
        ("OPTIONS", "/small.txt", h(&[])),
        ("DELETE", "/small.txt", h(&[])),
    ];
    // h3client sends one method per connection: group by method.
    let mut checked = 0;
    for method in ["GET", "HEAD", "POST", "OPTIONS", "DELETE"] {
        let same: Vec<&Ask<'_>> = asks.iter().filter(|a| a.0 == method).collect();
        let over_h3 = f.h3(
            method,
            &same
                .iter()
                .map(|(_, p, hs)| (*p, hs.clone()))
                .collect::<Vec<_>>(),
        );
        for (ask, got) in same.iter().zip(over_h3) {
            let want = f.h2(ask);
            assert_eq!(
                comparable(&got),
                comparable(&want),
                "{} {} {:?}: HTTP/3 (left) and HTTP/2 (right) differ",
                ask.0,
                ask.1,
                ask.2
            );
            assert!(!got["reset"].as_bool().unwrap(), "{got}");
            // RFC 9110 6.6.1: an origin server with a clock sends Date,
            // on every version (compared above without its value).
            let date = got["headers"]["date"].as_str().unwrap_or_default();
            assert!(
                date.ends_with(" GMT") && date.len() == 29,
                "no Date over HTTP/3: {got}"
            );
            checked += 1;
        }
    }
    assert_eq!(checked, asks.len());
    // The cases said what they mean: spot-check a few answers outright.
    let answers = f.h3(
        "GET",
        &[
            ("/large.bin", vec![("range", "bytes=100-199".into())]),
            ("/small.txt", vec![("if-none-match", etag.clone())]),
            ("/app.js", vec![("accept-encoding", "gzip".into())]),
        ],
    );
    let large = pattern(3 << 20);
    assert_eq!(answers[0]["status"], 206);
    assert_eq!(answers[0]["sha256"], sha256(&large[100..200]));
    assert_eq!(answers[1]["status"], 304);
    assert_eq!(answers[1]["length"], 0);
    assert_eq!(answers[2]["headers"]["content-encoding"], "gzip");
    assert_eq!(answers[2]["text"], "GZ-BYTES");
    // A target that climbs out of the root, sent as it is (reqwest's URL
    // parser would have removed the dot segments): refused as the
    // plaintext engine refuses it.
    let escape = f.h3("GET", &[("/%2e%2e/%2e%2e/etc/passwd", vec![])]);
    assert_eq!(escape[0]["status"], 400, "{}", escape[0]);
    assert!(!escape[0]["text"].as_str().unwrap().contains("root:"));
    let raw = common::raw(
        f.d.http,
        b"GET /%2e%2e/%2e%2e/etc/passwd HTTP/1.1\r\nHost: x\r\n\r\n",
        Duration::from_secs(5),
    );
    assert_eq!(common::status_of(&raw), 400);
}

#[test]
fn http3_is_advertised_counted_and_logged() {
    let f = fixture(&[]);
    let port = f.https.port();
    // Alt-Svc on both HTTPS protocols; not on plain HTTP (browsers use
    // HTTP/3 only for https origins).
    for http2 in [true, false] {
        let r =
            f.ca.client(http2)
                .get(format!("https://localhost:{port}/small.txt"))
                .send()
                .unwrap();
        assert_eq!(
            r.headers()["alt-svc"],
            format!("h3=\":{port}\"; ma=86400").as_str()
        );
    }
    let plain = common::client().get(f.d.url("/small.txt")).send().unwrap();
    assert!(plain.headers().get("alt-svc").is_none());
    assert!(
        f.d.stderr_text()
            .contains(&format!(" http3=127.0.0.1:{port} ")),
        "the start line names the HTTP/3 address: {}",
        f.d.stderr_text()
    );

    let got = f.h3("GET", &[("/large.bin", vec![]), ("/nope", vec![])]);
    assert_eq!(got[0]["sha256"], sha256(&pattern(3 << 20)));
    for (path, status, bytes) in [("/large.bin", 200, 3 << 20), ("/nope", 404, 14)] {
        let line = f.d.json_log_line("target", &serde_json::json!(path));
        assert_eq!(line["version"], "HTTP/3.0", "{line}");
        assert_eq!(line["status"], status, "{line}");
        assert_eq!(line["bytes"], bytes, "{line}");
        assert_eq!(line["completed"], true, "{line}");
        assert_eq!(line["user_agent"], "aioquic-test", "{line}");
    }
    let m = f.d.metrics();
    assert_eq!(
        metric_sum(&m, "fileserver_tls_connections_total", &[("alpn", "h3")]),
        Some(1.0),
        "{m}"
    );
    assert!(
        metric_sum(&m, "fileserver_http_requests_total", &[("code", "404")]).unwrap_or(0.0) >= 1.0,
        "{m}"
    );
}

/// The SPKI pin of the leaf in `cert`, as Chromium's
/// `--ignore-certificate-errors-spki-list` takes it (its QUIC stack
/// ignores `--ignore-certificate-errors`).
fn spki_pin(cert: &std::path::Path) -> String {
    let pem = std::fs::read(cert).unwrap();
    use rustls::pki_types::pem::PemObject;
    let der = rustls::pki_types::CertificateDer::from_pem_slice(&pem).unwrap();
    let (_, parsed) = x509_parser::parse_x509_certificate(der.as_ref()).unwrap();
    let spki = parsed.tbs_certificate.subject_pki.raw;
    base64(ring::digest::digest(&ring::digest::SHA256, spki).as_ref())
}

fn base64(bytes: &[u8]) -> String {
    const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = u32::from(b[0]) << 16 | u32::from(b[1]) << 8 | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(A[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[test]
fn chromium_loads_a_page_and_its_assets_over_http3() {
    let f = fixture(&[]);
    f.tree.write(
        "index.html",
        b"<!doctype html><html><head><script src=\"/js/app.js\"></script></head>\
          <body><img src=\"/img/a.png\"><p id=out>not run</p></body></html>",
    );
    f.tree.write(
        "js/app.js",
        b"window.addEventListener('load', () => {\n\
          const nav = performance.getEntriesByType('navigation')[0].nextHopProtocol;\n\
          const res = performance.getEntriesByType('resource').map(r => r.nextHopProtocol);\n\
          const img = document.images[0].naturalWidth;\n\
          document.getElementById('out').textContent = `page=${nav} assets=${res.join(',')} img=${img}`;\n});\n",
    );
    f.tree.write("img/a.png", common::PNG_1X1);
    let port = f.https.port();
    let (dom, stderr) = common::chromium_dom_with(
        &format!("https://localhost:{port}/"),
        &[
            "--enable-quic".into(),
            format!("--origin-to-force-quic-on=localhost:{port}"),
            // localhost may resolve to ::1 first; the listener is 127.0.0.1.
            "--host-resolver-rules=MAP localhost 127.0.0.1".into(),
            format!(
                "--ignore-certificate-errors-spki-list={}",
                spki_pin(&f.ca.cert)
            ),
        ],
    );
    assert!(
        dom.contains("page=h3 assets=h3,h3 img=1"),
        "not all over HTTP/3: {dom}\n{stderr}"
    );
    for path in ["/", "/js/app.js", "/img/a.png"] {
        let line = f.d.json_log_line("target", &serde_json::json!(path));
        assert_eq!(line["version"], "HTTP/3.0", "{line}");
        assert_eq!(line["status"], 200, "{line}");
    }
}

#[test]
fn idle_connections_close_after_the_configured_timeout() {
    let f = fixture(&["--set", "http3.idle_timeout=1s"]);
    let t0 = Instant::now();
    let lines = f.h3_lines("GET", &[("/small.txt", vec![])], &["--goaway-wait", "10"]);
    assert_eq!(lines[0]["status"], 200);
    assert_eq!(lines[1]["terminated"], true, "not closed within 10 s");
    assert!(t0.elapsed() < Duration::from_secs(5), "{:?}", t0.elapsed());
}

#[test]
fn sigterm_sends_goaway_and_the_daemon_exits() {
    let mut f = fixture(&[]);
    // A client that fetches, then keeps its connection open.
    let mut client = Command::new(python())
        .arg(client_script())
        .args(["--port", &f.https.port().to_string()])
        .arg("--ca")
        .arg(&f.ca_file)
        .args(["--goaway-wait", "20", "/small.txt"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(client.stdout.take().unwrap()).lines();
    let _alpn = lines.next().unwrap().unwrap();
    let answer: Value = serde_json::from_str(&lines.next().unwrap().unwrap()).unwrap();
    assert_eq!(answer["status"], 200);
    let t0 = Instant::now();
    f.d.signal(libc::SIGTERM);
    let status = f.d.wait_exit(Duration::from_secs(15)).expect("exited");
    assert!(status.success(), "{status:?}");
    assert!(t0.elapsed() < Duration::from_secs(10), "{:?}", t0.elapsed());
    let end: Value = serde_json::from_str(&lines.next().unwrap().unwrap()).unwrap();
    assert_eq!(end["terminated"], true, "the client saw the connection end");
    let _ = client.wait();
}

#[test]
fn sigterm_lets_an_http3_download_in_flight_finish() {
    let mut f = fixture(&[]);
    // aioquic takes some seconds for this (it reads a few MB/s here):
    // long enough to be in flight at SIGTERM, well within shutdown_timeout.
    let huge = pattern(24 << 20);
    f.tree.write("huge.bin", &huge);
    let client = Command::new(python())
        .arg(client_script())
        .args(["--port", &f.https.port().to_string()])
        .arg("--ca")
        .arg(&f.ca_file)
        .arg("/huge.bin")
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    // Once the response has started (the file is open), stop the daemon.
    let deadline = Instant::now() + Duration::from_secs(10);
    while metric_sum(
        &f.d.metrics(),
        "fileserver_tls_connections_total",
        &[("alpn", "h3")],
    )
    .is_none()
    {
        assert!(Instant::now() < deadline, "no HTTP/3 connection");
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(300));
    let stopped_at = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    f.d.signal(libc::SIGTERM);
    let out = client.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let mut answer: Value = serde_json::from_str(text.lines().nth(1).expect(&text)).unwrap();
    answer["text"] = Value::Null;
    assert_eq!(answer["status"], 200, "{answer}");
    assert_eq!(answer["length"], huge.len(), "{answer}");
    assert_eq!(answer["sha256"], sha256(&huge), "the whole file arrived");
    let finished_at = answer["finished_at"].as_f64().unwrap();
    assert!(
        finished_at > stopped_at,
        "the download ended {:.2} s before SIGTERM: nothing was in flight",
        stopped_at - finished_at
    );
    let line = f.d.json_log_line("target", &serde_json::json!("/huge.bin"));
    assert_eq!(
        (&line["completed"], &line["version"]),
        (&true.into(), &"HTTP/3.0".into())
    );
    let status = f.d.wait_exit(Duration::from_secs(30)).expect("exited");
    assert!(status.success(), "{status:?}");
    assert!(
        f.d.stderr_text().contains("shutting down"),
        "the drain began while the download ran: {}",
        f.d.stderr_text()
    );
}

#[test]
fn check_config_says_http3_needs_tls_listen() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("c.toml");
    std::fs::write(&path, "[http3]\nenabled = true\n").unwrap();
    let out = Command::new(bin())
        .arg("check-config")
        .arg(&path)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let e = String::from_utf8_lossy(&out.stderr);
    assert!(e.contains("key `http3.enabled`: needs tls_listen"), "{e}");
    std::fs::write(&path, "[http3]\nidle_timeout = \"0s\"\n").unwrap();
    let out = Command::new(bin())
        .arg("check-config")
        .arg(&path)
        .output()
        .unwrap();
    let e = String::from_utf8_lossy(&out.stderr);
    assert!(e.contains("key `http3.idle_timeout`"), "{e}");
}

/// `max_connections_per_client` holds for QUIC too: a client's second
/// connection is refused before its handshake while the first is open
/// (its streams do not count), and is taken once the first has closed.
#[test]
fn a_clients_quic_connections_over_its_share_are_refused() {
    use std::io::BufRead;
    let f = fixture(&["--max-connections-per-client", "1"]);
    let client = |extra: &[&str]| {
        let mut c = Command::new(python());
        c.arg(client_script())
            .args(["--port", &f.https.port().to_string()])
            .arg("--ca")
            .arg(&f.ca_file)
            .args(extra)
            .args(["/small.txt", "/small.txt", "/small.txt"])
            .stdin(Stdio::null())
            .stdout(Stdio::piped());
        c
    };
    let mut first = client(&["--goaway-wait", "3"]).spawn().unwrap();
    let mut lines = std::io::BufReader::new(first.stdout.take().unwrap()).lines();
    // Its three answers, on one connection: it is open now.
    for _ in 0..4 {
        let line = lines.next().unwrap().unwrap();
        assert!(!line.contains("error"), "{line}");
    }
    let second = client(&[]).output().unwrap();
    let text = String::from_utf8_lossy(&second.stdout);
    assert!(
        !second.status.success(),
        "a second connection was served: {text}"
    );
    let refused = common::metric_sum(
        &f.d.metrics(),
        "fileserver_connections_refused_total",
        &[("reason", "per_client")],
    );
    assert_eq!(refused, Some(1.0));
    assert!(first.wait().unwrap().success());
    // Closed: the place is free again.
    let third = client(&[]).output().unwrap();
    assert!(
        third.status.success(),
        "{}",
        String::from_utf8_lossy(&third.stdout)
    );
}

/// `limit_rate` paces an HTTP/3 body like the TCP engines' (the stream
/// sleeps between slices; QUIC's other streams go on).
#[test]
fn a_paced_http3_download_takes_its_rate() {
    let rate = 2u64 << 20;
    let f = fixture(&["--limit-rate", &rate.to_string()]);
    let t0 = std::time::Instant::now();
    let got = f.h3("GET", &[("/large.bin", vec![]), ("/small.txt", vec![])]);
    let took = t0.elapsed();
    assert_eq!(got[0]["length"], 3 << 20);
    assert_eq!(got[1]["status"], 200);
    // After the first slice (a tenth of a second of the rate), the rest
    // at the rate; the client's start (Python, the handshake) on top.
    let want = Duration::from_secs_f64(((3u64 << 20) - rate / 10) as f64 / rate as f64);
    assert!(
        took >= want.mul_f64(0.9) && took <= want.mul_f64(1.1) + Duration::from_secs(1),
        "{took:?} for 3 MiB, want {want:?}"
    );
}

/// A rule's `rate_limit` holds on HTTP/3 too: past the burst, 429 with
/// `Retry-After`, on that path only.
#[test]
fn a_rate_limit_answers_429_over_http3() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("c.toml");
    std::fs::write(
        &cfg,
        "[[rules]]\npath = \"/small.txt\"\nrate_limit = { rate = \"1/m\", burst = 2 }\n",
    )
    .unwrap();
    let f = fixture(&["--config", cfg.to_str().unwrap()]);
    let asks: Vec<(&str, Vec<(&str, String)>)> = (0..4)
        .map(|_| ("/small.txt", vec![]))
        .chain([("/dir/index.html", vec![])])
        .collect();
    let got = f.h3("GET", &asks);
    let status = |v: &Value| v["status"].as_u64().unwrap();
    let ok = got[..4].iter().filter(|v| status(v) == 200).count();
    let limited: Vec<&Value> = got[..4].iter().filter(|v| status(v) == 429).collect();
    assert_eq!((ok, limited.len()), (2, 2), "{got:?}");
    assert!(
        limited[0]["headers"]["retry-after"].as_str().is_some(),
        "{got:?}"
    );
    assert_eq!(status(&got[4]), 200, "another path is not limited");
}

/// `tls_listen` with two addresses: the start line names both, and each
/// serves HTTPS (curl, HTTP/2) and HTTP/3 (aioquic) alike.
#[test]
fn several_tls_listen_addresses_each_serve_https_and_http3() {
    let tree = Tree::new();
    tree.write("small.txt", b"on every address\n");
    let ca = TestCa::new();
    let ca_file = ca.ca_file();
    let mut args = ca.args();
    let at = args.iter().position(|a| a == "--tls-listen").unwrap();
    args[at + 1] = "127.0.0.1:0,127.0.0.2:0".into();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let mut cmd = Command::new(bin());
    cmd.args(common::base_args(&tree.root))
        .args(&args)
        .args(["--set", "http3.enabled=true"]);
    let d = Daemon::spawn(cmd);
    assert!(d.wait_stderr(" https=127.0.0.1:", Duration::from_secs(5)));
    let text = d.stderr_text();
    let line = text.lines().find(|l| l.starts_with("listening")).unwrap();
    let https = line
        .split(' ')
        .find_map(|kv| kv.strip_prefix("https="))
        .unwrap();
    let addrs: Vec<SocketAddr> = https.split(',').map(|a| a.parse().unwrap()).collect();
    assert_eq!(addrs.len(), 2, "{line}");
    assert!(line.contains(&format!(" http3={https} ")), "{line}");
    for a in &addrs {
        let out = Command::new("curl")
            .args(["-sS", "--http2", "--cacert"])
            .arg(&ca_file)
            .arg("--resolve")
            .arg(format!("localhost:{}:{}", a.port(), a.ip()))
            .arg(format!("https://localhost:{}/small.txt", a.port()))
            .output()
            .unwrap();
        assert_eq!(
            String::from_utf8_lossy(&out.stdout),
            "on every address\n",
            "{a}"
        );
        let h3 = Command::new(python())
            .arg(client_script())
            .args([
                "--host",
                &a.ip().to_string(),
                "--port",
                &a.port().to_string(),
            ])
            .arg("--ca")
            .arg(&ca_file)
            .arg("/small.txt")
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&h3.stdout);
        assert!(text.contains("\"status\": 200"), "{a}: {text}");
    }
}

/// Every engine's answers carry `Date` (RFC 9110 6.6.1), and HTTP/2's and
/// HTTP/3's carry no connection-specific field (RFC 9113 8.2.2, RFC 9114
/// 4.2), whatever the answer: a file, a 404, a 304, a range, a redirect, a
/// listing, a 416. HTTP/1.1 (plain and TLS) through reqwest, h2c through
/// curl, HTTPS HTTP/2 through reqwest, HTTP/3 through aioquic.
#[test]
fn every_engine_dates_its_answers_and_drops_connection_fields() {
    use httpfile::field::CONNECTION_SPECIFIC;
    let f = fixture(&[]);
    let etag = f.h2(&("GET", "/small.txt", vec![]))["headers"]["etag"]
        .as_str()
        .unwrap()
        .to_string();
    let asks: Vec<(&str, Vec<(&str, String)>)> = vec![
        ("/small.txt", vec![]),
        ("/missing.txt", vec![]),
        ("/small.txt", vec![("if-none-match", etag)]),
        ("/large.bin", vec![("range", "bytes=0-9".into())]),
        ("/dir", vec![]),
        ("/empty/", vec![]),
        ("/small.txt", vec![("range", "bytes=999999-".into())]),
    ];
    let h3 = f.h3("GET", &asks);
    let plain = common::client();
    let https_h1 = f.ca.client(false);
    for ((path, headers), h3) in asks.iter().zip(&h3) {
        let what = format!("{path} {headers:?}");
        // HTTP/3.
        let h = h3["headers"].as_object().unwrap();
        assert!(h.contains_key("date"), "HTTP/3 {what}: {h3}");
        for name in CONNECTION_SPECIFIC {
            assert!(!h.contains_key(name), "HTTP/3 {what} carries {name}: {h3}");
        }
        // HTTPS with HTTP/2.
        let h2 = f.h2(&("GET", path, headers.clone()));
        let h = h2["headers"].as_object().unwrap();
        assert!(h.contains_key("date"), "HTTP/2 {what}: {h2}");
        for name in CONNECTION_SPECIFIC {
            assert!(!h.contains_key(name), "HTTP/2 {what} carries {name}: {h2}");
        }
        // HTTP/1.1, plain and over TLS.
        let urls = [
            (&plain, f.d.url(path)),
            (
                &https_h1,
                format!("https://localhost:{}{path}", f.https.port()),
            ),
        ];
        for (client, url) in urls {
            let mut rb = client.get(&url);
            for (k, v) in headers {
                rb = rb.header(*k, v);
            }
            let r = rb.send().unwrap();
            assert!(r.headers().contains_key("date"), "HTTP/1.1 {url} {what}");
        }
        // h2c, on the plain listener.
        let mut curl = Command::new("curl");
        curl.args([
            "-sS",
            "-o",
            "/dev/null",
            "-D",
            "-",
            "--http2-prior-knowledge",
        ]);
        for (k, v) in headers {
            curl.arg("-H").arg(format!("{k}: {v}"));
        }
        let out = curl.arg(f.d.url(path)).output().unwrap();
        let head = String::from_utf8_lossy(&out.stdout).to_lowercase();
        assert!(head.starts_with("http/2 "), "h2c {what}: {head}");
        assert!(head.contains("\ndate: "), "h2c {what}: {head}");
        for name in CONNECTION_SPECIFIC {
            assert!(
                !head.contains(&format!("\n{name}:")),
                "h2c {what} carries {name}: {head}"
            );
        }
    }
}
