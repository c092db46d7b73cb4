//! One client connection, HTTP/1.1, plaintext or over TLS (`wire`): parse
//! the head (`http::request`), decide the answer (`decide`, the stage
//! every listener shares), encode its head and send its body (`send`),
//! count and log the exchange. This module decides no HTTP semantics; it
//! reads, hands over, and counts. Pipelined responses are batched into one
//! write.
//!
//! ```text
//! rbuf [....consumed....|req2 head|req3 part...]     (start..end = unparsed)
//! ```

use crate::accesslog::RequestLine;
use crate::exchange::Exchange;
use crate::http::request::{parse_request_uninit, ParseError, Request};
use crate::request_context::{RequestContext, Sent};
use crate::send::{Output, Progress};
use crate::state::{ConnContext, InForce};
use crate::wire::Wire;
use decide::Check;
use httpfile::encode::Framing;
use httpfile::field::Name;
use httpfile::plan::{self, Body};
use httpfile::status::reason;
use httpfile::ByteRange;
use std::io;
use std::mem::MaybeUninit;
use std::net::SocketAddr;
use std::rc::Rc;
use std::task::Poll;
use std::time::{Duration, Instant};

const STACK_HEADERS: usize = 128;
const WBUF_FLUSH: usize = 64 * 1024;

struct Conn {
    ctx: Rc<ConnContext>,
    peer: SocketAddr,
    live: InForce,
    stop_seen: bool,
    out: Output,
    /// The normalized path of the request in progress.
    path: Vec<u8>,
    /// Its satisfiable ranges.
    ranges: Vec<ByteRange>,
    /// The site whose manager `out` reads through (`None`: the default).
    site: Option<usize>,
    /// The site that answers the request in progress, for its counters
    /// (`None`: the default site, or a head rejected before a site).
    answering: Option<usize>,
    /// When the last response was logged, while nothing has been flushed
    /// since: the idle deadline that follows starts there, one clock read
    /// fewer per keep-alive request.
    finished_at: Option<Instant>,
}

/// Serves one accepted connection (or one whose TLS handshake chose
/// HTTP/1.1) until it closes; `read`: bytes of it already read (what
/// followed a PROXY header: a buffer and how many of its first octets),
/// taken before the socket's.
pub(crate) async fn serve(
    ctx: Rc<ConnContext>,
    wire: Wire,
    peer: SocketAddr,
    read: (Vec<u8>, usize),
) {
    let live = ctx.in_force();
    let send_timeout = live.s.limits.send_timeout;
    let files = ctx.files().manager().clone();
    // Over TLS every response advertises HTTP/3 when it is on.
    let fields = match (wire.is_tls(), ctx.alt_svc()) {
        (true, Some(v)) => [Name::AltSvc.http1_line().as_bytes(), v.as_bytes(), b"\r\n"].concat(),
        _ => Vec::new(),
    };
    let mut c = Conn {
        ctx,
        peer,
        live,
        stop_seen: false,
        out: Output::new(wire, fields, files, send_timeout),
        path: Vec::with_capacity(128),
        ranges: Vec::new(),
        site: None,
        answering: None,
        finished_at: None,
    };
    match c.run(read).await {
        Ok(Ended::Closed) => c.out.wire.close_notify(),
        Ok(Ended::H2c(read)) => {
            metrics::counter!("fileserver_h2c_connections_total").increment(1);
            let Conn { ctx, out, .. } = c;
            // Boxed: HTTP/2's state is not carried by every HTTP/1.1
            // connection's task.
            Box::pin(crate::h2conn::serve(ctx, out.wire, read, peer)).await;
        }
        // No close_notify: a response cut short (a timeout, a file changed
        // mid-send) must not end like a complete one.
        Err(e) => tracing::debug!(peer = %c.peer, "connection ended: {e}"),
    }
}

/// What ended [`Conn::run`]'s wait for request bytes.
enum Woke {
    Read(io::Result<usize>),
    Timer,
    Stop,
}

/// How [`Conn::run`] ends: the connection is done, or it opened with the
/// HTTP/2 preface (h2c with prior knowledge, RFC 9113 3.3) and goes to
/// `h2conn` with the bytes read so far.
enum Ended {
    Closed,
    H2c(Vec<u8>),
}

/// A connection's read buffer to start with, grown to `max_header_bytes`
/// (8 KiB) only for a head that needs it, as nginx's 1 KiB
/// `client_header_buffer_size`: heads are mostly well under 2 KiB, and
/// the buffer is most of what a connection holds. Peak RSS at 4096
/// connections (arena_h1_4096): 45 MiB instead of 69, CPU per request
/// 0.96x.
pub(crate) const HEAD_BUF_START: usize = 2048;

/// How long a draining connection with no request in progress waits for
/// one that may be on its way (see `Conn::run`).
const STOP_GRACE: Duration = Duration::from_millis(500);

/// What an HTTP/2 client with prior knowledge sends first.
const H2_PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

impl Conn {
    async fn run(&mut self, read: (Vec<u8>, usize)) -> io::Result<Ended> {
        let (mut rbuf, end) = read;
        let (mut start, mut end) = (0usize, end);
        // An empty buffer is taken from the worker's spares once bytes
        // arrive; one that came with bytes (after a PROXY header) is kept.
        let first = HEAD_BUF_START.min(self.live.s.limits.max_header_bytes);
        if !rbuf.is_empty() && rbuf.len() < first {
            rbuf.resize(first, 0);
        }
        let mut served = 0u64;
        let mut head_started: Option<Instant> = None;
        // When the wait for the next request began (keep-alive).
        let mut idle_since: Option<Instant> = None;
        // When this idle connection began to drain (shutdown).
        let mut drain_from: Option<Instant> = None;
        let sleep = tokio::time::sleep(Duration::ZERO);
        tokio::pin!(sleep);
        // The deadline `sleep` is set to, until it fires.
        let mut armed: Option<Instant> = None;
        let ctx = self.ctx.clone();
        let mut stop = ctx.stopping.waiter();
        let h2c = self.live.s.http2.h2c && !self.out.wire.is_tls();
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
                let max_head = self.live.s.limits.max_header_bytes;
                // The header slots (4 KiB) end with the parse, so no
                // connection's task holds them across its awaits: the
                // request borrows `rbuf`.
                let parsed = {
                    let n = self.live.s.limits.max_headers;
                    let mut stack;
                    let mut heap;
                    let headers: &mut [MaybeUninit<httparse::Header<'_>>] = if n <= STACK_HEADERS {
                        stack = [const { MaybeUninit::uninit() }; STACK_HEADERS];
                        &mut stack[..n]
                    } else {
                        heap = vec![MaybeUninit::uninit(); n];
                        &mut heap[..]
                    };
                    parse_request_uninit(&rbuf[start..end], headers, max_head)
                };
                match parsed {
                    Ok(Some(req)) => {
                        head_started = None;
                        let head_len = req.head_len;
                        let pending = end > start + head_len;
                        // A declared body we will not read: close gracefully so
                        // the client sees our answer, not a reset.
                        let req_unread = req.head.has_body;
                        // Boxed, the head moved in with it: a connection that
                        // waits for its next request carries neither (its
                        // task: 1424 bytes instead of 4736; peak RSS at 4096
                        // connections 0.78x, then 0.91x; CPU per request
                        // level).
                        let this = &mut *self;
                        let keep =
                            Box::pin(async move { this.handle(&req, pending).await }).await?;
                        start += head_len;
                        served += 1;
                        if !keep {
                            Box::pin(self.out.flush(false)).await?;
                            if req_unread {
                                Box::pin(self.linger_close()).await;
                            }
                            return Ok(Ended::Closed);
                        }
                        if start == end {
                            start = 0;
                            end = 0;
                        }
                        if self.out.wbuf.len() >= WBUF_FLUSH {
                            Box::pin(self.out.flush(false)).await?;
                            self.finished_at = None;
                        }
                        continue;
                    }
                    Ok(None) => {}
                    Err(e) => {
                        let why = match e {
                            ParseError::Bad(why) => why,
                            _ => reason(e.status()),
                        };
                        Box::pin(self.reject(e.status(), why)).await?;
                        return Ok(Ended::Closed);
                    }
                }
            }
            // Need more bytes: answer what is batched first. A flush may
            // wait on the client, after which the finish time is stale.
            let mut finished_at = self.finished_at.take();
            if !self.out.wbuf.is_empty() {
                // Boxed, as each flush here: its state (504 bytes) is not
                // carried by every waiting connection's task, and only a
                // batch of pipelined answers comes this way.
                Box::pin(self.out.flush(false)).await?;
                finished_at = None;
            }
            if start > 0 {
                rbuf.copy_within(start..end, 0);
                end -= start;
                start = 0;
            }
            if end == 0 && !rbuf.is_empty() {
                // Nothing of the next request is here: the buffers go back
                // to the worker's spares until it comes.
                let first = HEAD_BUF_START.min(self.live.s.limits.max_header_bytes);
                let buf = std::mem::take(&mut rbuf);
                if buf.len() == first {
                    self.ctx.spares.give_read(buf);
                }
                self.ctx
                    .spares
                    .give_write(std::mem::take(&mut self.out.wbuf));
            }
            let limits = &self.live.s.limits;
            let now = finished_at.unwrap_or_else(Instant::now);
            let mut deadline = if end > start {
                *head_started.get_or_insert(now) + limits.header_read_timeout
            } else if served == 0 {
                now + limits.header_read_timeout
            } else {
                *idle_since.get_or_insert(now) + limits.keepalive_timeout
            };
            if (self.ctx.stopping.get() || self.stop_seen) && start == end {
                // Draining. A client sends its next request as soon as it
                // has an answer, so one may be on its way to a connection
                // that looks idle: closing now would reset it. One that
                // comes within STOP_GRACE is answered with
                // `Connection: close`; only a connection idle that long
                // closes unasked (an upgrade under load drops nothing).
                let since = *drain_from.get_or_insert(idle_since.unwrap_or(now));
                let until = since + STOP_GRACE;
                if until <= Instant::now() {
                    return Ok(Ended::Closed);
                }
                deadline = deadline.min(until);
            }
            let max_header_bytes = limits.max_header_bytes;
            let wire = &mut self.out.wire;
            let spares = &ctx.spares;
            let woke = {
                let read = async {
                    if rbuf.is_empty() {
                        wire.readable().await?;
                        rbuf = spares.read_buffer(HEAD_BUF_START.min(max_header_bytes));
                    } else if end == rbuf.len() && end < max_header_bytes {
                        // A head longer than the buffer: the parse above
                        // refused it if the buffer had reached the limit.
                        rbuf.resize((2 * end).min(max_header_bytes), 0);
                    }
                    wire.read(&mut rbuf[end..]).await
                };
                tokio::pin!(read);
                // Bytes already there need no timer: arming one as the
                // runtime's earliest wakes its driver, an eventfd write per
                // connection (with a connection per request, 9 system
                // calls per request instead of 8).
                match futures_util::poll!(read.as_mut()) {
                    Poll::Ready(r) => Woke::Read(r),
                    Poll::Pending => {
                        // A deadline later than the one set (the next
                        // keep-alive wait's) leaves the timer as it is, and
                        // it is checked when it fires; only an earlier one
                        // moves it. A keep-alive request then costs no timer
                        // operation. With the spares, against buffers freed
                        // by a timer (arena_h1_4096, 3 rounds): CPU per
                        // request 0.86x, peak RSS 0.83x.
                        if armed.is_none_or(|at| at > deadline) {
                            sleep.as_mut().reset(deadline.into());
                            armed = Some(deadline);
                        }
                        tokio::select! {
                            biased;
                            r = &mut read => Woke::Read(r),
                            _ = &mut sleep => Woke::Timer,
                            () = stop.wait(), if !self.stop_seen => Woke::Stop,
                        }
                    }
                }
            };
            match woke {
                Woke::Read(Ok(0)) => return Ok(Ended::Closed),
                Woke::Read(Ok(n)) => {
                    end += n;
                    idle_since = None;
                    if self.out.wbuf.capacity() == 0 {
                        self.out.wbuf = self.ctx.spares.write_buffer();
                    }
                }
                Woke::Read(Err(e)) => return Err(e),
                Woke::Timer => {
                    armed = None;
                    if Instant::now() < deadline {
                        // Set for an earlier wait.
                        continue;
                    }
                    if end > start {
                        Box::pin(self.reject(408, "request head not received in time")).await?;
                    }
                    return Ok(Ended::Closed);
                }
                Woke::Stop => self.stop_seen = true,
            }
        }
    }

    /// Half-closes and discards what the client still sends (bounded in
    /// bytes and time), so closing with unread input does not turn into a
    /// TCP reset that destroys the response we just sent.
    async fn linger_close(&mut self) {
        let _ = self.out.wire.shutdown().await;
        let mut buf = [0u8; 4096];
        let mut drained = 0usize;
        let deadline = tokio::time::Instant::now() + Duration::from_secs(1);
        while drained < 256 * 1024 {
            match tokio::time::timeout_at(deadline, self.out.wire.read(&mut buf)).await {
                Ok(Ok(n)) if n > 0 => drained += n,
                _ => break,
            }
        }
    }

    fn refresh(&mut self) {
        if self.live.refresh(&self.ctx) {
            self.out.send_timeout = self.live.s.limits.send_timeout;
        }
    }

    /// Answers a head that was not parsed (400, 408, 414, 431), logs and
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
    /// a send timed out, the file changed mid-send).
    fn finish(&mut self, req: Option<&Request<'_>>, completed: bool, t0: Instant) {
        let site = self.answering.take();
        let Progress { status, body, cold } = self.out.progress;
        if status == 0 {
            return;
        }
        let done = Instant::now();
        self.finished_at = Some(done);
        self.ctx.finish(
            &self.live,
            &Exchange {
                peer: self.peer.ip(),
                request: req.map(|r| RequestLine {
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
                cold,
                completed,
                forwarded: req.and_then(|r| r.forwarded),
                x_forwarded_for: req.and_then(|r| r.x_forwarded_for),
                referer: req.and_then(|r| r.referer),
                user_agent: req.and_then(|r| r.user_agent),
                host: req.and_then(|r| r.head.host),
                tls: self.out.wire.is_tls(),
                authorization: req.and_then(|r| r.head.authorization),
                site,
                duration: done - t0,
            },
        );
    }

    /// Decides the answer to one request and sends it. The file it sends
    /// is checked before its last bytes leave (`send`), not at resolve; a
    /// response whose file changed before any byte left is withdrawn and
    /// decided again, with the check at resolve, once.
    async fn respond(
        &mut self,
        req: &Request<'_>,
        pending: bool,
        framing: &mut Framing,
    ) -> io::Result<()> {
        // Rc clone (not the Arc inside): no shared atomic write per request.
        let ctx = self.ctx.clone();
        // Without [acme] this is one pointer test per request. A CA asks
        // over plain HTTP only.
        if let Some(challenges) = ctx.acme_challenges().filter(|_| !self.out.wire.is_tls()) {
            if let Some(answer) = req
                .target()
                .starts_with(crate::acme::HTTP01_PREFIX)
                .then(|| challenges.http01(httpfile::path::path_part(req.target()).ok()?))
                .flatten()
            {
                // Before the site's rules: a CA validates over plain HTTP
                // even where every other path redirects to HTTPS.
                let plan = crate::acme::challenge::http01_plan(req.head.method, &answer);
                self.out.write_head(&plan, *framing);
                if let Body::Bytes(bytes) = plan.body {
                    self.out.send_bytes(bytes);
                }
                return Ok(());
            }
        }
        // The Host rule was the parser's.
        let sent = Sent {
            hosts: 1,
            forwarded: req.forwarded,
            x_forwarded_for: req.x_forwarded_for,
        };
        let rc = RequestContext::of(&self.live, ctx.files(), self.peer.ip(), req.head.host, sent);
        self.answering = rc.site;
        if rc.site != self.site {
            // The file is read through the manager that opened it.
            self.out.files = rc.fm.clone();
            self.site = rc.site;
        }
        let mut check = Check::BeforeSendUpTo(crate::send::COPY_MAX);
        let with_client;
        let head = match rc.client {
            None => &req.head,
            // What the site's rules judge: the client behind trusted
            // proxies, and the scheme.
            Some(client) => {
                with_client = httpfile::RequestHead {
                    client: Some(client),
                    tls: self.out.wire.is_tls(),
                    ..req.head
                };
                &with_client
            }
        };
        loop {
            let files = decide::Files { fm: rc.fm, check };
            let decision = decide::decide_checked(files, rc.serve, head, &mut self.path).await;
            let plan = decision.plan(head, &mut self.ranges);
            framing.keep_alive &= !plan.close;
            let file = decision.representation();
            match file {
                Some(r) => self.out.write_head_at(&plan, *framing, r.now()),
                None => self.out.write_head(&plan, *framing),
            }
            self.out.may_withdraw = check != Check::AtResolve;
            match (plan.body, file) {
                (Body::File(_) | Body::Multipart(_), Some(r)) => {
                    let l = &self.live.s.limits;
                    self.out.pace = crate::pace::Pace::new(l.limit_rate, l.limit_rate_after);
                    self.out.send_file(&plan, r, pending).await?;
                    if !self.out.withdrawn {
                        return Ok(());
                    }
                    rc.fm.invalidate(r.file.path());
                    check = Check::AtResolve;
                }
                (Body::Bytes(bytes), _) => {
                    self.out.send_bytes(bytes);
                    return Ok(());
                }
                _ => return Ok(()),
            }
        }
    }
}
