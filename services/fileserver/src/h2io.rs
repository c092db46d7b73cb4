//! HTTP/2's connection I/O, over TLS (ALPN `h2`) or h2c: the wrapper that
//! notes activity, checks frames (`h2guard`) and gathers small writes
//! beneath `h2conn`, and the loop that closes idle and stalled connections
//! and drains them at shutdown. Everything runs on the worker's thread, so
//! the single-writer counters stay single-writer.
//!
//! ```text
//! io -> Watched (activity, h2guard, coalesce) -> h2conn::Connection
//!         -> Responder -> ServeDir::call -> Logged body -> Drop: count + log
//! idle: no byte moved for keepalive_timeout (send_timeout with a response
//! in flight) closes the connection; shutdown: GOAWAY, then the streams in
//! flight finish.
//! ```

use crate::h2guard::{Closing, Guard};
use crate::responder::{Activity, Responder, SendBudget};
use crate::state::ConnContext;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{ready, Context, Poll};
use std::time::{Duration, Instant};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// How long a closing HTTP/2 connection reads and drops input after its
/// GOAWAY, so that the GOAWAY is read before the close (a close with
/// unread input sends a reset, which may discard it).
const LINGER: Duration = Duration::from_secs(1);

/// Serves HTTP/2 on `io` until the client closes, the connection idles
/// out, or shutdown drains it; `read_ahead` holds what was read of it
/// before (empty, or the h2c preface and what followed). `tls`: `io` is a
/// TLS stream (what a rule's `scheme` matches).
pub async fn serve<I>(ctx: Rc<ConnContext>, io: I, read_ahead: Vec<u8>, peer: SocketAddr, tls: bool)
where
    I: AsyncRead + AsyncWrite + Unpin + 'static,
{
    let live = ctx.live();
    let limits = live.0.s.limits.clone();
    let activity = Rc::new(Activity::new());
    let h2_settings = live.0.s.http2.clone();
    let io = Watched {
        read_ahead,
        pos: 0,
        inner: io,
        activity: activity.clone(),
        coalesce: Coalesce::default(),
        guard: Guard::new(h2_settings.control_frame_budget),
    };
    let budget = Rc::new(SendBudget::new(&ctx, &h2_settings));
    let responder = Responder::new(
        ctx.clone(),
        live,
        peer,
        tls,
        "HTTP/2.0",
        activity.clone(),
        Some(budget),
    );
    let conn = crate::h2conn::Connection::new(io, &h2_settings, responder);
    drive(ctx, conn, &activity, &limits, peer).await;
}

/// Runs `conn` until it ends, the connection idles out (keepalive, send
/// and linger deadlines from `activity`), or shutdown drains it.
async fn drive<I>(
    ctx: Rc<ConnContext>,
    conn: crate::h2conn::Connection<I>,
    activity: &Activity,
    limits: &crate::config::Limits,
    peer: SocketAddr,
) where
    I: AsyncRead + AsyncWrite + Unpin,
{
    let mut conn = std::pin::pin!(conn);
    let mut shutdown = ctx.shutdown.clone();
    let mut stop_seen = ctx.stopping.get();
    if stop_seen {
        conn.graceful_shutdown();
    }
    loop {
        let deadline = if let Some(at) = activity.closing_at.get() {
            at + LINGER
        } else if activity.in_flight.get() > 0 {
            activity.progress.get() + limits.send_timeout
        } else {
            activity.last.get() + limits.keepalive_timeout
        };
        tokio::select! {
            r = conn.as_mut() => {
                if let Err(e) = r {
                    tracing::debug!(%peer, "connection ended: {e}");
                }
                return;
            }
            _ = tokio::time::sleep_until(deadline.into()) => {
                let now = Instant::now();
                if let Some(at) = activity.closing_at.get() {
                    if at + LINGER <= now {
                        return;
                    }
                } else if activity.in_flight.get() > 0 {
                    if activity.progress.get() + limits.send_timeout <= now {
                        tracing::debug!(%peer, "no send progress for send_timeout");
                        // The guard sends GOAWAY at the next frame
                        // boundary when h2 polls the connection next
                        // (this loop does, now).
                        activity.abort.set(Some(crate::h2guard::ENHANCE_YOUR_CALM));
                        activity.closing_at.set(Some(now));
                    }
                } else if activity.last.get() + limits.keepalive_timeout <= now {
                    tracing::debug!(%peer, "closing idle connection");
                    return;
                }
            }
            _ = activity.busy.notified() => {}
            _ = shutdown.changed(), if !stop_seen => {
                stop_seen = true;
                conn.graceful_shutdown();
            }
        }
    }
}

/// The connection's socket (or TLS stream), noting when bytes move; the
/// bytes the plaintext engine already read (the h2c preface) are read again
/// first.
#[derive(Debug)]
struct Watched<I> {
    read_ahead: Vec<u8>,
    pos: usize,
    inner: I,
    activity: Rc<Activity>,
    coalesce: Coalesce,
    /// Frame accounting, checks and our own GOAWAY.
    guard: Guard,
}

/// HTTP/2 write coalescing. h2 writes whatever is queued each time the
/// connection is polled, which meant one `writev` (and, over TLS, one
/// record) per response: 40021 writes for 40000 requests of h2load
/// `-m 10` (strace, when hyper answered each stream in its own task).
/// Small writes gather in `out`, and the first flush after them yields to
/// the worker's other tasks, so the streams answered meanwhile leave in one
/// write; large writes (file data) go straight through, uncopied. Still
/// worth it with streams answered inline (`h2conn`): without the yields
/// tls_small_h2 cost 1.64x the CPU per request.
#[derive(Debug, Default)]
struct Coalesce {
    out: Vec<u8>,
    /// Yields in this flush so far, and what was gathered at the last one.
    yields: u8,
    gathered_at_yield: usize,
}

impl Coalesce {
    /// Writes smaller than this are gathered.
    const SMALL: usize = 16 * 1024;
    /// At most this much is gathered before it is written.
    const MAX: usize = 64 * 1024;
    /// Yields per flush at most: one gave 0.50 writes per request, two
    /// 0.40, four 0.20 (h2load -c16 -m10 over TLS); eight measured as four.
    const YIELDS: u8 = 4;

    /// Whether `len` more bytes are to be gathered (else: drain, write through).
    fn take(&self, len: usize) -> bool {
        len < Self::SMALL && self.out.len() + len <= Self::MAX
    }
}

impl<I> Watched<I> {
    fn moved(&self, n: usize) {
        if n > 0 {
            self.activity.last.set(Instant::now());
        }
    }

    /// Notes `n` bytes of `bufs` the server wrote (the guard's frame
    /// boundaries and send progress).
    fn wrote(&mut self, bufs: &[io::IoSlice<'_>], mut n: usize) {
        self.moved(n);
        let mut progress = false;
        for b in bufs {
            if n == 0 {
                break;
            }
            let k = b.len().min(n);
            progress |= self.guard.scan_write(&b[..k]);
            n -= k;
        }
        if progress {
            self.activity.progress.set(Instant::now());
        }
    }

    /// Takes a close the serve loop asked for.
    fn take_abort(&mut self) {
        if let Some(code) = self.activity.abort.take() {
            self.guard.close(code);
        }
    }

    fn closing(&self) -> bool {
        self.guard.closing != Closing::No
    }
}

impl<I: AsyncRead + AsyncWrite + Unpin> AsyncRead for Watched<I> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        this.take_abort();
        if this.closing() {
            return this.poll_read_closing(cx);
        }
        let before = buf.filled().len();
        if this.pos < this.read_ahead.len() {
            let rest = &this.read_ahead[this.pos..];
            let n = rest.len().min(buf.remaining());
            buf.put_slice(&rest[..n]);
            this.pos += n;
        } else {
            ready!(Pin::new(&mut this.inner).poll_read(cx, buf))?;
            this.moved(buf.filled().len() - before);
        }
        if let Some((at, code)) = this.guard.scan_read(&buf.filled()[before..]) {
            // h2 gets the bytes before the offending frame's end (an
            // incomplete frame, which it does not act on); the GOAWAY
            // follows on its next read.
            buf.set_filled(before + at);
            this.guard.close(code);
            this.activity.closing_at.set(Some(Instant::now()));
            if at == 0 {
                return this.poll_read_closing(cx);
            }
        }
        Poll::Ready(Ok(()))
    }
}

impl<I: AsyncRead + AsyncWrite + Unpin> Watched<I> {
    /// Reading while closing: send the GOAWAY, then drop input until the
    /// client closes (h2 then sees the end).
    fn poll_read_closing(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        if self.activity.closing_at.get().is_none() {
            self.activity.closing_at.set(Some(Instant::now()));
        }
        ready!(self.poll_goaway(cx));
        let mut scratch = [0u8; 2048];
        loop {
            let mut b = ReadBuf::new(&mut scratch);
            match ready!(Pin::new(&mut self.inner).poll_read(cx, &mut b)) {
                Ok(()) if b.filled().is_empty() => return Poll::Ready(Ok(())),
                Ok(()) => continue,
                Err(e) => return Poll::Ready(Err(e)),
            }
        }
    }

    /// Writes our GOAWAY after the last whole frame, flushes, and shuts
    /// the write side; Ready once done (or once the peer is gone).
    fn poll_goaway(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        loop {
            let g = &mut self.guard;
            match g.closing {
                Closing::No | Closing::Done => return Poll::Ready(()),
                Closing::Requested(code) => {
                    if !g.at_boundary() {
                        // h2 is mid-frame: its next write ends the frame.
                        return Poll::Pending;
                    }
                    let frame = g.goaway(code);
                    g.closing = Closing::Queued;
                    self.coalesce.out.extend_from_slice(&frame);
                }
                Closing::Queued => {
                    let done = match self.poll_drain(cx) {
                        Poll::Pending => return Poll::Pending,
                        Poll::Ready(Err(_)) => true,
                        Poll::Ready(Ok(())) => false,
                    };
                    if !done {
                        let _ = ready!(Pin::new(&mut self.inner).poll_flush(cx));
                        let _ = ready!(Pin::new(&mut self.inner).poll_shutdown(cx));
                    }
                    self.guard.closing = Closing::Done;
                }
            }
        }
    }

    /// A write while closing: the bytes that finish the frame in progress,
    /// then nothing (Pending: the serve loop ends the connection).
    fn poll_write_closing(
        &mut self,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let len = bufs.iter().map(|b| b.len()).sum();
        let n = self.guard.until_boundary(len);
        if n == 0 {
            ready!(self.poll_goaway(cx));
            return Poll::Pending;
        }
        let mut left = n;
        for b in bufs {
            let k = b.len().min(left);
            self.coalesce.out.extend_from_slice(&b[..k]);
            left -= k;
        }
        self.wrote(bufs, n);
        Poll::Ready(Ok(n))
    }
}

impl<I: AsyncWrite + Unpin> Watched<I> {
    /// Writes out what [`Coalesce`] gathered.
    fn poll_drain(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let c = &mut self.coalesce;
        while !c.out.is_empty() {
            let n = ready!(Pin::new(&mut self.inner).poll_write(cx, &c.out))?;
            if n == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            c.out.drain(..n);
            self.activity.last.set(Instant::now());
        }
        Poll::Ready(Ok(()))
    }
}

impl<I: AsyncRead + AsyncWrite + Unpin> AsyncWrite for Watched<I> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        this.take_abort();
        let bufs = [io::IoSlice::new(buf)];
        if this.closing() {
            return this.poll_write_closing(cx, &bufs);
        }
        if this.coalesce.take(buf.len()) {
            this.coalesce.out.extend_from_slice(buf);
            this.wrote(&bufs, buf.len());
            return Poll::Ready(Ok(buf.len()));
        }
        ready!(this.poll_drain(cx))?;
        let r = Pin::new(&mut this.inner).poll_write(cx, buf);
        if let Poll::Ready(Ok(n)) = r {
            this.wrote(&bufs, n);
        }
        r
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        this.take_abort();
        if this.closing() {
            return this.poll_write_closing(cx, bufs);
        }
        let len = bufs.iter().map(|b| b.len()).sum();
        if this.coalesce.take(len) {
            for b in bufs {
                this.coalesce.out.extend_from_slice(b);
            }
            this.wrote(bufs, len);
            return Poll::Ready(Ok(len));
        }
        ready!(this.poll_drain(cx))?;
        let r = Pin::new(&mut this.inner).poll_write_vectored(cx, bufs);
        if let Poll::Ready(Ok(n)) = r {
            this.wrote(bufs, n);
        }
        r
    }

    fn is_write_vectored(&self) -> bool {
        true
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if this.closing() {
            ready!(this.poll_goaway(cx));
            return Poll::Ready(Ok(()));
        }
        // Let the streams woken in this turn add their frames first; again
        // while each turn added some (a stream's DATA follows its HEADERS
        // one turn later), a few times at most.
        let c = &mut this.coalesce;
        let grew = c.out.len() > c.gathered_at_yield;
        if grew && c.yields < Coalesce::YIELDS {
            c.yields += 1;
            c.gathered_at_yield = c.out.len();
            cx.waker().wake_by_ref();
            return Poll::Pending;
        }
        ready!(this.poll_drain(cx))?;
        this.coalesce.yields = 0;
        this.coalesce.gathered_at_yield = 0;
        Pin::new(&mut this.inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if this.closing() {
            ready!(this.poll_goaway(cx));
            return Poll::Ready(Ok(()));
        }
        ready!(this.poll_drain(cx))?;
        Pin::new(&mut this.inner).poll_shutdown(cx)
    }
}
