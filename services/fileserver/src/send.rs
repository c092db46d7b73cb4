//! The HTTP/1.1 engine's write half: the socket, the batch of pipelined
//! responses, and the ways a body goes out. It encodes a plan's head and
//! sends what the decision names; it decides nothing about the response.
//!
//! ```text
//! wbuf [resp1 head+body|resp2 head]  -> flushed before any read or sendfile
//! body in memory (cached, variant)   -> into the batch, or one writev with the head
//! body from the file                 -> corked (up to 128 KiB): the tail read, then
//!                                       all but the tail by sendfile (cold windows
//!                                       read through the backend), the file checked
//!                                       unchanged, the tail sent, the cork pulled
//! over TLS (`wire::Tls`)              -> the same steps, but every write is sealed
//!                                       by rustls and file windows are read into
//!                                       `wbuf` where sendfile would send them
//! ```

use crate::wire::{Tls, Wire};
use decide::Representation;
use filemanager::CachedFile;
use httpfile::date::{with_date, with_now, HTTP_DATE_LEN};
use httpfile::encode::{encode_head_with, Framing};
use httpfile::plan::{Body, Plan};
use httpfile::ByteRange;
use rustix::fd::{AsFd, BorrowedFd};
use std::io::{self, IoSlice};
use std::time::Duration;
use tokio::io::Interest;

/// The tail of a body read from the file: read into the batch behind the
/// head (or behind what sendfile sent), the file checked, then sent. For a
/// range this small that is all of it: one `preadv2` and one send instead of
/// a send of the head, a residency check and a sendfile, as lighttpd does
/// for small files (many_files, 20000 x 4 KiB: 1.04x req/s when it came in;
/// benches/README.md).
pub(crate) const COPY_MAX: u64 = 16 * 1024;

/// The tail of a body larger than [`COPY_MAX`] and at most [`LONG`]:
/// sendfile sends the rest. Any tail holds the promise (the file is
/// checked before it leaves), and every byte of it is copied twice, from
/// the file and to the socket. Against 16 KiB tails, HttpArena's shape
/// (the arena group, 3 rounds, bodies of 18-76 KiB): CPU per request 0.90x
/// at 64 connections, 0.85x at 1024, 0.87x at 4096, and peak RSS at 4096
/// connections 69 MiB instead of 133.
pub(crate) const TAIL: u64 = 1024;

/// Past this, a body's tail is [`COPY_MAX`]: with 1 MiB bodies (the
/// harness's `large`, 5 rounds) a 1 KiB tail cost 1.98x the CPU per
/// request of a 16 KiB one, and a 4 KiB tail 1.43x. Measured, not yet
/// explained.
const LONG: u64 = 128 * 1024;

/// Body bytes a connection sends before it lets the worker's other
/// connections run: a large body goes out in calls of at most this much,
/// with a yield to the scheduler between them. A sendfile to a reader as
/// fast as loopback never blocks, so without this one download held its
/// worker for as long as the client kept up, and cached 1 KiB requests
/// beside 64 MiB downloads (the harness's cold scenario) waited behind it.
const FAIR_SHARE: u64 = 1024 * 1024;

/// The write half: the socket, the batch of pipelined responses, and what
/// the response in progress has sent.
pub(crate) struct Output {
    pub(crate) wire: Wire,
    /// Header lines every response of the connection carries beyond the
    /// plan's (`Alt-Svc` over TLS when HTTP/3 is on), CRLF-terminated.
    fields: Vec<u8>,
    /// Reads the cold ranges sendfile would wait for.
    pub(crate) files: filemanager::FileManager,
    pub(crate) wbuf: Vec<u8>,
    pub(crate) progress: Progress,
    pub(crate) send_timeout: Duration,
    /// Where the response in progress starts in `wbuf`, while none of it
    /// has been written.
    response_at: Option<usize>,
    /// The response in progress may be taken back when its file changed
    /// before any byte of it left (the engine then decides again).
    pub(crate) may_withdraw: bool,
    /// It was taken back: `wbuf` and `progress` are as before its head.
    pub(crate) withdrawn: bool,
    /// Body bytes sent since this connection last yielded ([`FAIR_SHARE`]).
    since_yield: u64,
    /// The pace of the response in progress (`limit_rate`), set by the
    /// engine before its body: file bytes past the tail wait for it.
    pub(crate) pace: Option<crate::pace::Pace>,
}

/// What the response in progress has put on the wire, for the counters and
/// the access log: its status once the head is written, and the body bytes
/// handed to the kernel (or batched behind the head when more pipelined
/// responses follow). An aborted response is counted with what it sent.
#[derive(Clone, Copy, Default)]
pub(crate) struct Progress {
    pub(crate) status: u16,
    pub(crate) body: u64,
    /// Of `body`, bytes read through the backend because they were cold.
    pub(crate) cold: u64,
}

fn io_err(kind: io::ErrorKind, msg: &'static str) -> io::Error {
    io::Error::new(kind, msg)
}

impl Output {
    /// The write half of `stream`, nothing batched.
    pub(crate) fn new(
        wire: Wire,
        fields: Vec<u8>,
        files: filemanager::FileManager,
        send_timeout: Duration,
    ) -> Output {
        Output {
            wire,
            fields,
            files,
            wbuf: Vec::new(),
            progress: Progress::default(),
            send_timeout,
            response_at: None,
            may_withdraw: false,
            withdrawn: false,
            since_yield: 0,
            pace: None,
        }
    }

    /// How much of `want` body bytes may go now: all, unpaced; else what
    /// the pace allows, once it allows any.
    async fn paced(&self, want: u64) -> u64 {
        match &self.pace {
            None => want,
            Some(p) => p.wait(self.progress.body, want).await,
        }
    }

    /// Counts `sent` body bytes and, past [`FAIR_SHARE`] since the last
    /// time, lets the worker's other tasks run (and its I/O be polled).
    async fn share_worker(&mut self, sent: u64) {
        self.since_yield += sent;
        if self.since_yield >= FAIR_SHARE {
            self.since_yield = 0;
            tokio::task::yield_now().await;
        }
    }

    /// Encodes `plan`'s head (and its message body, if it has one) into the
    /// batch, dated now; from here on the response counts as started.
    pub(crate) fn write_head(&mut self, plan: &Plan<'_>, framing: Framing) {
        with_now(|_, date| self.write_head_dated(plan, framing, date));
    }

    /// [`write_head`](Self::write_head), dated `now` (the second a file's
    /// answer was decided at: the clock is read once per response).
    pub(crate) fn write_head_at(&mut self, plan: &Plan<'_>, framing: Framing, now: u64) {
        with_date(now, |_, date| self.write_head_dated(plan, framing, date));
    }

    /// [`write_head`](Self::write_head) with the `Date` the plan was made at.
    pub(crate) fn write_head_dated(
        &mut self,
        plan: &Plan<'_>,
        framing: Framing,
        date: &[u8; HTTP_DATE_LEN],
    ) {
        self.response_at = Some(self.wbuf.len());
        self.withdrawn = false;
        encode_head_with(plan, framing, date, &self.fields, &mut self.wbuf);
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

    /// Sends the body `plan` names of `r` (a file or multipart ranges of
    /// it) after what is in the batch; `pending`: more responses follow.
    pub(crate) async fn send_file(
        &mut self,
        plan: &Plan<'_>,
        r: &Representation,
        pending: bool,
    ) -> io::Result<()> {
        let bytes = r.bytes();
        match plan.body {
            Body::File(range) => self.send_range(&r.file, bytes, range, pending, true).await,
            Body::Multipart(parts) => {
                let last = parts.ranges.len().saturating_sub(1);
                for (i, &range) in parts.ranges.iter().enumerate() {
                    let before = self.wbuf.len();
                    parts.write_part_head(i, &mut self.wbuf);
                    self.progress.body += (self.wbuf.len() - before) as u64;
                    // One check covers the whole body: it is made after
                    // every part was read, before the last one leaves.
                    self.send_range(&r.file, bytes, range, true, i == last)
                        .await?;
                    if self.withdrawn {
                        return Ok(());
                    }
                }
                let before = self.wbuf.len();
                parts.write_closing(&mut self.wbuf);
                self.progress.body += (self.wbuf.len() - before) as u64;
                Ok(())
            }
            Body::Empty | Body::Message(_) | Body::Bytes(_) => Ok(()),
        }
    }

    /// Appends a listing page's (or any in-memory) body to the batch.
    pub(crate) fn send_bytes(&mut self, bytes: &[u8]) {
        self.wbuf.extend_from_slice(bytes);
        self.progress.body += bytes.len() as u64;
    }

    /// Sends `range` of `f` after what is in `wbuf`. Bytes in memory (a
    /// variant's, or the cached file's): copied into `wbuf` when more
    /// responses follow, else one writev of head and body. From the file:
    /// a range of at most [`COPY_MAX`] bytes read and sent from memory,
    /// a longer one by sendfile (head with MSG_MORE first) but for its last
    /// [`TAIL`] bytes ([`COPY_MAX`] past [`LONG`]), then those
    /// ([`send_tail`](Self::send_tail)), which check the file when `check`
    /// (the body's last range).
    async fn send_range(
        &mut self,
        f: &CachedFile,
        bytes: Option<&[u8]>,
        range: ByteRange,
        pending: bool,
        check: bool,
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
        let tail_len = match range.len() {
            n if n <= COPY_MAX => n,
            n if n <= LONG => TAIL,
            _ => COPY_MAX,
        };
        let tail = ByteRange {
            start: range.end - tail_len,
            end: range.end,
        };
        if tail.start > range.start {
            let lead = ByteRange {
                start: range.start,
                end: tail.start,
            };
            if self.wire.is_tls() {
                self.send_copied(f, lead).await?;
                return self.send_tail(f, tail, pending, check).await;
            }
            let corked = !pending && range.len() <= LONG && self.cork(true);
            let sent = self.send_lead_and_tail(f, lead, tail, pending, check).await;
            if corked {
                self.cork(false);
            }
            return sent;
        }
        self.send_tail(f, tail, pending, check).await
    }

    /// Sends `lead` of `f` and then `tail` ([`send_tail`](Self::send_tail)),
    /// after what is in the batch. The tail is read first, into the batch
    /// behind the head: a read that did not wait shows the lead's last page
    /// readable too, so the lead's residency is one `cachestat` rather than
    /// that and a probe of its last page, one system call fewer per
    /// response. When either is not resident, the lead goes through
    /// [`send_cold`](Self::send_cold) and the tail is read after it.
    async fn send_lead_and_tail(
        &mut self,
        f: &CachedFile,
        lead: ByteRange,
        tail: ByteRange,
        pending: bool,
        check: bool,
    ) -> io::Result<()> {
        let head_end = self.wbuf.len();
        let fd = f.as_fd();
        let resident =
            filemanager::read_resident(fd, tail.start, tail.len() as usize, &mut self.wbuf)
                && filemanager::is_resident_before_read(fd, lead.start, lead.len());
        if !resident {
            self.wbuf.truncate(head_end);
        }
        self.write_wbuf_to(head_end, rustix::net::SendFlags::MORE, head_end)
            .await?;
        if !resident {
            self.send_cold(f, lead).await?;
            return self.send_tail(f, tail, pending, check).await;
        }
        self.sendfile(fd, lead.start, lead.len()).await?;
        self.send_read_tail(f, 0, true, tail, pending, check).await
    }

    /// Sets or clears `TCP_CORK`; true when it was set. sendfile pushes
    /// what it queued when it returns, so without the cork the tail went
    /// out as a second segment, a second wake-up of the client: at 64
    /// connections on HttpArena's files (`scripts/cpu-by-syscall.sh`, two
    /// pairs) sendfile, sendto and setsockopt together cost 3.3 µs per
    /// request against 3.9 without. Only bodies of at most [`LONG`] are
    /// corked: 1 MiB bodies corked cost 1.96x the CPU per request (the
    /// harness's `large`, 3 rounds), where one more segment is nothing.
    fn cork(&self, on: bool) -> bool {
        let Wire::Plain(stream) = &self.wire else {
            return false;
        };
        rustix::net::sockopt::set_tcp_cork(stream, on).is_ok()
    }

    /// Sends the last bytes of a range read from the file: read into the
    /// batch (from the page cache, else through the backend), then the file
    /// is checked to be the version the head described (the change
    /// watcher's word, one empty epoll wait, else one statx), then sent. A
    /// file rewritten in place at any point of the send shows in that
    /// check, and the body then ends short (the client sees fewer bytes
    /// than `Content-Length`), never complete with mixed contents: the rule
    /// HTTP/2 and HTTP/3 follow too (`render::read_part`), as does
    /// `servedir`'s body. When nothing of the response
    /// has left yet (a body of at most [`COPY_MAX`] bytes) it is withdrawn
    /// instead, if `may_withdraw`, and the engine answers again from the
    /// reopened file: this check then stands in for the resolve stage's.
    async fn send_tail(
        &mut self,
        f: &CachedFile,
        tail: ByteRange,
        pending: bool,
        check: bool,
    ) -> io::Result<()> {
        let body_from = self.wbuf.len();
        let len = tail.len() as usize;
        let mut whole = true;
        if !filemanager::read_resident(f.as_fd(), tail.start, len, &mut self.wbuf) {
            match self.files.read_at(f, tail.start, len).await {
                Ok(bytes) if bytes.len() == len => {
                    self.progress.cold += tail.len();
                    self.wbuf.extend_from_slice(&bytes);
                }
                // It shrank: a change, answered like any other below.
                Ok(_) => whole = false,
                Err(e) => {
                    // The head (and what is batched before it) still goes:
                    // a response that was started ends short, not unsent.
                    self.wbuf.truncate(body_from);
                    self.flush(false).await?;
                    return Err(e);
                }
            }
        }
        self.send_read_tail(f, body_from, whole, tail, pending, check)
            .await
    }

    /// Checks and sends a tail read into `wbuf` from `body_from` on
    /// (`whole`: all of it was there to read); the rest of
    /// [`send_tail`](Self::send_tail).
    async fn send_read_tail(
        &mut self,
        f: &CachedFile,
        body_from: usize,
        whole: bool,
        tail: ByteRange,
        pending: bool,
        check: bool,
    ) -> io::Result<()> {
        if !whole || (check && !self.files.contents_unchanged(f)) {
            if let (true, Some(at)) = (self.may_withdraw, self.response_at) {
                self.wbuf.truncate(at);
                self.progress = Progress::default();
                self.withdrawn = true;
                return Ok(());
            }
            self.wbuf.truncate(body_from);
            self.flush(false).await?;
            return Err(io_err(
                io::ErrorKind::UnexpectedEof,
                "file changed while sending",
            ));
        }
        if pending {
            self.progress.body += tail.len();
            return Ok(());
        }
        self.write_wbuf(rustix::net::SendFlags::empty(), body_from)
            .await
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
            let len = self.paced((range.end - off).min(WINDOW)).await;
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

    /// Sends a range over TLS: window by window, read into `wbuf` from the
    /// page cache (else through the backend, sealed from the buffer it
    /// returns) behind what is batched there (the head goes with the first
    /// window), then sealed and written.
    async fn send_copied(&mut self, f: &CachedFile, range: ByteRange) -> io::Result<()> {
        let mut off = range.start;
        while off < range.end {
            let body_from = self.wbuf.len();
            let len = (range.end - off).min(crate::wire::SEAL_WINDOW as u64);
            let len = self.paced(len).await as usize;
            if filemanager::read_resident(f.as_fd(), off, len, &mut self.wbuf) {
                self.write_sealed(&[], body_from).await?;
            } else {
                let bytes = self.files.read_at(f, off, len).await?;
                if bytes.len() != len {
                    return Err(io_err(
                        io::ErrorKind::UnexpectedEof,
                        "file shrank while sending",
                    ));
                }
                self.progress.cold += len as u64;
                self.write_sealed(&bytes, body_from).await?;
            }
            off += len as u64;
            self.share_worker(len as u64).await;
        }
        // An idle connection does not keep a window's buffer; the tail and
        // the next responses fit in this.
        self.wbuf.shrink_to(2 * COPY_MAX as usize);
        Ok(())
    }

    /// Writes all of `wbuf` (with MSG_MORE when a body follows).
    pub(crate) async fn flush(&mut self, more: bool) -> io::Result<()> {
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
        self.write_wbuf_to(self.wbuf.len(), flags, body_from).await
    }

    /// Writes `wbuf` up to `end` and drops what it wrote; bytes from
    /// `body_from` on are body of the response in progress.
    async fn write_wbuf_to(
        &mut self,
        end: usize,
        flags: rustix::net::SendFlags,
        body_from: usize,
    ) -> io::Result<()> {
        let stream = match &self.wire {
            Wire::Plain(stream) => stream,
            Wire::Tls(_) => {
                debug_assert_eq!(end, self.wbuf.len(), "over TLS the batch goes whole");
                return self.write_sealed(&[], body_from).await;
            }
        };
        let flags = flags | rustix::net::SendFlags::NOSIGNAL;
        let mut pos = 0;
        while pos < end {
            let r = stream.try_io(Interest::WRITABLE, || {
                rustix::net::send(stream, &self.wbuf[pos..end], flags).map_err(io::Error::from)
            });
            match r {
                Ok(n) => {
                    let body = (pos + n).saturating_sub(body_from.max(pos));
                    self.progress.body += body as u64;
                    pos += n;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    writable(stream, self.send_timeout).await?
                }
                Err(e) => return Err(e),
            }
        }
        self.wbuf.drain(..end);
        self.response_at = None;
        Ok(())
    }

    /// Writes `wbuf` then `body` with writev (one syscall in the common case).
    async fn flush_with(&mut self, body: &[u8]) -> io::Result<()> {
        let stream = match &self.wire {
            Wire::Plain(stream) => stream,
            Wire::Tls(_) => return self.write_sealed(body, self.wbuf.len()).await,
        };
        let (mut a, mut b) = (0usize, 0usize);
        while a < self.wbuf.len() || b < body.len() {
            let r = stream.try_io(Interest::WRITABLE, || {
                let iov = [IoSlice::new(&self.wbuf[a..]), IoSlice::new(&body[b..])];
                rustix::io::writev(stream, &iov).map_err(io::Error::from)
            });
            match r {
                Ok(mut n) => {
                    let h = (self.wbuf.len() - a).min(n);
                    a += h;
                    n -= h;
                    b += n;
                    self.progress.body += n as u64;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    writable(stream, self.send_timeout).await?
                }
                Err(e) => return Err(e),
            }
        }
        self.wbuf.clear();
        self.response_at = None;
        Ok(())
    }

    /// Over TLS: seals `wbuf` then `body` and writes them out. The bytes
    /// of `wbuf` from `body_from` on, and all of `body`, are body of the
    /// response in progress, counted once the records holding them are
    /// in the kernel.
    async fn write_sealed(&mut self, body: &[u8], body_from: usize) -> io::Result<()> {
        let Wire::Tls(tls) = &mut self.wire else {
            unreachable!("only TLS is sealed")
        };
        let head = self.wbuf.len();
        let total = head + body.len();
        let (mut taken, mut counted) = (0usize, 0usize);
        while taken < total {
            let n = tls.seal(
                &self.wbuf[taken.min(head)..],
                &body[taken.saturating_sub(head)..],
            )?;
            taken += n;
            flush_sealed(tls, self.send_timeout).await?;
            let body_at = |at: usize| at.saturating_sub(body_from);
            self.progress.body += (body_at(taken) - body_at(counted)) as u64;
            counted = taken;
        }
        self.wbuf.clear();
        self.response_at = None;
        Ok(())
    }

    /// sendfile(2) on the non-blocking socket; a file that ends early (it
    /// shrank) is an error, which closes the connection: the client sees a
    /// short body, never one that disagrees with Content-Length silently.
    async fn sendfile(&mut self, file: BorrowedFd<'_>, offset: u64, len: u64) -> io::Result<()> {
        let mut off = offset;
        let end = offset + len;
        while off < end {
            let chunk = self.paced((end - off).min(FAIR_SHARE)).await as usize;
            let Wire::Plain(stream) = &self.wire else {
                unreachable!("TLS bodies are copied, not sent from the file")
            };
            let before = off;
            let r = stream.try_io(Interest::WRITABLE, || {
                rustix::fs::sendfile(stream.as_fd(), file, Some(&mut off), chunk)
                    .map_err(io::Error::from)
            });
            match r {
                Ok(0) => {
                    return Err(io_err(
                        io::ErrorKind::UnexpectedEof,
                        "file shrank while sending",
                    ))
                }
                Ok(_) => {
                    self.progress.body += off - before;
                    self.share_worker(off - before).await;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    writable(stream, self.send_timeout).await?
                }
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }
}

/// Waits until `stream` takes more bytes, at most `timeout`.
async fn writable(stream: &tokio::net::TcpStream, timeout: Duration) -> io::Result<()> {
    match tokio::time::timeout(timeout, stream.writable()).await {
        Ok(r) => r,
        Err(_) => Err(io_err(io::ErrorKind::TimedOut, "send timeout")),
    }
}

/// Writes all that `tls` sealed, waiting for the socket at most `timeout`
/// each time it is full.
async fn flush_sealed(tls: &mut Tls, timeout: Duration) -> io::Result<()> {
    while !tls.try_flush()? {
        writable(tls.tcp(), timeout).await?;
    }
    Ok(())
}
