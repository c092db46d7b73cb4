//! One client connection: read heads into a reused buffer, answer each
//! request (pipelined responses are batched into one write), send bodies with
//! one writev (cached small files) or sendfile (everything else).
//!
//! ```text
//! rbuf [....consumed....|req2 head|req3 part...]     (start..end = unparsed)
//! wbuf [resp1 head+body|resp2 head]  -> flushed before any read or sendfile
//! ```

use crate::files::{FileExt, FileRef, OpenError, Opened};
use crate::http::conditional::{etag_list_matches, evaluate, Precondition};
use crate::http::date::{fmt_http_date, with_now, HTTP_DATE_LEN};
use crate::http::mime::{accepted_encodings, content_type, is_text};
use crate::http::path::{normalize_path, PathError};
use crate::http::range::{parse_range, ByteRange, RangeOutcome};
use crate::http::request::{parse_request, Method, Request};
use crate::http::response::{header, push_encoded_path, push_u64, reason, status_line};
use crate::state::{Live, Worker};
use crate::stats::MethodLabel;
use rustix::fd::{AsFd, BorrowedFd};
use std::io::{self, IoSlice};
use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, Interest};
use tokio::net::TcpStream;

const STACK_HEADERS: usize = 128;
const WBUF_FLUSH: usize = 64 * 1024;
const ALLOW: &[u8] = b"Allow: GET, HEAD, OPTIONS\r\n";

struct Conn {
    w: Rc<Worker>,
    stream: TcpStream,
    peer: SocketAddr,
    live: Arc<Live>,
    generation: u64,
    wbuf: Vec<u8>,
    path: Vec<u8>,
    alt: String,
    ranges: Vec<ByteRange>,
    parts: Vec<u8>,
    part_ends: Vec<usize>,
    stop_seen: bool,
    progress: Progress,
}

/// Serves one accepted connection until it closes.
pub async fn serve(w: Rc<Worker>, stream: TcpStream, peer: SocketAddr) {
    let (live, generation) = w.shared.live();
    let mut c = Conn {
        w,
        stream,
        peer,
        live,
        generation,
        wbuf: Vec::with_capacity(1024),
        path: Vec::with_capacity(128),
        alt: String::new(),
        ranges: Vec::new(),
        parts: Vec::new(),
        part_ends: Vec::new(),
        stop_seen: false,
        progress: Progress::default(),
    };
    if let Err(e) = c.run().await {
        tracing::debug!(peer = %c.peer, "connection ended: {e}");
    }
}

/// The media type of a response and whether it is text. The cache entry
/// already holds the served file's type (guessed once, when it was loaded);
/// a precompressed sibling (`encoding` set) is typed by the original path.
fn media_type(f: &FileRef, type_path: &str, encoding: Option<&str>) -> (&'static str, bool) {
    if encoding.is_some() {
        return content_type(type_path);
    }
    let mime = f.mime();
    (mime, is_text(mime))
}

/// What the response in progress has put on the wire, for the counters and
/// the access log: its status once the head is written, and the body bytes
/// handed to the kernel (or batched behind the head when more pipelined
/// responses follow). An aborted response is counted with what it sent.
#[derive(Clone, Copy, Default)]
struct Progress {
    status: u16,
    body: u64,
}

fn io_err(kind: io::ErrorKind, msg: &'static str) -> io::Error {
    io::Error::new(kind, msg)
}

impl Conn {
    async fn run(&mut self) -> io::Result<()> {
        let mut rbuf = vec![0u8; self.live.s.limits.max_header_bytes];
        let (mut start, mut end) = (0usize, 0usize);
        let mut served = 0u64;
        let mut head_started: Option<Instant> = None;
        let sleep = tokio::time::sleep(Duration::ZERO);
        tokio::pin!(sleep);
        let mut shutdown = self.w.shutdown.clone();
        loop {
            if start < end {
                let n = self.live.s.limits.max_headers;
                let mut stack;
                let mut heap;
                let headers: &mut [httparse::Header<'_>] = if n <= STACK_HEADERS {
                    stack = [httparse::EMPTY_HEADER; STACK_HEADERS];
                    &mut stack[..n]
                } else {
                    heap = vec![httparse::EMPTY_HEADER; n];
                    &mut heap[..]
                };
                let max_head = rbuf.len();
                match parse_request(&rbuf[start..end], headers, max_head) {
                    Ok(Some(req)) => {
                        head_started = None;
                        let head_len = req.head_len;
                        let pending = end > start + head_len;
                        // A declared body we will not read: close gracefully so
                        // the client sees our answer, not a reset.
                        let req_unread = req.has_body;
                        let keep = self.handle(&req, pending).await?;
                        start += head_len;
                        served += 1;
                        if !keep {
                            self.flush(false).await?;
                            if req_unread {
                                self.linger_close().await;
                            }
                            return Ok(());
                        }
                        if start == end {
                            start = 0;
                            end = 0;
                        }
                        if self.wbuf.len() >= WBUF_FLUSH {
                            self.flush(false).await?;
                        }
                        continue;
                    }
                    Ok(None) => {}
                    Err(e) => {
                        let why = match e {
                            crate::http::request::ParseError::Bad(why) => why,
                            _ => reason(e.status()),
                        };
                        self.reject(e.status(), why).await?;
                        return Ok(());
                    }
                }
            }
            // Need more bytes: answer what is batched first.
            if !self.wbuf.is_empty() {
                self.flush(false).await?;
            }
            if (self.w.stopping.get() || self.stop_seen) && start == end {
                return Ok(());
            }
            if start > 0 {
                rbuf.copy_within(start..end, 0);
                end -= start;
                start = 0;
            }
            let limits = &self.live.s.limits;
            let now = Instant::now();
            let deadline = if end > start {
                *head_started.get_or_insert(now) + limits.header_read_timeout
            } else if served == 0 {
                now + limits.header_read_timeout
            } else {
                now + limits.keepalive_timeout
            };
            sleep.as_mut().reset(deadline.into());
            tokio::select! {
                biased;
                r = self.stream.read(&mut rbuf[end..]) => match r {
                    Ok(0) => return Ok(()),
                    Ok(n) => end += n,
                    Err(e) => return Err(e),
                },
                _ = &mut sleep => {
                    if end > start {
                        self.reject(408, "request head not received in time").await?;
                    }
                    return Ok(());
                },
                _ = shutdown.changed(), if !self.stop_seen => {
                    self.stop_seen = true;
                    if start == end {
                        return Ok(());
                    }
                },
            }
        }
    }

    /// Half-closes and discards what the client still sends (bounded in
    /// bytes and time), so closing with unread input does not turn into a
    /// TCP reset that destroys the response we just sent.
    async fn linger_close(&mut self) {
        use tokio::io::AsyncWriteExt;
        let _ = self.stream.shutdown().await;
        let mut buf = [0u8; 4096];
        let mut drained = 0usize;
        let deadline = tokio::time::Instant::now() + Duration::from_secs(1);
        while drained < 256 * 1024 {
            match tokio::time::timeout_at(deadline, self.stream.read(&mut buf)).await {
                Ok(Ok(n)) if n > 0 => drained += n,
                _ => break,
            }
        }
    }

    fn refresh(&mut self) {
        if self.w.shared.generation() != self.generation {
            let (live, generation) = self.w.shared.live();
            self.live = live;
            self.generation = generation;
        }
    }

    /// Answers a head that was not parsed (400, 408, 431), logs and
    /// counts it, and closes.
    async fn reject(&mut self, code: u16, why: &str) -> io::Result<()> {
        let t0 = Instant::now();
        self.progress = Progress::default();
        self.simple(code, false, false, b"", why)?;
        let sent = self.flush(false).await;
        self.finish(None, sent.is_ok(), t0);
        sent?;
        self.linger_close().await;
        Ok(())
    }

    async fn handle(&mut self, req: &Request<'_>, pending: bool) -> io::Result<bool> {
        let t0 = Instant::now();
        self.refresh();
        let mut keep = req.keep_alive && !req.has_body && !self.w.stopping.get() && !self.stop_seen;
        self.progress = Progress::default();
        let sent = self.respond(req, pending, &mut keep).await;
        self.finish(Some(req), sent.is_ok(), t0);
        sent.map(|()| keep)
    }

    /// Counts and logs the response in progress once its head was written;
    /// `completed` is false when writing it failed (the client went away,
    /// or a send timed out).
    fn finish(&self, req: Option<&Request<'_>>, completed: bool, t0: Instant) {
        let Progress { status, body } = self.progress;
        if status == 0 {
            return;
        }
        let duration = t0.elapsed();
        let method = match req.map(Request::method) {
            Some(Method::Get) => MethodLabel::Get,
            Some(Method::Head) => MethodLabel::Head,
            _ => MethodLabel::Other,
        };
        self.w.stats.record(method, status, body, completed);
        self.w.record_duration(duration);
        if let Some(log) = &self.live.access {
            let peer = self.peer.ip();
            let client = crate::http::forwarded::client_addr(
                peer,
                &self.live.s.trusted_proxies,
                req.and_then(|r| r.forwarded),
                req.and_then(|r| r.x_forwarded_for),
            );
            log.log(&crate::accesslog::Entry {
                client,
                peer,
                time: crate::http::date::now_secs(),
                request: req.map(|r| crate::accesslog::RequestLine {
                    method: r.method_raw,
                    target: r.target,
                    minor_version: r.minor_version,
                }),
                status,
                bytes: body,
                completed,
                referer: req.and_then(|r| r.referer),
                user_agent: req.and_then(|r| r.user_agent),
                duration,
            });
        }
    }

    /// Writes status line, Server and Date.
    fn head_start(&mut self, code: u16) -> u64 {
        self.progress = Progress {
            status: code,
            body: 0,
        };
        self.wbuf.extend_from_slice(status_line(code));
        self.wbuf.extend_from_slice(b"Server: fileserver\r\n");
        with_now(|now, date| {
            self.wbuf.extend_from_slice(b"Date: ");
            self.wbuf.extend_from_slice(date);
            self.wbuf.extend_from_slice(b"\r\n");
            now
        })
    }

    fn head_end(&mut self, keep: bool, minor: u8) {
        if !keep {
            self.wbuf.extend_from_slice(b"Connection: close\r\n");
        } else if minor == 0 {
            self.wbuf.extend_from_slice(b"Connection: keep-alive\r\n");
        }
        self.wbuf.extend_from_slice(b"\r\n");
    }

    /// Buffers a small text response (errors, redirects, OPTIONS). Never
    /// fails; it returns the handlers' result type so they can end with it.
    fn simple(
        &mut self,
        code: u16,
        head: bool,
        keep: bool,
        extra: &[u8],
        detail: &str,
    ) -> io::Result<()> {
        self.head_start(code);
        self.wbuf.extend_from_slice(extra);
        if code == 204 || code == 304 {
            self.head_end(keep, 1);
            return Ok(());
        }
        let r = reason(code);
        let detail = if detail == r { "" } else { detail };
        let body_len = 3
            + 1
            + r.len()
            + if detail.is_empty() {
                0
            } else {
                2 + detail.len()
            }
            + 1;
        self.wbuf
            .extend_from_slice(b"Content-Type: text/plain; charset=utf-8\r\nContent-Length: ");
        push_u64(&mut self.wbuf, body_len as u64);
        self.wbuf.extend_from_slice(b"\r\n");
        self.head_end(keep, 1);
        if head {
            return Ok(());
        }
        push_u64(&mut self.wbuf, u64::from(code));
        self.wbuf.push(b' ');
        self.wbuf.extend_from_slice(r.as_bytes());
        if !detail.is_empty() {
            self.wbuf.extend_from_slice(b": ");
            self.wbuf.extend_from_slice(detail.as_bytes());
        }
        self.wbuf.push(b'\n');
        self.progress.body = body_len as u64;
        Ok(())
    }

    async fn respond(
        &mut self,
        req: &Request<'_>,
        pending: bool,
        keep: &mut bool,
    ) -> io::Result<()> {
        let method = req.method();
        let head = method == Method::Head;
        match method {
            Method::Other => {
                if req.has_body {
                    *keep = false;
                }
                return self.simple(405, false, *keep, ALLOW, "");
            }
            Method::Options => {
                if req.has_body {
                    *keep = false;
                }
                if req.target != b"*" {
                    let mut scratch = std::mem::take(&mut self.path);
                    let bad = normalize_path(req.target, &mut scratch).err();
                    self.path = scratch;
                    if let Some(e) = bad {
                        *keep = false;
                        return self.simple(400, false, false, b"", e.reason());
                    }
                }
                return self.simple(204, false, *keep, ALLOW, "");
            }
            Method::Get | Method::Head => {}
        }
        if req.has_body {
            *keep = false;
            return self.simple(
                400,
                head,
                false,
                b"",
                "request body not allowed on GET/HEAD",
            );
        }
        let mut scratch = std::mem::take(&mut self.path);
        let result = self
            .respond_path(req, pending, keep, head, &mut scratch)
            .await;
        self.path = scratch;
        result
    }

    async fn respond_path(
        &mut self,
        req: &Request<'_>,
        pending: bool,
        keep: &mut bool,
        head: bool,
        scratch: &mut Vec<u8>,
    ) -> io::Result<()> {
        let np = match normalize_path(req.target, scratch) {
            Ok(p) => p,
            Err(e) => {
                *keep = false;
                let e = if e == PathError::Asterisk {
                    PathError::NotOriginForm
                } else {
                    e
                };
                return self.simple(400, head, false, b"", e.reason());
            }
        };
        let serve_dotfiles = self.live.s.serve_dotfiles;
        if np.dotfile && !serve_dotfiles {
            return self.simple(404, head, *keep, b"", "");
        }
        // Rc clone (not the Arc inside): no shared atomic write per request.
        let w = self.w.clone();
        match w.shared.files.open(np.rel).await {
            Ok(Opened::File(f)) => {
                if np.trailing_slash && !np.rel.is_empty() {
                    return self.simple(404, head, *keep, b"", "");
                }
                self.serve_negotiated(req, f, np.rel, pending, *keep, head)
                    .await
            }
            Ok(Opened::IsDir) => {
                if !np.trailing_slash {
                    let mut loc = Vec::with_capacity(np.rel.len() + 16);
                    loc.extend_from_slice(b"Location: /");
                    push_encoded_path(&mut loc, np.rel);
                    loc.push(b'/');
                    if let Some(q) = req.target.iter().position(|&b| b == b'?') {
                        loc.extend_from_slice(&req.target[q..]);
                    }
                    // Deterministic while the directory exists, and with no
                    // validator to revalidate by: fresh for a minute, which
                    // bounds how long a directory replaced by a file misleads.
                    loc.extend_from_slice(b"\r\nCache-Control: max-age=60\r\n");
                    return self.simple(301, head, *keep, &loc, "");
                }
                // Directories are the rare path: holding the Arc here is fine.
                let live = self.live.clone();
                for name in &live.s.index {
                    let mut p = std::mem::take(&mut self.alt);
                    p.clear();
                    if !np.rel.is_empty() {
                        p.push_str(np.rel);
                        p.push('/');
                    }
                    p.push_str(name);
                    let opened = w.shared.files.open(&p).await;
                    let result = match opened {
                        Ok(Opened::File(f)) => Some(
                            self.serve_negotiated(req, f, &p, pending, *keep, head)
                                .await,
                        ),
                        Ok(_) => None,
                        Err(e) => Some(self.open_error(e, head, *keep)),
                    };
                    self.alt = p;
                    if let Some(r) = result {
                        return r;
                    }
                }
                if live.s.directory_listing {
                    return self.listing(req, np.rel, head, *keep, serve_dotfiles).await;
                }
                self.simple(404, head, *keep, b"", "")
            }
            Ok(Opened::NotFound) => self.simple(404, head, *keep, b"", ""),
            Ok(Opened::Forbidden) => self.simple(403, head, *keep, b"", ""),
            Err(e) => self.open_error(e, head, *keep),
        }
    }

    fn open_error(&mut self, e: OpenError, head: bool, keep: bool) -> io::Result<()> {
        match e {
            OpenError::Exhausted => self.simple(
                503,
                head,
                keep,
                b"Retry-After: 1\r\n",
                "out of file descriptors",
            ),
            OpenError::NotFound => self.simple(404, head, keep, b"", ""),
            OpenError::Forbidden => self.simple(403, head, keep, b"", ""),
            OpenError::IsDir => self.simple(404, head, keep, b"", ""),
            OpenError::Io(e) => {
                tracing::warn!("open failed: {e}");
                self.simple(500, head, keep, b"", "")
            }
        }
    }

    /// A directory listing, read off the worker thread by the file layer.
    async fn listing(
        &mut self,
        req: &Request<'_>,
        rel: &str,
        head: bool,
        keep: bool,
        dotfiles: bool,
    ) -> io::Result<()> {
        let opts = filemanager::ListOptions {
            max_entries: self.live.s.listing_max_entries,
            hidden: dotfiles,
        };
        let w = self.w.clone();
        let listing = match w.shared.files.list_dir(rel, opts).await {
            Ok(listing) => listing,
            Err(e) => {
                tracing::debug!("listing {rel}: {e}");
                return self.open_error(e, head, keep);
            }
        };
        let want_json = req.accept.is_some_and(|a| {
            a.windows(16)
                .any(|w| w.eq_ignore_ascii_case(b"application/json"))
        });
        let (body, ct): (String, &[u8]) = if want_json {
            (crate::listing::json(&listing), b"application/json")
        } else {
            (
                crate::listing::html(rel, &listing),
                b"text/html; charset=utf-8",
            )
        };
        let etag = crate::listing::etag(&body);
        let not_modified = req
            .if_none_match
            .is_some_and(|list| etag_list_matches(list, etag.as_bytes(), false));
        if not_modified {
            self.head_start(304);
        } else {
            self.head_start(200);
            header(&mut self.wbuf, b"Content-Type", ct);
            self.wbuf.extend_from_slice(b"Content-Length: ");
            push_u64(&mut self.wbuf, body.len() as u64);
            self.wbuf.extend_from_slice(b"\r\n");
        }
        header(&mut self.wbuf, b"ETag", etag.as_bytes());
        self.wbuf.extend_from_slice(b"Vary: Accept\r\n");
        self.wbuf.extend_from_slice(&self.live.cache_control_line);
        // Names are chosen by whoever writes the tree: no script may run.
        self.wbuf.extend_from_slice(
            b"Content-Security-Policy: default-src 'none'; style-src 'unsafe-inline'\r\n\
              X-Content-Type-Options: nosniff\r\n",
        );
        if listing.truncated {
            self.wbuf.extend_from_slice(b"Listing-Truncated: ");
            push_u64(&mut self.wbuf, listing.entries.len() as u64);
            self.wbuf.extend_from_slice(b"\r\n");
        }
        self.head_end(keep, req.minor_version);
        if !head && !not_modified {
            self.wbuf.extend_from_slice(body.as_bytes());
            self.progress.body = body.len() as u64;
        }
        Ok(())
    }

    /// Picks a precompressed sibling by Accept-Encoding, else the file itself.
    async fn serve_negotiated(
        &mut self,
        req: &Request<'_>,
        f: FileRef,
        rel: &str,
        pending: bool,
        keep: bool,
        head: bool,
    ) -> io::Result<()> {
        // Whether a sibling exists is not known without probing, so every
        // response of a path that may have one says it varies: the same
        // answer with or without Accept-Encoding (caches see one rule).
        let already = [".br", ".zst", ".gz"].iter().any(|e| rel.ends_with(e));
        let vary = self.live.s.precompressed && !already;
        if let Some(ae) = req.accept_encoding.filter(|_| vary) {
            let acc = accepted_encodings(ae);
            let w = self.w.clone();
            let mut sib = String::with_capacity(rel.len() + 4);
            for (ok, ext, enc) in [
                (acc.br, ".br", "br"),
                (acc.zstd, ".zst", "zstd"),
                (acc.gzip, ".gz", "gzip"),
            ] {
                if !ok {
                    continue;
                }
                sib.clear();
                sib.push_str(rel);
                sib.push_str(ext);
                if let Ok(Opened::File(cf)) = w.shared.files.open(&sib).await {
                    drop(f);
                    return self
                        .serve_file(req, &cf, rel, Some(enc), true, pending, keep, head)
                        .await;
                }
            }
        }
        self.serve_file(req, &f, rel, None, vary, pending, keep, head)
            .await
    }

    /// Writes the representation headers shared by 200/206/304/412/416.
    fn validators(&mut self, f: &FileRef, last_modified: u64, encoding: Option<&str>, vary: bool) {
        let mut lm = [0u8; HTTP_DATE_LEN];
        fmt_http_date(last_modified, &mut lm);
        header(&mut self.wbuf, b"Last-Modified", &lm);
        header(&mut self.wbuf, b"ETag", f.etag().as_bytes());
        let cc = &self.live.cache_control_line;
        self.wbuf.extend_from_slice(cc);
        if let Some(enc) = encoding {
            header(&mut self.wbuf, b"Content-Encoding", enc.as_bytes());
        }
        if vary {
            self.wbuf.extend_from_slice(b"Vary: Accept-Encoding\r\n");
        }
    }

    fn content_type_header(&mut self, f: &FileRef, type_path: &str, encoding: Option<&str>) {
        let (mime, text) = media_type(f, type_path, encoding);
        self.wbuf.extend_from_slice(b"Content-Type: ");
        self.wbuf.extend_from_slice(mime.as_bytes());
        if text {
            self.wbuf.extend_from_slice(b"; charset=utf-8");
        }
        self.wbuf.extend_from_slice(b"\r\n");
    }

    #[allow(clippy::too_many_arguments)]
    async fn serve_file(
        &mut self,
        req: &Request<'_>,
        f: &FileRef,
        type_path: &str,
        encoding: Option<&str>,
        vary: bool,
        pending: bool,
        keep: bool,
        head: bool,
    ) -> io::Result<()> {
        let size = f.size();
        let now = crate::http::date::now_secs();
        // Last-Modified is never later than Date (RFC 9110 8.8.2.1).
        let last_modified = f.mtime_secs().min(now);
        let is_get = !head;
        let use_range = match evaluate(req, f.etag().as_bytes(), last_modified, is_get) {
            Precondition::Failed => {
                return self.simple(412, head, keep, b"", "");
            }
            Precondition::NotModified => {
                self.head_start(304);
                self.validators(f, last_modified, encoding, vary);
                self.head_end(keep, req.minor_version);
                return Ok(());
            }
            Precondition::Proceed { use_range } => use_range,
        };
        let outcome = if use_range {
            let max = self.live.s.limits.max_ranges;
            parse_range(req.range.unwrap_or_default(), size, max, &mut self.ranges)
        } else {
            RangeOutcome::Full
        };
        match outcome {
            RangeOutcome::Unsatisfiable => {
                self.head_start(416);
                self.wbuf.extend_from_slice(b"Content-Range: bytes */");
                push_u64(&mut self.wbuf, size);
                self.wbuf.extend_from_slice(b"\r\n");
                self.validators(f, last_modified, encoding, vary);
                self.wbuf.extend_from_slice(b"Content-Length: 0\r\n");
                self.head_end(keep, req.minor_version);
                Ok(())
            }
            RangeOutcome::Full => {
                self.head_start(200);
                self.content_type_header(f, type_path, encoding);
                self.wbuf.extend_from_slice(b"Content-Length: ");
                push_u64(&mut self.wbuf, size);
                self.wbuf.extend_from_slice(b"\r\nAccept-Ranges: bytes\r\n");
                self.validators(f, last_modified, encoding, vary);
                self.head_end(keep, req.minor_version);
                if head {
                    return Ok(());
                }
                self.send_body(f, 0, size, pending).await
            }
            RangeOutcome::Partial if self.ranges.len() == 1 => {
                let r = self.ranges[0];
                self.head_start(206);
                self.content_type_header(f, type_path, encoding);
                self.wbuf.extend_from_slice(b"Content-Range: bytes ");
                push_u64(&mut self.wbuf, r.start);
                self.wbuf.push(b'-');
                push_u64(&mut self.wbuf, r.end - 1);
                self.wbuf.push(b'/');
                push_u64(&mut self.wbuf, size);
                self.wbuf.extend_from_slice(b"\r\nContent-Length: ");
                push_u64(&mut self.wbuf, r.len());
                self.wbuf.extend_from_slice(b"\r\nAccept-Ranges: bytes\r\n");
                self.validators(f, last_modified, encoding, vary);
                self.head_end(keep, req.minor_version);
                self.send_body(f, r.start, r.len(), pending).await
            }
            RangeOutcome::Partial => {
                self.multipart(req, f, type_path, size, last_modified, encoding, vary, keep)
                    .await
            }
        }
    }

    #[allow(clippy::too_many_arguments)]
    async fn multipart(
        &mut self,
        req: &Request<'_>,
        f: &FileRef,
        type_path: &str,
        size: u64,
        last_modified: u64,
        encoding: Option<&str>,
        vary: bool,
        keep: bool,
    ) -> io::Result<()> {
        let boundary = fresh_boundary();
        let boundary = &boundary[..];
        let (mime, text) = media_type(f, type_path, encoding);
        let mut parts = std::mem::take(&mut self.parts);
        let mut ends = std::mem::take(&mut self.part_ends);
        parts.clear();
        ends.clear();
        let mut total = 0u64;
        for r in &self.ranges {
            parts.extend_from_slice(b"\r\n--");
            parts.extend_from_slice(boundary);
            parts.extend_from_slice(b"\r\nContent-Type: ");
            parts.extend_from_slice(mime.as_bytes());
            if text {
                parts.extend_from_slice(b"; charset=utf-8");
            }
            parts.extend_from_slice(b"\r\nContent-Range: bytes ");
            push_u64(&mut parts, r.start);
            parts.push(b'-');
            push_u64(&mut parts, r.end - 1);
            parts.push(b'/');
            push_u64(&mut parts, size);
            parts.extend_from_slice(b"\r\n\r\n");
            ends.push(parts.len());
            total += r.len();
        }
        let closing_start = parts.len();
        parts.extend_from_slice(b"\r\n--");
        parts.extend_from_slice(boundary);
        parts.extend_from_slice(b"--\r\n");
        let body_len = total + parts.len() as u64;
        self.head_start(206);
        self.wbuf
            .extend_from_slice(b"Content-Type: multipart/byteranges; boundary=");
        self.wbuf.extend_from_slice(boundary);
        self.wbuf.extend_from_slice(b"\r\nContent-Length: ");
        push_u64(&mut self.wbuf, body_len);
        self.wbuf.extend_from_slice(b"\r\nAccept-Ranges: bytes\r\n");
        self.validators(f, last_modified, encoding, vary);
        self.head_end(keep, req.minor_version);
        let ranges = std::mem::take(&mut self.ranges);
        let mut prev = 0;
        let mut result = Ok(());
        for (r, &e) in ranges.iter().zip(ends.iter()) {
            self.wbuf.extend_from_slice(&parts[prev..e]);
            self.progress.body += (e - prev) as u64;
            prev = e;
            if let Err(err) = self.send_body(f, r.start, r.len(), true).await {
                result = Err(err);
                break;
            }
        }
        if result.is_ok() {
            self.wbuf.extend_from_slice(&parts[closing_start..]);
            self.progress.body += (parts.len() - closing_start) as u64;
        }
        self.ranges = ranges;
        self.parts = parts;
        self.part_ends = ends;
        result
    }

    /// Sends `len` bytes of `f` from `offset` after what is in `wbuf`.
    /// Cached bytes: copied into `wbuf` when more responses follow, else one
    /// writev of head and body. Otherwise: head with MSG_MORE, then sendfile.
    async fn send_body(
        &mut self,
        f: &FileRef,
        offset: u64,
        len: u64,
        pending: bool,
    ) -> io::Result<()> {
        if len == 0 {
            return Ok(());
        }
        if let Some(bytes) = f.bytes() {
            let end = offset + len;
            if end > bytes.len() as u64 {
                return Err(io_err(
                    io::ErrorKind::UnexpectedEof,
                    "cached bytes shorter than length",
                ));
            }
            let body = &bytes[offset as usize..end as usize];
            if pending {
                self.wbuf.extend_from_slice(body);
                self.progress.body += len;
                return Ok(());
            }
            return self.flush_with(body).await;
        }
        self.flush(true).await?;
        self.sendfile(f.fd(), offset, len).await
    }

    async fn wait_writable(&self) -> io::Result<()> {
        match tokio::time::timeout(self.live.s.limits.send_timeout, self.stream.writable()).await {
            Ok(r) => r,
            Err(_) => Err(io_err(io::ErrorKind::TimedOut, "send timeout")),
        }
    }

    /// Writes all of `wbuf` (with MSG_MORE when a body follows).
    async fn flush(&mut self, more: bool) -> io::Result<()> {
        let mut pos = 0;
        let mut flags = rustix::net::SendFlags::NOSIGNAL;
        if more {
            flags |= rustix::net::SendFlags::MORE;
        }
        while pos < self.wbuf.len() {
            let r = self.stream.try_io(Interest::WRITABLE, || {
                rustix::net::send(&self.stream, &self.wbuf[pos..], flags).map_err(io::Error::from)
            });
            match r {
                Ok(n) => pos += n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => self.wait_writable().await?,
                Err(e) => return Err(e),
            }
        }
        self.wbuf.clear();
        Ok(())
    }

    /// Writes `wbuf` then `body` with writev (one syscall in the common case).
    async fn flush_with(&mut self, body: &[u8]) -> io::Result<()> {
        let (mut a, mut b) = (0usize, 0usize);
        while a < self.wbuf.len() || b < body.len() {
            let r = self.stream.try_io(Interest::WRITABLE, || {
                let iov = [IoSlice::new(&self.wbuf[a..]), IoSlice::new(&body[b..])];
                rustix::io::writev(&self.stream, &iov).map_err(io::Error::from)
            });
            match r {
                Ok(mut n) => {
                    let h = (self.wbuf.len() - a).min(n);
                    a += h;
                    n -= h;
                    b += n;
                    self.progress.body += n as u64;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => self.wait_writable().await?,
                Err(e) => return Err(e),
            }
        }
        self.wbuf.clear();
        Ok(())
    }

    /// sendfile(2) on the non-blocking socket; a file that ends early (it
    /// shrank) is an error, which closes the connection: the client sees a
    /// short body, never one that disagrees with Content-Length silently.
    async fn sendfile(&mut self, file: BorrowedFd<'_>, offset: u64, len: u64) -> io::Result<()> {
        let mut off = offset;
        let end = offset + len;
        while off < end {
            let chunk = (end - off).min(1 << 30) as usize;
            let before = off;
            let r = self.stream.try_io(Interest::WRITABLE, || {
                rustix::fs::sendfile(self.stream.as_fd(), file, Some(&mut off), chunk)
                    .map_err(io::Error::from)
            });
            match r {
                Ok(0) => {
                    return Err(io_err(
                        io::ErrorKind::UnexpectedEof,
                        "file shrank while sending",
                    ))
                }
                Ok(_) => self.progress.body += off - before,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => self.wait_writable().await?,
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }
}

/// A multipart/byteranges boundary for one response: 128 bits from the
/// kernel's generator, so no earlier response (nor anything else a file's
/// author can learn) predicts it, and a file that contains it by chance is
/// a 2^-128 event per position.
fn fresh_boundary() -> [u8; 32] {
    let mut random = [0u8; 16];
    if rustix::rand::getrandom(&mut random, rustix::rand::GetRandomFlags::empty()).is_err() {
        // getrandom(2) (Linux 3.17+) does not fail for 16 bytes; should it,
        // std's per-process random SipHash keys still give an unguessable value.
        use std::hash::BuildHasher;
        for (i, half) in random.chunks_exact_mut(8).enumerate() {
            let h = std::hash::RandomState::new().hash_one((i, Instant::now()));
            half.copy_from_slice(&h.to_le_bytes());
        }
    }
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut out = [0u8; 32];
    for (i, b) in random.iter().enumerate() {
        out[2 * i] = HEX[usize::from(b >> 4)];
        out[2 * i + 1] = HEX[usize::from(b & 0xf)];
    }
    out
}
