//! One client connection, HTTP/1.1. Each request runs the stages in turn:
//! parse the head (`http::request`), route it (`httpfile::plan::route`),
//! resolve its path (`filemanager::FileManager::resolve`), plan the response
//! (`httpfile::plan`), encode the head (`httpfile::encode`), then write it
//! and send the body: one writev for cached small files, one send of head and
//! body read behind it for small ranges in the page cache, sendfile for the
//! rest. This module decides no HTTP semantics; it reads, writes, and
//! counts. Pipelined responses are batched into one write.
//!
//! ```text
//! rbuf [....consumed....|req2 head|req3 part...]     (start..end = unparsed)
//! wbuf [resp1 head+body|resp2 head]  -> flushed before any read or sendfile
//! ```

use crate::http::request::{parse_request, Method, ParseError, Request};
use crate::state::{ConnContext, Live};
use crate::stats::MethodLabel;
use filemanager::{CachedFile, OpenError, Query, Resolved, ResolvedFile};
use httpfile::date::{with_now, HTTP_DATE_LEN};
use httpfile::encode::{encode_head, Framing};
use httpfile::path::normalize_path;
use httpfile::plan::{self, Body, Plan, Policy, Route};
use httpfile::status::reason;
use httpfile::ByteRange;
use rustix::fd::{AsFd, BorrowedFd};
use servedir::stages;
use std::io::{self, IoSlice};
use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, Interest};
use tokio::net::TcpStream;

const STACK_HEADERS: usize = 128;
const WBUF_FLUSH: usize = 64 * 1024;
/// Ranges up to this size that are in the page cache are read into the
/// batch behind their head and go out in one send, instead of a send of the
/// head, a residency check and a sendfile: two syscalls where there were
/// four, as lighttpd does for small files. Measured together with the
/// one-`statx` revalidation (filemanager), alternated against the build
/// before both on many_files (20000 x 4 KiB, wrk -t1, 5 rounds): 91-95k
/// against 87-92k req/s, 1.04x; wrk's own core bounds that figure.
const COPY_MAX: u64 = 16 * 1024;

struct Conn {
    ctx: Rc<ConnContext>,
    peer: SocketAddr,
    live: Arc<Live>,
    generation: u64,
    stop_seen: bool,
    out: Output,
    /// The normalized path of the request in progress.
    path: Vec<u8>,
    /// Its satisfiable ranges.
    ranges: Vec<ByteRange>,
}

/// The write half: the socket, the batch of pipelined responses, and what
/// the response in progress has sent.
struct Output {
    stream: TcpStream,
    /// Reads the cold ranges sendfile would wait for.
    files: filemanager::FileManager,
    wbuf: Vec<u8>,
    progress: Progress,
    send_timeout: Duration,
}

/// Serves one accepted connection until it closes.
pub async fn serve(ctx: Rc<ConnContext>, stream: TcpStream, peer: SocketAddr) {
    let (live, generation) = ctx.live();
    let send_timeout = live.s.limits.send_timeout;
    let files = ctx.files().manager().clone();
    let mut c = Conn {
        ctx,
        peer,
        live,
        generation,
        stop_seen: false,
        out: Output {
            files,
            stream,
            wbuf: Vec::with_capacity(1024),
            progress: Progress::default(),
            send_timeout,
        },
        path: Vec::with_capacity(128),
        ranges: Vec::new(),
    };
    match c.run().await {
        Ok(Ended::Closed) => {}
        Ok(Ended::H2c(read)) => {
            metrics::counter!("fileserver_h2c_connections_total").increment(1);
            let Conn { ctx, out, .. } = c;
            let h2 = crate::hyperconn::Protocol::Http2;
            crate::hyperconn::serve(ctx, out.stream, read, peer, h2).await;
        }
        Err(e) => tracing::debug!(peer = %c.peer, "connection ended: {e}"),
    }
}

/// How [`Conn::run`] ends: the connection is done, or it opened with the
/// HTTP/2 preface (h2c with prior knowledge, RFC 9113 3.3) and goes to
/// hyper with the bytes read so far.
enum Ended {
    Closed,
    H2c(Vec<u8>),
}

/// What an HTTP/2 client with prior knowledge sends first.
const H2_PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// What the response in progress has put on the wire, for the counters and
/// the access log: its status once the head is written, and the body bytes
/// handed to the kernel (or batched behind the head when more pipelined
/// responses follow). An aborted response is counted with what it sent.
#[derive(Clone, Copy, Default)]
struct Progress {
    status: u16,
    body: u64,
    /// Of `body`, bytes read through the backend because they were cold.
    cold: u64,
}

fn io_err(kind: io::ErrorKind, msg: &'static str) -> io::Error {
    io::Error::new(kind, msg)
}

impl Conn {
    async fn run(&mut self) -> io::Result<Ended> {
        let mut rbuf = vec![0u8; self.live.s.limits.max_header_bytes];
        let (mut start, mut end) = (0usize, 0usize);
        let mut served = 0u64;
        let mut head_started: Option<Instant> = None;
        let sleep = tokio::time::sleep(Duration::ZERO);
        tokio::pin!(sleep);
        let mut shutdown = self.ctx.shutdown.clone();
        let h2c = self.live.s.http2.h2c;
        loop {
            // Only the first bytes of a connection can be the preface; a
            // prefix of it waits for more bytes instead of being parsed.
            let preface = h2c && served == 0 && start == 0 && {
                let n = end.min(H2_PREFACE.len());
                n > 0 && rbuf[..n] == H2_PREFACE[..n]
            };
            if preface && end >= H2_PREFACE.len() {
                rbuf.truncate(end);
                return Ok(Ended::H2c(rbuf));
            }
            if start < end && !preface {
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
                        let req_unread = req.head.has_body;
                        let keep = self.handle(&req, pending).await?;
                        start += head_len;
                        served += 1;
                        if !keep {
                            self.out.flush(false).await?;
                            if req_unread {
                                self.linger_close().await;
                            }
                            return Ok(Ended::Closed);
                        }
                        if start == end {
                            start = 0;
                            end = 0;
                        }
                        if self.out.wbuf.len() >= WBUF_FLUSH {
                            self.out.flush(false).await?;
                        }
                        continue;
                    }
                    Ok(None) => {}
                    Err(e) => {
                        let why = match e {
                            ParseError::Bad(why) => why,
                            _ => reason(e.status()),
                        };
                        self.reject(e.status(), why).await?;
                        return Ok(Ended::Closed);
                    }
                }
            }
            // Need more bytes: answer what is batched first.
            if !self.out.wbuf.is_empty() {
                self.out.flush(false).await?;
            }
            if (self.ctx.stopping.get() || self.stop_seen) && start == end {
                return Ok(Ended::Closed);
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
                r = self.out.stream.read(&mut rbuf[end..]) => match r {
                    Ok(0) => return Ok(Ended::Closed),
                    Ok(n) => end += n,
                    Err(e) => return Err(e),
                },
                _ = &mut sleep => {
                    if end > start {
                        self.reject(408, "request head not received in time").await?;
                    }
                    return Ok(Ended::Closed);
                },
                _ = shutdown.changed(), if !self.stop_seen => {
                    self.stop_seen = true;
                    if start == end {
                        return Ok(Ended::Closed);
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
        let _ = self.out.stream.shutdown().await;
        let mut buf = [0u8; 4096];
        let mut drained = 0usize;
        let deadline = tokio::time::Instant::now() + Duration::from_secs(1);
        while drained < 256 * 1024 {
            match tokio::time::timeout_at(deadline, self.out.stream.read(&mut buf)).await {
                Ok(Ok(n)) if n > 0 => drained += n,
                _ => break,
            }
        }
    }

    fn refresh(&mut self) {
        if self.ctx.generation() != self.generation {
            let (live, generation) = self.ctx.live();
            self.out.send_timeout = live.s.limits.send_timeout;
            self.live = live;
            self.generation = generation;
        }
    }

    /// Answers a head that was not parsed (400, 408, 431), logs and
    /// counts it, and closes.
    async fn reject(&mut self, code: u16, why: &str) -> io::Result<()> {
        let t0 = Instant::now();
        let framing = Framing {
            keep_alive: false,
            minor_version: 1,
        };
        self.out.write_head(&plan::reject(code, why), framing);
        let sent = self.out.flush(false).await;
        self.finish(None, sent.is_ok(), t0);
        sent?;
        self.linger_close().await;
        Ok(())
    }

    async fn handle(&mut self, req: &Request<'_>, pending: bool) -> io::Result<bool> {
        let t0 = Instant::now();
        self.refresh();
        let keep_alive =
            req.keep_alive && !req.head.has_body && !self.ctx.stopping.get() && !self.stop_seen;
        let mut framing = Framing {
            keep_alive,
            minor_version: req.minor_version,
        };
        self.out.progress = Progress::default();
        let sent = self.respond(req, pending, &mut framing).await;
        self.finish(Some(req), sent.is_ok(), t0);
        sent.map(|()| framing.keep_alive)
    }

    /// Counts and logs the response in progress once its head was written;
    /// `completed` is false when writing it failed (the client went away,
    /// or a send timed out).
    fn finish(&self, req: Option<&Request<'_>>, completed: bool, t0: Instant) {
        let Progress { status, body, cold } = self.out.progress;
        if status == 0 {
            return;
        }
        let duration = t0.elapsed();
        let method = match req.map(Request::method) {
            Some(Method::Get) => MethodLabel::Get,
            Some(Method::Head) => MethodLabel::Head,
            _ => MethodLabel::Other,
        };
        self.ctx.stats.record(method, status, body, completed);
        if cold > 0 {
            self.ctx.stats.record_cold(cold);
        }
        self.ctx.record_duration(duration);
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
                time: httpfile::date::now_secs(),
                request: req.map(|r| crate::accesslog::RequestLine {
                    method: r.method_raw,
                    target: r.target(),
                    version: if r.minor_version == 0 {
                        "HTTP/1.0"
                    } else {
                        "HTTP/1.1"
                    },
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

    /// Runs the stages for one request and sends its response.
    async fn respond(
        &mut self,
        req: &Request<'_>,
        pending: bool,
        framing: &mut Framing,
    ) -> io::Result<()> {
        let s = &self.live.s;
        let policy = Policy {
            cache_control: Some(s.cache_control.as_str()).filter(|c| !c.is_empty()),
            max_ranges: s.limits.max_ranges,
            dotfiles: s.serve_dotfiles,
        };
        let path = normalize_path(req.target(), &mut self.path);
        let path = match plan::route(&req.head, path, &policy) {
            Route::Serve(path) => path,
            Route::Respond(plan) => {
                framing.keep_alive &= !plan.close;
                self.out.write_head(&plan, *framing);
                return Ok(());
            }
        };
        let accept = stages::accept_encoding(req.head.accept_encoding);
        let siblings = stages::siblings(&accept);
        let query = Query {
            path: path.rel,
            dir_only: path.trailing_slash,
            siblings: if s.precompressed { &siblings } else { &[] },
            index: &s.index,
            listing: s.directory_listing.then_some(filemanager::ListOptions {
                max_entries: s.listing_max_entries,
                hidden: s.serve_dotfiles,
            }),
        };
        // Rc clone (not the Arc inside): no shared atomic write per request.
        let ctx = self.ctx.clone();
        let method = req.method();
        let plan = match ctx.files().resolve(&query).await {
            Ok(Resolved::File(mut f)) => {
                // Off, or a type it does not compress: no allocation, no
                // await that waits (`applies` is a few string compares).
                if let Some(options) = &s.compression {
                    stages::compress(ctx.files().manager(), &mut f, &req.head, &accept, options)
                        .await;
                }
                return self
                    .out
                    .serve_file(&req.head, &f, &policy, &mut self.ranges, pending, *framing)
                    .await;
            }
            Ok(Resolved::Listing(listing)) => {
                let page = stages::listing_page(&listing, &req.head, path.rel);
                let plan = plan::listing(&req.head, &page, &policy);
                self.out.write_head(&plan, *framing);
                if let Body::Bytes(bytes) = plan.body {
                    self.out.wbuf.extend_from_slice(bytes);
                    self.out.progress.body += bytes.len() as u64;
                }
                return Ok(());
            }
            Ok(Resolved::Directory) => plan::redirect_to_directory(&req.head, "", path.rel),
            Ok(Resolved::NotFound) => plan::error(method, 404, ""),
            Ok(Resolved::Forbidden) | Err(OpenError::Forbidden) => {
                let why = stages::forbidden_reason(ctx.files().manager(), path.rel).await;
                plan::error(method, 403, why)
            }
            Err(e) => open_error(method, e),
        };
        self.out.write_head(&plan, *framing);
        Ok(())
    }
}

/// The plan for a resolve that failed.
fn open_error(method: Method, e: OpenError) -> Plan<'static> {
    match e {
        OpenError::Exhausted => plan::exhausted(method),
        OpenError::NotFound | OpenError::IsDir => plan::error(method, 404, ""),
        OpenError::Forbidden => plan::error(method, 403, ""),
        OpenError::Io(e) => {
            tracing::warn!("open failed: {e}");
            plan::error(method, 500, "")
        }
    }
}

impl Output {
    /// Encodes `plan`'s head (and its message body, if it has one) into the
    /// batch, dated now; from here on the response counts as started.
    fn write_head(&mut self, plan: &Plan<'_>, framing: Framing) {
        with_now(|_, date| self.write_head_dated(plan, framing, date));
    }

    /// [`write_head`](Self::write_head) with the `Date` the plan was made at.
    fn write_head_dated(&mut self, plan: &Plan<'_>, framing: Framing, date: &[u8; HTTP_DATE_LEN]) {
        encode_head(plan, framing, date, &mut self.wbuf);
        let body = match plan.body {
            Body::Message(_) => plan.headers.content_length.unwrap_or(0),
            _ => 0,
        };
        self.progress = Progress {
            status: plan.status,
            body,
            cold: 0,
        };
    }

    /// Plans and sends a resolved file (its variant, if it has one).
    async fn serve_file(
        &mut self,
        req: &httpfile::RequestHead<'_>,
        f: &ResolvedFile,
        policy: &Policy<'_>,
        ranges: &mut Vec<ByteRange>,
        pending: bool,
        framing: Framing,
    ) -> io::Result<()> {
        let etag = stages::entity_tag(f);
        let info = stages::file_info(f, &etag);
        let (now, date) = with_now(|now, date| (now, *date));
        let plan = plan::file(req, &info, policy, now, ranges, plan::random_boundary);
        stages::count_sent(&self.files, f, &plan);
        self.write_head_dated(&plan, framing, &date);
        let bytes = stages::body_bytes(f);
        match plan.body {
            Body::File(range) => self.send_range(&f.file, bytes, range, pending).await,
            Body::Multipart(parts) => {
                for (i, &range) in parts.ranges.iter().enumerate() {
                    let before = self.wbuf.len();
                    parts.write_part_head(i, &mut self.wbuf);
                    self.progress.body += (self.wbuf.len() - before) as u64;
                    self.send_range(&f.file, bytes, range, true).await?;
                }
                let before = self.wbuf.len();
                parts.write_closing(&mut self.wbuf);
                self.progress.body += (self.wbuf.len() - before) as u64;
                Ok(())
            }
            Body::Empty | Body::Message(_) | Body::Bytes(_) => Ok(()),
        }
    }

    /// Sends `range` of `f` after what is in `wbuf`. Bytes in memory (a
    /// variant's, or the cached file's): copied into `wbuf` when more
    /// responses follow, else one writev of head and body. Otherwise: head
    /// with MSG_MORE, then sendfile.
    async fn send_range(
        &mut self,
        f: &CachedFile,
        bytes: Option<&[u8]>,
        range: ByteRange,
        pending: bool,
    ) -> io::Result<()> {
        if range.is_empty() {
            return Ok(());
        }
        if let Some(bytes) = bytes {
            let Some(body) = bytes.get(range.start as usize..range.end as usize) else {
                return Err(io_err(
                    io::ErrorKind::UnexpectedEof,
                    "cached bytes shorter than length",
                ));
            };
            if pending {
                self.wbuf.extend_from_slice(body);
                self.progress.body += range.len();
                return Ok(());
            }
            return self.flush_with(body).await;
        }
        if range.len() <= COPY_MAX {
            let body_from = self.wbuf.len();
            let len = range.len() as usize;
            if filemanager::read_resident(f.as_fd(), range.start, len, &mut self.wbuf) {
                if pending {
                    self.progress.body += range.len();
                    return Ok(());
                }
                return self
                    .write_wbuf(rustix::net::SendFlags::empty(), body_from)
                    .await;
            }
        }
        self.flush(true).await?;
        if filemanager::is_resident(f.as_fd(), range.start, range.len()) {
            return self.sendfile(f.as_fd(), range.start, range.len()).await;
        }
        self.send_cold(f, range).await
    }

    /// Sends a range that is not all in the page cache without letting
    /// sendfile wait for the disk on the worker thread: each window that is
    /// cold is read through the file layer's backend (io_uring; the page
    /// cache fills as it reads) and sent from memory; resident windows
    /// still go by sendfile. The hot path pays one residency check per
    /// response (cachestat and a one-byte RWF_NOWAIT read); binaries with
    /// and without it, alternated (wrk, 2 workers, 3 rounds), showed no
    /// difference beyond the spread: 1 MiB 3.5-6.5k vs 3.2-4.1k req/s,
    /// 4 KiB ranges 123-125k vs 120-127k.
    async fn send_cold(&mut self, f: &CachedFile, range: ByteRange) -> io::Result<()> {
        const WINDOW: u64 = 256 * 1024;
        let mut off = range.start;
        while off < range.end {
            let len = (range.end - off).min(WINDOW);
            if filemanager::is_resident(f.as_fd(), off, len) {
                self.sendfile(f.as_fd(), off, len).await?;
            } else {
                let bytes = self.files.read_at(f, off, len as usize).await?;
                if bytes.len() as u64 != len {
                    return Err(io_err(
                        io::ErrorKind::UnexpectedEof,
                        "file shrank while sending",
                    ));
                }
                self.progress.cold += len;
                self.flush_with(&bytes).await?;
            }
            off += len;
        }
        Ok(())
    }

    async fn wait_writable(&self) -> io::Result<()> {
        match tokio::time::timeout(self.send_timeout, self.stream.writable()).await {
            Ok(r) => r,
            Err(_) => Err(io_err(io::ErrorKind::TimedOut, "send timeout")),
        }
    }

    /// Writes all of `wbuf` (with MSG_MORE when a body follows).
    async fn flush(&mut self, more: bool) -> io::Result<()> {
        let flags = if more {
            rustix::net::SendFlags::MORE
        } else {
            rustix::net::SendFlags::empty()
        };
        self.write_wbuf(flags, self.wbuf.len()).await
    }

    /// Writes all of `wbuf`, whose bytes from `body_from` on are body of the
    /// response in progress (counted as they are written).
    async fn write_wbuf(
        &mut self,
        flags: rustix::net::SendFlags,
        body_from: usize,
    ) -> io::Result<()> {
        let flags = flags | rustix::net::SendFlags::NOSIGNAL;
        let mut pos = 0;
        while pos < self.wbuf.len() {
            let r = self.stream.try_io(Interest::WRITABLE, || {
                rustix::net::send(&self.stream, &self.wbuf[pos..], flags).map_err(io::Error::from)
            });
            match r {
                Ok(n) => {
                    let body = (pos + n).saturating_sub(body_from.max(pos));
                    self.progress.body += body as u64;
                    pos += n;
                }
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
