//! Connections hyper serves: HTTPS (HTTP/2 or HTTP/1.1, as ALPN chose) and
//! h2c with prior knowledge handed over by the plaintext engine. Every
//! request is answered by `servedir::ServeDir`, which plans with `httpfile`
//! and resolves through the same file manager as the hand-written engine,
//! so both listeners give the same answers. This module adds what the
//! daemon promises for every response that was started: it is counted in
//! the worker's counters and logged once its body ends or is dropped half
//! sent. Everything runs on the worker's thread (h2 streams are spawned
//! with `spawn_local`), so the single-writer counters stay single-writer.
//!
//! ```text
//! io -> Watched (last activity) -> hyper auto::Builder (h1 | h2 limits)
//!         -> Responder (Service) -> ServeDir::call -> Logged body
//!                                                     `-> Drop: count + log
//! idle: no byte moved for keepalive_timeout (send_timeout with a response
//! in flight) closes the connection; shutdown: graceful (GOAWAY / close
//! after the response in flight).
//! ```

use crate::accesslog::{Entry, RequestLine};
use crate::state::{ConnContext, Live};
use crate::stats::MethodLabel;
use bytes::Bytes;
use http::header::{HeaderValue, REFERER, SERVER, USER_AGENT};
use http::{Request, Response};
use http_body::{Body as HttpBody, Frame, SizeHint};
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use std::cell::{Cell, RefCell};
use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::rc::Rc;
use std::sync::Arc;
use std::task::{ready, Context, Poll};
use std::time::Instant;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tower_service::Service as _;

/// The protocol a hyper connection speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Protocol {
    /// HTTP/1.1 (ALPN `http/1.1`, or none).
    Http1,
    /// HTTP/2 (ALPN `h2`, or h2c with prior knowledge).
    Http2,
}

impl Protocol {
    /// The ALPN name, as a metric label.
    pub fn alpn(self) -> &'static str {
        match self {
            Protocol::Http1 => "http/1.1",
            Protocol::Http2 => "h2",
        }
    }
}

/// Runs HTTP/2 stream tasks on the worker's `LocalSet`.
#[derive(Clone, Copy, Debug)]
struct LocalExec;

impl<F> hyper::rt::Executor<F> for LocalExec
where
    F: Future + 'static,
{
    fn execute(&self, fut: F) {
        tokio::task::spawn_local(fut);
    }
}

/// When bytes last moved, and how many responses are in flight: the idle
/// rule's inputs.
#[derive(Debug)]
struct Activity {
    last: Cell<Instant>,
    in_flight: Cell<usize>,
}

/// One response in flight; dropping it (body done, or the request future
/// cancelled by a stream reset) ends it.
#[derive(Debug)]
struct InFlight(Rc<Activity>);

impl InFlight {
    fn new(a: &Rc<Activity>) -> InFlight {
        a.in_flight.set(a.in_flight.get() + 1);
        InFlight(a.clone())
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.in_flight.set(self.0.in_flight.get() - 1);
    }
}

/// Serves `io` with hyper until the client closes, the connection idles
/// out, or shutdown drains it; `read_ahead` holds what was read of it
/// before (empty, or the h2c preface and what followed).
pub async fn serve<I>(
    ctx: Rc<ConnContext>,
    io: I,
    read_ahead: Vec<u8>,
    peer: SocketAddr,
    protocol: Protocol,
) where
    I: AsyncRead + AsyncWrite + Unpin + 'static,
{
    let live = ctx.live();
    let limits = live.0.s.limits.clone();
    let builder = builder(&live.0.s, protocol);
    let activity = Rc::new(Activity {
        last: Cell::new(Instant::now()),
        in_flight: Cell::new(0),
    });
    let io = Watched {
        read_ahead,
        pos: 0,
        inner: io,
        activity: activity.clone(),
        coalesce: (protocol == Protocol::Http2).then(Coalesce::default),
    };
    let responder = Responder {
        ctx: ctx.clone(),
        live: RefCell::new(live),
        peer,
        version: match protocol {
            Protocol::Http1 => "HTTP/1.1",
            Protocol::Http2 => "HTTP/2.0",
        },
        activity: activity.clone(),
    };
    let conn = builder.serve_connection(TokioIo::new(io), responder);
    tokio::pin!(conn);
    let mut shutdown = ctx.shutdown.clone();
    let mut stop_seen = ctx.stopping.get();
    if stop_seen {
        conn.as_mut().graceful_shutdown();
    }
    loop {
        let idle_for = if activity.in_flight.get() > 0 {
            limits.send_timeout
        } else {
            limits.keepalive_timeout
        };
        let deadline = activity.last.get() + idle_for;
        tokio::select! {
            r = conn.as_mut() => {
                if let Err(e) = r {
                    tracing::debug!(%peer, "connection ended: {e}");
                }
                return;
            }
            _ = tokio::time::sleep_until(deadline.into()) => {
                if activity.last.get() + idle_for <= Instant::now() {
                    tracing::debug!(%peer, "closing idle connection");
                    return;
                }
            }
            _ = shutdown.changed(), if !stop_seen => {
                stop_seen = true;
                conn.as_mut().graceful_shutdown();
            }
        }
    }
}

/// hyper's builder with the daemon's limits: for HTTP/1.1 the head limits
/// and read timeout of the plaintext engine (hyper's buffer floor is
/// 8 KiB), for HTTP/2 the `[http2]` bounds. A client that opens and resets
/// streams in a loop (rapid reset) meets `max_pending_reset_streams`, then
/// a GOAWAY.
fn builder(s: &crate::config::Settings, protocol: Protocol) -> auto::Builder<LocalExec> {
    let mut b = auto::Builder::new(LocalExec);
    b.http1()
        .timer(TokioTimer::new())
        .header_read_timeout(s.limits.header_read_timeout)
        .max_buf_size(s.limits.max_header_bytes.max(8192))
        .max_headers(s.limits.max_headers);
    let h = &s.http2;
    b.http2()
        .timer(TokioTimer::new())
        .max_concurrent_streams(h.max_concurrent_streams)
        .max_header_list_size(h.max_header_list_size)
        .initial_stream_window_size(h.initial_stream_window)
        .initial_connection_window_size(h.initial_connection_window)
        .max_pending_accept_reset_streams(h.max_pending_reset_streams)
        .max_local_error_reset_streams(h.max_local_error_resets);
    match protocol {
        Protocol::Http1 => b.http1_only(),
        Protocol::Http2 => b.http2_only(),
    }
}

/// The connection's service: the settings in force at each request, the
/// `ServeDir` built from them, and the bookkeeping that makes its
/// responses counted and logged.
#[derive(Debug)]
struct Responder {
    ctx: Rc<ConnContext>,
    /// The settings in force and their generation, re-read only when a
    /// reload bumped it (one relaxed load per request, like conn.rs).
    live: RefCell<(Arc<Live>, u64)>,
    peer: SocketAddr,
    version: &'static str,
    activity: Rc<Activity>,
}

impl Responder {
    fn live(&self) -> Arc<Live> {
        let mut live = self.live.borrow_mut();
        if self.ctx.generation() != live.1 {
            *live = self.ctx.live();
        }
        live.0.clone()
    }
}

type ResponseFuture = Pin<Box<dyn Future<Output = Result<Response<Logged>, Infallible>>>>;

impl hyper::service::Service<Request<Incoming>> for Responder {
    type Response = Response<Logged>;
    type Error = Infallible;
    type Future = ResponseFuture;

    fn call(&self, req: Request<Incoming>) -> ResponseFuture {
        let t0 = Instant::now();
        let in_flight = InFlight::new(&self.activity);
        let live = self.live();
        let method = match *req.method() {
            http::Method::GET => MethodLabel::Get,
            http::Method::HEAD => MethodLabel::Head,
            _ => MethodLabel::Other,
        };
        let fields = live
            .access
            .is_some()
            .then(|| LogFields::of(&req, self.peer, &live.s.trusted_proxies));
        let mut files = live.files.clone();
        let (ctx, peer, version) = (self.ctx.clone(), self.peer, self.version);
        let logger = fields.is_some().then_some(live);
        Box::pin(async move {
            let response = match files.call(req).await {
                Ok(r) => r,
                Err(never) => match never {},
            };
            let (mut parts, body) = response.into_parts();
            parts
                .headers
                .insert(SERVER, HeaderValue::from_static("fileserver"));
            let status = parts.status.as_u16();
            let body = Logged {
                body,
                sent: 0,
                ended: false,
                done: Some(Done {
                    ctx,
                    peer,
                    version,
                    method,
                    status,
                    t0,
                    fields,
                    logger,
                    _in_flight: in_flight,
                }),
            };
            Ok(Response::from_parts(parts, body))
        })
    }
}

/// What the access log needs of a request, copied only while it is on.
#[derive(Debug)]
struct LogFields {
    client: IpAddr,
    method: http::Method,
    target: String,
    referer: Option<HeaderValue>,
    user_agent: Option<HeaderValue>,
}

impl LogFields {
    fn of(
        req: &Request<Incoming>,
        peer: SocketAddr,
        trusted: &[crate::http::forwarded::IpNet],
    ) -> LogFields {
        let header = |name: &str| req.headers().get(name).map(HeaderValue::as_bytes);
        LogFields {
            client: crate::http::forwarded::client_addr(
                peer.ip(),
                trusted,
                header("forwarded"),
                header("x-forwarded-for"),
            ),
            method: req.method().clone(),
            target: req
                .uri()
                .path_and_query()
                .map_or("/", |pq| pq.as_str())
                .to_string(),
            referer: req.headers().get(REFERER).cloned(),
            user_agent: req.headers().get(USER_AGENT).cloned(),
        }
    }
}

/// A response's accounting, settled when its body is dropped.
#[derive(Debug)]
struct Done {
    ctx: Rc<ConnContext>,
    peer: SocketAddr,
    version: &'static str,
    method: MethodLabel,
    status: u16,
    t0: Instant,
    fields: Option<LogFields>,
    /// The settings whose access logger logs this response (while one is on).
    logger: Option<Arc<Live>>,
    _in_flight: InFlight,
}

/// `servedir`'s body, counting what hyper takes of it; on drop the
/// response is counted and logged with the bytes it sent (all of them, or
/// fewer when the client left or reset the stream).
#[derive(Debug)]
pub struct Logged {
    body: servedir::Body,
    sent: u64,
    ended: bool,
    done: Option<Done>,
}

impl HttpBody for Logged {
    type Data = Bytes;
    type Error = servedir::BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let this = self.get_mut();
        let polled = Pin::new(&mut this.body).poll_frame(cx);
        match &polled {
            Poll::Ready(Some(Ok(frame))) => {
                if let Some(data) = frame.data_ref() {
                    this.sent += data.len() as u64;
                }
            }
            Poll::Ready(None) => this.ended = true,
            _ => {}
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

impl Drop for Logged {
    fn drop(&mut self) {
        let Some(d) = self.done.take() else {
            return;
        };
        let completed = self.ended || self.body.is_end_stream();
        let duration = d.t0.elapsed();
        d.ctx.stats.record(d.method, d.status, self.sent, completed);
        d.ctx.record_duration(duration);
        let log = d.logger.as_ref().and_then(|live| live.access.as_ref());
        if let (Some(log), Some(f)) = (log, &d.fields) {
            log.log(&Entry {
                client: f.client,
                peer: d.peer.ip(),
                time: httpfile::date::now_secs(),
                request: Some(RequestLine {
                    method: f.method.as_str(),
                    target: f.target.as_bytes(),
                    version: d.version,
                }),
                status: d.status,
                bytes: self.sent,
                completed,
                referer: f.referer.as_ref().map(HeaderValue::as_bytes),
                user_agent: f.user_agent.as_ref().map(HeaderValue::as_bytes),
                duration,
            });
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
    /// HTTP/2 only (None for HTTP/1.1, whose one response per request
    /// gains nothing from waiting).
    coalesce: Option<Coalesce>,
}

/// HTTP/2 write coalescing. hyper answers each stream in its own task and
/// its connection task writes whatever is ready each time it runs, which
/// here meant one `writev` (and, over TLS, one record) per response: 40021
/// writes for 40000 requests of h2load `-m 10` (strace). Small writes now
/// gather in `out`, and the first flush after them yields once to the
/// worker's other tasks, so the streams answered in the same turn leave in
/// one write; large writes (file data) go straight through, uncopied.
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
}

impl<I: AsyncRead + Unpin> AsyncRead for Watched<I> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if this.pos < this.read_ahead.len() {
            let rest = &this.read_ahead[this.pos..];
            let n = rest.len().min(buf.remaining());
            buf.put_slice(&rest[..n]);
            this.pos += n;
            return Poll::Ready(Ok(()));
        }
        let before = buf.filled().len();
        let r = Pin::new(&mut this.inner).poll_read(cx, buf);
        this.moved(buf.filled().len() - before);
        r
    }
}

impl<I: AsyncWrite + Unpin> Watched<I> {
    /// Writes out what [`Coalesce`] gathered.
    fn poll_drain(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let Some(c) = &mut self.coalesce else {
            return Poll::Ready(Ok(()));
        };
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

impl<I: AsyncWrite + Unpin> AsyncWrite for Watched<I> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        if let Some(c) = &mut this.coalesce {
            if c.take(buf.len()) {
                c.out.extend_from_slice(buf);
                return Poll::Ready(Ok(buf.len()));
            }
            ready!(this.poll_drain(cx))?;
        }
        let r = Pin::new(&mut this.inner).poll_write(cx, buf);
        if let Poll::Ready(Ok(n)) = r {
            this.moved(n);
        }
        r
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        if let Some(c) = &mut this.coalesce {
            let len = bufs.iter().map(|b| b.len()).sum();
            if c.take(len) {
                for b in bufs {
                    c.out.extend_from_slice(b);
                }
                return Poll::Ready(Ok(len));
            }
            ready!(this.poll_drain(cx))?;
        }
        let r = Pin::new(&mut this.inner).poll_write_vectored(cx, bufs);
        if let Poll::Ready(Ok(n)) = r {
            this.moved(n);
        }
        r
    }

    fn is_write_vectored(&self) -> bool {
        self.coalesce.is_some() || self.inner.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if let Some(c) = &mut this.coalesce {
            // Let the streams woken in this turn add their frames first;
            // again while each turn added some (a stream's DATA follows its
            // HEADERS one turn later), a few times at most.
            let grew = c.out.len() > c.gathered_at_yield;
            if grew && c.yields < Coalesce::YIELDS {
                c.yields += 1;
                c.gathered_at_yield = c.out.len();
                cx.waker().wake_by_ref();
                return Poll::Pending;
            }
            ready!(this.poll_drain(cx))?;
            if let Some(c) = &mut this.coalesce {
                c.yields = 0;
                c.gathered_at_yield = 0;
            }
        }
        Pin::new(&mut this.inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        ready!(this.poll_drain(cx))?;
        Pin::new(&mut this.inner).poll_shutdown(cx)
    }
}
