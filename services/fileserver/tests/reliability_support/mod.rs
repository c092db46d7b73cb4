//! Helpers shared by the `reliability_*` tests (the daemon itself is started
//! with `tests/common`): a raw HTTP/1.1 client that pipelines requests on a
//! keep-alive socket and parses every response properly, a Prometheus text
//! parser, `/proc` readings of the daemon (open fds, RSS), and the one-line
//! summary each test prints.
//!
//! ```text
//! Client { stream, buf[start..end] }   send(many requests) -> read_head()+read_body() per response
//! Metrics { Vec<Series{name, labels, value}> }   sum("x") / get("x", &[("code","200")])
//! ```
#![allow(dead_code)]

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

/// Prints the test's summary line where a CI log shows it: straight to the
/// process's stderr (not through the test harness's captured `eprintln!`),
/// and appended to `$RELIABILITY_SUMMARY_FILE` when that is set.
pub(crate) fn summary(line: &str) {
    let mut err = io::stderr().lock();
    let _ = writeln!(err, "{line}");
    let _ = err.flush();
    if let Some(path) = std::env::var_os("RELIABILITY_SUMMARY_FILE") {
        if let Ok(mut f) = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
        {
            let _ = writeln!(f, "{line}");
        }
    }
}

/// FNV-1a, 64 bit: a content fingerprint that needs no dependency.
pub(crate) fn fnv64(data: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in data {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

/// Deterministic pseudo-random bytes (xorshift64*), so expected file
/// contents can be regenerated instead of stored.
pub(crate) fn pseudo_random_bytes(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed ^ 0x9E37_79B9_7F4A_7C15;
    if x == 0 {
        x = 1;
    }
    let mut out = Vec::with_capacity(len + 8);
    while out.len() < len {
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        out.extend_from_slice(&x.wrapping_mul(0x2545_F491_4F6C_DD1D).to_le_bytes());
    }
    out.truncate(len);
    out
}

// ------------------------------------------------------------------ /proc --

/// Descriptors the process holds now (`/proc/PID/fd`).
pub(crate) fn fd_count(pid: i32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|d| d.count())
        .unwrap_or(0)
}

/// What each open descriptor points to, for diagnostics when counts differ.
pub(crate) fn fd_targets(pid: i32) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|d| {
            d.filter_map(Result::ok)
                .map(|e| {
                    let t = std::fs::read_link(e.path()).map(|p| p.display().to_string());
                    format!(
                        "{}->{}",
                        e.file_name().to_string_lossy(),
                        t.unwrap_or_default()
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

/// Resident set size in KiB (`VmRSS` of `/proc/PID/status`).
pub(crate) fn rss_kb(pid: i32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        })
        .unwrap_or(0)
}

// ---------------------------------------------------------------- metrics --

/// One sample of the Prometheus text exposition.
#[derive(Clone, Debug)]
pub(crate) struct Series {
    /// Metric name.
    pub name: String,
    /// Label pairs in the order rendered.
    pub labels: Vec<(String, String)>,
    /// Sample value.
    pub value: f64,
}

/// A parsed `/metrics` scrape.
#[derive(Clone, Debug, Default)]
pub(crate) struct Metrics {
    /// Every sample line.
    pub series: Vec<Series>,
    /// The text as scraped (for failure messages).
    pub text: String,
}

impl Metrics {
    /// Parses Prometheus text format (comments skipped).
    pub(crate) fn parse(text: &str) -> Metrics {
        let mut series = Vec::new();
        for line in text.lines() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let (name, labels, rest) = match line.find('{') {
                Some(b) => {
                    let Some(e) = line[b..].find('}').map(|e| b + e) else {
                        continue;
                    };
                    let mut labels = Vec::new();
                    for pair in line[b + 1..e].split(',').filter(|p| !p.is_empty()) {
                        if let Some((k, v)) = pair.split_once('=') {
                            labels.push((
                                k.trim().to_string(),
                                v.trim().trim_matches('"').to_string(),
                            ));
                        }
                    }
                    (&line[..b], labels, &line[e + 1..])
                }
                None => match line.split_once(' ') {
                    Some((n, r)) => (n, Vec::new(), r),
                    None => continue,
                },
            };
            let Some(value) = rest
                .split_whitespace()
                .next()
                .and_then(|v| v.parse::<f64>().ok())
            else {
                continue;
            };
            series.push(Series {
                name: name.to_string(),
                labels,
                value,
            });
        }
        Metrics {
            series,
            text: text.to_string(),
        }
    }

    /// Sum over every series of `name` (all label sets); None if absent.
    pub(crate) fn sum(&self, name: &str) -> Option<f64> {
        let mut found = false;
        let mut total = 0.0;
        for s in self.series.iter().filter(|s| s.name == name) {
            found = true;
            total += s.value;
        }
        found.then_some(total)
    }

    /// The sum of the series of `name` carrying all of `labels` (e.g. one
    /// code over every method); None if there is none.
    pub(crate) fn get(&self, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
        let mut matching = self
            .series
            .iter()
            .filter(|s| {
                s.name == name
                    && labels
                        .iter()
                        .all(|(k, v)| s.labels.iter().any(|(sk, sv)| sk == k && sv == v))
            })
            .peekable();
        matching.peek()?;
        Some(matching.map(|s| s.value).sum())
    }

    /// Like [`Metrics::get`] but a missing series is 0 (counters not yet touched).
    pub(crate) fn get0(&self, name: &str, labels: &[(&str, &str)]) -> f64 {
        self.get(name, labels).unwrap_or(0.0)
    }

    /// Like [`Metrics::sum`] but panics with the scrape when the metric is missing.
    pub(crate) fn must(&self, name: &str) -> f64 {
        self.sum(name)
            .unwrap_or_else(|| panic!("metric {name} missing from /metrics:\n{}", self.text))
    }
}

/// Scrapes `/metrics` from the admin listener with a raw request.
pub(crate) fn scrape(admin: SocketAddr) -> Metrics {
    let mut c = Client::connect(admin, Duration::from_secs(10)).expect("connect admin");
    c.send(b"GET /metrics HTTP/1.1\r\nHost: admin\r\nConnection: close\r\n\r\n")
        .expect("send /metrics");
    let r = c.read_response(false).expect("read /metrics");
    assert_eq!(r.status, 200, "/metrics answered {}", r.status);
    Metrics::parse(&String::from_utf8_lossy(&r.body))
}

/// GET on the admin listener; returns the status.
pub(crate) fn admin_status(admin: SocketAddr, path: &str) -> io::Result<u16> {
    let mut c = Client::connect(admin, Duration::from_secs(5))?;
    c.send(format!("GET {path} HTTP/1.1\r\nHost: admin\r\nConnection: close\r\n\r\n").as_bytes())?;
    Ok(c.read_response(false)?.status)
}

// ------------------------------------------------------------- raw client --

/// A parsed response head.
#[derive(Clone, Debug, Default)]
pub(crate) struct Head {
    /// Status code.
    pub status: u16,
    /// Header fields (names lower-cased).
    pub headers: Vec<(String, String)>,
    /// Body bytes that follow, from Content-Length (0 for HEAD/204/304).
    pub body_len: u64,
    /// The server announced `Connection: close`.
    pub close: bool,
}

impl Head {
    /// First value of header `name` (case-insensitive).
    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        let name = name.to_ascii_lowercase();
        self.headers
            .iter()
            .find(|(k, _)| *k == name)
            .map(|(_, v)| v.as_str())
    }
}

/// A complete response.
#[derive(Clone, Debug, Default)]
pub(crate) struct Response {
    /// Status code.
    pub status: u16,
    /// Head.
    pub head: Head,
    /// Body bytes.
    pub body: Vec<u8>,
}

impl Response {
    /// First value of header `name`.
    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.head.header(name)
    }
}

fn invalid(msg: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, msg)
}

/// A blocking HTTP/1.1 client on one socket: requests may be pipelined
/// (send several, then read that many responses in order).
#[derive(Debug)]
pub(crate) struct Client {
    /// The socket.
    pub stream: TcpStream,
    buf: Vec<u8>,
    start: usize,
    end: usize,
}

impl Client {
    /// Connects with read and write timeouts of `timeout` (a hang becomes an error).
    pub(crate) fn connect(addr: SocketAddr, timeout: Duration) -> io::Result<Client> {
        let stream = TcpStream::connect_timeout(&addr, timeout)?;
        Ok(Client::from_stream(stream, timeout))
    }

    /// Wraps a connected socket.
    pub(crate) fn from_stream(stream: TcpStream, timeout: Duration) -> Client {
        let _ = stream.set_read_timeout(Some(timeout));
        let _ = stream.set_write_timeout(Some(timeout));
        let _ = stream.set_nodelay(true);
        Client {
            stream,
            buf: vec![0; 64 * 1024],
            start: 0,
            end: 0,
        }
    }

    /// Writes all of `bytes`.
    pub(crate) fn send(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.stream.write_all(bytes)
    }

    /// Reads more bytes into the buffer; `Ok(0)` at EOF.
    fn fill(&mut self) -> io::Result<usize> {
        if self.start > 0 && self.start == self.end {
            self.start = 0;
            self.end = 0;
        }
        if self.end == self.buf.len() {
            if self.start > 0 {
                self.buf.copy_within(self.start..self.end, 0);
                self.end -= self.start;
                self.start = 0;
            } else {
                let n = self.buf.len();
                self.buf.resize(n * 2, 0);
            }
        }
        loop {
            match self.stream.read(&mut self.buf[self.end..]) {
                Ok(n) => {
                    self.end += n;
                    return Ok(n);
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    return Err(io::Error::new(io::ErrorKind::TimedOut, "read timed out"))
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// Bytes already received and not yet consumed.
    pub(crate) fn buffered(&self) -> usize {
        self.end - self.start
    }

    /// Reads and parses one response head. `head_request`: the request was
    /// HEAD, so no body follows whatever Content-Length says.
    pub(crate) fn read_head(&mut self, head_request: bool) -> io::Result<Head> {
        loop {
            if self.end > self.start {
                let mut hdrs = [httparse::EMPTY_HEADER; 64];
                let mut resp = httparse::Response::new(&mut hdrs);
                match resp.parse(&self.buf[self.start..self.end]) {
                    Ok(httparse::Status::Complete(n)) => {
                        let status = resp.code.unwrap_or(0);
                        let mut head = Head {
                            status,
                            ..Head::default()
                        };
                        let mut cl: Option<u64> = None;
                        for h in resp.headers.iter() {
                            let name = h.name.to_ascii_lowercase();
                            let value = String::from_utf8_lossy(h.value).trim().to_string();
                            match name.as_str() {
                                "content-length" => {
                                    let v: u64 = value.parse().map_err(|_| {
                                        invalid(format!("bad Content-Length {value:?}"))
                                    })?;
                                    if cl.is_some_and(|c| c != v) {
                                        return Err(invalid("two different Content-Length".into()));
                                    }
                                    cl = Some(v);
                                }
                                "transfer-encoding" => {
                                    return Err(invalid(format!(
                                        "unexpected Transfer-Encoding {value:?}"
                                    )))
                                }
                                "connection" if value.eq_ignore_ascii_case("close") => {
                                    head.close = true
                                }
                                _ => {}
                            }
                            head.headers.push((name, value));
                        }
                        let bodyless =
                            head_request || status == 204 || status == 304 || status < 200;
                        head.body_len = if bodyless {
                            0
                        } else {
                            cl.ok_or_else(|| {
                                invalid(format!("status {status} without Content-Length"))
                            })?
                        };
                        self.start += n;
                        return Ok(head);
                    }
                    Ok(httparse::Status::Partial) => {}
                    Err(e) => {
                        let shown = &self.buf[self.start..self.end.min(self.start + 200)];
                        return Err(invalid(format!(
                            "unparsable response head ({e}): {:?}",
                            String::from_utf8_lossy(shown)
                        )));
                    }
                }
            }
            if self.fill()? == 0 {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    if self.end > self.start {
                        "connection closed inside a response head"
                    } else {
                        "connection closed before a response"
                    },
                ));
            }
        }
    }

    /// Reads exactly `len` body bytes, handing them to `sink` in chunks.
    /// Err(UnexpectedEof) when the server closes first.
    pub(crate) fn read_body_with(
        &mut self,
        len: u64,
        mut sink: impl FnMut(&[u8]),
    ) -> io::Result<()> {
        let mut left = len;
        while left > 0 {
            if self.end == self.start && self.fill()? == 0 {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    format!("connection closed with {left} of {len} body bytes missing"),
                ));
            }
            let take = (self.end - self.start).min(usize::try_from(left).unwrap_or(usize::MAX));
            sink(&self.buf[self.start..self.start + take]);
            self.start += take;
            left -= take as u64;
        }
        Ok(())
    }

    /// Reads one whole response.
    pub(crate) fn read_response(&mut self, head_request: bool) -> io::Result<Response> {
        let head = self.read_head(head_request)?;
        let mut body = Vec::with_capacity(usize::try_from(head.body_len.min(1 << 24)).unwrap_or(0));
        self.read_body_with(head.body_len, |c| body.extend_from_slice(c))?;
        Ok(Response {
            status: head.status,
            head,
            body,
        })
    }

    /// Waits up to `timeout` for the server to close the connection.
    /// Ok(true): EOF or reset with no more bytes; Ok(false): still open at
    /// the timeout; Err: unexpected extra bytes arrived.
    pub(crate) fn expect_closed(&mut self, timeout: Duration) -> io::Result<bool> {
        if self.end > self.start {
            return Err(invalid(format!(
                "{} unexpected bytes after the last response: {:?}",
                self.end - self.start,
                String::from_utf8_lossy(&self.buf[self.start..self.end.min(self.start + 200)])
            )));
        }
        let old = self.stream.read_timeout().ok().flatten();
        let _ = self
            .stream
            .set_read_timeout(Some(timeout.max(Duration::from_millis(1))));
        let result = match self.fill() {
            Ok(0) => Ok(true),
            Ok(_) => Err(invalid(format!(
                "unexpected bytes after the last response: {:?}",
                String::from_utf8_lossy(&self.buf[self.start..self.end.min(self.start + 200)])
            ))),
            Err(e) if e.kind() == io::ErrorKind::TimedOut => Ok(false),
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::ConnectionReset
                        | io::ErrorKind::BrokenPipe
                        | io::ErrorKind::ConnectionAborted
                ) =>
            {
                Ok(true)
            }
            Err(e) => Err(e),
        };
        let _ = self.stream.set_read_timeout(old);
        result
    }
}

/// A simple GET request with Host.
pub(crate) fn get(path: &str) -> String {
    format!("GET {path} HTTP/1.1\r\nHost: test\r\n\r\n")
}

/// GET on a fresh connection; the whole response.
pub(crate) fn get_once(addr: SocketAddr, path: &str, timeout: Duration) -> io::Result<Response> {
    let mut c = Client::connect(addr, timeout)?;
    c.send(format!("GET {path} HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n").as_bytes())?;
    c.read_response(false)
}

/// Waits until `cond` holds or `timeout` passes; returns whether it held.
pub(crate) fn wait_until(timeout: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    loop {
        if cond() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The daemon's descriptors by kind.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct FdKinds {
    /// All descriptors.
    pub total: usize,
    /// Regular files beneath the served root (cached entries, open handles).
    pub files: usize,
    /// Sockets (listeners, client and admin connections).
    pub sockets: usize,
    /// Everything else (epoll, eventfd, io_uring, pipes, the root directory).
    pub other: usize,
}

/// Classifies `/proc/PID/fd` against the served `root`.
pub(crate) fn fd_kinds(pid: i32, root: &std::path::Path) -> FdKinds {
    let root = root.canonicalize().unwrap_or_else(|_| root.to_path_buf());
    let prefix = format!("{}/", root.display());
    let mut k = FdKinds::default();
    for t in fd_targets(pid) {
        k.total += 1;
        let target = t.split_once("->").map_or("", |(_, t)| t);
        if target.starts_with(&prefix) {
            k.files += 1;
        } else if target.starts_with("socket:") {
            k.sockets += 1;
        } else {
            k.other += 1;
        }
    }
    k
}

/// Connects to an IPv4 `addr` from a socket whose receive buffer was set to
/// `rcvbuf` bytes BEFORE connecting (so the window stays small and a large
/// response stays in flight while the client does not read).
pub(crate) fn connect_small_rcvbuf(addr: SocketAddr, rcvbuf: i32) -> io::Result<TcpStream> {
    use std::os::fd::{FromRawFd, OwnedFd};
    let SocketAddr::V4(v4) = addr else {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, "IPv4 only"));
    };
    // SAFETY: socket(2) with constant arguments; the result is checked.
    let raw = unsafe { libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0) };
    if raw < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `raw` is a fresh descriptor nobody else owns; OwnedFd closes it.
    let fd = unsafe { OwnedFd::from_raw_fd(raw) };
    // SAFETY: setsockopt on our socket with a pointer to a live c_int and its size.
    let rc = unsafe {
        libc::setsockopt(
            raw,
            libc::SOL_SOCKET,
            libc::SO_RCVBUF,
            (&rcvbuf as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    let sa = libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: v4.port().to_be(),
        sin_addr: libc::in_addr {
            s_addr: u32::from(*v4.ip()).to_be(),
        },
        sin_zero: [0; 8],
    };
    // SAFETY: connect(2) on our socket with a pointer to a live sockaddr_in and its size.
    let rc = unsafe {
        libc::connect(
            raw,
            (&sa as *const libc::sockaddr_in).cast(),
            std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(TcpStream::from(fd))
}
