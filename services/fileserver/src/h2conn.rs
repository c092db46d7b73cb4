//! HTTP/2 connections (HTTPS with ALPN `h2`, and h2c) on the worker's
//! thread: the frames are `h2wire`'s, the answers the same `decide` stage
//! and plans as the HTTP/1.1 engine's, and this module moves bytes
//! between them. No task, header map or body type per stream: a request
//! answered from cached bytes is decided, its head HPACK-encoded from the
//! plan and its body copied behind it, all in the loop that read it.
//!
//! ```text
//! read ─> h2wire::Connection::receive ─> Event::Request ─> decide ─> plan
//!   ─> HEADERS (hpack, from the plan; what repeats indexed)
//!   ─> body: within the windows now, or kept in `answers` and sent as
//!      WINDOW_UPDATEs open them (file bytes read straight into the
//!      output, the file checked before its last)
//! write: the output, as the socket takes it; nothing more is read from a
//! file, and no further request is taken up, while the output and the
//! bodies held in memory are over the connection's cap or the process's
//! send budget (in-memory bodies count as file bytes do)
//! timers, looked at every turn: h2wire's (an incomplete frame or header
//! block, idle without work, age, draining bodies) and send_timeout with
//! no HEADERS or DATA sent while answers wait; shutdown: GOAWAY, then finish
//! ```
//!
//! An answer that waits keeps only its log line's fields of the request
//! ([`LogHead`], each cut at [`LOG_FIELD_MAX`]), not the decoded head: a
//! client holding streams at a zero window pins a few hundred octets per
//! stream, not its header list.

use crate::exchange::{LogFields, Outcome};
use crate::render::{self, Part};
use crate::request_context::{self, RequestContext};
use crate::state::{ConnContext, InForce};
use crate::wire::Wire;
use decide::Representation;
use h2wire::{Event, Expired, Reason, Request};
use httpfile::plan::{Body, Plan};
use httpfile::ByteRange;
use std::collections::VecDeque;
use std::io;
use std::net::SocketAddr;
use std::ops::Range;
use std::rc::Rc;
use std::time::{Duration, Instant};
use tokio::io::Interest;
use tokio::sync::OwnedSemaphorePermit;

/// How long a closing connection reads and drops input after its
/// GOAWAY, so that the GOAWAY is read before the close (a close with
/// unread input sends a reset, which may discard it).
const LINGER: Duration = Duration::from_secs(1);
/// Read buffer: one frame at the default maximum size and its header.
const READ_BUF: usize = 16 * 1024 + 9;
/// The least of the process's send budget a connection takes at a time.
const CHARGE_STEP: usize = 64 * 1024;
/// How soon a connection whose requests wait for the process's send
/// budget looks again.
const BUDGET_RETRY: Duration = Duration::from_millis(5);
/// File bytes read for one connection beyond the process budget when it
/// holds none (so no client starves), and the least read at a time.
const MIN_READ: usize = 16 * 1024;

/// What the output may hold past its cap: the DATA frame that crosses it
/// (16 KiB and its header) and a HEADERS frame.
const OUTPUT_SLACK: usize = 32 * 1024;

/// Body bytes a connection produces before it lets the worker's other
/// connections run (the HTTP/1.1 engine's rule, `send.rs`).
const FAIR_SHARE: u64 = 1024 * 1024;
/// The most of one request field a waiting answer keeps for its log line
/// and counters (method, target, referer, user-agent, forwarded,
/// x-forwarded-for, host, authorization); longer values are kept cut,
/// ending in `...`.
pub(crate) const LOG_FIELD_MAX: usize = 1024;

/// Serves HTTP/2 on `wire` until the client closes, the connection idles
/// out, or shutdown drains it; `read_ahead` holds what the HTTP/1.1
/// engine read of it before (empty, or the h2c preface and what followed).
pub(crate) async fn serve(ctx: Rc<ConnContext>, wire: Wire, read_ahead: Vec<u8>, peer: SocketAddr) {
    let live = ctx.in_force();
    let now = Instant::now();
    let conn = h2wire::Connection::new(live.s.http2.wire.clone(), now);
    let tls = wire.is_tls();
    let alt_svc = match (tls, ctx.alt_svc()) {
        (true, Some(v)) => Some(v.as_bytes().to_vec()),
        _ => None,
    };
    let mut c = H2 {
        ctx,
        peer,
        live,
        tls,
        wire,
        out: Out {
            conn,
            scratch: Vec::new(),
            alt_svc,
            last_progress: now,
            progress_pending: false,
        },
        answers: Vec::new(),
        path: Vec::with_capacity(128),
        ranges: Vec::new(),
        held: Vec::new(),
        held_octets: 0,
        kept_octets: 0,
        budget_short: false,
        since_yield: 0,
        pace_wake: None,
    };
    if let Err(e) = c.run(read_ahead).await {
        tracing::debug!(%peer, "HTTP/2 connection ended: {e}");
    }
    c.close().await;
}

/// One HTTP/2 connection's state beside `h2wire`'s.
struct H2 {
    ctx: Rc<ConnContext>,
    peer: SocketAddr,
    live: InForce,
    tls: bool,
    wire: Wire,
    out: Out,
    /// Answers whose body waits for window, budget or a read.
    answers: Vec<Answer>,
    /// The normalized path of the request being decided.
    path: Vec<u8>,
    ranges: Vec<ByteRange>,
    /// The process-wide send budget's permits for what this connection
    /// holds: output not yet written, and waiting answers' bodies and
    /// log fields.
    held: Vec<OwnedSemaphorePermit>,
    /// Octets the permits in `held` cover.
    held_octets: usize,
    /// Octets the waiting answers keep in memory of their own (bodies
    /// copied, log fields).
    kept_octets: usize,
    /// The process's send budget could not cover what the connection
    /// holds, last time it was asked.
    budget_short: bool,
    /// Body bytes produced since the task last yielded.
    since_yield: u64,
    /// When the first paced answer may send again (`limit_rate`).
    pace_wake: Option<Instant>,
}

/// The frame layer and what rendering a head into it needs: apart from
/// the rest of `H2` so that a decision borrowing the settings (`live`) is
/// rendered without a clone of their `Arc` (a shared count each request).
struct Out {
    conn: h2wire::Connection,
    /// A field value rendered for the encoder.
    scratch: Vec<u8>,
    /// `Alt-Svc` for every response (HTTPS while HTTP/3 runs).
    alt_svc: Option<Vec<u8>>,
    /// When HEADERS or DATA last left (a client that pings while it holds
    /// every window at zero makes none).
    last_progress: Instant,
    /// The output holds HEADERS or DATA not yet written.
    progress_pending: bool,
}

impl Out {
    /// Sends `plan`'s head and, when the body is in memory (a message, or
    /// `rep`'s cached bytes) and both the windows and `room` (what the
    /// connection may still add to its output) take it, the body: such an
    /// answer is done here, with no kept [`Answer`] and no later round.
    fn start(
        &mut self,
        req: &Request,
        plan: &Plan<'_>,
        rep: Option<&Representation>,
        room: usize,
    ) -> Started {
        let stream = req.stream();
        let status = plan.status;
        let mut message = Vec::new();
        let mut inline: &[u8] = &[];
        let mut parts = VecDeque::new();
        if req.method() != b"HEAD" {
            match plan.body {
                Body::Empty => {}
                Body::Message(detail) => {
                    httpfile::plan::write_message(status, detail, &mut message);
                    inline = &message;
                }
                Body::Bytes(b) => inline = b,
                // Cached bytes that wait are read from the cache later, not
                // copied now.
                Body::File(range) => match render::in_memory(rep, range) {
                    Some(b) if b.len() <= self.conn.window(stream).min(room) => inline = b,
                    _ => parts.push_back(Part::Range { range, last: true }),
                },
                Body::Multipart(m) => render::push_multipart(&m, &mut parts),
            }
        }
        let empty = inline.is_empty() && parts.is_empty();
        if !self.send_head(stream, plan, rep.map(Representation::now), empty) {
            return Started::Gone;
        }
        if empty {
            return Started::Done { status, sent: 0 };
        }
        if !inline.is_empty() {
            if inline.len() <= self.conn.window(stream).min(room) {
                self.conn.send_data(stream, inline, true);
                self.made_progress();
                return Started::Done {
                    status,
                    sent: inline.len() as u64,
                };
            }
            parts.push_back(Part::Bytes(inline.to_vec()));
        }
        Started::Waiting {
            status,
            sent: 0,
            parts,
        }
    }

    /// HEADERS from the plan: `:status`, then `render::each_head_field`
    /// (what repeats across responses goes through the table).
    fn send_head(&mut self, stream: u32, plan: &Plan<'_>, now: Option<u64>, end: bool) -> bool {
        let (scratch, alt_svc) = (&mut self.scratch, self.alt_svc.as_deref());
        let sent = self.conn.send_headers(stream, end, |b| {
            b.status(plan.status);
            render::each_head_field(plan, now, alt_svc, scratch, |name, value, repeats| {
                if repeats {
                    b.indexed(name, value);
                } else {
                    b.field(name, value);
                }
            });
        });
        if sent {
            self.made_progress();
        }
        sent
    }

    /// HEADERS or DATA went into the output. The send timeout runs from
    /// here if nothing was waiting to leave; otherwise from the earlier
    /// stamp, or from the last write that moved bytes (`write_some`), so
    /// only the first of a batch of responses reads the clock.
    fn made_progress(&mut self) {
        if !self.progress_pending {
            self.progress_pending = true;
            self.last_progress = Instant::now();
        }
    }
}

/// A response whose body is not all sent: what is left of it, in order.
struct Answer {
    stream: u32,
    head: LogHead,
    /// Octets this answer keeps in memory of its own (`kept_octets`).
    kept: usize,
    outcome: Outcome,
    file: Option<(Representation, filemanager::FileManager)>,
    parts: VecDeque<Part>,
    /// `limit_rate` of a file body.
    pace: Option<crate::pace::Pace>,
}

/// How a response's start went.
enum Started {
    /// Not started: the stream is gone (reset, or the connection ended).
    Gone,
    /// Complete: the body bytes sent.
    Done { status: u16, sent: u64 },
    /// The head is sent; these parts of the body wait.
    Waiting {
        status: u16,
        sent: u64,
        parts: VecDeque<Part>,
    },
}

/// How a body step ended.
enum Step {
    /// All sent.
    Done,
    /// Waits for window, budget or the output to be written.
    Blocked,
    /// Sent its share of this round; goes on at the next.
    Paused,
    /// Sent what its `limit_rate` allows until `H2::pace_wake`.
    Paced,
    /// The file changed, shrank or failed: the stream is reset.
    Failed,
}

impl H2 {
    async fn run(&mut self, read_ahead: Vec<u8>) -> io::Result<()> {
        // Room for the cap and the frame that may cross it, at once: grown
        // by doubling, the output's allocation reached twice the cap.
        let most = self.output_cap() + OUTPUT_SLACK;
        self.out.conn.output().reserve_exact(most);
        let ctx = self.ctx.clone();
        let mut stop = ctx.stopping.waiter();
        let mut stop_seen = self.ctx.stopping.get();
        if stop_seen {
            self.out.conn.shutdown();
        }
        if !read_ahead.is_empty() {
            self.receive(&read_ahead, Instant::now());
        }
        loop {
            // Every turn, whatever woke it: a client that keeps the socket
            // readable does not keep the timers from running.
            let now = Instant::now();
            if let Some(why) = self.out.conn.handle_timeout(now) {
                tracing::debug!(peer = %self.peer, "HTTP/2 connection timer: {why:?}");
                count_timer(match why {
                    Expired::HeaderRead => "header_read",
                    Expired::Idle => "idle",
                    Expired::MaxAge => "max_age",
                });
            }
            let send_timeout = self.live.s.limits.send_timeout;
            if self.waiting() && self.out.last_progress + send_timeout <= now {
                // `close` writes the GOAWAY as far as the client takes it.
                tracing::debug!(peer = %self.peer, "no send progress for send_timeout");
                self.out.conn.abort(Reason::ENHANCE_YOUR_CALM);
                count_goaway(Reason::ENHANCE_YOUR_CALM);
                count_timer("send");
                return Ok(());
            }
            self.dispatch().await;
            let more = self.produce().await;
            self.write_some()?;
            let pending_write = !self.out.conn.output().is_empty() || self.wire.wants_flush();
            if self.out.conn.is_done() && !pending_write {
                return Ok(());
            }
            // A client that does not read its answers is not read from
            // either: what it asks for waits in its socket, not here.
            // Requests it asked for wait in the connection's queue (at most
            // max_concurrent_streams) while the answers held are over the
            // cap; frames are still read, so windows can open.
            let queued = self.out.conn.has_event();
            let room = queued && self.room() > 0;
            if room {
                continue;
            }
            let may_read = self.out.conn.output().len() < self.output_cap();
            if may_read && (more || self.wire.has_buffered_input()) {
                // Bodies that can go on do, after what the client sent.
                if self.read_some()? {
                    return Ok(());
                }
                continue;
            }
            let far = now + Duration::from_secs(3600);
            let mut deadline = self.out.conn.poll_timeout().unwrap_or(far);
            if self.waiting() {
                deadline = deadline.min(self.out.last_progress + send_timeout);
            }
            if let Some(at) = self.pace_wake {
                deadline = deadline.min(at);
            }
            if queued && self.budget_short {
                // Held back by the process's send budget, which other
                // connections give back as they write: look again soon.
                deadline = deadline.min(now + BUDGET_RETRY);
            }
            let interest = match (may_read, pending_write) {
                (true, true) => Interest::READABLE | Interest::WRITABLE,
                (true, false) => Interest::READABLE,
                _ => Interest::WRITABLE,
            };
            tokio::select! {
                biased;
                r = self.wire.tcp().ready(interest) => {
                    let ready = r?;
                    if may_read
                        && (ready.is_readable() || ready.is_read_closed())
                        && self.read_some()?
                    {
                        return Ok(());
                    }
                }
                _ = tokio::time::sleep_until(deadline.into()) => {}
                () = stop.wait(), if !stop_seen => {
                    stop_seen = true;
                    self.out.conn.shutdown();
                }
            }
        }
    }

    /// The most output a connection holds before it stops reading and
    /// producing: `[http2] send_budget_per_connection`.
    fn output_cap(&self) -> usize {
        self.live.s.http2.send_budget_per_connection as usize
    }

    /// Answers wait, or output does: the send timeout runs.
    fn waiting(&mut self) -> bool {
        !self.answers.is_empty() || !self.out.conn.output().is_empty() || self.wire.wants_flush()
    }

    /// What the connection may still add to its output now: its cap
    /// (`[http2] send_budget_per_connection`) less the output and the
    /// bodies and log fields its waiting answers keep, and no more than
    /// the process's send budget still covers; 0 while that budget cannot
    /// cover what it holds.
    fn room(&mut self) -> usize {
        let used = self.out.conn.output().len() + self.kept_octets;
        self.budget_short = !self.charge(used);
        if self.budget_short {
            return 0;
        }
        // An answer's body goes into the output at once only if the
        // process budget covers it too: beyond what this connection's
        // permits cover, what is left of the budget.
        let covered = (self.held_octets + MIN_READ).saturating_sub(used)
            + self.ctx.h2_send_budget().available_permits();
        if covered == 0 {
            self.budget_short = true;
            return 0;
        }
        self.output_cap().saturating_sub(used).min(covered)
    }

    /// Takes the process-wide send budget for `used` octets, beyond the
    /// [`MIN_READ`] every connection may hold so none starves, and beyond
    /// what its permits cover already; false when the budget cannot.
    /// Permits are given back when the output is written (`write_some`).
    fn charge(&mut self, used: usize) -> bool {
        let need = used.saturating_sub(MIN_READ + self.held_octets);
        if need == 0 {
            return true;
        }
        // In steps, so that a batch of small answers takes the budget once
        // rather than once each.
        let budget = self.ctx.h2_send_budget();
        for want in [need.max(CHARGE_STEP), need] {
            let want = want.min(u32::MAX as usize);
            if let Ok(p) = budget.clone().try_acquire_many_owned(want as u32) {
                self.held.push(p);
                self.held_octets += want;
                return true;
            }
        }
        false
    }

    /// Reads what is there into the worker's read buffer and hands it to
    /// the connection; true at the end of input. A connection holds no
    /// read buffer of its own (16 KiB each, 4 MiB at 256 connections).
    fn read_some(&mut self) -> io::Result<bool> {
        let ctx = self.ctx.clone();
        let mut rbuf = ctx.spares.frame_buffer(READ_BUF);
        match self.wire.try_read(&mut rbuf)? {
            None => Ok(false),
            Some(0) => Ok(true),
            Some(n) => {
                self.receive(&rbuf[..n], Instant::now());
                Ok(false)
            }
        }
    }

    /// Feeds `bytes` to the connection; its requests are taken up by
    /// [`H2::dispatch`].
    fn receive(&mut self, bytes: &[u8], now: Instant) {
        let failed_before = self.out.conn.is_done();
        if let Err(reason) = self.out.conn.receive(bytes, now) {
            if !failed_before {
                tracing::debug!(peer = %self.peer, "HTTP/2 connection error: {reason:?}");
                count_goaway(reason);
            }
        }
    }

    /// Answers the requests and resets the connection handed out, while
    /// the connection has room for their answers: the others wait in its
    /// queue (and the client's further requests in the socket).
    async fn dispatch(&mut self) {
        loop {
            let room = self.room();
            if room == 0 {
                return;
            }
            let Some(event) = self.out.conn.next_event() else {
                return;
            };
            match event {
                Event::Request(req) => self.answer(req, room).await,
                Event::Reset(stream) => {
                    if let Some(i) = self.answers.iter().position(|a| a.stream == stream) {
                        let a = self.answers.swap_remove(i);
                        self.finish(a, false);
                    }
                }
            }
        }
    }

    /// Decides `req`'s answer, sends its head and as much of its body as
    /// the windows take; keeps the rest in `answers`.
    async fn answer(&mut self, req: Request, room: usize) {
        let t0 = Instant::now();
        self.live.refresh(&self.ctx);
        if req.too_large() {
            let plan = httpfile::plan::reject(431, "request header fields too large");
            let started = self.out.start(&req, &plan, None, room);
            return self.settle(req, t0, started, None, None);
        }
        let (mut head, sent) = request_context::read_head(&req, !req.end_stream());
        let ctx = self.ctx.clone();
        let entered = RequestContext::enter(
            &self.live,
            ctx.files(),
            self.peer.ip(),
            self.tls,
            &mut head,
            sent,
        );
        let rc = match entered {
            Ok(rc) => rc,
            Err(malformed) => {
                let started = self.out.start(&req, &malformed.plan(), None, room);
                return self.settle(req, t0, started, None, None);
            }
        };
        let mut path = std::mem::take(&mut self.path);
        let mut ranges = std::mem::take(&mut self.ranges);
        let files = decide::Files {
            fm: rc.fm,
            check: decide::Check::AtResolve,
        };
        let decision = decide::decide_checked(files, rc.serve, &head, &mut path).await;
        let plan = decision.plan(&head, &mut ranges);
        let started = self.out.start(&req, &plan, decision.representation(), room);
        let file = match &started {
            Started::Waiting { .. } => decision.into_representation().map(|r| (r, rc.fm.clone())),
            Started::Done { .. } | Started::Gone => None,
        };
        self.settle(req, t0, started, file, rc.site);
        self.path = path;
        self.ranges = ranges;
    }

    /// Logs an answer that is complete, or keeps one whose body waits.
    /// `site`: the `[[sites]]` table that answered, for the counters.
    fn settle(
        &mut self,
        req: Request,
        t0: Instant,
        started: Started,
        file: Option<(Representation, filemanager::FileManager)>,
        site: Option<usize>,
    ) {
        let logged = self.live.access.is_some();
        let outcome = |status, sent, completed| Outcome {
            status,
            site,
            sent,
            completed,
            ..Outcome::begun(t0)
        };
        match started {
            Started::Gone => self.out.conn.recycle(req),
            Started::Done { status, sent } => {
                self.log(LogFields::of(&req, logged), &outcome(status, sent, true));
                self.out.conn.recycle(req);
            }
            Started::Waiting {
                status,
                sent,
                parts,
            } => {
                let stream = req.stream();
                let head = LogHead::keep(LogFields::of(&req, logged));
                self.out.conn.recycle(req);
                let copied: usize = parts
                    .iter()
                    .map(|p| match p {
                        Part::Bytes(b) => b.len(),
                        Part::Range { .. } => 0,
                    })
                    .sum();
                let kept = copied + head.size();
                self.kept_octets += kept;
                self.answers.push(Answer {
                    stream,
                    head,
                    kept,
                    outcome: outcome(status, sent, false),
                    pace: file.as_ref().and_then(|_| {
                        let l = &self.live.s.limits;
                        crate::pace::Pace::new(l.limit_rate, l.limit_rate_after)
                    }),
                    file,
                    parts,
                });
            }
        }
    }

    /// Sends what the windows and the send budgets allow of every kept
    /// answer, oldest first; true when one could go on at once (it
    /// stopped at its share of this round, not for window or budget).
    async fn produce(&mut self) -> bool {
        if self.answers.is_empty() {
            return false;
        }
        let answers = std::mem::take(&mut self.answers);
        let mut kept = Vec::with_capacity(answers.len());
        let mut more = false;
        self.pace_wake = None;
        for mut a in answers {
            if self.out.conn.output().len() >= self.output_cap() {
                kept.push(a);
                continue;
            }
            match self.step(&mut a).await {
                Step::Done => self.finish(a, true),
                Step::Failed => {
                    self.out.conn.reset(a.stream, Reason::INTERNAL_ERROR);
                    self.finish(a, false);
                }
                Step::Blocked | Step::Paced => kept.push(a),
                Step::Paused => {
                    more = true;
                    kept.push(a);
                }
            }
            if self.since_yield >= FAIR_SHARE {
                // A large body shares its worker, as the HTTP/1.1 engine's.
                self.since_yield = 0;
                tokio::task::yield_now().await;
            }
        }
        kept.append(&mut self.answers);
        self.answers = kept;
        more
    }

    /// Moves `a`'s body forward as far as it can go now: at most
    /// `[http2] max_send_buffer` per call, within the windows.
    async fn step(&mut self, a: &mut Answer) -> Step {
        let max_round = self.live.s.http2.max_send_buffer.max(MIN_READ);
        let mut round = 0;
        loop {
            let end_of_body = a.parts.len() == 1;
            let Some(part) = a.parts.front_mut() else {
                return Step::Done;
            };
            let window = self
                .out
                .conn
                .window(a.stream)
                .min(self.out.conn.max_frame());
            if window == 0 {
                return Step::Blocked;
            }
            if round >= max_round || self.out.conn.output().len() >= self.output_cap() {
                return Step::Paused;
            }
            // A paced stream waits alone: the others go on meanwhile.
            let want = match part {
                Part::Bytes(b) => b.len() as u64,
                Part::Range { range, .. } => range.len(),
            };
            let paced = a
                .pace
                .map(|p| p.allowance(a.outcome.sent, want, Instant::now()));
            let window = match paced {
                None => window,
                Some(Ok(n)) => window.min(n as usize),
                Some(Err(at)) => {
                    self.pace_wake = Some(self.pace_wake.map_or(at, |w| w.min(at)));
                    return Step::Paced;
                }
            };
            match part {
                Part::Bytes(bytes) => {
                    let Some(n) = self.reserve(bytes.len().min(window)) else {
                        return Step::Blocked;
                    };
                    self.out
                        .conn
                        .send_data(a.stream, &bytes[..n], n == bytes.len() && end_of_body);
                    bytes.drain(..n);
                    a.outcome.sent += n as u64;
                    round += n;
                    if bytes.is_empty() {
                        a.parts.pop_front();
                    }
                }
                Part::Range { range, last } => {
                    let Some((rep, fm)) = &a.file else {
                        return Step::Failed;
                    };
                    // Bytes from memory too: they are copied into the output.
                    let Some(n) = self.reserve((range.len() as usize).min(window)) else {
                        return Step::Blocked;
                    };
                    let final_bytes = n as u64 == range.len();
                    let frame_at = self.out.conn.output().len();
                    let frame = self.out.conn.begin_data();
                    let out = self.out.conn.output();
                    // A file is checked before its body's last bytes leave:
                    // a change at any point ends the body short.
                    match render::read_part(rep, fm, *range, n, *last, out).await {
                        Some(cold) => a.outcome.cold += cold,
                        None => {
                            self.out.conn.output().truncate(frame_at);
                            return Step::Failed;
                        }
                    }
                    self.out
                        .conn
                        .end_data(frame, a.stream, final_bytes && end_of_body);
                    range.start += n as u64;
                    a.outcome.sent += n as u64;
                    round += n;
                    self.since_yield += n as u64;
                    if range.is_empty() {
                        a.parts.pop_front();
                    }
                }
            }
            self.out.made_progress();
        }
    }

    /// Takes the process-wide send budget for `n` body bytes about to be
    /// put into the output (read from the file or copied from memory);
    /// with none held, up to [`MIN_READ`] of output without, so no
    /// connection starves; `None` when it must wait for its output to be
    /// written.
    fn reserve(&mut self, n: usize) -> Option<usize> {
        let budget = self.ctx.h2_send_budget();
        match budget.clone().try_acquire_many_owned(n as u32) {
            Ok(p) => {
                self.held.push(p);
                self.held_octets += n;
                Some(n)
            }
            // Without permits, up to MIN_READ in the output: one chunk,
            // not one per call.
            Err(_) if self.held.is_empty() => {
                let free = MIN_READ.saturating_sub(self.out.conn.output().len());
                (free > 0).then(|| n.min(free))
            }
            Err(_) => None,
        }
    }

    /// Writes what the socket takes of the output now.
    fn write_some(&mut self) -> io::Result<()> {
        loop {
            let out = self.out.conn.output();
            let n = self.wire.try_write(out)?;
            out.drain(..n);
            if n > 0 && self.out.progress_pending {
                self.out.last_progress = Instant::now();
            }
            if out.is_empty() {
                if !self.wire.wants_flush() {
                    self.held.clear();
                    self.held_octets = 0;
                    self.out.progress_pending = false;
                }
                return Ok(());
            }
            if n == 0 {
                return Ok(());
            }
        }
    }

    /// Counts and logs an answer that ended.
    fn finish(&mut self, mut a: Answer, completed: bool) {
        self.kept_octets -= a.kept;
        a.outcome.completed = completed;
        self.log(a.head.fields(), &a.outcome);
    }

    /// Counts and logs one exchange (`ConnContext::finish`).
    fn log(&self, f: LogFields<'_>, o: &Outcome) {
        let x = f.exchange(self.peer.ip(), "HTTP/2.0", self.tls, o);
        self.ctx.finish(&self.live, &x);
    }

    /// Ends the connection: answers still waiting are logged as cut short,
    /// requests it dropped unanswered are counted,
    /// what is left of the output (the GOAWAY) is written, the TLS session
    /// and the write side are closed, and input is read and dropped for
    /// [`LINGER`] so the client reads the GOAWAY.
    async fn close(&mut self) {
        for a in std::mem::take(&mut self.answers) {
            self.finish(a, false);
        }
        let dropped = self.out.conn.dropped_requests();
        if dropped > 0 {
            tracing::debug!(peer = %self.peer, dropped, "HTTP/2 requests dropped on reset streams");
            metrics::counter!("fileserver_http2_requests_dropped_total").increment(dropped);
        }
        let deadline = tokio::time::Instant::now() + LINGER;
        loop {
            if self.write_some().is_err() {
                return;
            }
            if self.out.conn.output().is_empty() && !self.wire.wants_flush() {
                break;
            }
            let writable = self.wire.tcp().ready(Interest::WRITABLE);
            if tokio::time::timeout_at(deadline, writable).await.is_err() {
                return;
            }
        }
        let _ = tokio::time::timeout_at(deadline, self.wire.shutdown()).await;
        let mut buf = [0u8; 4096];
        while let Ok(Ok(n)) = tokio::time::timeout_at(deadline, self.wire.read(&mut buf)).await {
            if n == 0 {
                break;
            }
        }
    }
}

/// What a waiting answer keeps of its request for its log line and
/// counters ([`LogFields`]), each field cut at [`LOG_FIELD_MAX`], in one
/// buffer.
struct LogHead {
    buf: Vec<u8>,
    /// method, target, referer, user-agent, forwarded, x-forwarded-for,
    /// host, authorization.
    at: [Option<Range<u32>>; 8],
}

impl LogHead {
    fn keep(f: LogFields<'_>) -> LogHead {
        let values = [
            Some(f.method),
            Some(f.target),
            f.referer,
            f.user_agent,
            f.forwarded,
            f.x_forwarded_for,
            f.host,
            f.authorization,
        ];
        let len: usize = values
            .iter()
            .flatten()
            .map(|v| v.len().min(LOG_FIELD_MAX + 3))
            .sum();
        let mut buf = Vec::with_capacity(len);
        let at = values.map(|v| {
            let v = v?;
            let start = buf.len() as u32;
            if v.len() > LOG_FIELD_MAX {
                buf.extend_from_slice(&v[..LOG_FIELD_MAX]);
                buf.extend_from_slice(b"...");
            } else {
                buf.extend_from_slice(v);
            }
            Some(start..buf.len() as u32)
        });
        LogHead { buf, at }
    }

    /// Octets it holds.
    fn size(&self) -> usize {
        self.buf.capacity() + std::mem::size_of::<LogHead>()
    }

    fn fields(&self) -> LogFields<'_> {
        let get = |i: usize| {
            self.at[i]
                .clone()
                .map(|r| &self.buf[r.start as usize..r.end as usize])
        };
        LogFields {
            method: get(0).unwrap_or_default(),
            target: get(1).unwrap_or_default(),
            referer: get(2),
            user_agent: get(3),
            forwarded: get(4),
            x_forwarded_for: get(5),
            host: get(6),
            authorization: get(7),
        }
    }
}

/// Counts a connection this side ended with a GOAWAY that names an error.
fn count_goaway(reason: Reason) {
    let code = match reason {
        Reason::ENHANCE_YOUR_CALM => "enhance_your_calm",
        Reason::FLOW_CONTROL_ERROR => "flow_control_error",
        Reason::FRAME_SIZE_ERROR => "frame_size_error",
        Reason::PROTOCOL_ERROR => "protocol_error",
        Reason::COMPRESSION_ERROR => "compression_error",
        Reason::STREAM_CLOSED => "stream_closed",
        _ => "other",
    };
    metrics::counter!("fileserver_http2_guard_goaways_total", "code" => code).increment(1);
}

/// Counts a connection a timer ended, or began to end.
fn count_timer(timer: &'static str) {
    metrics::counter!("fileserver_http2_timer_closes_total", "timer" => timer).increment(1);
}

/// Describes the HTTP/2 metrics (at start, with an HTTPS listener).
pub(crate) fn describe() {
    metrics::describe_counter!(
        "fileserver_http2_timer_closes_total",
        "HTTP/2 connections a timer ended or sent GOAWAY, by timer: header_read \
         (a frame or header block left incomplete for header_read_timeout), idle \
         (no stream and no work for keepalive_timeout), max_age \
         ([http2] max_connection_age), send (no send progress for send_timeout)."
    );
    metrics::describe_counter!(
        "fileserver_http2_requests_dropped_total",
        "HTTP/2 requests dropped before they were decided: their stream was reset \
         (by the client, or by the server for the client's error) or the connection \
         failed while they waited."
    );
    metrics::describe_counter!(
        "fileserver_http2_guard_goaways_total",
        "HTTP/2 connections the daemon closed with a GOAWAY naming an error, by \
         code: enhance_your_calm (a flood of frames that ask for nothing, or \
         answers held without send progress for send_timeout), protocol_error, \
         frame_size_error, flow_control_error, compression_error, stream_closed."
    );
}
