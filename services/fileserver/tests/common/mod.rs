//! Shared helpers for tests that run the real `fileserver` binary on loopback.
//!
//! Other test files use it with `mod common;`. The daemon prints one start
//! line on stderr:
//!
//! ```text
//! listening http=127.0.0.1:PORT admin=127.0.0.1:PORT workers=N backend=KIND fd_limit=N url=http://127.0.0.1:PORT/ root=/abs/path
//! ```
#![allow(dead_code)]

pub(crate) mod tls;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Path of the daemon binary built by cargo for these tests.
pub(crate) fn bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_fileserver"))
}

/// Parsed start line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct StartLine {
    pub http: SocketAddr,
    /// The HTTPS listener, when `tls_listen` is set.
    pub https: Option<SocketAddr>,
    pub admin: SocketAddr,
    pub workers: usize,
    pub backend: String,
    pub fd_limit: u64,
    /// How many site rules are in force (absent from older builds).
    pub rules: Option<usize>,
    pub root: PathBuf,
}

/// Parses `listening http=.. admin=.. workers=.. backend=.. fd_limit=.. root=..`,
/// or its JSON form (`log_format = "json"`): `{"fields": {"message":
/// "listening", "http": .., ..}}`.
pub(crate) fn parse_start_line(line: &str) -> Option<StartLine> {
    if line.starts_with('{') {
        let v: serde_json::Value = serde_json::from_str(line).ok()?;
        let f = &v["fields"];
        if f["message"] != "listening" {
            return None;
        }
        let addr = |k: &str| f[k].as_str().and_then(|a| a.parse().ok());
        return Some(StartLine {
            http: addr("http")?,
            https: addr("https"),
            admin: addr("admin")?,
            workers: f["workers"].as_u64()? as usize,
            backend: f["backend"].as_str()?.to_string(),
            fd_limit: f["fd_limit"].as_u64()?,
            rules: f["rules"].as_u64().map(|n| n as usize),
            root: PathBuf::from(f["root"].as_str()?),
        });
    }
    let rest = line.trim_end().strip_prefix("listening ")?;
    let (fields, root) = rest.split_once(" root=")?;
    let mut http = None;
    let mut https = None;
    let mut admin = None;
    let mut workers = None;
    let mut backend = None;
    let mut fd_limit = None;
    let mut rules = None;
    for kv in fields.split(' ') {
        let (k, v) = kv.split_once('=')?;
        match k {
            // Several listen addresses: the first, then the others.
            "http" => http = v.split(',').next().and_then(|a| a.parse().ok()),
            "https" => https = v.split(',').next().and_then(|a| a.parse().ok()),
            "admin" => admin = v.parse().ok(),
            "workers" => workers = v.parse().ok(),
            "backend" => backend = Some(v.to_string()),
            "fd_limit" => fd_limit = v.parse().ok(),
            "rules" => rules = v.parse().ok(),
            _ => {}
        }
    }
    Some(StartLine {
        http: http?,
        https,
        admin: admin?,
        workers: workers?,
        backend: backend?,
        fd_limit: fd_limit?,
        rules,
        root: PathBuf::from(root),
    })
}

/// A running daemon; killed (SIGKILL) and reaped on drop.
pub(crate) struct Daemon {
    pub child: Option<Child>,
    pub start: StartLine,
    pub http: SocketAddr,
    pub admin: SocketAddr,
    /// Everything the daemon wrote to stderr so far.
    pub stderr: Arc<Mutex<String>>,
    /// Stdout lines (the access log, with `--access-log stdout`).
    pub stdout: Arc<Mutex<Vec<String>>>,
}

/// Arguments that make a daemon test-friendly: free ports, 2 workers.
pub(crate) fn base_args(root: &Path) -> Vec<String> {
    vec![
        "--root".into(),
        root.display().to_string(),
        "--listen".into(),
        "127.0.0.1:0".into(),
        "--admin-listen".into(),
        "127.0.0.1:0".into(),
        "--workers".into(),
        "2".into(),
    ]
}

/// [`base_args`] with `listen` in place of its TCP address.
#[allow(dead_code)]
pub(crate) fn base_args_listening(root: &Path, listen: &str) -> Vec<String> {
    let mut a = base_args(root);
    let at = a.iter().position(|x| x == "--listen").unwrap();
    a[at + 1] = listen.to_string();
    a
}

/// The Python `scripts/install-deps.sh` puts aioquic and h2 in.
#[allow(dead_code)]
pub(crate) fn test_python() -> PathBuf {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/test-venv/bin/python");
    assert!(
        p.exists(),
        "{} not found: scripts/install-deps.sh installs aioquic into target/test-venv",
        p.display()
    );
    p
}

/// A script beside the tests (`tests/NAME`).
#[allow(dead_code)]
pub(crate) fn test_script(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests")
        .join(name)
}

impl Daemon {
    /// Starts the daemon serving `root` with extra arguments.
    pub(crate) fn start(root: &Path, extra: &[&str]) -> Daemon {
        let mut cmd = Command::new(bin());
        cmd.args(base_args(root)).args(extra);
        Daemon::spawn(cmd)
    }

    /// Starts a prepared command (stdout/stderr are taken over) and waits for the start line.
    pub(crate) fn spawn(mut cmd: Command) -> Daemon {
        cmd.stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .stdin(Stdio::null());
        let mut child = cmd.spawn().expect("spawn fileserver");
        let stdout = child.stdout.take().unwrap();
        let stderr = child.stderr.take().unwrap();
        let err_buf = Arc::new(Mutex::new(String::new()));
        let out_lines = Arc::new(Mutex::new(Vec::new()));
        // The start line comes on stderr, among the log lines.
        let (tx, rx) = mpsc::channel();
        {
            let err_buf = err_buf.clone();
            std::thread::spawn(move || {
                let mut sent = false;
                for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                    if !sent {
                        if let Some(s) = parse_start_line(&line) {
                            let _ = tx.send(s);
                            sent = true;
                        }
                    }
                    let mut b = err_buf.lock().unwrap();
                    b.push_str(&line);
                    b.push('\n');
                }
            });
        }
        {
            let out_lines = out_lines.clone();
            std::thread::spawn(move || {
                for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                    out_lines.lock().unwrap().push(line);
                }
            });
        }
        let start = match rx.recv_timeout(Duration::from_secs(20)) {
            Ok(s) => s,
            Err(_) => {
                let _ = child.kill();
                let _ = child.wait();
                std::thread::sleep(Duration::from_millis(100));
                panic!("no start line; stderr:\n{}", err_buf.lock().unwrap());
            }
        };
        // CI runs the traversal and semantics suites again with
        // FILESERVER_IO_BACKEND=portable: make sure the daemon took it.
        if let Ok(want) = std::env::var("FILESERVER_IO_BACKEND") {
            let asked = cmd.get_args().any(|a| a == "--io-backend");
            assert!(
                asked || want == "auto" || start.backend == want,
                "FILESERVER_IO_BACKEND={want} but the daemon runs {}",
                start.backend
            );
        }
        Daemon {
            http: start.http,
            admin: start.admin,
            start,
            child: Some(child),
            stderr: err_buf,
            stdout: out_lines,
        }
    }

    pub(crate) fn url(&self, path: &str) -> String {
        format!("http://{}{}", self.http, path)
    }

    /// GETs `path` with a fresh client and returns the body as text.
    pub(crate) fn get_text(&self, path: &str) -> String {
        client().get(self.url(path)).send().unwrap().text().unwrap()
    }

    /// Waits (10 s at most) for the JSON access-log line on stdout whose
    /// field `key` equals `value`, and returns it.
    pub(crate) fn json_log_line(&self, key: &str, value: &serde_json::Value) -> serde_json::Value {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let lines = self.stdout.lock().unwrap().clone();
            let found = lines
                .iter()
                .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
                .find(|v| &v[key] == value);
            if let Some(v) = found {
                return v;
            }
            assert!(
                Instant::now() < deadline,
                "no access log line with {key}={value}: {lines:?}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The status `/healthz` answers with.
    pub(crate) fn healthz(&self) -> u16 {
        client()
            .get(self.admin_url("/healthz"))
            .send()
            .unwrap()
            .status()
            .as_u16()
    }

    pub(crate) fn admin_url(&self, path: &str) -> String {
        format!("http://{}{}", self.admin, path)
    }

    pub(crate) fn pid(&self) -> i32 {
        self.child.as_ref().unwrap().id() as i32
    }

    /// Sends a signal (libc::SIGTERM, SIGHUP, ...).
    pub(crate) fn signal(&self, sig: i32) {
        // SAFETY: kill(2) on our own child, not yet reaped, so the pid is ours.
        let rc = unsafe { libc::kill(self.pid(), sig) };
        assert_eq!(rc, 0, "kill: {}", std::io::Error::last_os_error());
    }

    /// SIGHUP, then waits (5 s at most) until the log says the
    /// configuration was reloaded.
    pub(crate) fn reload(&self) {
        self.signal(libc::SIGHUP);
        assert!(
            self.wait_stderr("configuration reloaded", Duration::from_secs(5)),
            "{}",
            self.stderr_text()
        );
    }

    /// Waits up to `timeout` for exit.
    pub(crate) fn wait_exit(&mut self, timeout: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + timeout;
        let child = self.child.as_mut()?;
        loop {
            if let Ok(Some(st)) = child.try_wait() {
                self.child = None;
                return Some(st);
            }
            if Instant::now() > deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// The `/metrics` text.
    pub(crate) fn metrics(&self) -> String {
        reqwest::blocking::get(self.admin_url("/metrics"))
            .unwrap()
            .text()
            .unwrap()
    }

    pub(crate) fn stderr_text(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    /// Waits until stderr contains `needle`.
    pub(crate) fn wait_stderr(&self, needle: &str, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            if self.stderr_text().contains(needle) {
                return true;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        false
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Value of `name{labels}` in Prometheus text: the sum of the samples of
/// `name` that carry at least those labels (a series the daemon splits
/// further, by `site`, is summed over it); None if there is none.
pub(crate) fn metric(text: &str, series: &str) -> Option<f64> {
    let (name, labels) = match series.split_once('{') {
        Some((name, rest)) => (name, rest.trim_end_matches('}')),
        None => (series, ""),
    };
    let pairs: Vec<(&str, &str)> = labels
        .split(',')
        .filter_map(|kv| kv.split_once('='))
        .map(|(k, v)| (k, v.trim_matches('"')))
        .collect();
    metric_sum(text, name, &pairs)
}

/// Sum of the samples of `name` whose labels include every pair of `labels`
/// (e.g. requests with `code="200"` over every `method`); None if none.
pub(crate) fn metric_sum(text: &str, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    let mut found = None;
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        let Some((series, value)) = line.rsplit_once(' ') else {
            continue;
        };
        let (series_name, series_labels) = match series.split_once('{') {
            Some((n, rest)) => (n, rest.trim_end_matches('}')),
            None => (series, ""),
        };
        if series_name != name {
            continue;
        }
        let has = |k: &str, v: &str| {
            series_labels
                .split(',')
                .any(|kv| kv == format!("{k}=\"{v}\""))
        };
        if labels.iter().all(|(k, v)| has(k, v)) {
            if let Ok(v) = value.trim().parse::<f64>() {
                *found.get_or_insert(0.0) += v;
            }
        }
    }
    found
}

/// A blocking HTTP client without redirects, compression or proxies.
/// Headless Chromium's DOM of `url` once its scripts ran (5 s of virtual
/// time; certificates are not checked: the tests' CAs are their own), and
/// what it wrote on stderr.
pub(crate) fn chromium_dom(url: &str) -> (String, String) {
    chromium_dom_with(url, &["--ignore-certificate-errors".into()])
}

/// [`chromium_dom`] with other flags in place of
/// `--ignore-certificate-errors`.
pub(crate) fn chromium_dom_with(url: &str, flags: &[String]) -> (String, String) {
    let profile = tempfile::tempdir().unwrap();
    let out = Command::new("chromium")
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--virtual-time-budget=5000",
            "--dump-dom",
        ])
        .args(flags)
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .arg(url)
        .stdin(Stdio::null())
        .output()
        .expect("chromium (scripts/install-deps.sh installs it)");
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A loopback port free a moment ago, for a server that must be told
/// its port before it starts.
///
/// It is drawn below the kernel's ephemeral range. A port from `bind(0)`
/// lies inside that range, where, between this check and the server's
/// own bind, any test's `bind(0)` listener or outgoing connection may
/// take it (pebble then exits with "address already in use"). Below the
/// range only another `free_port` can, and it draws at random.
pub(crate) fn free_port() -> u16 {
    let (ephemeral_low, _) = ephemeral_port_range();
    let low = 10_000u16;
    if ephemeral_low < low + 1000 {
        // A range widened to start low leaves no room below it.
        return TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
    }
    let span = u64::from(ephemeral_low - low);
    let mut seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64
        ^ (u64::from(std::process::id()) << 32);
    for _ in 0..1000 {
        // xorshift64: any spread will do, the bind below is the check.
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        let port = low + (seed % span) as u16;
        if TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
    panic!("no free loopback port in {low}..{ephemeral_low}");
}

/// The kernel's range for `bind(0)` and outgoing connections
/// (`net.ipv4.ip_local_port_range`), or Linux's default where it cannot
/// be read.
pub(crate) fn ephemeral_port_range() -> (u16, u16) {
    std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|s| {
            let mut it = s.split_whitespace().map(|n| n.parse::<u16>());
            Some((it.next()?.ok()?, it.next()?.ok()?))
        })
        .unwrap_or((32768, 60999))
}

pub(crate) fn client() -> reqwest::blocking::Client {
    reqwest::blocking::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .no_proxy()
        .timeout(Duration::from_secs(20))
        .build()
        .unwrap()
}

/// `body` decoded from `coding` (a `Content-Encoding` value; `""` is
/// identity), with the crates a client would use.
pub(crate) fn decode(coding: &str, body: &[u8]) -> Vec<u8> {
    use std::io::Read;
    let mut out = Vec::new();
    match coding {
        "" => out.extend_from_slice(body),
        "gzip" => {
            flate2::read::GzDecoder::new(body)
                .read_to_end(&mut out)
                .unwrap();
        }
        "br" => brotli::BrotliDecompress(&mut &body[..], &mut out).unwrap(),
        "zstd" => out = zstd::stream::decode_all(body).unwrap(),
        other => panic!("unexpected coding {other}"),
    }
    out
}

/// Minified-looking JavaScript of about `n` bytes: compresses well, and
/// differently for each `seed`.
pub(crate) fn script(n: usize, seed: usize) -> Vec<u8> {
    let mut s = String::with_capacity(n + 64);
    let mut i = 0;
    while s.len() < n {
        s.push_str(&format!(
            "function f{i}_{seed}(a,b){{return a*{}+b.k{};}}",
            i * 7 + seed,
            i % 13
        ));
        i += 1;
    }
    s.into_bytes()
}

/// Sends raw bytes and reads until the server closes (or `timeout`).
pub(crate) fn raw(addr: SocketAddr, req: &[u8], timeout: Duration) -> Vec<u8> {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(timeout)).unwrap();
    s.write_all(req).unwrap();
    read_until_close(&mut s)
}

/// Reads until the peer closes or the stream's read timeout passes.
pub(crate) fn read_until_close(s: &mut impl Read) -> Vec<u8> {
    let mut out = Vec::new();
    let mut buf = [0u8; 65536];
    loop {
        match s.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => out.extend_from_slice(&buf[..n]),
            // A signal (the in-process example server's runtime gets some)
            // is not the end of the response.
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => break,
        }
    }
    out
}

/// Status code of the first response in `resp`.
pub(crate) fn status_of(resp: &[u8]) -> u16 {
    let s = String::from_utf8_lossy(resp);
    s.split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0)
}

/// A temp root with some files and a canary file OUTSIDE the root.
pub(crate) struct Tree {
    pub dir: tempfile::TempDir,
    pub root: PathBuf,
    pub canary: PathBuf,
}

/// Bytes of the canary file; they must never appear in any response.
pub(crate) const CANARY: &[u8] = b"CANARY-6f1e0c-never-serve-me";

impl Tree {
    pub(crate) fn new() -> Tree {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("root");
        std::fs::create_dir(&root).unwrap();
        let canary = dir.path().join("secret.txt");
        std::fs::write(&canary, CANARY).unwrap();
        Tree { dir, root, canary }
    }

    pub(crate) fn write(&self, rel: &str, data: &[u8]) -> PathBuf {
        let p = self.root.join(rel);
        if let Some(parent) = p.parent() {
            std::fs::create_dir_all(parent).unwrap();
        }
        std::fs::write(&p, data).unwrap();
        p
    }
}

impl Default for Tree {
    fn default() -> Self {
        Tree::new()
    }
}

/// A 1x1 PNG (valid: Chromium decodes it).
pub(crate) const PNG_1X1: &[u8] = &[
    0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x48, 0x44, 0x52,
    0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x01, 0x08, 0x06, 0x00, 0x00, 0x00, 0x1f, 0x15, 0xc4,
    0x89, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x44, 0x41, 0x54, 0x78, 0x9c, 0x63, 0xf8, 0xcf, 0xc0, 0xf0,
    0x1f, 0x00, 0x05, 0x00, 0x01, 0xff, 0x89, 0x99, 0x3d, 0x1d, 0x00, 0x00, 0x00, 0x00, 0x49, 0x45,
    0x4e, 0x44, 0xae, 0x42, 0x60, 0x82,
];

/// Runs `fileserver check-config` on `text`; (exit code, stdout, stderr).
pub(crate) fn check_config(text: &str) -> (Option<i32>, String, String) {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("c.toml");
    std::fs::write(&file, text).unwrap();
    let out = Command::new(bin())
        .arg("check-config")
        .arg(&file)
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}
