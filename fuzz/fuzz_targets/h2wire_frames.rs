//! An `h2wire::Connection` fed the client preface and arbitrary bytes in
//! arbitrary pieces, interleaved with the server's side of the
//! conversation: answering the requests it handed out (heads, and bodies
//! within `window()`), resetting them, shutting down, and the clock.
//!
//! Input: one octet choosing a `Config` (small limits reach the limits'
//! code), then operations of one octet each (the low three bits) and their
//! arguments; the bytes a receive takes come from the same input. The
//! client's stream starts with the preface (unless the config octet's high
//! bit is set), so the input's first frame is the client's SETTINGS.
//!
//! Checked after every operation, on the bytes the server wrote (all of
//! them, parsed as frames) and the events it handed out:
//! - the output is whole frames; a receive writes only SETTINGS ACK, PING
//!   ACK, WINDOW_UPDATE, RST_STREAM and GOAWAY; the tick RST_STREAM; the
//!   answers HEADERS, CONTINUATION and DATA within `max_frame()`;
//! - what receives write is at most 4 octets per octet read, plus the
//!   handshake (no amplification), and events are at most one per
//!   9 octets read (no queue a client can grow for free);
//! - no `Event::Request` for a stream the server had reset in an earlier
//!   step; one reset in the same step must be followed by its
//!   `Event::Reset`; requests come on odd, rising stream ids; an
//!   `Event::Reset` names a stream handed out, once;
//! - `open_streams()` stays within `max_concurrent_streams`; after a
//!   connection error `is_done()` and nothing more is written;
//! - `window()` and `send_data` within it never panic.
#![no_main]

use h2wire::{Config, Connection, Event, Reason};
use libfuzzer_sys::fuzz_target;
use std::collections::HashSet;
use std::time::{Duration, Instant};

/// The connection's clock-dependent calls, in one place. Today the
/// connection takes no time; an API that does (`Connection::new(cfg,
/// now)`, `receive(bytes, now)`, `handle_timeout(now)` beside
/// `poll_timeout()`) changes only these bodies:
/// - `new`: `Connection::new(cfg, clock.now)`
/// - `receive`: `conn.receive(bytes, clock.now)`
/// - `tick`: `if conn.poll_timeout().is_some_and(|t| t <= clock.now) {
///   conn.handle_timeout(clock.now) }`
mod clocked {
    use super::*;

    /// Simulated time: starts at a real `Instant` and moves only when the
    /// input says so.
    pub struct Clock {
        pub now: Instant,
    }

    impl Clock {
        pub fn new() -> Clock {
            Clock {
                now: Instant::now(),
            }
        }

        pub fn advance(&mut self, by: Duration) {
            self.now += by;
        }
    }

    pub fn new(cfg: Config, clock: &Clock) -> Connection {
        Connection::new(cfg, clock.now)
    }

    pub fn receive(conn: &mut Connection, bytes: &[u8], clock: &Clock) -> Result<(), Reason> {
        conn.receive(bytes, clock.now)
    }

    /// The timers due by `clock`'s time, as the daemon runs them every
    /// turn of its loop.
    pub fn tick(conn: &mut Connection, clock: &Clock) {
        if conn.poll_timeout().is_some_and(|t| t <= clock.now) {
            conn.handle_timeout(clock.now);
        }
    }
}

use clocked::Clock;

const DATA: u8 = 0x0;
const HEADERS: u8 = 0x1;
const RST_STREAM: u8 = 0x3;
const SETTINGS: u8 = 0x4;
const PING: u8 = 0x6;
const GOAWAY: u8 = 0x7;
const WINDOW_UPDATE: u8 = 0x8;
const CONTINUATION: u8 = 0x9;

fn config(b: u8) -> Config {
    let d = Config::default();
    match b & 3 {
        0 => d,
        // Small everything: refusals, exhausted budgets, small windows.
        1 => Config {
            max_concurrent_streams: 2,
            max_header_list_size: 256,
            initial_stream_window: 100,
            initial_connection_window: 65535,
            control_frame_budget: 20,
            max_local_error_resets: 4,
            max_pending_reset_streams: 2,
            // Timers the input's clock reaches: a partial frame, idleness,
            // age and a request bound all end connections here.
            header_read_timeout: Duration::from_secs(2),
            idle_timeout: Duration::from_secs(5),
            max_age: Duration::from_secs(30),
            max_requests: 3,
        },
        2 => Config {
            max_concurrent_streams: 8,
            initial_stream_window: 0,
            initial_connection_window: 0,
            control_frame_budget: 100,
            ..d
        },
        _ => Config {
            max_concurrent_streams: u32::from(b >> 2),
            max_header_list_size: u32::from(b) * 64,
            initial_stream_window: u32::from(b) << 8,
            initial_connection_window: u32::from(b) << 12,
            control_frame_budget: u32::from(b >> 1),
            max_local_error_resets: usize::from(b >> 3),
            max_pending_reset_streams: usize::from(b >> 4),
            max_requests: u32::from(b >> 5),
            ..d
        },
    }
}

/// The input, read from the front.
struct Input<'a>(&'a [u8]);

impl<'a> Input<'a> {
    fn byte(&mut self) -> Option<u8> {
        let (&b, rest) = self.0.split_first()?;
        self.0 = rest;
        Some(b)
    }

    fn take(&mut self, n: usize) -> &'a [u8] {
        let (a, b) = self.0.split_at(n.min(self.0.len()));
        self.0 = b;
        a
    }
}

/// One frame of the server's output.
struct Frame {
    kind: u8,
    stream: u32,
    len: usize,
}

/// The server's output since the last call, as frames (it must be whole
/// frames: nothing else is ever written between two calls).
fn frames(out: &[u8]) -> Vec<Frame> {
    let mut v = Vec::new();
    let mut p = out;
    while !p.is_empty() {
        assert!(p.len() >= 9, "a partial frame head in the output");
        let len = u32::from_be_bytes([0, p[0], p[1], p[2]]) as usize;
        let stream = u32::from_be_bytes([p[5], p[6], p[7], p[8]]) & 0x7fff_ffff;
        assert!(p.len() >= 9 + len, "a partial frame in the output");
        v.push(Frame {
            kind: p[3],
            stream,
            len,
        });
        p = &p[9 + len..];
    }
    v
}

#[derive(Default)]
struct State {
    /// Streams handed out as requests and not yet known to be gone.
    open: Vec<u32>,
    /// Every stream handed out as a request.
    handed_out: HashSet<u32>,
    /// Streams with an `Event::Reset` already.
    reset_events: HashSet<u32>,
    /// Streams the server sent RST_STREAM for, in earlier steps.
    rst_before: HashSet<u32>,
    last_request: u32,
    received: usize,
    written_by_receive: usize,
    events: usize,
    failed: bool,
}

/// Who wrote: what an operation may write.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Writer {
    Receive,
    Tick,
    Answer,
    Reset,
    Shutdown,
}

fn check_output(conn: &mut Connection, st: &mut State, who: Writer) -> HashSet<u32> {
    let out = std::mem::take(conn.output());
    let max_frame = conn.max_frame();
    let mut rst_now = HashSet::new();
    for f in frames(&out) {
        let allowed = match who {
            Writer::Receive => matches!(
                f.kind,
                SETTINGS | PING | WINDOW_UPDATE | RST_STREAM | GOAWAY
            ),
            Writer::Reset => f.kind == RST_STREAM,
            // Draining streams reset; a timer (a partial frame, idleness,
            // age) ends the connection with GOAWAY.
            Writer::Tick => matches!(f.kind, RST_STREAM | GOAWAY),
            // An answer that ends a stream whose body still comes gives
            // the body's window back, or resets the stream past its bound.
            Writer::Answer => {
                let answer = matches!(f.kind, HEADERS | CONTINUATION | DATA);
                assert!(
                    !answer || f.len <= max_frame,
                    "an answer frame over the peer's max"
                );
                answer || matches!(f.kind, WINDOW_UPDATE | RST_STREAM)
            }
            Writer::Shutdown => f.kind == GOAWAY,
        };
        assert!(allowed, "frame type {} written by the wrong call", f.kind);
        if f.kind == RST_STREAM {
            assert_ne!(f.stream, 0, "RST_STREAM on stream 0");
            rst_now.insert(f.stream);
        }
    }
    if st.failed {
        assert!(out.is_empty(), "output after the connection failed");
    }
    if who != Writer::Receive {
        // No event comes between: these count from now on.
        st.rst_before.extend(&rst_now);
    }
    if who == Writer::Receive {
        st.written_by_receive += out.len();
        // Per frame read (9 octets at least) at most a WINDOW_UPDATE and
        // a RST_STREAM (26); the constant is for the final GOAWAY.
        assert!(
            st.written_by_receive <= 4 * st.received + 128,
            "{} written for {} read",
            st.written_by_receive,
            st.received
        );
    }
    rst_now
}

/// Hands out the events of this step, checking them against the resets
/// the server wrote before (`st.rst_before`) and in this step (`rst_now`).
fn drain_events(conn: &mut Connection, st: &mut State, rst_now: &HashSet<u32>) {
    let mut must_reset = Vec::new();
    while let Some(ev) = conn.next_event() {
        st.events += 1;
        match ev {
            Event::Request(req) => {
                let id = req.stream();
                assert!(
                    !st.rst_before.contains(&id),
                    "a request on stream {id}, which the server had reset"
                );
                if rst_now.contains(&id) {
                    must_reset.push(id);
                }
                assert!(id % 2 == 1 && id > st.last_request, "request stream {id}");
                st.last_request = id;
                st.handed_out.insert(id);
                st.open.push(id);
                // Exercise the accessors on whatever came.
                let _ = (req.method(), req.scheme(), req.authority(), req.path());
                let _ = (req.end_stream(), req.too_large(), req.fields().count());
                conn.recycle(req);
            }
            Event::Reset(id) => {
                assert!(
                    st.handed_out.contains(&id),
                    "a reset of stream {id}, never handed out"
                );
                assert!(st.reset_events.insert(id), "stream {id} reset twice");
                must_reset.retain(|&s| s != id);
                st.open.retain(|&s| s != id);
            }
        }
    }
    assert!(
        must_reset.is_empty(),
        "requests on streams {must_reset:?}, reset in the same step without an Event::Reset"
    );
    st.rst_before.extend(rst_now);
}

const BODY: [u8; 4096] = [b'x'; 4096];

fuzz_target!(|data: &[u8]| {
    let mut input = Input(data);
    let Some(cfg_byte) = input.byte() else {
        return;
    };
    let cfg = config(cfg_byte);
    let max_streams = cfg.max_concurrent_streams as usize;
    let mut clock = Clock::new();
    let mut conn = clocked::new(cfg, &clock);
    let mut st = State::default();
    // The handshake (SETTINGS, WINDOW_UPDATE) is written before anything
    // is read: not counted against what the client sends.
    check_output(&mut conn, &mut st, Writer::Receive);
    st.written_by_receive = 0;
    // The high bit of the config octet leaves the preface to the input.
    let mut preface: &[u8] = if cfg_byte & 0x80 == 0 {
        h2wire::PREFACE
    } else {
        b""
    };
    let mut steps = 0;
    while let Some(op) = input.byte() {
        steps += 1;
        if steps > 2000 {
            break;
        }
        match op & 7 {
            // Receive: the next piece of the client's stream, the
            // preface first.
            0..=3 => {
                let n = usize::from(input.byte().unwrap_or(0)) << (op >> 6);
                let from_preface = n.min(preface.len());
                let mut piece = preface[..from_preface].to_vec();
                preface = &preface[from_preface..];
                piece.extend_from_slice(input.take(n - from_preface));
                st.received += piece.len();
                let result = clocked::receive(&mut conn, &piece, &clock);
                let rst_now = check_output(&mut conn, &mut st, Writer::Receive);
                if result.is_err() {
                    assert!(conn.is_done(), "a connection error, and not done");
                    st.failed = true;
                }
                drain_events(&mut conn, &mut st, &rst_now);
                // Events are paid for in frames read.
                assert!(st.events * 9 <= st.received, "{} events", st.events);
            }
            // Answer one open request: a head, then a body within the
            // window.
            4 => {
                let arg = input.byte().unwrap_or(0);
                let Some(&id) = st.open.get(usize::from(arg) % st.open.len().max(1)) else {
                    continue;
                };
                let head_only = arg & 0x80 != 0;
                let status = [200u16, 206, 304, 404, 431, 500, 103, 999][usize::from(arg >> 4) & 7];
                // Up to 32 KiB of head: CONTINUATIONs past the frame size.
                let large =
                    vec![b'v'; usize::from(arg & 0x40 != 0) * usize::from(arg & 0x3f) * 512];
                let sent = conn.send_headers(id, head_only, |b| {
                    b.status(status);
                    b.indexed(b"content-type", b"text/plain");
                    if !large.is_empty() {
                        b.field(b"x-large", &large);
                    }
                });
                check_output(&mut conn, &mut st, Writer::Answer);
                if !sent || head_only {
                    st.open.retain(|&s| s != id);
                    continue;
                }
                let want = usize::from(input.byte().unwrap_or(0)) * 32;
                let window = conn.window(id);
                let n = want.min(window).min(BODY.len());
                let end = n == want;
                conn.send_data(id, &BODY[..n], end);
                check_output(&mut conn, &mut st, Writer::Answer);
                if end {
                    st.open.retain(|&s| s != id);
                }
            }
            // More body on an answered stream, within its window.
            5 => {
                let arg = input.byte().unwrap_or(0);
                let Some(&id) = st.open.get(usize::from(arg) % st.open.len().max(1)) else {
                    continue;
                };
                let window = conn.window(id);
                let n = (usize::from(arg) * 16).min(window).min(BODY.len());
                // A stream not yet answered gets no DATA before its head.
                if conn.send_headers(id, false, |b| {
                    b.status(200);
                }) {
                    check_output(&mut conn, &mut st, Writer::Answer);
                }
                let window_after = conn.window(id);
                if n <= window_after && window_after > 0 {
                    conn.send_data(id, &BODY[..n], arg & 1 == 1);
                    check_output(&mut conn, &mut st, Writer::Answer);
                    if arg & 1 == 1 {
                        st.open.retain(|&s| s != id);
                    }
                }
            }
            // Reset an open stream from this side.
            6 => {
                let arg = input.byte().unwrap_or(0);
                let Some(&id) = st.open.get(usize::from(arg) % st.open.len().max(1)) else {
                    continue;
                };
                conn.reset(id, Reason(u32::from(arg >> 4)));
                check_output(&mut conn, &mut st, Writer::Reset);
                st.open.retain(|&s| s != id);
            }
            // The clock, a look at the windows, or the end.
            _ => {
                let arg = input.byte().unwrap_or(0);
                match arg & 3 {
                    0 | 1 => {
                        clock.advance(Duration::from_millis(u64::from(arg) * 16));
                        let open_before = conn.open_streams();
                        clocked::tick(&mut conn, &clock);
                        let out = conn.output().len();
                        // A reset per draining stream, and one GOAWAY (17
                        // octets) when a timer ends the connection.
                        assert!(out <= 13 * open_before + 17, "tick wrote {out}");
                        check_output(&mut conn, &mut st, Writer::Tick);
                    }
                    2 => {
                        for id in [0, 1, u32::from(arg), u32::MAX, st.last_request + 2] {
                            let _ = conn.window(id);
                        }
                    }
                    _ => {
                        conn.shutdown();
                        check_output(&mut conn, &mut st, Writer::Shutdown);
                    }
                }
            }
        }
        assert!(
            conn.open_streams() <= max_streams,
            "{} streams open",
            conn.open_streams()
        );
        if conn.is_done() && st.failed {
            // Only the end is left: nothing is written any more.
            let result = clocked::receive(&mut conn, &[0; 9], &clock);
            assert!(result.is_err());
            check_output(&mut conn, &mut st, Writer::Receive);
            break;
        }
    }
    // Every window, after whatever happened.
    for id in st.handed_out.iter().copied() {
        let _ = conn.window(id);
    }
});
