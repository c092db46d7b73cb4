//! The server side of one HTTP/2 connection, without I/O: what the client
//! sent goes in through [`Connection::receive`], requests and resets come
//! out as [`Event`]s, answers go in through the `send_*` calls, and the
//! bytes to write accumulate in [`Connection::output`].
//!
//! ```text
//! receive(bytes) ─> frames ─> HEADERS+CONTINUATION ─> HPACK ─> Request ─> Event
//!                     │         (decoded even when refused: the table must follow)
//!                     ├─> SETTINGS / PING ─> ACK        ├─> WINDOW_UPDATE ─> send windows
//!                     ├─> DATA ─> windows given back (request bodies are read out, bounded)
//!                     └─> anything malformed ─> RST_STREAM (stream error) or GOAWAY
//! send_headers / send_data ─> output  (HEADERS split into CONTINUATIONs, DATA
//!                                     within the peer's windows and frame size)
//! ```
//!
//! Every frame a client can send for free and that makes the server
//! answer or remember (SETTINGS, PING, PRIORITY, WINDOW_UPDATE, empty
//! DATA or CONTINUATION, unknown types, a reset of a stream still being
//! answered) spends one unit of a credit that every answer earns back
//! two of; a client that spends it all gets GOAWAY ENHANCE_YOUR_CALM
//! (the CVE-2019-9512/9515/9516/9518 and CVE-2023-44487 floods). Streams
//! the server resets for the client's errors are counted too, and a
//! header block is bounded before it is decoded (CVE-2024-27316). A
//! request on a stream reset before it was handed out is never handed
//! out (CVE-2025-8671, "MadeYouReset"), and counts against the same bound
//! as a client's own resets. Padding is paid for like the octets it is.
//!
//! Timers run on the caller's clock: [`Connection::poll_timeout`] says
//! when [`Connection::handle_timeout`] must next be called. A frame or
//! header block left incomplete must end within `header_read_timeout`
//! (a trickle of octets does not hold a connection); only frames that do
//! work keep it from idling out; its age and its requests are bounded.
//!
//! What each frame is comes from [`frame`](crate::frame) (read into a
//! typed `Frame`, checked for what the frame alone says); the streams and
//! the windows are [`stream`](crate::stream)'s. This module decides what a
//! frame does to the connection, and keeps the events, timers and credit.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use crate::frame::{self, Frame, Head, Reason, Setting};
use crate::request::Request;
use crate::stream::{RecvWindow, SendWindow, Stream, Streams};

/// What this side announces and enforces.
#[derive(Debug, Clone)]
pub struct Config {
    /// `SETTINGS_MAX_CONCURRENT_STREAMS`: more open at once are refused.
    pub max_concurrent_streams: u32,
    /// `SETTINGS_MAX_HEADER_LIST_SIZE`: a larger request head is answered
    /// 431 ([`Request::too_large`]).
    pub max_header_list_size: u32,
    /// `SETTINGS_INITIAL_WINDOW_SIZE`: what a client may send on a stream
    /// before it is given more.
    pub initial_stream_window: u32,
    /// The connection's receive window (a WINDOW_UPDATE after the
    /// SETTINGS raises it from 65535).
    pub initial_connection_window: u32,
    /// Cheap frames a client may send beyond what answers earn back.
    pub control_frame_budget: u32,
    /// Streams reset for the client's errors before the connection ends.
    pub max_local_error_resets: usize,
    /// Streams the client resets before they were handed out as events
    /// (opened and reset within what one read brought), at most; more end
    /// the connection (the rapid reset, CVE-2023-44487).
    pub max_pending_reset_streams: usize,
    /// How long a frame or a header block may stay incomplete: past it the
    /// connection ends (GOAWAY, NO_ERROR), as HTTP/1.1's 408.
    pub header_read_timeout: Duration,
    /// How long a connection with no stream open stays open without a
    /// frame that does work (a request, body octets, a window opened for
    /// an answer): PINGs and SETTINGS do not keep it. Then GOAWAY.
    pub idle_timeout: Duration,
    /// The most a connection lives: then GOAWAY, and the streams already
    /// opened are answered (nginx's `keepalive_time`).
    pub max_age: Duration,
    /// Streams a connection may open, 0 for no limit: the last one gets a
    /// GOAWAY beside it, and its answers finish (nginx's
    /// `keepalive_requests`).
    pub max_requests: u32,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            max_concurrent_streams: 100,
            max_header_list_size: 16 * 1024,
            initial_stream_window: 1024 * 1024,
            initial_connection_window: 2 * 1024 * 1024,
            control_frame_budget: 1000,
            max_local_error_resets: 1024,
            max_pending_reset_streams: 20,
            header_read_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(60),
            max_age: Duration::from_secs(3600),
            max_requests: 0,
        }
    }
}

/// Why [`Connection::handle_timeout`] ended or began to end a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expired {
    /// A frame or header block stayed incomplete past `header_read_timeout`:
    /// ended at once.
    HeaderRead,
    /// No stream and no work for `idle_timeout`: GOAWAY.
    Idle,
    /// Older than `max_age`: GOAWAY, its streams answered.
    MaxAge,
}

/// A DATA frame being written: [`Connection::begin_data`].
#[derive(Debug)]
#[must_use = "end the frame with Connection::end_data"]
pub struct DataFrame(usize);

/// What [`Connection::next_event`] hands out.
#[derive(Debug)]
pub enum Event {
    /// A request head: answer it with [`Connection::send_headers`] (and
    /// [`Connection::send_data`]), then give it back with
    /// [`Connection::recycle`].
    Request(Request),
    /// A stream that was still being answered is gone (the client reset
    /// it): stop answering it.
    Reset(u32),
}

/// Request body octets read and dropped per stream once it is answered,
/// before the stream is reset (NO_ERROR, RFC 9113 8.1): some clients take
/// a reset before their body ends as a failure and drop the answer.
/// Padding counts: it costs the same to read.
const DRAIN_MAX: u64 = 64 * 1024;
/// A DATA frame carrying fewer body octets than this (padding aside) and
/// not ending its stream is paid for like a control frame: a flood of
/// empty or all-padding frames is a flood of free frames.
const TINY_DATA: u64 = 256;
/// Window given back to a draining stream at the least per WINDOW_UPDATE
/// (or what is left of its drain): one update per frame read would be
/// one frame out per frame in.
const DRAIN_UPDATE: u64 = 16 * 1024;
/// How often draining streams are looked at (two looks: a reset).
const TICK: Duration = Duration::from_secs(1);
/// Credit an answer (HEADERS or DATA with octets) earns back.
const REFILL: i64 = 2;
/// Spare requests kept for the next ones: as many as a client's usual
/// batch of concurrent streams (h2load's and browsers' 10 or more), so a
/// batch allocates nothing once the connection has seen one.
const SPARE_REQUESTS: usize = 16;
/// The most a spare request's buffers may hold (a larger one is dropped):
/// a browser's head fits, and the spares keep at most 64 KiB per
/// connection whatever a client's headers were (four spares of a full
/// 16 KiB header list kept as much before).
const SPARE_BYTES: usize = 4096;
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Waiting for the client preface.
    Preface,
    /// The preface is in; the first frame must be SETTINGS.
    Settings,
    Open,
}

/// A header block being gathered across HEADERS and CONTINUATION frames.
#[derive(Debug, Clone, Copy)]
struct BlockHead {
    stream: u32,
    end_stream: bool,
    depends_on_itself: bool,
}

/// One HTTP/2 connection, server side. See the module docs.
#[derive(Debug)]
pub struct Connection {
    cfg: Config,
    phase: Phase,
    /// Received bytes short of a whole frame.
    rbuf: Vec<u8>,
    /// Whole frames received.
    frames_in: u64,
    out: Vec<u8>,
    dec: hpack::Decoder,
    enc: hpack::Encoder,
    block: Vec<u8>,
    block_head: Option<BlockHead>,
    streams: Streams,
    peer_initial_window: i64,
    peer_max_frame: usize,
    send_window: SendWindow,
    recv_window: RecvWindow,
    /// The client acknowledged this side's SETTINGS.
    settings_acked: bool,
    credit: i64,
    local_resets: usize,
    /// Streams reset while their request still waited in `events`, since
    /// the queue was last emptied.
    pending_resets: usize,
    /// GOAWAY sent: streams above this are not served.
    goaway_last: Option<u32>,
    peer_goaway: bool,
    failed: Option<Reason>,
    events: VecDeque<Event>,
    spare: Vec<Request>,
    /// Requests dropped before they were handed out: their stream was
    /// reset (by either side) or the connection ended.
    dropped_requests: u64,
    /// Streams opened, toward `max_requests`.
    opened: u32,
    /// The clock as of the last `receive` or `handle_timeout`.
    now: Instant,
    born: Instant,
    /// The last frame that did work, or the last time a stream was open.
    last_work: Instant,
    /// A stream closed and none is open: `last_work` restarts at the next
    /// clock reading.
    went_idle: bool,
    /// Since when the frame in `rbuf` (or the preface) is incomplete.
    partial_since: Option<Instant>,
    /// Since when the header block in `block` is open.
    block_since: Option<Instant>,
    next_tick: Instant,
}

impl Connection {
    /// A connection whose SETTINGS (and the connection window's update)
    /// are already in [`Connection::output`]; `now` starts its timers.
    pub fn new(cfg: Config, now: Instant) -> Connection {
        let mut out = Vec::with_capacity(64);
        frame::settings(
            &mut out,
            &[
                (
                    frame::SETTINGS_MAX_CONCURRENT_STREAMS,
                    cfg.max_concurrent_streams,
                ),
                (
                    frame::SETTINGS_INITIAL_WINDOW_SIZE,
                    cfg.initial_stream_window,
                ),
                (
                    frame::SETTINGS_MAX_HEADER_LIST_SIZE,
                    cfg.max_header_list_size,
                ),
            ],
        );
        let extra = cfg
            .initial_connection_window
            .saturating_sub(frame::DEFAULT_WINDOW);
        if extra > 0 {
            frame::window_update(&mut out, 0, extra);
        }
        Connection {
            phase: Phase::Preface,
            rbuf: Vec::new(),
            frames_in: 0,
            out,
            dec: hpack::Decoder::new(4096),
            enc: hpack::Encoder::new(),
            block: Vec::new(),
            block_head: None,
            streams: Streams::default(),
            peer_initial_window: i64::from(frame::DEFAULT_WINDOW),
            peer_max_frame: frame::DEFAULT_MAX_FRAME as usize,
            send_window: SendWindow::new(i64::from(frame::DEFAULT_WINDOW)),
            recv_window: RecvWindow::new(i64::from(
                cfg.initial_connection_window.max(frame::DEFAULT_WINDOW),
            )),
            settings_acked: false,
            credit: i64::from(cfg.control_frame_budget),
            local_resets: 0,
            pending_resets: 0,
            goaway_last: None,
            peer_goaway: false,
            failed: None,
            events: VecDeque::new(),
            spare: Vec::new(),
            dropped_requests: 0,
            opened: 0,
            now,
            born: now,
            last_work: now,
            went_idle: false,
            partial_since: None,
            block_since: None,
            next_tick: now + TICK,
            cfg,
        }
    }

    /// Takes what the client sent, read at `now`. An error ends the
    /// connection: its GOAWAY is in the output, to be written before the
    /// socket closes.
    pub fn receive(&mut self, input: &[u8], now: Instant) -> Result<(), Reason> {
        if let Some(r) = self.failed {
            return Err(r);
        }
        self.now = now;
        let frames_before = self.frames_in;
        let result = if self.rbuf.is_empty() {
            self.process(input)
                .map(|n| self.rbuf.extend_from_slice(&input[n..]))
        } else {
            let mut buf = std::mem::take(&mut self.rbuf);
            buf.extend_from_slice(input);
            let result = self.process(&buf).map(|n| {
                buf.drain(..n);
            });
            self.rbuf = buf;
            result
        };
        if let Err(reason) = result {
            self.fail(reason);
        }
        // An incomplete frame's clock starts with its first octet: kept
        // while no frame completes, restarted when one did.
        self.partial_since = if self.rbuf.is_empty() && self.phase != Phase::Preface {
            None
        } else if self.frames_in != frames_before {
            Some(now)
        } else {
            self.partial_since.or(Some(now))
        };
        result
    }
}

// Timers, on the caller's clock.
impl Connection {
    /// When [`Connection::handle_timeout`] must next be called: the
    /// earliest of the header-read, idle, age and drain deadlines.
    pub fn poll_timeout(&self) -> Option<Instant> {
        if self.failed.is_some() {
            return None;
        }
        let mut at = self.born + self.cfg.max_age;
        if let Some(t) = self.incomplete_since() {
            at = at.min(t + self.cfg.header_read_timeout);
        }
        if self.streams.is_empty() {
            at = at.min(self.last_work + self.cfg.idle_timeout);
        } else {
            at = at.min(self.next_tick);
        }
        Some(at)
    }

    /// Runs the timers due at `now`; cheap when none is, so it may be
    /// called on every turn of the caller's loop. Says why it ended, or
    /// began to end, the connection.
    pub fn handle_timeout(&mut self, now: Instant) -> Option<Expired> {
        if self.failed.is_some() {
            return None;
        }
        self.now = now;
        if !self.streams.is_empty() || self.went_idle {
            // Busy is not idle: the idle clock starts when the last
            // stream closes.
            self.last_work = now;
            self.went_idle = false;
        }
        if self
            .incomplete_since()
            .is_some_and(|t| now >= t + self.cfg.header_read_timeout)
        {
            self.fail(Reason::NO_ERROR);
            return Some(Expired::HeaderRead);
        }
        if now >= self.next_tick {
            self.tick();
            self.next_tick = now + TICK;
        }
        if self.goaway_last.is_none() {
            if now >= self.born + self.cfg.max_age {
                self.shutdown();
                return Some(Expired::MaxAge);
            }
            if self.streams.is_empty() && now >= self.last_work + self.cfg.idle_timeout {
                self.shutdown();
                return Some(Expired::Idle);
            }
        }
        None
    }

    /// Since when a frame or a header block has been incomplete, if one is.
    fn incomplete_since(&self) -> Option<Instant> {
        self.partial_since.into_iter().chain(self.block_since).min()
    }

    /// About once a second: a stream answered and still reading out its
    /// request body since the last look is reset (NO_ERROR).
    fn tick(&mut self) {
        let mut i = 0;
        while i < self.streams.len() {
            let s = &mut self.streams[i];
            if !s.send_open && s.recv_open {
                if s.drain_marked {
                    let id = s.id;
                    self.remove(i);
                    self.rst(id, Reason::NO_ERROR);
                    continue;
                }
                s.drain_marked = true;
            }
            i += 1;
        }
    }
}

// What the caller reads of the connection, and its ending.
impl Connection {
    /// Requests dropped before they were handed out (their stream was
    /// reset, or the connection ended), since the connection began.
    pub fn dropped_requests(&self) -> u64 {
        self.dropped_requests
    }

    /// The next request or reset, in the order they arrived.
    pub fn next_event(&mut self) -> Option<Event> {
        let event = self.events.pop_front();
        if event.is_none() {
            self.pending_resets = 0;
        }
        event
    }

    /// Gives an answered request's buffers back for the next one.
    pub fn recycle(&mut self, req: Request) {
        if self.spare.len() < SPARE_REQUESTS && req.capacity() <= SPARE_BYTES {
            self.spare.push(req);
        }
    }

    /// Bytes to write, in order; the caller removes what it wrote. A
    /// caller of [`Connection::begin_data`] appends a payload here.
    pub fn output(&mut self) -> &mut Vec<u8> {
        &mut self.out
    }

    /// Ended with an error, or going away with no stream left.
    pub fn is_done(&self) -> bool {
        self.failed.is_some()
            || ((self.goaway_last.is_some() || self.peer_goaway) && self.streams.is_empty())
    }

    /// A request or reset waits to be handed out.
    pub fn has_event(&self) -> bool {
        !self.events.is_empty()
    }

    /// Streams open or half-closed.
    pub fn open_streams(&self) -> usize {
        self.streams.len()
    }

    /// Graceful shutdown: GOAWAY, no stream after the last one opened is
    /// served, and [`Connection::is_done`] once those are answered.
    pub fn shutdown(&mut self) {
        if self.goaway_last.is_none() && self.failed.is_none() {
            self.goaway(Reason::NO_ERROR);
            self.goaway_last = Some(self.streams.last());
        }
    }

    /// Ends the connection from this side (a stalled client, an answer
    /// that cannot go on): GOAWAY with `reason`, then [`Connection::is_done`].
    pub fn abort(&mut self, reason: Reason) {
        self.fail(reason);
    }
}

// Answers: the caller's side of each stream.
impl Connection {
    /// Answer octets [`Connection::send_data`] may take for `stream` now:
    /// the smaller of its window and the connection's, 0 for a stream
    /// that is gone or ended.
    pub fn window(&self, stream: u32) -> usize {
        match self.streams.find(stream) {
            Some(i) if self.streams[i].send_open && self.failed.is_none() => {
                self.streams[i].send.and(self.send_window).max(0) as usize
            }
            _ => 0,
        }
    }

    /// The largest DATA payload the client accepts in one frame.
    pub fn max_frame(&self) -> usize {
        self.peer_max_frame
    }

    /// Sends the response head of `stream`, written by `write` (which
    /// starts with `:status`). False if the stream is gone, ended, or has
    /// its head already.
    pub fn send_headers(
        &mut self,
        stream: u32,
        end_stream: bool,
        write: impl FnOnce(&mut hpack::Block<'_>),
    ) -> bool {
        let Some(i) = self.streams.find(stream) else {
            return false;
        };
        let s = &mut self.streams[i];
        if !s.send_open || s.headers_sent || self.failed.is_some() {
            return false;
        }
        s.headers_sent = true;
        let start = frame::reserve_head(&mut self.out);
        write(&mut self.enc.block(&mut self.out));
        frame::end_headers(
            &mut self.out,
            start,
            stream,
            end_stream,
            self.peer_max_frame,
        );
        self.earn();
        if end_stream {
            self.end_send(i);
        }
        true
    }

    /// Sends `data` on `stream`, at most [`Connection::window`] octets
    /// (more is a caller's error and panics), in frames the client
    /// accepts; `end_stream` ends the answer.
    pub fn send_data(&mut self, stream: u32, data: &[u8], end_stream: bool) {
        let mut rest = data;
        loop {
            let n = rest.len().min(self.peer_max_frame);
            let last = n == rest.len();
            let frame = self.begin_data();
            self.out.extend_from_slice(&rest[..n]);
            self.end_data(frame, stream, end_stream && last);
            rest = &rest[n..];
            if last {
                return;
            }
        }
    }

    /// Starts a DATA frame whose payload the caller then appends to
    /// [`Connection::output`] (a file read straight into it), and ends
    /// with [`Connection::end_data`] before any other call.
    pub fn begin_data(&mut self) -> DataFrame {
        DataFrame(frame::reserve_head(&mut self.out))
    }

    /// Ends the DATA frame `data` on `stream`: its payload is what was
    /// appended since [`Connection::begin_data`], at most
    /// [`Connection::window`] and [`Connection::max_frame`] octets (more is
    /// a caller's error and panics).
    pub fn end_data(&mut self, data: DataFrame, stream: u32, end_stream: bool) {
        let at = data.0;
        let len = self.out.len() - at - 9;
        let i = self.streams.find(stream).expect("DATA on a live stream");
        let s = &mut self.streams[i];
        assert!(
            s.send_open && len as i64 <= s.send.and(self.send_window),
            "DATA past the stream's window or after its end"
        );
        assert!(len <= self.peer_max_frame, "DATA larger than a frame");
        s.send.spend(len);
        self.send_window.spend(len);
        frame::end_data(&mut self.out, at, stream, end_stream);
        if len > 0 {
            self.earn();
        }
        if end_stream {
            self.end_send(i);
        }
    }

    /// Resets `stream` from this side (its answer failed): RST_STREAM
    /// with `reason`, no event.
    pub fn reset(&mut self, stream: u32, reason: Reason) {
        if let Some(i) = self.streams.find(stream) {
            self.remove(i);
            self.rst(stream, reason);
        }
    }
}

// Receiving: each frame's effect on the connection and its streams.
impl Connection {
    /// Handles every whole frame in `buf`; returns the octets used.
    fn process(&mut self, buf: &[u8]) -> Result<usize, Reason> {
        let mut pos = 0;
        if self.phase == Phase::Preface {
            let n = buf.len().min(frame::PREFACE.len());
            if buf[..n] != frame::PREFACE[..n] {
                return Err(Reason::PROTOCOL_ERROR);
            }
            if n < frame::PREFACE.len() {
                return Ok(0);
            }
            pos = n;
            self.phase = Phase::Settings;
        }
        while let Some(h) = buf.get(pos..pos + 9) {
            let h = Head::parse(h.try_into().expect("9 octets"));
            if h.len > frame::DEFAULT_MAX_FRAME {
                return Err(Reason::FRAME_SIZE_ERROR);
            }
            let end = pos + 9 + h.len as usize;
            let Some(payload) = buf.get(pos + 9..end) else {
                break;
            };
            pos = end;
            self.frames_in += 1;
            if self.phase == Phase::Settings {
                if h.kind != frame::SETTINGS || h.flags & frame::ACK != 0 {
                    return Err(Reason::PROTOCOL_ERROR);
                }
                self.phase = Phase::Open;
            }
            self.frame(h, payload)?;
        }
        Ok(pos)
    }

    fn frame(&mut self, h: Head, payload: &[u8]) -> Result<(), Reason> {
        if let Some(b) = self.block_head {
            if h.kind != frame::CONTINUATION || h.stream != b.stream {
                return Err(Reason::PROTOCOL_ERROR);
            }
        }
        match Frame::parse(h, payload)? {
            Frame::Data(data) => self.on_data(data),
            Frame::Headers(headers) => self.on_headers(headers),
            Frame::Continuation {
                end_headers,
                fragment,
            } => self.on_continuation(end_headers, fragment),
            Frame::Priority { stream, depends_on } => {
                self.cheap()?;
                // RFC 9113 5.3.1 makes a self-dependency a stream error,
                // but no RST_STREAM may name an idle stream (5.1).
                if depends_on == stream && !self.streams.is_idle(stream) {
                    return self.stream_error(stream, Reason::PROTOCOL_ERROR);
                }
                Ok(())
            }
            Frame::RstStream { stream } => self.on_rst(stream),
            Frame::Settings(settings) => self.on_settings(settings),
            Frame::Ping { ack, payload } => {
                self.cheap()?;
                if !ack {
                    frame::ping_ack(&mut self.out, payload);
                }
                Ok(())
            }
            Frame::GoAway => {
                self.peer_goaway = true;
                Ok(())
            }
            Frame::WindowUpdate { stream, increment } => self.on_window_update(stream, increment),
            // Unknown types are ignored (RFC 9113 5.5), and paid for.
            Frame::Unknown => self.cheap(),
        }
    }

    fn on_headers(&mut self, h: frame::Headers<'_>) -> Result<(), Reason> {
        let head = BlockHead {
            stream: h.stream,
            end_stream: h.end_stream,
            depends_on_itself: h.depends_on == Some(h.stream),
        };
        if h.end_headers {
            // The usual case: the whole block in one frame, decoded where
            // it lies.
            return self.on_block(head, h.fragment);
        }
        self.block.clear();
        self.block.extend_from_slice(h.fragment);
        self.block_head = Some(head);
        self.block_since = Some(self.now);
        self.check_block_size()
    }

    fn on_continuation(&mut self, end: bool, fragment: &[u8]) -> Result<(), Reason> {
        let Some(head) = self.block_head else {
            return Err(Reason::PROTOCOL_ERROR);
        };
        if fragment.is_empty() && !end {
            self.cheap()?;
        }
        self.block.extend_from_slice(fragment);
        self.check_block_size()?;
        if end {
            self.block_head = None;
            self.block_since = None;
            let block = std::mem::take(&mut self.block);
            let result = self.on_block(head, &block);
            self.block = block;
            return result;
        }
        Ok(())
    }

    /// A block larger than any list this side accepts, however it is
    /// coded, is not gathered further.
    fn check_block_size(&self) -> Result<(), Reason> {
        if self.block.len() > 2 * self.cfg.max_header_list_size as usize + 16 * 1024 {
            return Err(Reason::ENHANCE_YOUR_CALM);
        }
        Ok(())
    }

    fn on_block(&mut self, head: BlockHead, block: &[u8]) -> Result<(), Reason> {
        let id = head.stream;
        if let Some(i) = self.streams.find(id) {
            // Trailers: decoded for the table, checked, then dropped.
            let mut malformed = false;
            self.dec
                .decode(block, |f| malformed |= !is_trailer_field(f.name))
                .map_err(|_| Reason::COMPRESSION_ERROR)?;
            let s = &mut self.streams[i];
            if !s.recv_open {
                return self.stream_error(id, Reason::STREAM_CLOSED);
            }
            // A body that ends short of its content-length is malformed
            // (RFC 9113 8.1.1) whether DATA or trailers end it.
            let short = s.content_length.is_some_and(|n| s.body_read != n);
            if !head.end_stream || malformed || short {
                return self.stream_error(id, Reason::PROTOCOL_ERROR);
            }
            s.recv_open = false;
            self.last_work = self.now;
            return self.body_ended(i);
        }
        if id % 2 == 0 {
            return Err(Reason::PROTOCOL_ERROR);
        }
        if id <= self.streams.last() {
            if !self.streams.was_closed(id) {
                // Never opened: identifiers only rise (RFC 9113 5.1.1).
                return Err(Reason::PROTOCOL_ERROR);
            }
            // Closed (reset, or ended both ways): decoded for the table,
            // then refused on its own.
            self.decode(block, None)?;
            self.rst(id, Reason::STREAM_CLOSED);
            return self.count_local_reset();
        }
        if self.goaway_last.is_some() {
            // After GOAWAY: not served, but the table must follow.
            return self.decode(block, None);
        }
        let mut req = self.spare.pop().unwrap_or_default();
        req.reset(id, head.end_stream, self.cfg.max_header_list_size as usize);
        self.decode(block, Some(&mut req))?;
        self.streams.set_last(id);
        req.finish();
        if head.depends_on_itself || req.malformed.is_some() {
            self.recycle(req);
            self.streams.remember_closed(id);
            self.rst(id, Reason::PROTOCOL_ERROR);
            return self.count_local_reset();
        }
        if self.streams.len() >= self.cfg.max_concurrent_streams as usize {
            self.recycle(req);
            self.streams.remember_closed(id);
            self.rst(id, Reason::REFUSED_STREAM);
            return self.cheap();
        }
        let recv_window = if self.settings_acked {
            i64::from(self.cfg.initial_stream_window)
        } else {
            // The client may not have this side's SETTINGS yet.
            i64::from(self.cfg.initial_stream_window.max(frame::DEFAULT_WINDOW))
        };
        self.streams.push(Stream::new(
            id,
            head.end_stream,
            SendWindow::new(self.peer_initial_window),
            RecvWindow::new(recv_window),
            req.content_length,
        ));
        self.events.push_back(Event::Request(req));
        self.last_work = self.now;
        self.opened += 1;
        if self.opened == self.cfg.max_requests {
            // The last one this connection serves: the client opens a new
            // connection for the next, and this one ends once answered.
            self.shutdown();
        }
        Ok(())
    }

    fn decode(&mut self, block: &[u8], req: Option<&mut Request>) -> Result<(), Reason> {
        let result = match req {
            Some(req) => self.dec.decode(block, |f| req.push(f.name, f.value)),
            None => self.dec.decode(block, |_| {}),
        };
        result.map_err(|_| Reason::COMPRESSION_ERROR)
    }

    fn on_data(&mut self, data: frame::Data) -> Result<(), Reason> {
        let frame::Data {
            stream: id,
            len,
            body,
            end_stream,
        } = data;
        if !self.recv_window.take(len) {
            return Err(Reason::FLOW_CONTROL_ERROR);
        }
        // The connection's window: every octet is read out at once.
        let half = u64::from(self.cfg.initial_connection_window / 2).max(1);
        if let Some(inc) = self.recv_window.give_back(half) {
            frame::window_update(&mut self.out, 0, inc);
        }
        if body < TINY_DATA && !end_stream {
            self.cheap()?;
        }
        let Some(i) = self.streams.find(id) else {
            if self.streams.is_idle(id) {
                return Err(Reason::PROTOCOL_ERROR);
            }
            // A stream that is closed (or reset): in flight before the
            // client knew, or not; either way a tiny answer, paid for.
            self.cheap()?;
            self.rst(id, Reason::STREAM_CLOSED);
            return Ok(());
        };
        let s = &mut self.streams[i];
        if !s.recv_open {
            return self.stream_error(id, Reason::STREAM_CLOSED);
        }
        if !s.recv.take(len) {
            return self.stream_error(id, Reason::FLOW_CONTROL_ERROR);
        }
        s.body_read += body;
        s.received += len;
        if body > 0 {
            self.last_work = self.now;
        }
        let length_wrong = s
            .content_length
            .is_some_and(|n| s.body_read > n || (end_stream && s.body_read != n));
        if length_wrong {
            return self.stream_error(id, Reason::PROTOCOL_ERROR);
        }
        if end_stream {
            s.recv_open = false;
            return self.body_ended(i);
        }
        if !s.send_open {
            self.drain(i, false);
        }
        Ok(())
    }

    fn on_rst(&mut self, id: u32) -> Result<(), Reason> {
        if self.streams.is_idle(id) {
            return Err(Reason::PROTOCOL_ERROR);
        }
        let Some(i) = self.streams.find(id) else {
            return Ok(());
        };
        let s = self.remove(i);
        if !s.send_open {
            return Ok(());
        }
        if self.drop_queued(id) {
            return self.count_pending_reset();
        }
        // Work started and thrown away: the rapid-reset flood.
        self.events.push_back(Event::Reset(id));
        self.cheap()
    }

    /// Takes the request of `stream` out of the queue if it was never
    /// handed out; true if it was there.
    fn drop_queued(&mut self, stream: u32) -> bool {
        let queued = self
            .events
            .iter()
            .position(|e| matches!(e, Event::Request(r) if r.stream == stream));
        let Some(at) = queued else {
            return false;
        };
        if let Some(Event::Request(req)) = self.events.remove(at) {
            self.recycle(req);
        }
        self.dropped_requests += 1;
        true
    }

    /// A stream reset while its request still waited in the queue: the
    /// rapid reset, bounded per read.
    fn count_pending_reset(&mut self) -> Result<(), Reason> {
        self.pending_resets += 1;
        if self.pending_resets > self.cfg.max_pending_reset_streams {
            return Err(Reason::ENHANCE_YOUR_CALM);
        }
        Ok(())
    }

    fn on_settings(&mut self, settings: frame::Settings<'_>) -> Result<(), Reason> {
        if settings.ack {
            self.settings_acked = true;
            return Ok(());
        }
        self.cheap()?;
        // A frame may repeat a setting (a 16 KiB one 2730 times): each is
        // checked, and the last initial window is applied to the streams
        // once, so a frame costs one walk of them, not one per entry.
        let mut initial_window = None;
        for setting in settings.params() {
            match setting? {
                Setting::InitialWindowSize(value) => initial_window = Some(i64::from(value)),
                Setting::MaxFrameSize(value) => self.peer_max_frame = value as usize,
                Setting::HeaderTableSize(value) => self.enc.set_peer_limit(value as usize),
                Setting::Other => {}
            }
        }
        if let Some(value) = initial_window {
            let delta = value - self.peer_initial_window;
            self.peer_initial_window = value;
            for s in self.streams.iter_mut() {
                s.send.grow(delta)?;
            }
        }
        frame::settings_ack(&mut self.out);
        Ok(())
    }

    fn on_window_update(&mut self, id: u32, increment: u32) -> Result<(), Reason> {
        self.cheap()?;
        let inc = i64::from(increment);
        if id == 0 {
            if inc == 0 {
                return Err(Reason::PROTOCOL_ERROR);
            }
            return self.send_window.grow(inc);
        }
        if self.streams.is_idle(id) {
            return Err(Reason::PROTOCOL_ERROR);
        }
        let Some(i) = self.streams.find(id) else {
            return Ok(());
        };
        if inc == 0 {
            return self.stream_error(id, Reason::PROTOCOL_ERROR);
        }
        let s = &mut self.streams[i];
        let was_open = s.send.is_open();
        if let Err(reason) = s.send.grow(inc) {
            return self.stream_error(id, reason);
        }
        if !was_open && s.send.is_open() {
            // An answer can go on: work, as a request is.
            self.last_work = self.now;
        }
        Ok(())
    }
}

// Stream ends, errors, and the credit of free frames.
impl Connection {
    /// This side ended stream `i`'s answer.
    fn end_send(&mut self, i: usize) {
        let s = &mut self.streams[i];
        s.send_open = false;
        if !s.recv_open {
            self.remove(i);
        } else {
            self.drain(i, true);
        }
    }

    /// The client ended stream `i`'s body.
    fn body_ended(&mut self, i: usize) -> Result<(), Reason> {
        if !self.streams[i].send_open {
            self.remove(i);
        }
        Ok(())
    }

    /// Stream `i` is answered and its body still comes: give its window
    /// back up to [`DRAIN_MAX`] octets (padding included), then reset it.
    /// The window goes back in steps of [`DRAIN_UPDATE`], or at once when
    /// the answer just ended (`now`).
    fn drain(&mut self, i: usize, now: bool) {
        let s = &mut self.streams[i];
        if s.received > DRAIN_MAX {
            let id = s.id;
            self.remove(i);
            self.rst(id, Reason::NO_ERROR);
            return;
        }
        let at_least = if now { 1 } else { DRAIN_UPDATE };
        if let Some(inc) = s.recv.give_back(at_least) {
            frame::window_update(&mut self.out, s.id, inc);
        }
    }

    /// RST_STREAM for the client's error on `id`; too many end the
    /// connection.
    fn stream_error(&mut self, id: u32, reason: Reason) -> Result<(), Reason> {
        self.rst(id, reason);
        if let Some(i) = self.streams.find(id) {
            let s = self.remove(i);
            if s.send_open {
                if self.drop_queued(id) {
                    // Never handed out, so never decided: a client cannot
                    // have work done by provoking resets (MadeYouReset).
                    self.count_pending_reset()?;
                } else {
                    self.events.push_back(Event::Reset(id));
                }
            }
        }
        self.count_local_reset()
    }

    fn count_local_reset(&mut self) -> Result<(), Reason> {
        self.local_resets += 1;
        if self.local_resets > self.cfg.max_local_error_resets {
            return Err(Reason::ENHANCE_YOUR_CALM);
        }
        Ok(())
    }

    fn rst(&mut self, id: u32, reason: Reason) {
        frame::rst_stream(&mut self.out, id, reason);
    }

    fn goaway(&mut self, reason: Reason) {
        frame::goaway(&mut self.out, self.streams.last(), reason);
    }

    fn fail(&mut self, reason: Reason) {
        if self.failed.is_none() {
            self.goaway(reason);
            self.failed = Some(reason);
            self.streams.clear();
            // Requests not handed out yet are not answered: no stream is
            // left to answer them on.
            for e in std::mem::take(&mut self.events) {
                if let Event::Request(req) = e {
                    self.dropped_requests += 1;
                    self.recycle(req);
                }
            }
        }
    }

    fn cheap(&mut self) -> Result<(), Reason> {
        self.credit -= 1;
        if self.credit < 0 {
            return Err(Reason::ENHANCE_YOUR_CALM);
        }
        Ok(())
    }

    fn earn(&mut self) {
        self.credit = (self.credit + REFILL).min(i64::from(self.cfg.control_frame_budget));
    }

    /// Takes stream `i` out (see [`Streams::remove`]); the last one out
    /// starts the idle clock.
    fn remove(&mut self, i: usize) -> Stream {
        let s = self.streams.remove(i);
        if self.streams.is_empty() {
            self.went_idle = true;
        }
        s
    }
}

/// A trailer field may not be a pseudo-header, nor break the rules of any
/// field name (RFC 9113 8.1, 8.2).
fn is_trailer_field(name: &[u8]) -> bool {
    !name.is_empty() && name.iter().all(|&b| crate::request::is_lower_token(b))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Spares cover a batch of streams, and a request whose buffers grew
    /// past [`SPARE_BYTES`] is not kept for the next one.
    #[test]
    fn spare_requests_are_bounded_in_number_and_size() {
        let mut c = Connection::new(Config::default(), Instant::now());
        for _ in 0..SPARE_REQUESTS + 4 {
            c.recycle(Request::default());
        }
        assert_eq!(c.spare.len(), SPARE_REQUESTS);
        c.spare.clear();
        let mut big = Request::default();
        big.reset(1, true, usize::MAX);
        big.push(b"x-large", &vec![b'a'; SPARE_BYTES]);
        c.recycle(big);
        assert!(c.spare.is_empty());
        let mut small = Request::default();
        small.reset(3, true, usize::MAX);
        small.push(b"x-small", b"a");
        c.recycle(small);
        assert_eq!(c.spare.len(), 1);
    }
}
