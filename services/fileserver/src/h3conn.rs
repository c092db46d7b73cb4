//! HTTP/3: QUIC (quinn) on `tls_listen`'s port, UDP, one endpoint per
//! worker on its own SO_REUSEPORT socket, with HTTP/3's frames and QPACK
//! from `h3wire` (as HTTP/2's are `h2wire`'s). Each request goes the way
//! it goes on the other engines: its head read into an
//! `httpfile::RequestHead`, the shared context step (`request_context`:
//! Host rule, site, options, files, client), `decide`, the plan, whose
//! fields are rendered as HTTP/2 renders them (`render`) into a QPACK
//! field section, and whose body is sent from memory or read from the
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
//!   -> serve: open the control stream (SETTINGS); the client's
//!      unidirectional streams read (client_stream: its control stream
//!      checked, QPACK streams dropped); accept request streams until
//!      GOAWAY / close
//!        each: HeadReader until HEADERS within header_read_timeout,
//!        QPACK into an h2wire::Request (HTTP/2's checks), STOP_SENDING
//!        for a body, RequestHead -> RequestContext::enter -> decide
//!        -> plan -> HEADERS (its section from the plan), then per chunk
//!           of at most 128 KiB: hold the send budgets, read (the file
//!           checked before its last bytes; changed: RESET_STREAM
//!           H3_INTERNAL_ERROR), a DATA frame (paced by limit_rate), the
//!           HEADERS going out with the first; finish; each step within
//!           send_timeout (else H3_REQUEST_CANCELLED)
//!        Record: the Exchange, settled when the stream's task ends or drops
//! shutdown: GOAWAY; requests in flight finish; then the connection closes
//! ```
//!
//! A framing error the RFC makes the connection's (a frame where it may
//! not come, a QPACK section that needs a dynamic table, a second or
//! ended critical stream) closes it with the RFC's code; a malformed
//! request resets its stream (H3_MESSAGE_ERROR); a head over
//! `max_field_section_size` is answered 431 unread.
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
use crate::state::{ConnContext, InForce, Live};
use bytes::Bytes;
use decide::Representation;
use h3wire::frame::{self, stream_type};
use h3wire::{qpack, varint, Code, ControlReader, Head, HeadReader};
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
pub(crate) async fn serve(ctx: Rc<ConnContext>, quic: quinn::Connection) {
    let peer = quic.remote_address();
    let Some(settings) = ctx.live().0.s.http3.clone() else {
        return;
    };
    metrics::counter!("fileserver_tls_connections_total", "alpn" => "h3").increment(1);
    // This side's control stream: SETTINGS now, GOAWAY at shutdown. It
    // lives as long as the connection (its end is the client's error).
    let mut preface = Vec::new();
    frame::write_control_preface(settings.max_field_section_size, &mut preface);
    let mut control = match quic.open_uni().await {
        Ok(control) => control,
        Err(e) => return tracing::debug!(%peer, "HTTP/3 control stream not opened: {e}"),
    };
    if control.write_all(&preface).await.is_err() {
        return;
    }
    let conn = Rc::new(Conn {
        quic: quic.clone(),
        live: RefCell::new(ctx.in_force()),
        output: Output::new(&ctx),
        ctx: ctx.clone(),
        peer,
        max_field_section_size: usize::try_from(settings.max_field_section_size)
            .unwrap_or(usize::MAX),
        scratch: RefCell::default(),
        heads: RefCell::default(),
        huffman: RefCell::default(),
    });
    let mut requests = tokio::task::JoinSet::new();
    let mut client_streams = tokio::task::JoinSet::new();
    let critical = Rc::new(Cell::new([false; 3]));
    let mut stop = ctx.stopping.waiter();
    let mut stop_seen = ctx.stopping.get() || *ctx.shutdown.borrow();
    // The first request stream not taken: GOAWAY names it.
    let mut next_id = 0u64;
    let mut goaway_sent = false;
    loop {
        if stop_seen && !goaway_sent {
            goaway_sent = true;
            let mut goaway = Vec::new();
            frame::write_goaway(next_id, &mut goaway);
            let _ = tokio::time::timeout(QUIET, control.write_all(&goaway)).await;
        }
        // After GOAWAY, once the requests before it are answered: the
        // client's own GOAWAY may never come.
        if stop_seen && requests.is_empty() {
            break;
        }
        tokio::select! {
            accepted = quic.accept_bi() => match accepted {
                Ok((mut send, mut recv)) if goaway_sent => {
                    // Opened before the client read the GOAWAY: not
                    // processed, so it may retry it elsewhere (RFC 9114 5.2).
                    let _ = send.reset(code(Code::H3_REQUEST_REJECTED));
                    let _ = recv.stop(code(Code::H3_REQUEST_REJECTED));
                }
                Ok((send, recv)) => {
                    next_id = u64::from(recv.id()) + 4;
                    requests.spawn_local(respond(conn.clone(), send, recv));
                }
                Err(e) => {
                    tracing::debug!(%peer, "HTTP/3 connection ended: {e}");
                    break;
                }
            },
            accepted = quic.accept_uni() => match accepted {
                Ok(recv) => {
                    client_streams.spawn_local(client_stream(quic.clone(), critical.clone(), recv));
                }
                Err(_) => break,
            },
            Some(_) = requests.join_next(), if !requests.is_empty() => {}
            Some(_) = client_streams.join_next(), if !client_streams.is_empty() => {}
            () = stop.wait(), if !stop_seen => stop_seen = true,
        }
    }
    // The connection stays open while its responses finish.
    while requests.join_next().await.is_some() {}
    if stop_seen {
        close_when_delivered(&quic).await;
    }
}

/// Reads one stream the client opened to this side (RFC 9114 6.2): its
/// control stream (checked frame by frame), its QPACK streams (read and
/// dropped: with no dynamic table they carry nothing to use), anything
/// else refused. A second stream of a kind, or the end of one, closes
/// the connection with the RFC's code. `seen`: the kinds already open.
async fn client_stream(
    quic: quinn::Connection,
    seen: Rc<Cell<[bool; 3]>>,
    mut recv: quinn::RecvStream,
) {
    let close = |c: Code, why: &str| quic.close(code(c), why.as_bytes());
    let mut first = Vec::new();
    let (kind, mut bytes) = loop {
        let mut pos = 0;
        if let Some(kind) = varint::decode(&first, &mut pos) {
            break (kind, Bytes::from(first.split_off(pos)));
        }
        match recv.read_chunk(8, true).await {
            Ok(Some(chunk)) => first.extend_from_slice(&chunk.bytes),
            _ => return,
        }
    };
    let Some(slot) = [
        stream_type::CONTROL,
        stream_type::QPACK_ENCODER,
        stream_type::QPACK_DECODER,
    ]
    .iter()
    .position(|&k| k == kind) else {
        return if kind == stream_type::PUSH {
            close(
                Code::H3_STREAM_CREATION_ERROR,
                "a push stream from a client",
            );
        } else {
            // Unknown types are ignored (RFC 9114 6.2).
            let _ = recv.stop(code(Code::H3_STREAM_CREATION_ERROR));
        };
    };
    let mut kinds = seen.get();
    if kinds[slot] {
        return close(Code::H3_STREAM_CREATION_ERROR, "a second critical stream");
    }
    kinds[slot] = true;
    seen.set(kinds);
    let mut control = (kind == stream_type::CONTROL).then(ControlReader::default);
    loop {
        if let Some(Err(c)) = control.as_mut().map(|r| r.receive(&bytes)) {
            return close(c, "control stream");
        }
        match recv.read_chunk(usize::MAX, true).await {
            Ok(Some(chunk)) => bytes = chunk.bytes,
            Ok(None) | Err(quinn::ReadError::Reset(_)) => {
                return close(Code::H3_CLOSED_CRITICAL_STREAM, "a critical stream ended");
            }
            Err(_) => return,
        }
    }
}

/// An HTTP/3 code as QUIC carries it.
fn code(c: Code) -> quinn::VarInt {
    quinn::VarInt::from_u64(c.0).unwrap_or(quinn::VarInt::MAX)
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
    quic.close(code(Code::H3_NO_ERROR), b"shutting down");
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

/// The most of a body one read brings, and one hold of the send budgets
/// covers.
const READ_CHUNK: usize = 128 * 1024;

/// What a connection's request streams share.
struct Conn {
    quic: quinn::Connection,
    ctx: Rc<ConnContext>,
    /// The settings in force.
    live: RefCell<InForce>,
    peer: SocketAddr,
    output: Output,
    /// `[http3] max_field_section_size`: a request head over it is 431.
    max_field_section_size: usize,
    /// Where each response head's field values and field section are
    /// written in turn: buffers for the connection, not grown per
    /// response.
    scratch: RefCell<(Vec<u8>, Vec<u8>)>,
    /// Request heads answered, each with the buffer its path was
    /// normalized into, kept for the next streams' (grown once, as HTTP/2
    /// keeps its own).
    heads: RefCell<Vec<(h2wire::Request, Vec<u8>)>>,
    /// Where a request's Huffman-coded strings are decoded.
    huffman: RefCell<Vec<u8>>,
}

/// Request heads a connection keeps for reuse, each with its path of at
/// most [`KEPT_HEAD_MAX`] octets: what it holds between requests stays
/// small whatever heads a client sent.
const KEPT_HEADS: usize = 8;
const KEPT_HEAD_MAX: usize = 2048;

impl Conn {
    /// The settings in force, for an answer that holds them across its
    /// awaits (a reload may swap the connection's meanwhile).
    fn live(&self) -> Arc<Live> {
        Arc::clone(&self.refreshed())
    }

    /// `header_read_timeout` in force: read in place, without taking a
    /// count on the process's settings (a shared write, per stream).
    fn header_read_timeout(&self) -> Duration {
        self.refreshed().s.limits.header_read_timeout
    }

    /// The connection's settings, brought up to a reload first.
    fn refreshed(&self) -> std::cell::RefMut<'_, InForce> {
        let mut live = self.live.borrow_mut();
        live.refresh(&self.ctx);
        live
    }
}

/// Answers one request stream.
async fn respond(conn: Rc<Conn>, mut send: quinn::SendStream, mut recv: quinn::RecvStream) {
    let peer = conn.peer;
    let head_timeout = conn.header_read_timeout();
    let (mut req, mut path) = conn.heads.borrow_mut().pop().unwrap_or_default();
    // The head within header_read_timeout, as HTTP/1.1 and HTTP/2 bound
    // theirs: a stream that sends nothing, or a frame a byte at a time,
    // holds no slot past it.
    let max = conn.max_field_section_size;
    let read = tokio::time::timeout(head_timeout, read_head(&conn, &mut recv, &mut req, max)).await;
    let fits = match read {
        Ok(Ok(fits)) => fits,
        Ok(Err(HeadError::Stream(c))) => {
            tracing::debug!(%peer, "HTTP/3 request refused: {c:?}");
            let _ = send.reset(code(c));
            let _ = recv.stop(code(c));
            return;
        }
        Ok(Err(HeadError::Connection(c))) => {
            tracing::debug!(%peer, "HTTP/3 connection error: {c:?}");
            conn.quic.close(code(c), b"request stream");
            return;
        }
        Ok(Err(HeadError::Gone)) => return,
        Err(_) => {
            timer_reset("header_read");
            tracing::debug!(%peer, "HTTP/3 request head not in within {head_timeout:?}");
            let _ = send.reset(code(Code::H3_REQUEST_INCOMPLETE));
            let _ = recv.stop(code(Code::H3_REQUEST_INCOMPLETE));
            return;
        }
    };
    // Bodies are never used: what a client sends after the head is
    // dropped by QUIC from here on, not buffered up to the window
    // (RFC 9114 4.1; no frame goes out when the request already ended).
    let _ = recv.stop(code(Code::H3_NO_ERROR));
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
    Box::pin(answer(&mut record, &mut send, fits, &mut path)).await;
    drop(record);
    let mut heads = conn.heads.borrow_mut();
    if heads.len() < KEPT_HEADS && req.capacity() + path.capacity() <= KEPT_HEAD_MAX {
        heads.push((req, path));
    }
}

/// Why a request head was not read.
enum HeadError {
    /// The stream's error: it is reset with this code.
    Stream(Code),
    /// The connection's error: it is closed with this code.
    Connection(Code),
    /// The client reset the stream or the connection is gone.
    Gone,
}

/// Reads `recv` up to the end of its HEADERS into `req`, the section
/// at most `max` octets; false when it was larger (not read: 431).
async fn read_head(
    conn: &Conn,
    recv: &mut quinn::RecvStream,
    req: &mut h2wire::Request,
    max: usize,
) -> Result<bool, HeadError> {
    let mut reader = HeadReader::default();
    loop {
        let chunk = match recv.read_chunk(usize::MAX, true).await {
            Ok(Some(chunk)) => chunk.bytes,
            Ok(None) => return Err(HeadError::Stream(Code::H3_REQUEST_INCOMPLETE)),
            Err(_) => return Err(HeadError::Gone),
        };
        match reader.receive(&chunk, max) {
            Ok(Head::More) => {}
            Ok(Head::TooLarge) => {
                // Emptied all the same: a head kept from an earlier
                // stream must not be logged as this one's.
                req.begin(false, max);
                return Ok(false);
            }
            Ok(Head::Section(section)) => {
                req.begin(false, max);
                let huffman = &mut conn.huffman.borrow_mut();
                qpack::decode(section, req, huffman).map_err(HeadError::Connection)?;
                req.finish();
                return match req.malformed() {
                    // RFC 9114 4.1.2: a malformed request is the stream's error.
                    Some(_) => Err(HeadError::Stream(Code::H3_MESSAGE_ERROR)),
                    None => Ok(true),
                };
            }
            Err(c) => return Err(HeadError::Connection(c)),
        }
    }
}

/// Decides `record`'s request and sends the answer on `stream`: the head
/// read into an `httpfile::RequestHead`, the shared context step, decide,
/// the plan rendered. `fits`: false for a head over the limit (431);
/// `path`: where the request's path is normalized.
async fn answer(
    record: &mut Record<'_>,
    stream: &mut quinn::SendStream,
    fits: bool,
    path: &mut Vec<u8>,
) {
    let (conn, live, req) = (record.conn, record.live, record.req);
    let files = conn.ctx.files();
    if !fits || req.too_large() {
        let plan = httpfile::plan::reject(431, "request header fields too large");
        return send(record, stream, &plan, None, files.manager(), false).await;
    }
    // Whether the stream ended with the head is not known here; a body
    // is not read either way (STOP_SENDING).
    let (mut head, sent) = request_context::read_head(req, false);
    let rc = match RequestContext::enter(live, files, conn.peer.ip(), true, &mut head, sent) {
        Ok(rc) => rc,
        Err(malformed) => {
            let plan = malformed.plan();
            return send(record, stream, &plan, None, files.manager(), head.is_head()).await;
        }
    };
    record.o.site = rc.site;
    let mut ranges = Vec::new();
    let checked = decide::Files {
        fm: rc.fm,
        check: decide::Check::AtResolve,
    };
    let decision = decide::decide_checked(checked, rc.serve, &head, path).await;
    let plan = decision.plan(&head, &mut ranges);
    let rep = decision.representation();
    send(record, stream, &plan, rep, rc.fm, head.is_head()).await;
}

/// Sends `plan`'s head and, unless `head_only` (HEAD), its body (a file's
/// from `rep`, read through `fm`) on `stream`: each step within
/// `send_timeout`, each read held against the send budgets until QUIC has
/// taken it, paced by `limit_rate`. The head goes out with the body's
/// first DATA frame, in one write.
async fn send(
    record: &mut Record<'_>,
    stream: &mut quinn::SendStream,
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
    let mut head = Some(Bytes::from(response_head(conn, plan, rep)));
    let out = &conn.output;
    let sent: Result<(), Cut> = async {
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
                let _held = match out.try_hold(n as u32) {
                    Some(held) => held,
                    None => {
                        // The head does not wait for the budgets.
                        if let Some(head) = head.take() {
                            out.step(send_timeout, stream.write_chunk(head), peer, "head not sent")
                                .await?;
                        }
                        out.hold(n as u32, send_timeout).await.ok_or(Cut::Stalled)?
                    }
                };
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
                        let _ = stream.reset(code(Code::H3_INTERNAL_ERROR));
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
                    // Sized exactly: a `Bytes` made from it needs no allocation of its own.
                    let mut frame = Vec::with_capacity(frame::header_len(frame::DATA, n as u64));
                    frame::write_header(frame::DATA, n as u64, &mut frame);
                    let mut chunks = [head.take().unwrap_or_default(), frame.into(), data.split_to(n)];
                    out.step(send_timeout, stream.write_all_chunks(&mut chunks), peer, "client went away")
                        .await?;
                    record.o.sent += n as u64;
                }
            }
        }
        if let Some(head) = head.take() {
            out.step(send_timeout, stream.write_chunk(head), peer, "response head not sent")
                .await?;
        }
        record.o.completed = true;
        stream.finish().map_err(|_| Cut::Ended)
    }
    .await;
    if let Err(Cut::Stalled) = sent {
        // The connection's answers must make progress within
        // send_timeout, as on HTTP/2: a client that opens no window holds
        // them that long at most, whatever their number.
        timer_reset("send");
        tracing::debug!(%peer, "HTTP/3 answer made no progress for {send_timeout:?}");
        let _ = stream.reset(code(Code::H3_REQUEST_CANCELLED));
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

/// The response's HEADERS frame from `plan`: `:status`, then
/// `render::each_head_field`, as HTTP/2 sends it, in QPACK's static
/// references and plain literals.
fn response_head(conn: &Conn, plan: &Plan<'_>, rep: Option<&Representation>) -> Vec<u8> {
    let alt_svc = conn.ctx.alt_svc().map(http::HeaderValue::as_bytes);
    let now = rep.map(Representation::now);
    let (values, section) = &mut *conn.scratch.borrow_mut();
    section.clear();
    qpack::begin(section);
    qpack::status(plan.status, section);
    render::each_head_field(plan, now, alt_svc, values, |name, value, repeats| {
        if repeats {
            qpack::field(name, value, section);
        } else {
            qpack::literal(name, value, section);
        }
    });
    let len = section.len() as u64;
    let mut frame = Vec::with_capacity(frame::header_len(frame::HEADERS, len) + section.len());
    frame::write_header(frame::HEADERS, len, &mut frame);
    frame.extend_from_slice(section);
    frame
}

/// One exchange's record: counted and logged (`ConnContext::finish`)
/// when dropped, once its status is known, whatever ended it.
struct Record<'r> {
    conn: &'r Conn,
    /// The settings the request was answered under (their access log).
    live: &'r Live,
    req: &'r h2wire::Request,
    /// Its `sent`: body bytes QUIC took; `completed`: all of them.
    o: Outcome,
}

impl Drop for Record<'_> {
    fn drop(&mut self) {
        if self.o.status == 0 {
            return;
        }
        let f = LogFields::of(self.req, self.live.access.is_some());
        let x = f.exchange(self.conn.peer.ip(), "HTTP/3.0", true, &self.o);
        self.conn.ctx.finish(self.live, &x);
    }
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

    /// [`hold`](Self::hold) when both budgets have `bytes` now.
    fn try_hold(&self, bytes: u32) -> Option<[tokio::sync::SemaphorePermit<'_>; 2]> {
        let bytes = bytes.min(self.most);
        let connection = self.connection.try_acquire_many(bytes).ok()?;
        Some([connection, self.process.try_acquire_many(bytes).ok()?])
    }
}

/// Counts a step out when it ends or is dropped.
struct Left<'a>(&'a Cell<usize>);

impl Drop for Left<'_> {
    fn drop(&mut self) {
        self.0.set(self.0.get() - 1);
    }
}

/// A request stream a timer ended (`timer`: `header_read` or `send`).
fn timer_reset(timer: &'static str) {
    metrics::counter!("fileserver_http3_timer_resets_total", "timer" => timer).increment(1);
}
