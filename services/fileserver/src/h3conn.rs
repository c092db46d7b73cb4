//! HTTP/3: QUIC (quinn) on `tls_listen`'s port, UDP, one endpoint per
//! worker on its own SO_REUSEPORT socket. Each request goes the way it
//! goes on the other engines: its head read into an
//! `httpfile::RequestHead`, the shared context step (`request_context`:
//! Host rule, site, options, files, client), `decide`, the plan, whose
//! fields are rendered as HTTP/2 renders them (`render`) into the h3
//! response head, and whose body is sent from memory or read from the
//! file through the site's file manager, the file checked before its
//! last bytes. Every exchange is counted and logged (`HTTP/3.0` in the
//! access log) like the others, however it ends.
//!
//! ```text
//! UDP socket (worker i) -> quinn Endpoint -> Incoming
//!   -> (server.rs) Retry for an unproven address under load, the
//!      handshake cap, the client's share
//!   -> handshake: timeout(tls_handshake_timeout, QUIC + TLS 1.3, ALPN h3)
//!   -> (server.rs) one of max_connections
//!   -> serve: h3 Connection, accept request streams until GOAWAY / close
//!        each: head within header_read_timeout, STOP_SENDING for a body,
//!        RequestHead -> RequestContext::enter -> decide -> plan
//!        -> send_response (head from the plan), then per chunk of at
//!           most 128 KiB: hold the send budgets, read (the file checked
//!           before its last bytes; changed: STOP_STREAM INTERNAL_ERROR),
//!           send_data (paced by limit_rate); finish; each step within
//!           send_timeout (else H3_REQUEST_CANCELLED)
//!        Record: the Exchange, settled when the stream's task ends or drops
//! shutdown: GOAWAY; requests in flight finish; then the connection closes
//! ```
//!
//! What a client can hold: QUIC flow control bounds what it sends
//! (`stream_window`, `connection_window`), `send_window` what the server
//! holds for it, and the two timeouts how long a stream may sit still
//! (docs/operations.md, "HTTP/2 and HTTP/3 bounds").
//!
//! Connection migration is off: a client whose address changes may land
//! on another worker's socket, which does not know the connection.

use crate::config::Http3Settings;
use crate::exchange::{LogFields, Outcome};
use crate::render::{self, Part};
use crate::request_context::{self, RequestContext};
use crate::state::{ConnContext, Live};
use bytes::Bytes;
use decide::Representation;
use h3::quic::SendStream as _;
use http::{HeaderName, HeaderValue};
use httpfile::plan::{Body, Plan};
use httpfile::ByteRange;
use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::future::Future;
use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The worker's QUIC endpoint on `socket`, with `[http3]`'s limits and
/// the HTTPS listener's certificates.
pub(crate) fn endpoint(
    socket: std::net::UdpSocket,
    certs: &crate::tls::Certs,
    s: &Http3Settings,
) -> std::io::Result<quinn::Endpoint> {
    let crypto = certs.quic().map_err(std::io::Error::other)?;
    let mut server = quinn::ServerConfig::with_crypto(Arc::new(crypto));
    let transport = s.transport()?;
    server.transport_config(Arc::new(transport));
    server.migration(false);
    quinn::Endpoint::new(
        quinn::EndpointConfig::default(),
        Some(server),
        socket,
        Arc::new(quinn::TokioRuntime),
    )
}

/// Completes the handshake of `incoming` within `tls_handshake_timeout`,
/// counted by result; `None` when it failed or timed out.
pub(crate) async fn handshake(
    ctx: &ConnContext,
    incoming: quinn::Incoming,
) -> Option<quinn::Connection> {
    let peer = incoming.remote_address();
    let timeout = ctx
        .live()
        .0
        .s
        .tls
        .as_ref()
        .map_or(Duration::from_secs(10), |t| t.handshake_timeout);
    let result = match tokio::time::timeout(timeout, incoming).await {
        Ok(Ok(conn)) => {
            metrics::counter!("fileserver_tls_handshakes_total", "result" => "ok").increment(1);
            return Some(conn);
        }
        Ok(Err(e)) => {
            tracing::debug!(%peer, "QUIC handshake failed: {e}");
            "error"
        }
        Err(_) => {
            tracing::debug!(%peer, "QUIC handshake timed out");
            "timeout"
        }
    };
    metrics::counter!("fileserver_tls_handshakes_total", "result" => result).increment(1);
    None
}

/// Serves one QUIC connection, its handshake done, until the client
/// closes it, it idles out, or shutdown drains it.
pub(crate) async fn serve(ctx: Rc<ConnContext>, conn: quinn::Connection) {
    let peer = conn.remote_address();
    let Some(settings) = ctx.live().0.s.http3.clone() else {
        return;
    };
    metrics::counter!("fileserver_tls_connections_total", "alpn" => "h3").increment(1);
    let quic = conn.clone();
    let mut h3 = match h3::server::builder()
        .max_field_section_size(settings.max_field_section_size)
        .build::<_, Bytes>(h3_quinn::Connection::new(conn))
        .await
    {
        Ok(h3) => h3,
        Err(e) => {
            tracing::debug!(%peer, "HTTP/3 connection setup failed: {e}");
            return;
        }
    };
    let conn = Rc::new(Conn {
        live: RefCell::new(ctx.live()),
        output: Output::new(&ctx),
        ctx: ctx.clone(),
        peer,
        scratch: RefCell::default(),
    });
    let mut requests = tokio::task::JoinSet::new();
    let mut stop = ctx.stopping.waiter();
    let mut stop_seen = ctx.stopping.get() || *ctx.shutdown.borrow();
    if stop_seen {
        let _ = h3.shutdown(0).await;
    }
    loop {
        // After GOAWAY, once the requests before it are answered: h3
        // would wait for the client's own GOAWAY, which may never come.
        if stop_seen && requests.is_empty() {
            break;
        }
        tokio::select! {
            accepted = h3.accept() => match accepted {
                Ok(Some(resolver)) => {
                    requests.spawn_local(respond(conn.clone(), resolver));
                }
                // GOAWAY sent and every request before it accepted, or
                // the client closed.
                Ok(None) => break,
                Err(e) => {
                    tracing::debug!(%peer, "HTTP/3 connection ended: {e}");
                    break;
                }
            },
            Some(_) = requests.join_next(), if !requests.is_empty() => {}
            () = stop.wait(), if !stop_seen => {
                stop_seen = true;
                let _ = h3.shutdown(0).await;
            }
        }
    }
    // The connection stays open while its responses finish.
    while requests.join_next().await.is_some() {}
    if stop_seen {
        close_when_delivered(&quic).await;
    }
}

/// How long a draining connection must move no datagram either way before
/// it is closed.
const QUIET: Duration = Duration::from_millis(300);

/// Closes a drained connection once what its responses handed to QUIC has
/// been delivered, or when the client closes it first. A response is done
/// for h3 when QUIC has taken its last bytes, not when the client has them;
/// a close then would discard what is still unacknowledged. While data is
/// in flight the client acknowledges it (and QUIC resends what was lost),
/// so datagrams move both ways; when none has moved for [`QUIET`], nothing
/// is left to deliver.
async fn close_when_delivered(quic: &quinn::Connection) {
    let moved = |q: &quinn::Connection| {
        let s = q.stats();
        (s.udp_tx.datagrams, s.udp_rx.datagrams)
    };
    let mut last = moved(quic);
    loop {
        tokio::select! {
            _ = quic.closed() => return,
            _ = tokio::time::sleep(QUIET) => {}
        }
        let now = moved(quic);
        if now == last {
            break;
        }
        last = now;
    }
    quic.close(H3_NO_ERROR.into(), b"shutting down");
}

/// Describes HTTP/3's own series and starts them at 0, so a dashboard
/// sees them before the first event.
pub(crate) fn describe() {
    metrics::describe_counter!(
        "fileserver_quic_incoming_total",
        "New QUIC connection attempts, by result: accepted (its handshake begins), \
         retry (asked to prove its address first, [http3] address_validation), \
         refused ([http3] max_handshakes in progress)."
    );
    metrics::describe_counter!(
        "fileserver_http3_timer_resets_total",
        "HTTP/3 request streams a timer ended, by timer: header_read (no request \
         head within header_read_timeout), send (the connection's answers made no \
         progress for send_timeout)."
    );
    for result in ["accepted", "retry", "refused"] {
        metrics::counter!("fileserver_quic_incoming_total", "result" => result).absolute(0);
    }
    for timer in ["header_read", "send"] {
        metrics::counter!("fileserver_http3_timer_resets_total", "timer" => timer).absolute(0);
    }
}

/// HTTP/3's code for a connection closed with nothing wrong (RFC 9114 8.1).
const H3_NO_ERROR: u32 = 0x100;

/// The most of a body one read brings, and one hold of the send budgets
/// covers.
const READ_CHUNK: usize = 128 * 1024;

/// What a connection's request streams share.
struct Conn {
    ctx: Rc<ConnContext>,
    /// The settings in force and their generation, re-read only when a
    /// reload bumped it (one relaxed load per request, like conn.rs).
    live: RefCell<(Arc<Live>, u64)>,
    peer: SocketAddr,
    output: Output,
    /// Where each response head's field values are written in turn: one
    /// buffer for the connection, not one grown per response.
    scratch: RefCell<Vec<u8>>,
}

impl Conn {
    fn live(&self) -> Arc<Live> {
        let mut live = self.live.borrow_mut();
        if self.ctx.generation() != live.1 {
            *live = self.ctx.live();
        }
        live.0.clone()
    }
}

/// Answers one request stream.
async fn respond(
    conn: Rc<Conn>,
    mut resolver: h3::server::RequestResolver<h3_quinn::Connection, Bytes>,
) {
    let peer = conn.peer;
    let head_timeout = conn.live().s.limits.header_read_timeout;
    // The head's first frame within header_read_timeout, as HTTP/1.1 and
    // HTTP/2 bound theirs: a stream that sends nothing, or a frame a byte
    // at a time, holds no slot past it.
    let first = std::future::poll_fn(|cx| resolver.frame_stream.poll_next(cx));
    let frame = match tokio::time::timeout(head_timeout, first).await {
        Ok(frame) => frame,
        Err(_) => {
            timer_reset("header_read");
            tracing::debug!(%peer, "HTTP/3 request head not in within {head_timeout:?}");
            // Dropping the resolver then stops the receiving side.
            resolver
                .frame_stream
                .reset(h3::error::Code::H3_REQUEST_INCOMPLETE.value());
            return;
        }
    };
    let resolved = match resolver.accept_with_frame(frame) {
        Ok(r) => r.resolve().await,
        Err(e) => Err(e),
    };
    let (req, mut stream) = match resolved {
        Ok(r) => r,
        Err(e) => {
            tracing::debug!(%peer, "HTTP/3 request refused: {e}");
            return;
        }
    };
    // Bodies are never used: what a client sends after the head is
    // dropped by QUIC from here on, not buffered up to the window
    // (RFC 9114 4.1; no frame goes out when the request already ended).
    stream.stop_sending(h3::error::Code::H3_NO_ERROR);
    // The settings in force now that the head is in.
    let live = conn.live();
    // Counted and logged when dropped, on every path below (and when the
    // task is), with the bytes QUIC took, complete or not.
    let mut record = Record {
        conn: &conn,
        live: &live,
        req: &req,
        o: Outcome::begun(Instant::now()),
    };
    // Boxed: the answer's state (decide, then the send) stays where it
    // was made, while the stream's task, spawned, polled and read back
    // by the JoinSet, is moved whole each time (with the answer inline,
    // 2144 bytes, four copies of it were 7% of h3_small's CPU).
    Box::pin(answer(&mut record, &mut stream)).await;
}

/// Decides `record`'s request and sends the answer on `stream`: the head
/// read into an `httpfile::RequestHead`, the shared context step, decide,
/// the plan rendered.
async fn answer(record: &mut Record<'_>, stream: &mut Stream) {
    let (conn, live, req) = (record.conn, record.live, record.req);
    let (method, target, authority, fields) = parts(req);
    // Whether the stream ended with the head is not known here; a body
    // is not read either way (STOP_SENDING).
    let (mut head, sent) = request_context::read_head(method, target, false, authority, fields);
    let files = conn.ctx.files();
    let rc = match RequestContext::enter(live, files, conn.peer.ip(), true, &mut head, sent) {
        Ok(rc) => rc,
        Err(malformed) => {
            let plan = malformed.plan();
            return send(record, stream, &plan, None, files.manager(), head.is_head()).await;
        }
    };
    record.o.site = rc.site;
    let (mut path, mut ranges) = (Vec::new(), Vec::new());
    let checked = decide::Files {
        fm: rc.fm,
        check: decide::Check::AtResolve,
    };
    let decision = decide::decide_checked(checked, rc.serve, &head, &mut path).await;
    let plan = decision.plan(&head, &mut ranges);
    let rep = decision.representation();
    send(record, stream, &plan, rep, rc.fm, head.is_head()).await;
}

/// Sends `plan`'s head and, unless `head_only` (HEAD), its body (a file's
/// from `rep`, read through `fm`) on `stream`: each step within
/// `send_timeout`, each read held against the send budgets until QUIC has
/// taken it, paced by `limit_rate`.
async fn send(
    record: &mut Record<'_>,
    stream: &mut Stream,
    plan: &Plan<'_>,
    rep: Option<&Representation>,
    fm: &filemanager::FileManager,
    head_only: bool,
) {
    let (conn, live) = (record.conn, record.live);
    let peer = conn.peer;
    let send_timeout = live.s.limits.send_timeout;
    let mut parts = VecDeque::new();
    match plan.body {
        _ if head_only => {}
        Body::Empty => {}
        Body::Message(detail) => {
            let mut message = Vec::new();
            httpfile::plan::write_message(plan.status, detail, &mut message);
            parts.push_back(Part::Bytes(message));
        }
        Body::Bytes(b) => parts.push_back(Part::Bytes(b.to_vec())),
        Body::File(range) => parts.push_back(Part::Range { range, last: true }),
        Body::Multipart(m) => render::push_multipart(&m, &mut parts),
    }
    record.o.status = plan.status;
    let response = response_head(conn, plan, rep);
    let out = &conn.output;
    let sent: Result<(), Cut> = async {
        out.step(send_timeout, stream.send_response(response), peer, "response head not sent")
            .await?;
        let l = &live.s.limits;
        let pace = crate::pace::Pace::new(l.limit_rate, l.limit_rate_after);
        // A body in memory is sent from the cache's own copy, not copied
        // (and a HEAD's takes no reference to it).
        let shared = rep.filter(|_| !parts.is_empty()).and_then(Representation::shared_bytes);
        for part in parts {
            let none = ByteRange { start: 0, end: 0 };
            let (mut bytes, mut range, last) = match part {
                Part::Bytes(b) => (Bytes::from(b), none, false),
                Part::Range { range, last } => match shared.as_ref().and_then(|b| render::shared_part(b, range)) {
                    Some(b) => (b, none, false),
                    None => (Bytes::new(), range, last),
                },
            };
            while !bytes.is_empty() || !range.is_empty() {
                let n = (bytes.len() + range.len() as usize).min(READ_CHUNK);
                // What the next read brings is held against the budgets
                // until QUIC has taken it, so streams waiting on a client's
                // window hold no file data beyond them.
                let _held = out.hold(n as u32, send_timeout).await.ok_or(Cut::Stalled)?;
                let mut data = if bytes.is_empty() {
                    let mut buf = Vec::with_capacity(n);
                    let read = match rep {
                        Some(rep) => render::read_part(rep, fm, range, n, last, &mut buf).await,
                        None => None,
                    };
                    let Some(cold) = read else {
                        // The file changed or failed mid-send: end the
                        // stream short, as the other engines end theirs.
                        tracing::debug!(%peer, "HTTP/3 body ended early: the file changed or failed");
                        stream.stop_stream(h3::error::Code::H3_INTERNAL_ERROR);
                        return Err(Cut::Ended);
                    };
                    record.o.cold += cold;
                    range.start += n as u64;
                    Bytes::from(buf)
                } else {
                    bytes.split_to(n)
                };
                // Paced (`limit_rate`): this stream sleeps; the others go on.
                while !data.is_empty() {
                    let n = match &pace {
                        Some(p) => p.wait(record.o.sent, data.len() as u64).await as usize,
                        None => data.len(),
                    };
                    let chunk = data.split_to(n);
                    out.step(send_timeout, stream.send_data(chunk), peer, "client went away")
                        .await?;
                    record.o.sent += n as u64;
                }
            }
        }
        record.o.completed = true;
        out.step(send_timeout, stream.finish(), peer, "stream not finished")
            .await
    }
    .await;
    if let Err(Cut::Stalled) = sent {
        // The connection's answers must make progress within
        // send_timeout, as on HTTP/2: a client that opens no window holds
        // them that long at most, whatever their number.
        timer_reset("send");
        tracing::debug!(%peer, "HTTP/3 answer made no progress for {send_timeout:?}");
        stream.stop_stream(h3::error::Code::H3_REQUEST_CANCELLED);
    }
}

/// Why an answer stopped before its end.
enum Cut {
    /// Its stream ended already: the client went away or reset it, or the
    /// file changed and the stream was stopped.
    Ended,
    /// The connection's answers made no progress for `send_timeout`.
    Stalled,
}

/// The response head from `plan`: `:status`, then
/// `render::each_head_field`, as HTTP/2 sends it.
fn response_head(conn: &Conn, plan: &Plan<'_>, rep: Option<&Representation>) -> http::Response<()> {
    let mut response = http::Response::new(());
    *response.status_mut() =
        http::StatusCode::from_u16(plan.status).unwrap_or(http::StatusCode::INTERNAL_SERVER_ERROR);
    // Room for every field at once: grown field by field, the map
    // reallocated three times a response.
    let h = response.headers_mut();
    h.reserve(16);
    let alt_svc = conn.ctx.alt_svc().map(HeaderValue::as_bytes);
    let now = rep.map(Representation::now);
    let scratch = &mut conn.scratch.borrow_mut();
    render::each_head_field(plan, now, alt_svc, scratch, |name, value, _| {
        if let (Ok(n), Ok(v)) = (HeaderName::from_bytes(name), HeaderValue::from_bytes(value)) {
            h.append(n, v);
        }
    });
    response
}

/// One exchange's record: counted and logged (`ConnContext::finish`)
/// when dropped, once its status is known, whatever ended it.
struct Record<'r> {
    conn: &'r Conn,
    /// The settings the request was answered under (their access log).
    live: &'r Live,
    req: &'r http::Request<()>,
    /// Its `sent`: body bytes QUIC took; `completed`: all of them.
    o: Outcome,
}

impl Drop for Record<'_> {
    fn drop(&mut self) {
        if self.o.status == 0 {
            return;
        }
        let (method, target, authority, fields) = parts(self.req);
        let logged = self.live.access.is_some();
        let f = LogFields::of(method, target, authority, fields, logged);
        let x = f.exchange(self.conn.peer.ip(), "HTTP/3.0", true, &self.o);
        self.conn.ctx.finish(self.live, &x);
    }
}

/// A head's method, target, `:authority` and fields.
type HeadParts<'a, F> = (&'a [u8], &'a [u8], Option<&'a [u8]>, F);

/// `req`'s method, target (`:path`), `:authority` and fields, as
/// `read_head` and `LogFields::of` read a head.
fn parts(req: &http::Request<()>) -> HeadParts<'_, impl Iterator<Item = (&[u8], &[u8])>> {
    let uri = req.uri();
    let target = uri
        .path_and_query()
        .map_or(&b"/"[..], |pq| pq.as_str().as_bytes());
    let fields = req.headers().iter();
    (
        req.method().as_str().as_bytes(),
        target,
        uri.authority().map(|a| a.as_str().as_bytes()),
        fields.map(|(n, v)| (n.as_str().as_bytes(), v.as_bytes())),
    )
}

/// What a connection's answers hold and how they move. File data read
/// and not yet taken by QUIC is bounded as HTTP/2's output is: `[http2]
/// send_budget_per_connection` per connection, `send_budget` across the
/// process (shared with HTTP/2); what QUIC itself holds, by `[http3]
/// send_window`. When none of the answers that wait has moved for
/// `send_timeout`, they all end: one clock for the connection, as HTTP/2's.
struct Output {
    /// The most one hold may take: the smaller budget.
    most: u32,
    connection: tokio::sync::Semaphore,
    process: Arc<tokio::sync::Semaphore>,
    /// When an answer last moved, or began to wait with none waiting.
    progress: Cell<Instant>,
    /// Steps waiting now.
    waiting: Cell<usize>,
}

impl Output {
    fn new(ctx: &ConnContext) -> Output {
        let http2 = &ctx.live().0.s.http2;
        let per_connection = http2.send_budget_per_connection;
        Output {
            most: per_connection.min(http2.send_budget),
            connection: tokio::sync::Semaphore::new(per_connection as usize),
            process: ctx.h2_send_budget().clone(),
            progress: Cell::new(Instant::now()),
            waiting: Cell::new(0),
        }
    }

    fn stalled(&self, send_timeout: Duration) -> bool {
        self.progress.get() + send_timeout <= Instant::now()
    }

    /// Runs one send step of an answer: [`Cut::Ended`] when the client
    /// went away (logged as `what`), [`Cut::Stalled`] when the
    /// connection's answers made no progress for `send_timeout` meanwhile.
    async fn step<E: std::fmt::Display>(
        &self,
        send_timeout: Duration,
        step: impl Future<Output = Result<(), E>>,
        peer: SocketAddr,
        what: &str,
    ) -> Result<(), Cut> {
        match self.wait(send_timeout, step, true).await {
            Some(Ok(())) => Ok(()),
            Some(Err(e)) => {
                tracing::debug!(%peer, "HTTP/3 {what}: {e}");
                Err(Cut::Ended)
            }
            None => Err(Cut::Stalled),
        }
    }

    /// Waits for `step`; when it ends, that is progress if it `moves`
    /// bytes, and `None` if not and the connection stalled meanwhile.
    async fn wait<F: Future>(
        &self,
        send_timeout: Duration,
        step: F,
        moves: bool,
    ) -> Option<F::Output> {
        if self.waiting.get() == 0 {
            self.progress.set(Instant::now());
        }
        self.waiting.set(self.waiting.get() + 1);
        let _left = Left(&self.waiting);
        tokio::pin!(step);
        loop {
            let stalled_at = self.progress.get() + send_timeout;
            tokio::select! {
                // A step done at once never arms the timer.
                biased;
                done = &mut step => {
                    if moves {
                        self.progress.set(Instant::now());
                    } else if self.stalled(send_timeout) {
                        // Freed by an answer the timer just ended: this
                        // one would wait on the same client.
                        return None;
                    }
                    return Some(done);
                }
                () = tokio::time::sleep_until(stalled_at.into()) => {
                    if self.stalled(send_timeout) {
                        return None;
                    }
                }
            }
        }
    }

    /// Waits until `bytes` (at most either budget) may be read; `None`
    /// when the connection stalled meanwhile (its other answers hold the
    /// budget). The process budget is waited for without a limit: what
    /// holds it makes progress or meets its own timeout.
    async fn hold(
        &self,
        bytes: u32,
        send_timeout: Duration,
    ) -> Option<[tokio::sync::SemaphorePermit<'_>; 2]> {
        let bytes = bytes.min(self.most);
        let acquire = self.connection.acquire_many(bytes);
        let connection = self.wait(send_timeout, acquire, false).await?.ok()?;
        let process = self.process.acquire_many(bytes).await.ok()?;
        Some([connection, process])
    }
}

/// Counts a step out when it ends or is dropped.
struct Left<'a>(&'a Cell<usize>);

impl Drop for Left<'_> {
    fn drop(&mut self) {
        self.0.set(self.0.get() - 1);
    }
}

type Stream = h3::server::RequestStream<h3_quinn::BidiStream<Bytes>, Bytes>;

/// A request stream a timer ended (`timer`: `header_read` or `send`).
fn timer_reset(timer: &'static str) {
    metrics::counter!("fileserver_http3_timer_resets_total", "timer" => timer).increment(1);
}
