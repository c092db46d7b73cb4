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

use crate::accesslog::RequestLine;
use crate::exchange::Exchange;
use crate::h2guard::{Closing, Guard};
use crate::state::{ConnContext, Live};
use bytes::Bytes;
use http::header::{HeaderValue, CONNECTION, REFERER, SERVER, USER_AGENT};
use http::{Request, Response};
use http_body::{Body as HttpBody, Frame, SizeHint};
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use std::cell::{Cell, RefCell};
use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::sync::Arc;
use std::task::{ready, Context, Poll};
use std::time::{Duration, Instant};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
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
    /// When the connection last made send progress: for HTTP/1.1 any byte
    /// moved, for HTTP/2 a HEADERS or DATA frame written (a client that
    /// pings while it holds every window at zero makes none).
    progress: Cell<Instant>,
    in_flight: Cell<usize>,
    /// HTTP/2: a GOAWAY code the serve loop asks the guard to send.
    abort: Cell<Option<u32>>,
    /// HTTP/2: when the guard began closing (the linger runs from here).
    closing_at: Cell<Option<Instant>>,
    /// Woken when the first response of a quiet spell starts, so the serve
    /// loop swaps the keepalive deadline for the send timeout at once.
    busy: tokio::sync::Notify,
}

impl Activity {
    fn new() -> Activity {
        Activity {
            last: Cell::new(Instant::now()),
            progress: Cell::new(Instant::now()),
            in_flight: Cell::new(0),
            abort: Cell::new(None),
            closing_at: Cell::new(None),
            busy: tokio::sync::Notify::new(),
        }
    }
}

/// How long a closing HTTP/2 connection reads and drops input after its
/// GOAWAY, so that the GOAWAY is read before the close (a close with
/// unread input sends a reset, which may discard it).
const LINGER: Duration = Duration::from_secs(1);

/// One response in flight; dropping it (body done, or the request future
/// cancelled by a stream reset) ends it.
#[derive(Debug)]
struct InFlight(Rc<Activity>);

impl InFlight {
    fn new(a: &Rc<Activity>) -> InFlight {
        if a.in_flight.get() == 0 {
            a.progress.set(Instant::now());
            a.busy.notify_one();
        }
        a.in_flight.set(a.in_flight.get() + 1);
        InFlight(a.clone())
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.in_flight.set(self.0.in_flight.get() - 1);
    }
}

/// Serves an accepted HTTPS connection: the handshake (`tls`), then HTTP/2
/// or HTTP/1.1 as ALPN chose.
pub async fn serve_tls(
    ctx: Rc<ConnContext>,
    certs: &crate::tls::Certs,
    stream: tokio::net::TcpStream,
    peer: SocketAddr,
) {
    let timeout = match &ctx.live().0.s.tls {
        Some(t) => t.handshake_timeout,
        None => return,
    };
    if let Some((stream, h2)) = crate::tls::handshake(certs, stream, timeout, peer).await {
        let protocol = if h2 { Protocol::Http2 } else { Protocol::Http1 };
        serve(ctx, stream, Vec::new(), peer, protocol, true).await;
    }
}

/// Serves `io` with hyper until the client closes, the connection idles
/// out, or shutdown drains it; `read_ahead` holds what was read of it
/// before (empty, or the h2c preface and what followed). `tls`: `io` is a
/// TLS stream (what a rule's `scheme` matches).
pub async fn serve<I>(
    ctx: Rc<ConnContext>,
    io: I,
    read_ahead: Vec<u8>,
    peer: SocketAddr,
    protocol: Protocol,
    tls: bool,
) where
    I: AsyncRead + AsyncWrite + Unpin + 'static,
{
    let live = ctx.live();
    let limits = live.0.s.limits.clone();
    let builder = builder(&live.0.s, protocol);
    let activity = Rc::new(Activity::new());
    let h2 = protocol == Protocol::Http2;
    let h2_settings = &live.0.s.http2;
    let io = Watched {
        read_ahead,
        pos: 0,
        inner: io,
        activity: activity.clone(),
        coalesce: h2.then(Coalesce::default),
        guard: h2.then(|| Guard::new(h2_settings.control_frame_budget)),
    };
    let budget = h2.then(|| {
        let per_conn = h2_settings.send_budget_per_connection as usize;
        Rc::new(SendBudget {
            conn: Arc::new(Semaphore::new(per_conn)),
            global: ctx.h2_send_budget().clone(),
            max: per_conn.min(h2_settings.send_budget as usize),
        })
    });
    let responder = Responder {
        alt_svc: if tls { ctx.alt_svc().cloned() } else { None },
        ctx: ctx.clone(),
        live: RefCell::new(live),
        peer,
        tls,
        version: match protocol {
            Protocol::Http1 => "HTTP/1.1",
            Protocol::Http2 => "HTTP/2.0",
        },
        activity: activity.clone(),
        budget,
    };
    let conn = builder.serve_connection(TokioIo::new(io), responder);
    tokio::pin!(conn);
    let mut shutdown = ctx.shutdown.clone();
    let mut stop_seen = ctx.stopping.get();
    if stop_seen {
        conn.as_mut().graceful_shutdown();
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
                        if !h2 {
                            return;
                        }
                        // The guard sends GOAWAY at the next frame
                        // boundary when hyper polls the connection next
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
        .max_local_error_reset_streams(h.max_local_error_resets)
        .max_send_buf_size(h.max_send_buffer);
    match protocol {
        Protocol::Http1 => b.http1_only(),
        Protocol::Http2 => b.http2_only(),
    }
}

/// The connection's service: the settings in force at each request, the
/// `ServeDir` built from them, and the bookkeeping that makes its
/// responses counted and logged.
#[derive(Debug)]
pub(crate) struct Responder {
    ctx: Rc<ConnContext>,
    /// The settings in force and their generation, re-read only when a
    /// reload bumped it (one relaxed load per request, like conn.rs).
    live: RefCell<(Arc<Live>, u64)>,
    peer: SocketAddr,
    tls: bool,
    version: &'static str,
    activity: Rc<Activity>,
    /// HTTP/2: what its file bodies may hold read and not yet written.
    budget: Option<Rc<SendBudget>>,
    /// `Alt-Svc` advertising HTTP/3 (HTTPS connections, `[http3]` on).
    alt_svc: Option<HeaderValue>,
}

impl Responder {
    /// The responder of one HTTP/3 connection from `peer` (`h3conn`):
    /// the same answers, counting and log as the TCP listeners', with the
    /// flow control and idle rule QUIC itself enforces.
    pub(crate) fn for_http3(ctx: Rc<ConnContext>, peer: SocketAddr) -> Responder {
        let live = ctx.live();
        Responder {
            ctx,
            live: RefCell::new(live),
            peer,
            tls: true,
            version: "HTTP/3.0",
            activity: Rc::new(Activity::new()),
            budget: None,
            alt_svc: None,
        }
    }

    fn live(&self) -> Arc<Live> {
        let mut live = self.live.borrow_mut();
        if self.ctx.generation() != live.1 {
            *live = self.ctx.live();
        }
        live.0.clone()
    }
}

type ResponseFuture = Pin<Box<dyn Future<Output = Result<Response<Logged>, Infallible>>>>;

impl<B: Send + 'static> hyper::service::Service<Request<B>> for Responder {
    type Response = Response<Logged>;
    type Error = Infallible;
    type Future = ResponseFuture;

    fn call(&self, mut req: Request<B>) -> ResponseFuture {
        let t0 = Instant::now();
        let in_flight = InFlight::new(&self.activity);
        let live = self.live();
        if !live.s.serve.rules.is_empty() || !live.s.sites.is_empty() {
            // What the site's rules judge: the client behind trusted
            // proxies, and the scheme.
            let header = |name: &str| req.headers().get(name).map(HeaderValue::as_bytes);
            let client = crate::http::forwarded::client_addr(
                self.peer.ip(),
                &live.s.trusted_proxies,
                header("forwarded"),
                header("x-forwarded-for"),
            );
            req.extensions_mut().insert(servedir::ClientAddr(client));
            if self.tls {
                req.extensions_mut().insert(servedir::Tls);
            }
        }
        let request = RequestFields::of(&req, live.access.is_some());
        let host = servedir::request_host(req.version(), req.uri(), req.headers());
        let rejected = host_rule(&req, host).err();
        let h2 = req.version() == http::Version::HTTP_2;
        let mut files = live.service_for(host).clone();
        let (ctx, peer, version) = (self.ctx.clone(), self.peer, self.version);
        let gate = self.budget.clone().map(Gate::new);
        let alt_svc = self.alt_svc.clone();
        Box::pin(async move {
            let response = match rejected {
                // The HTTP/1.1 parser's rule (`http::request`), which hyper
                // leaves to the server: every listener rejects alike.
                Some(why) => {
                    let mut response = servedir::plan_response(&httpfile::plan::reject(400, why));
                    if !h2 {
                        // hyper closes an HTTP/1.1 connection that says so.
                        response
                            .headers_mut()
                            .insert(CONNECTION, HeaderValue::from_static("close"));
                    }
                    response
                }
                None => match files.call(req).await {
                    Ok(r) => r,
                    Err(never) => match never {},
                },
            };
            let (mut parts, body) = response.into_parts();
            parts
                .headers
                .insert(SERVER, HeaderValue::from_static(httpfile::encode::SERVER));
            if let Some(v) = alt_svc {
                parts.headers.insert(http::header::ALT_SVC, v);
            }
            let status = parts.status.as_u16();
            let body = Logged {
                body,
                sent: 0,
                ended: false,
                gate,
                done: Some(Done {
                    ctx,
                    live,
                    peer,
                    version,
                    request,
                    status,
                    t0,
                    _in_flight: in_flight,
                }),
            };
            Ok(Response::from_parts(parts, body))
        })
    }
}

/// `Host` as RFC 9112 3.2 and RFC 9113 8.3.1 require it
/// ([`httpfile::head::check_host`], what the HTTP/1.1 engine's parser
/// applies): HTTP/1.1 names one valid `Host`, HTTP/2 a valid authority.
/// `host` is the one that counts (`servedir::request_host`).
fn host_rule<B>(req: &Request<B>, host: Option<&[u8]>) -> Result<(), &'static str> {
    let hosts = req.headers().get_all(http::header::HOST).iter().count();
    httpfile::head::check_host(req.version() == http::Version::HTTP_11, hosts, host)
}

/// What the counters and the access log need of a request, kept until its
/// response ends: the method always, the rest only while a log is on.
#[derive(Debug)]
struct RequestFields {
    method: http::Method,
    log: Option<LogFields>,
}

#[derive(Debug)]
struct LogFields {
    target: String,
    forwarded: Option<HeaderValue>,
    x_forwarded_for: Option<HeaderValue>,
    referer: Option<HeaderValue>,
    user_agent: Option<HeaderValue>,
}

impl RequestFields {
    fn of<B>(req: &Request<B>, logged: bool) -> RequestFields {
        let header = |name| req.headers().get(name).cloned();
        RequestFields {
            method: req.method().clone(),
            log: logged.then(|| LogFields {
                target: req
                    .uri()
                    .path_and_query()
                    .map_or("/", |pq| pq.as_str())
                    .to_string(),
                forwarded: header(http::header::FORWARDED),
                x_forwarded_for: header(http::header::HeaderName::from_static("x-forwarded-for")),
                referer: header(REFERER),
                user_agent: header(USER_AGENT),
            }),
        }
    }
}

/// A response's accounting, settled when its body is dropped.
#[derive(Debug)]
struct Done {
    ctx: Rc<ConnContext>,
    /// The settings the request was answered under (their access log).
    live: Arc<Live>,
    peer: SocketAddr,
    version: &'static str,
    request: RequestFields,
    status: u16,
    t0: Instant,
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
    /// HTTP/2: the send budget file reads wait for.
    gate: Option<Gate>,
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
        if let Some(gate) = &mut this.gate {
            if this.body.reads_file() {
                let want = ready!(gate.poll_reserve(cx));
                this.body.limit_next_read(want);
            }
        }
        let mut polled = Pin::new(&mut this.body).poll_frame(cx);
        match &mut polled {
            Poll::Ready(Some(Ok(frame))) => {
                if let Some(data) = frame.data_mut() {
                    this.sent += data.len() as u64;
                    if let Some(gate) = &mut this.gate {
                        gate.hold(data);
                    }
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
        let log = d.request.log.as_ref();
        fn value(v: Option<&HeaderValue>) -> Option<&[u8]> {
            v.map(HeaderValue::as_bytes)
        }
        d.ctx.finish(
            &d.live,
            &Exchange {
                peer: d.peer.ip(),
                request: Some(RequestLine {
                    method: d.request.method.as_str(),
                    target: log.map_or(&b""[..], |f| f.target.as_bytes()),
                    version: d.version,
                }),
                status: d.status,
                bytes: self.sent,
                // Every byte of these bodies is read through the backend;
                // whether the page cache held it is not known here.
                cold: 0,
                completed: self.ended || self.body.is_end_stream(),
                forwarded: value(log.and_then(|f| f.forwarded.as_ref())),
                x_forwarded_for: value(log.and_then(|f| f.x_forwarded_for.as_ref())),
                referer: value(log.and_then(|f| f.referer.as_ref())),
                user_agent: value(log.and_then(|f| f.user_agent.as_ref())),
                duration: d.t0.elapsed(),
            },
        );
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
    /// HTTP/2 only: frame accounting, checks and our own GOAWAY.
    guard: Option<Guard>,
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
            let now = Instant::now();
            self.activity.last.set(now);
            if self.guard.is_none() {
                self.activity.progress.set(now);
            }
        }
    }

    /// Notes `n` bytes of `bufs` the server wrote (the guard's frame
    /// boundaries and send progress).
    fn wrote(&mut self, bufs: &[io::IoSlice<'_>], mut n: usize) {
        self.moved(n);
        let Some(g) = &mut self.guard else {
            return;
        };
        let mut progress = false;
        for b in bufs {
            if n == 0 {
                break;
            }
            let k = b.len().min(n);
            progress |= g.scan_write(&b[..k]);
            n -= k;
        }
        if progress {
            self.activity.progress.set(Instant::now());
        }
    }

    /// Takes a close the serve loop asked for.
    fn take_abort(&mut self) {
        if let Some(code) = self.activity.abort.take() {
            if let Some(g) = &mut self.guard {
                g.close(code);
            }
        }
    }

    fn closing(&self) -> bool {
        self.guard
            .as_ref()
            .is_some_and(|g| g.closing != Closing::No)
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
        if let Some(g) = &mut this.guard {
            if let Some((at, code)) = g.scan_read(&buf.filled()[before..]) {
                // hyper gets the bytes before the offending frame's end
                // (an incomplete frame, which h2 does not act on); the
                // GOAWAY follows on its next read.
                buf.set_filled(before + at);
                g.close(code);
                this.activity.closing_at.set(Some(Instant::now()));
                if at == 0 {
                    return this.poll_read_closing(cx);
                }
            }
        }
        Poll::Ready(Ok(()))
    }
}

impl<I: AsyncRead + AsyncWrite + Unpin> Watched<I> {
    /// Reading while closing: send the GOAWAY, then drop input until the
    /// client closes (hyper then sees the end).
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
            let Some(g) = &mut self.guard else {
                return Poll::Ready(());
            };
            match g.closing {
                Closing::No | Closing::Done => return Poll::Ready(()),
                Closing::Requested(code) => {
                    if !g.at_boundary() {
                        // hyper is mid-frame: its next write ends the frame.
                        return Poll::Pending;
                    }
                    let frame = g.goaway(code);
                    g.closing = Closing::Queued;
                    if let Some(c) = &mut self.coalesce {
                        c.out.extend_from_slice(&frame);
                    }
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
                    if let Some(g) = &mut self.guard {
                        g.closing = Closing::Done;
                    }
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
        let n = self.guard.as_ref().map_or(0, |g| g.until_boundary(len));
        if n == 0 {
            ready!(self.poll_goaway(cx));
            return Poll::Pending;
        }
        let mut left = n;
        if let Some(c) = &mut self.coalesce {
            for b in bufs {
                let k = b.len().min(left);
                c.out.extend_from_slice(&b[..k]);
                left -= k;
            }
        }
        self.wrote(bufs, n);
        Poll::Ready(Ok(n))
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
        if let Some(c) = &mut this.coalesce {
            if c.take(buf.len()) {
                c.out.extend_from_slice(buf);
                this.wrote(&bufs, buf.len());
                return Poll::Ready(Ok(buf.len()));
            }
            ready!(this.poll_drain(cx))?;
        }
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
        if let Some(c) = &mut this.coalesce {
            let len = bufs.iter().map(|b| b.len()).sum();
            if c.take(len) {
                for b in bufs {
                    c.out.extend_from_slice(b);
                }
                this.wrote(bufs, len);
                return Poll::Ready(Ok(len));
            }
            ready!(this.poll_drain(cx))?;
        }
        let r = Pin::new(&mut this.inner).poll_write_vectored(cx, bufs);
        if let Poll::Ready(Ok(n)) = r {
            this.wrote(bufs, n);
        }
        r
    }

    fn is_write_vectored(&self) -> bool {
        self.coalesce.is_some() || self.inner.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if this.closing() {
            ready!(this.poll_goaway(cx));
            return Poll::Ready(Ok(()));
        }
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
        if this.closing() {
            ready!(this.poll_goaway(cx));
            return Poll::Ready(Ok(()));
        }
        ready!(this.poll_drain(cx))?;
        Pin::new(&mut this.inner).poll_shutdown(cx)
    }
}

/// The bytes HTTP/2 file bodies of one connection may hold read and not
/// yet written, and the process-wide pool they also draw from.
#[derive(Debug)]
struct SendBudget {
    conn: Arc<Semaphore>,
    global: Arc<Semaphore>,
    /// The most one read may ask for (the smaller of the two budgets).
    max: usize,
}

/// A read's share of the budgets, released when hyper drops its bytes
/// (after they were written, or with the stream).
type Permits = (Option<OwnedSemaphorePermit>, Option<OwnedSemaphorePermit>);

type Acquire = Pin<Box<dyn Future<Output = Permits>>>;

/// One stream's reads: each waits for budget first, and is sized by how
/// well the client keeps up. The first read is [`Gate::MIN_READ`]; each
/// next one doubles (up to the service's read chunk) unless more than two
/// reads' worth still waits to be written, when it holds, and it falls
/// back to the minimum once more than four do. A stream whose window is
/// closed is not polled for more (h2 waits for capacity first), so it
/// holds the one read it made; the budgets bound the rest. Doubling only
/// once everything before was written kept reads at 16-32 KiB (h2 still
/// holds the last chunk when it asks for the next): tls_large_h2 cost
/// 1.25x the CPU per request of 128 KiB reads.
struct Gate {
    budget: Rc<SendBudget>,
    /// Size of the last read (0: none yet).
    last: usize,
    /// Bytes this stream read that hyper has not dropped yet.
    outstanding: Arc<AtomicUsize>,
    /// Permits for the next read, and its size.
    ready: Option<(Permits, usize)>,
    waiting: Option<(Acquire, usize)>,
}

impl std::fmt::Debug for Gate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gate")
            .field("last", &self.last)
            .field("outstanding", &self.outstanding.load(Relaxed))
            .finish_non_exhaustive()
    }
}

impl Gate {
    /// One HTTP/2 DATA frame at the default SETTINGS_MAX_FRAME_SIZE.
    const MIN_READ: usize = 16 * 1024;

    fn new(budget: Rc<SendBudget>) -> Gate {
        Gate {
            budget,
            last: 0,
            outstanding: Arc::new(AtomicUsize::new(0)),
            ready: None,
            waiting: None,
        }
    }

    fn next_size(&self) -> usize {
        let out = self.outstanding.load(Relaxed);
        let size = if self.last == 0 || out > 4 * self.last {
            Self::MIN_READ
        } else if out <= 2 * self.last {
            2 * self.last
        } else {
            self.last
        };
        size.min(self.budget.max).max(1)
    }

    /// Ready with the size of the next read once its permits are held.
    fn poll_reserve(&mut self, cx: &mut Context<'_>) -> Poll<usize> {
        if let Some((_, size)) = &self.ready {
            return Poll::Ready(*size);
        }
        if let Some((acquire, size)) = &mut self.waiting {
            let permits = ready!(acquire.as_mut().poll(cx));
            let size = *size;
            self.waiting = None;
            self.ready = Some((permits, size));
            return Poll::Ready(size);
        }
        let mut size = self.next_size();
        let b = &self.budget;
        let Ok(conn) = b.conn.clone().try_acquire_many_owned(size as u32) else {
            let (conn, global) = (b.conn.clone(), b.global.clone());
            let acquire = async move {
                let c = conn.acquire_many_owned(size as u32).await.ok();
                let g = global.acquire_many_owned(size as u32).await.ok();
                (c, g)
            };
            self.waiting = Some((Box::pin(acquire), size));
            return self.poll_reserve(cx);
        };
        let global = match b.global.clone().try_acquire_many_owned(size as u32) {
            Ok(g) => Some(g),
            // A connection that holds nothing may read one small chunk
            // beyond the process budget, so no client starves behind others.
            Err(_) if b.conn.available_permits() + size >= b.max => {
                drop(conn);
                size = Self::MIN_READ.min(b.max);
                let conn = b.conn.clone().try_acquire_many_owned(size as u32).ok();
                self.ready = Some(((conn, None), size));
                return Poll::Ready(size);
            }
            Err(_) => {
                let global = b.global.clone();
                let acquire = async move {
                    let g = global.acquire_many_owned(size as u32).await.ok();
                    (Some(conn), g)
                };
                self.waiting = Some((Box::pin(acquire), size));
                return self.poll_reserve(cx);
            }
        };
        self.ready = Some(((Some(conn), global), size));
        Poll::Ready(size)
    }

    /// Hands the reserved permits to `data`: they go back when hyper drops it.
    fn hold(&mut self, data: &mut Bytes) {
        let Some((permits, size)) = self.ready.take() else {
            return;
        };
        self.last = size;
        self.outstanding.fetch_add(data.len(), Relaxed);
        let bytes = std::mem::take(data);
        *data = Bytes::from_owner(Held {
            bytes,
            outstanding: self.outstanding.clone(),
            _permits: permits,
        });
    }
}

/// A read's bytes with their share of the send budget.
struct Held {
    bytes: Bytes,
    outstanding: Arc<AtomicUsize>,
    _permits: Permits,
}

impl AsRef<[u8]> for Held {
    fn as_ref(&self) -> &[u8] {
        &self.bytes
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        self.outstanding.fetch_sub(self.bytes.len(), Relaxed);
    }
}
