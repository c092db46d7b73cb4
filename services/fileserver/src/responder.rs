//! The responder HTTP/2 and HTTP/3 share: a request in, the settings in
//! force for it (re-read when a reload bumped their generation), the
//! `ServeDir` of its site, and a response whose body counts and logs it
//! once it ends or drops half sent. `h2conn` (over `h2io`) and `h3conn`
//! call it; it touches the connection only through [`Activity`]
//! (responses in flight, for the idle rule) and the HTTP/2 send budget.
//!
//! ```text
//! Responder::call -> host rule, site rules' inputs -> ServeDir::call
//!   -> Response<Logged>: Server, Alt-Svc; Logged: bytes sent, budget gate
//!                                         `-> Drop: count + log
//! ```

use crate::accesslog::RequestLine;
use crate::exchange::Exchange;
use crate::state::{ConnContext, Live};
use bytes::Bytes;
use http::header::{HeaderValue, REFERER, SERVER, USER_AGENT};
use http::{Request, Response};
use http_body::{Body as HttpBody, Frame, SizeHint};
use std::cell::{Cell, RefCell};
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::sync::Arc;
use std::task::{ready, Context, Poll};
use std::time::Instant;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tower_service::Service as _;

/// When bytes last moved, and how many responses are in flight: the idle
/// rule's inputs.
#[derive(Debug)]
pub(crate) struct Activity {
    pub(crate) last: Cell<Instant>,
    /// When the connection last made send progress: for HTTP/1.1 any byte
    /// moved, for HTTP/2 a HEADERS or DATA frame written (a client that
    /// pings while it holds every window at zero makes none).
    pub(crate) progress: Cell<Instant>,
    pub(crate) in_flight: Cell<usize>,
    /// HTTP/2: a GOAWAY code the serve loop asks the guard to send.
    pub(crate) abort: Cell<Option<u32>>,
    /// HTTP/2: when the guard began closing (the linger runs from here).
    pub(crate) closing_at: Cell<Option<Instant>>,
    /// Woken when the first response of a quiet spell starts, so the serve
    /// loop swaps the keepalive deadline for the send timeout at once.
    pub(crate) busy: tokio::sync::Notify,
}

impl Activity {
    pub(crate) fn new() -> Activity {
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
    /// The responder of one TCP connection from `peer`, answering under
    /// `live` until a reload; `tls`: what a rule's `scheme` matches (and
    /// whether `Alt-Svc` is sent); `version` as the access log names it.
    pub(crate) fn new(
        ctx: Rc<ConnContext>,
        live: (Arc<Live>, u64),
        peer: SocketAddr,
        tls: bool,
        version: &'static str,
        activity: Rc<Activity>,
        budget: Option<Rc<SendBudget>>,
    ) -> Responder {
        Responder {
            alt_svc: if tls { ctx.alt_svc().cloned() } else { None },
            ctx,
            live: RefCell::new(live),
            peer,
            tls,
            version,
            activity,
            budget,
        }
    }

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

/// The future of one request's answer.
pub(crate) type ResponseFuture = Pin<Box<dyn Future<Output = Response<Logged>>>>;

impl Responder {
    /// The answer to `req`, counted and logged once its body ends or is
    /// dropped.
    pub(crate) fn call<B: Send + 'static>(&self, mut req: Request<B>) -> ResponseFuture {
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
        let mut files = live.service_for(host).clone();
        let (ctx, peer, version) = (self.ctx.clone(), self.peer, self.version);
        let gate = self.budget.clone().map(Gate::new);
        let alt_svc = self.alt_svc.clone();
        Box::pin(async move {
            let response = match rejected {
                // The HTTP/1.1 parser's rule (`http::request`), which h2
                // and h3 leave to the server: every listener rejects alike.
                Some(why) => servedir::plan_response(&httpfile::plan::reject(400, why)),
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
            Response::from_parts(parts, body)
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

/// `servedir`'s body, counting what the connection takes of it; on drop the
/// response is counted and logged with the bytes it sent (all of them, or
/// fewer when the client left or reset the stream).
#[derive(Debug)]
pub(crate) struct Logged {
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

/// The bytes HTTP/2 file bodies of one connection may hold read and not
/// yet written, and the process-wide pool they also draw from.
#[derive(Debug)]
pub(crate) struct SendBudget {
    conn: Arc<Semaphore>,
    global: Arc<Semaphore>,
    /// The most one read may ask for (the smaller of the two budgets).
    max: usize,
}

impl SendBudget {
    /// A connection's budget under `[http2]`, drawing also on the
    /// process-wide pool.
    pub(crate) fn new(ctx: &ConnContext, h: &crate::config::Http2Settings) -> SendBudget {
        let per_conn = h.send_budget_per_connection as usize;
        SendBudget {
            conn: Arc::new(Semaphore::new(per_conn)),
            global: ctx.h2_send_budget().clone(),
            max: per_conn.min(h.send_budget as usize),
        }
    }
}

/// A read's share of the budgets, released when h2 drops its bytes
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
    /// Bytes this stream read that h2 has not dropped yet.
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

    /// Hands the reserved permits to `data`: they go back when h2 drops it.
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
