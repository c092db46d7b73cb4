//! RFC 9113's rules, one client misstep at a time: the frames go in as
//! bytes, and what the connection wrote comes out as frames (the stream
//! reset or the connection's GOAWAY, with the RFC's code), or as events.

mod support;

use std::time::Duration;

use h2wire::{Config, Connection, Event, Expired, Request};
use support::*;

const PROTOCOL_ERROR: u32 = 0x1;
const FLOW_CONTROL_ERROR: u32 = 0x3;
const STREAM_CLOSED: u32 = 0x5;
const FRAME_SIZE_ERROR: u32 = 0x6;
const REFUSED_STREAM: u32 = 0x7;
const COMPRESSION_ERROR: u32 = 0x9;
const ENHANCE_YOUR_CALM: u32 = 0xb;

fn request(conn: &mut Connection) -> Request {
    match conn.next_event() {
        Some(Event::Request(r)) => r,
        other => panic!("expected a request, got {other:?}"),
    }
}

/// The connection error `bytes` (after the handshake) cause.
fn conn_error(bytes: &[u8]) -> u32 {
    let mut c = open(Config::default());
    assert!(c.receive(bytes, t0()).is_err(), "no connection error");
    goaway(&mut c)
}

fn answer(conn: &mut Connection, req: Request, body: &[u8]) {
    let id = req.stream();
    assert!(conn.send_headers(id, body.is_empty(), |b| {
        b.status(200);
    }));
    if !body.is_empty() {
        conn.send_data(id, body, true);
    }
    conn.recycle(req);
}

#[test]
fn the_handshake_announces_the_limits_and_acks_the_clients() {
    let cfg = Config {
        max_concurrent_streams: 7,
        initial_connection_window: 1 << 20,
        ..Config::default()
    };
    let mut c = Connection::new(cfg, t0());
    let f = frames(&mut c);
    assert_eq!(f[0].kind, SETTINGS);
    assert!(f[0].payload.chunks(6).any(|s| s == [0, 3, 0, 0, 0, 7]));
    assert_eq!(f[1].kind, WINDOW_UPDATE);
    assert_eq!(f[1].payload, ((1u32 << 20) - 65535).to_be_bytes());
    c.receive(&hello(), t0()).unwrap();
    let f = frames(&mut c);
    assert_eq!((f[0].kind, f[0].flags), (SETTINGS, 1));
}

#[test]
fn a_bad_preface_or_first_frame_ends_the_connection() {
    let mut c = Connection::new(Config::default(), t0());
    frames(&mut c);
    assert!(c.receive(b"GET / HTTP/1.1\r\n\r\n", t0()).is_err());
    assert_eq!(goaway(&mut c), PROTOCOL_ERROR);
    let mut c = Connection::new(Config::default(), t0());
    frames(&mut c);
    let mut b = h2wire::PREFACE.to_vec();
    b.extend(frame(PING, 0, 0, &[0; 8]));
    assert!(c.receive(&b, t0()).is_err());
    assert_eq!(goaway(&mut c), PROTOCOL_ERROR);
}

#[test]
fn a_request_is_answered_in_frames_the_client_decodes() {
    let mut c = open(Config::default());
    c.receive(&get(1, "/index.html", true), t0()).unwrap();
    let req = request(&mut c);
    assert_eq!(req.path(), Some(&b"/index.html"[..]));
    assert_eq!(req.authority(), Some(&b"a"[..]));
    assert!(req.end_stream());
    answer(&mut c, req, b"hello");
    let f = frames(&mut c);
    assert_eq!((f[0].kind, f[0].flags, f[0].stream), (HEADERS, 0x4, 1));
    let mut fields = Vec::new();
    hpack::Decoder::new(4096)
        .decode(&f[0].payload, |x| {
            fields.push((x.name.to_vec(), x.value.to_vec()))
        })
        .unwrap();
    assert_eq!(fields, [(b":status".to_vec(), b"200".to_vec())]);
    assert_eq!(
        (f[1].kind, f[1].flags, &f[1].payload[..]),
        (DATA, 0x1, &b"hello"[..])
    );
    assert_eq!(c.open_streams(), 0);
}

#[test]
fn bytes_one_at_a_time_make_the_same_requests() {
    let mut c = Connection::new(Config::default(), t0());
    let mut all = hello();
    all.extend(get(1, "/a", true));
    all.extend(frame(HEADERS, 0x1, 3, &block("/b", &[("accept", "*/*")])));
    all.extend(frame(CONTINUATION, 0x4, 3, &[]));
    for b in all {
        c.receive(&[b], t0()).unwrap();
    }
    assert_eq!(request(&mut c).path(), Some(&b"/a"[..]));
    let r = request(&mut c);
    assert_eq!(r.path(), Some(&b"/b"[..]));
    assert_eq!(
        r.fields().collect::<Vec<_>>(),
        [(&b"accept"[..], &b"*/*"[..])]
    );
}

#[test]
fn frame_sizes_and_control_frames_get_their_codes() {
    assert_eq!(
        conn_error(&frame(DATA, 0, 1, &[0; 16385])),
        FRAME_SIZE_ERROR
    );
    assert_eq!(conn_error(&frame(PING, 0, 0, &[0; 7])), FRAME_SIZE_ERROR);
    assert_eq!(conn_error(&frame(PING, 0, 1, &[0; 8])), PROTOCOL_ERROR);
    assert_eq!(
        conn_error(&frame(SETTINGS, 1, 0, &[0; 6])),
        FRAME_SIZE_ERROR
    );
    assert_eq!(
        conn_error(&frame(SETTINGS, 0, 0, &[0; 5])),
        FRAME_SIZE_ERROR
    );
    assert_eq!(conn_error(&frame(SETTINGS, 0, 1, &[])), PROTOCOL_ERROR);
    assert_eq!(
        conn_error(&frame(SETTINGS, 0, 0, &[0, 4, 0x80, 0, 0, 0])),
        FLOW_CONTROL_ERROR
    );
    assert_eq!(
        conn_error(&frame(SETTINGS, 0, 0, &[0, 5, 0, 0, 0, 100])),
        PROTOCOL_ERROR
    );
    assert_eq!(
        conn_error(&frame(SETTINGS, 0, 0, &[0, 2, 0, 0, 0, 2])),
        PROTOCOL_ERROR
    );
    assert_eq!(
        conn_error(&frame(WINDOW_UPDATE, 0, 0, &[0; 3])),
        FRAME_SIZE_ERROR
    );
    assert_eq!(
        conn_error(&frame(WINDOW_UPDATE, 0, 0, &[0; 4])),
        PROTOCOL_ERROR
    );
    assert_eq!(
        conn_error(&frame(WINDOW_UPDATE, 0, 0, &[0x7f, 0xff, 0xff, 0xff])),
        FLOW_CONTROL_ERROR
    );
    assert_eq!(
        conn_error(&frame(RST_STREAM, 0, 0, &[0; 4])),
        PROTOCOL_ERROR
    );
    assert_eq!(
        conn_error(&frame(RST_STREAM, 0, 1, &[0; 4])),
        PROTOCOL_ERROR,
        "idle"
    );
    assert_eq!(
        conn_error(&frame(PRIORITY, 0, 1, &[0; 4])),
        FRAME_SIZE_ERROR
    );
    assert_eq!(conn_error(&frame(GOAWAY, 0, 0, &[0; 7])), FRAME_SIZE_ERROR);
    assert_eq!(
        conn_error(&frame(PUSH_PROMISE, 0x4, 1, &[0, 0, 0, 2])),
        PROTOCOL_ERROR
    );
    assert_eq!(
        conn_error(&frame(CONTINUATION, 0x4, 1, &[0x82])),
        PROTOCOL_ERROR
    );
    // An index past the tables.
    assert_eq!(
        conn_error(&frame(HEADERS, 0x5, 1, &[0xff, 0x7f])),
        COMPRESSION_ERROR
    );
    // A PING answered, an unknown frame type ignored.
    let mut c = open(Config::default());
    let mut b = frame(PING, 0, 0, b"12345678");
    b.extend(frame(0x42, 0, 0, b"x"));
    c.receive(&b, t0()).unwrap();
    let f = frames(&mut c);
    assert_eq!((f.len(), f[0].kind, f[0].flags), (1, PING, 1));
    assert_eq!(f[0].payload, b"12345678");
}

#[test]
fn stream_identifiers_must_rise_and_be_odd() {
    assert_eq!(conn_error(&get(2, "/", true)), PROTOCOL_ERROR);
    assert_eq!(conn_error(&get(0, "/", true)), PROTOCOL_ERROR);
    // An identifier below the last, never opened.
    let mut b = get(5, "/", true);
    b.extend(get(3, "/", true));
    assert_eq!(conn_error(&b), PROTOCOL_ERROR);
    // One that was opened and is closed: its stream alone is refused, and
    // the connection goes on.
    let mut c = open(Config::default());
    c.receive(&get(1, "/", true), t0()).unwrap();
    let r = request(&mut c);
    answer(&mut c, r, b"x");
    frames(&mut c);
    c.receive(&get(1, "/", true), t0()).unwrap();
    assert_eq!(resets(&mut c), [(1, STREAM_CLOSED)]);
    c.receive(&get(3, "/", true), t0()).unwrap();
    assert_eq!(request(&mut c).stream(), 3);
    // DATA on a stream never opened.
    assert_eq!(conn_error(&frame(DATA, 0, 9, b"x")), PROTOCOL_ERROR);
    assert_eq!(conn_error(&frame(DATA, 0, 0, b"x")), PROTOCOL_ERROR);
}

#[test]
fn a_header_block_is_one_uninterrupted_sequence_and_bounded() {
    let mut b = frame(HEADERS, 0x1, 1, &block("/", &[]));
    b.extend(frame(PING, 0, 0, &[0; 8]));
    assert_eq!(conn_error(&b), PROTOCOL_ERROR);
    let mut b = frame(HEADERS, 0x1, 1, &block("/", &[]));
    b.extend(frame(CONTINUATION, 0x4, 3, &[]));
    assert_eq!(conn_error(&b), PROTOCOL_ERROR);
    // Empty CONTINUATIONs without end, or a block past any list's size.
    let mut b = frame(HEADERS, 0x1, 1, &block("/", &[]));
    for _ in 0..2000 {
        b.extend(frame(CONTINUATION, 0, 1, &[]));
    }
    assert_eq!(conn_error(&b), ENHANCE_YOUR_CALM);
    let mut b = frame(HEADERS, 0x1, 1, &block("/", &[]));
    for _ in 0..4 {
        b.extend(frame(CONTINUATION, 0, 1, &[0; 16384]));
    }
    assert_eq!(conn_error(&b), ENHANCE_YOUR_CALM);
}

#[test]
fn a_malformed_head_resets_its_stream_and_the_table_stays_in_step() {
    let mut c = open(Config::default());
    // Literal with incremental indexing: "x-a: 1" goes into the table.
    let mut blk = block("/", &[]);
    blk.extend_from_slice(&[0x40, 3, b'x', b'-', b'a', 1, b'1', 0x00, 1, b'A', 1, b'v']);
    c.receive(&frame(HEADERS, 0x5, 1, &blk), t0()).unwrap();
    assert!(c.next_event().is_none());
    assert_eq!(resets(&mut c), [(1, PROTOCOL_ERROR)]);
    // Index 62 is "x-a: 1": the rejected block's addition counted.
    let mut blk = block("/b", &[]);
    blk.push(0xbe);
    c.receive(&frame(HEADERS, 0x5, 3, &blk), t0()).unwrap();
    let r = request(&mut c);
    assert_eq!(r.fields().collect::<Vec<_>>(), [(&b"x-a"[..], &b"1"[..])]);
}

#[test]
fn an_oversized_head_comes_out_marked_for_431() {
    let mut c = open(Config {
        max_header_list_size: 100,
        ..Config::default()
    });
    let big = "x".repeat(120);
    c.receive(
        &frame(HEADERS, 0x5, 1, &block("/", &[("cookie", &big)])),
        t0(),
    )
    .unwrap();
    let r = request(&mut c);
    assert!(r.too_large());
}

#[test]
fn streams_past_the_limit_are_refused() {
    let mut c = open(Config {
        max_concurrent_streams: 2,
        ..Config::default()
    });
    for id in [1, 3, 5] {
        c.receive(&get(id, "/", true), t0()).unwrap();
    }
    assert_eq!(resets(&mut c), [(5, REFUSED_STREAM)]);
    let r = request(&mut c);
    answer(&mut c, r, b"");
    c.receive(&get(7, "/", true), t0()).unwrap();
    assert!(resets(&mut c).is_empty());
}

#[test]
fn answers_stay_within_the_clients_windows() {
    let mut c = open(Config::default());
    c.receive(&frame(SETTINGS, 0, 0, &[0, 4, 0, 0, 0, 10]), t0())
        .unwrap();
    c.receive(&get(1, "/", true), t0()).unwrap();
    let r = request(&mut c);
    assert!(c.send_headers(1, false, |b| {
        b.status(200);
    }));
    assert_eq!(c.window(1), 10);
    c.send_data(1, b"0123456789", false);
    assert_eq!(c.window(1), 0);
    c.receive(&frame(WINDOW_UPDATE, 0, 1, &[0, 0, 0, 5]), t0())
        .unwrap();
    assert_eq!(c.window(1), 5);
    // A lower initial window applies to open streams, below zero too.
    c.receive(&frame(SETTINGS, 0, 0, &[0, 4, 0, 0, 0, 0]), t0())
        .unwrap();
    assert_eq!(c.window(1), 0);
    c.receive(&frame(SETTINGS, 0, 0, &[0, 4, 0, 1, 0, 0]), t0())
        .unwrap();
    // The connection's window (65535) bounds every stream.
    assert_eq!(c.window(1), 65535 - 10);
    c.send_data(1, &[], true);
    c.recycle(r);
    assert_eq!(c.window(1), 0, "ended");
    // WINDOW_UPDATE of 0 on a stream handed out: reset, and said so.
    c.receive(&get(3, "/", true), t0()).unwrap();
    let r = request(&mut c);
    c.receive(&frame(WINDOW_UPDATE, 0, 3, &[0; 4]), t0())
        .unwrap();
    assert!(matches!(c.next_event(), Some(Event::Reset(3))));
    assert_eq!(resets(&mut c), [(3, PROTOCOL_ERROR)]);
    c.recycle(r);
}

#[test]
fn large_heads_are_split_into_continuations() {
    let mut c = open(Config::default());
    c.receive(&get(1, "/", true), t0()).unwrap();
    let r = request(&mut c);
    let big = vec![b'v'; 40_000];
    assert!(c.send_headers(1, true, |b| {
        b.status(200).field(b"x-big", &big);
    }));
    c.recycle(r);
    let f = frames(&mut c);
    let kinds: Vec<_> = f.iter().map(|f| (f.kind, f.flags)).collect();
    assert_eq!(
        kinds,
        [(HEADERS, 0x1), (CONTINUATION, 0), (CONTINUATION, 0x4)]
    );
    let block: Vec<u8> = f.iter().flat_map(|f| f.payload.clone()).collect();
    let mut n = 0;
    hpack::Decoder::new(4096)
        .decode(&block, |x| {
            if x.name == b"x-big" {
                n = x.value.len();
            }
        })
        .unwrap();
    assert_eq!(n, 40_000);
}

#[test]
fn request_bodies_are_flow_controlled_checked_and_read_out() {
    let mut c = open(Config {
        initial_stream_window: 100,
        ..Config::default()
    });
    c.receive(&frame(SETTINGS, 1, 0, &[]), t0()).unwrap();
    // Past the stream's window.
    c.receive(&get(1, "/", false), t0()).unwrap();
    c.receive(&frame(DATA, 0, 1, &[0; 101]), t0()).unwrap();
    assert_eq!(resets(&mut c), [(1, FLOW_CONTROL_ERROR)]);
    // A body longer than its content-length.
    let hdr = block("/", &[("content-length", "3")]);
    c.receive(&frame(HEADERS, 0x4, 3, &hdr), t0()).unwrap();
    c.receive(&frame(DATA, 0, 3, b"abcd"), t0()).unwrap();
    assert_eq!(resets(&mut c), [(3, PROTOCOL_ERROR)]);
    // A body read out after the answer: its window comes back.
    let mut c = open(Config {
        initial_stream_window: 100,
        ..Config::default()
    });
    c.receive(&frame(SETTINGS, 1, 0, &[]), t0()).unwrap();
    c.receive(&get(1, "/", false), t0()).unwrap();
    c.receive(&frame(DATA, 0, 1, &[0; 60]), t0()).unwrap();
    let r = request(&mut c);
    answer(&mut c, r, b"done");
    let f = frames(&mut c);
    let update = f.iter().find(|f| f.kind == WINDOW_UPDATE && f.stream == 1);
    assert_eq!(
        update.map(|f| &f.payload[..]),
        Some(&60u32.to_be_bytes()[..])
    );
    c.receive(&frame(DATA, 1, 1, &[0; 10]), t0()).unwrap();
    assert_eq!(c.open_streams(), 0, "the body ended: the stream is closed");
    // One that goes on is reset at the second tick.
    c.receive(&get(3, "/", false), t0()).unwrap();
    let r = request(&mut c);
    answer(&mut c, r, b"");
    c.handle_timeout(t0() + Duration::from_secs(1));
    assert!(resets(&mut c).is_empty());
    c.handle_timeout(t0() + Duration::from_secs(2));
    assert_eq!(resets(&mut c), [(3, 0)]);
    // Trailers must end the stream.
    c.receive(&get(5, "/", false), t0()).unwrap();
    c.receive(&frame(HEADERS, 0x4, 5, &[0x40, 1, b't', 1, b'1']), t0())
        .unwrap();
    assert_eq!(resets(&mut c), [(5, PROTOCOL_ERROR)]);
}

#[test]
fn a_reset_from_the_client_stops_the_answer() {
    let mut c = open(Config::default());
    c.receive(&get(1, "/", true), t0()).unwrap();
    let r = request(&mut c);
    c.receive(&frame(RST_STREAM, 0, 1, &[0, 0, 0, 8]), t0())
        .unwrap();
    assert!(matches!(c.next_event(), Some(Event::Reset(1))));
    assert!(!c.send_headers(1, true, |b| {
        b.status(200);
    }));
    assert_eq!(c.window(1), 0);
    c.recycle(r);
    // DATA after it: a tiny reset, not a connection error.
    c.receive(&frame(DATA, 0, 1, b"x"), t0()).unwrap();
    assert_eq!(resets(&mut c), [(1, STREAM_CLOSED)]);
}

#[test]
fn free_frames_spend_a_credit_that_answers_earn_back() {
    let cfg = Config {
        control_frame_budget: 100,
        ..Config::default()
    };
    let mut c = open(cfg.clone());
    let mut flood = Vec::new();
    for _ in 0..200 {
        flood.extend(frame(PING, 0, 0, &[0; 8]));
    }
    assert!(c.receive(&flood, t0()).is_err());
    assert_eq!(goaway(&mut c), ENHANCE_YOUR_CALM);
    // A browser's pings and window updates beside its requests.
    let mut c = open(cfg.clone());
    for i in 0..500u32 {
        let mut b = get(2 * i + 1, "/", true);
        b.extend(frame(PING, 0, 0, &[0; 8]));
        b.extend(frame(WINDOW_UPDATE, 0, 0, &[0, 0, 1, 0]));
        c.receive(&b, t0()).unwrap();
        let r = request(&mut c);
        answer(&mut c, r, b"x");
    }
    // Streams opened, handed out, and reset before their answer.
    let mut c = open(cfg);
    for i in 0..200u32 {
        if c.receive(&get(2 * i + 1, "/", true), t0()).is_err() {
            break;
        }
        request(&mut c);
        if c.receive(&frame(RST_STREAM, 0, 2 * i + 1, &[0, 0, 0, 8]), t0())
            .is_err()
        {
            break;
        }
        assert!(matches!(c.next_event(), Some(Event::Reset(_))));
    }
    assert_eq!(goaway(&mut c), ENHANCE_YOUR_CALM);
}

#[test]
fn streams_reset_before_they_are_handed_out_are_dropped_and_bounded() {
    let cfg = Config {
        max_pending_reset_streams: 5,
        ..Config::default()
    };
    let mut c = open(cfg.clone());
    let mut b = Vec::new();
    for i in 0..5u32 {
        b.extend(get(2 * i + 1, "/", true));
        b.extend(frame(RST_STREAM, 0, 2 * i + 1, &[0, 0, 0, 8]));
    }
    b.extend(get(11, "/kept", true));
    c.receive(&b, t0()).unwrap();
    assert_eq!(request(&mut c).path(), Some(&b"/kept"[..]));
    assert!(
        c.next_event().is_none(),
        "the reset ones are never handed out"
    );
    // The count starts again once the queue was emptied ...
    c.receive(&b[..0], t0()).unwrap();
    let mut b = Vec::new();
    for i in 6..11u32 {
        b.extend(get(2 * i + 1, "/", true));
        b.extend(frame(RST_STREAM, 0, 2 * i + 1, &[0, 0, 0, 8]));
    }
    c.receive(&b, t0()).unwrap();
    // ... and one more than the bound in one read ends the connection.
    let mut c = open(cfg);
    let mut b = Vec::new();
    for i in 0..6u32 {
        b.extend(get(2 * i + 1, "/", true));
        b.extend(frame(RST_STREAM, 0, 2 * i + 1, &[0, 0, 0, 8]));
    }
    assert!(c.receive(&b, t0()).is_err());
    assert_eq!(goaway(&mut c), ENHANCE_YOUR_CALM);
}

#[test]
fn too_many_streams_reset_for_errors_end_the_connection() {
    let mut c = open(Config {
        max_local_error_resets: 3,
        ..Config::default()
    });
    let bad = block("/", &[("Upper", "x")]);
    for id in [1, 3, 5] {
        c.receive(&frame(HEADERS, 0x5, id, &bad), t0()).unwrap();
    }
    assert!(c.receive(&frame(HEADERS, 0x5, 7, &bad), t0()).is_err());
    assert_eq!(goaway(&mut c), ENHANCE_YOUR_CALM);
}

#[test]
fn shutdown_answers_what_was_asked_then_is_done() {
    let mut c = open(Config::default());
    c.receive(&get(1, "/", true), t0()).unwrap();
    c.shutdown();
    let f = frames(&mut c);
    assert_eq!((f[0].kind, f[0].code()), (GOAWAY, 0));
    assert_eq!(&f[0].payload[..4], &1u32.to_be_bytes());
    c.receive(&get(3, "/", true), t0()).unwrap();
    let r = request(&mut c);
    assert_eq!(r.stream(), 1);
    assert!(c.next_event().is_none(), "stream 3 came after GOAWAY");
    assert!(!c.is_done());
    answer(&mut c, r, b"x");
    assert!(c.is_done());
    // The client's GOAWAY: done once its streams are answered.
    let mut c = open(Config::default());
    c.receive(&get(1, "/", true), t0()).unwrap();
    c.receive(&frame(GOAWAY, 0, 0, &[0; 8]), t0()).unwrap();
    assert!(!c.is_done());
    let r = request(&mut c);
    answer(&mut c, r, b"x");
    assert!(c.is_done());
}

#[test]
fn padding_and_priority_are_read_past() {
    let mut c = open(Config::default());
    let blk = block("/p", &[]);
    let mut p = vec![3u8];
    p.extend_from_slice(&[0, 0, 0, 0, 16]);
    p.extend_from_slice(&blk);
    p.extend_from_slice(&[0; 3]);
    c.receive(&frame(HEADERS, 0x4 | 0x8 | 0x20, 1, &p), t0())
        .unwrap();
    let r = request(&mut c);
    assert_eq!(r.path(), Some(&b"/p"[..]));
    c.receive(&frame(DATA, 0x8 | 0x1, 1, &[2, b'x', 0, 0]), t0())
        .unwrap();
    // Padding as long as the frame.
    assert_eq!(conn_error(&frame(DATA, 0x8, 1, &[1])), PROTOCOL_ERROR);
    // A stream that depends on itself: reset when it is open, and not
    // when it is idle (no RST_STREAM may name an idle stream, 5.1).
    let mut c = open(Config::default());
    c.receive(&frame(PRIORITY, 0, 1, &[0, 0, 0, 1, 16]), t0())
        .unwrap();
    assert!(resets(&mut c).is_empty());
    c.receive(&get(1, "/", false), t0()).unwrap();
    let r = request(&mut c);
    c.receive(&frame(PRIORITY, 0, 1, &[0, 0, 0, 1, 16]), t0())
        .unwrap();
    assert_eq!(resets(&mut c), [(1, PROTOCOL_ERROR)]);
    c.recycle(r);
}

#[test]
fn the_clients_header_table_size_reaches_the_encoder() {
    let mut c = open(Config::default());
    c.receive(&frame(SETTINGS, 0, 0, &[0, 1, 0, 0, 0, 0]), t0())
        .unwrap();
    frames(&mut c);
    c.receive(&get(1, "/", true), t0()).unwrap();
    let r = request(&mut c);
    assert!(c.send_headers(1, true, |b| {
        b.status(200).indexed(b"server", b"x");
    }));
    c.recycle(r);
    let f = frames(&mut c);
    // A size update to 0 first; the field then cannot be added.
    assert_eq!(f[0].payload[..2], [0x20, 0x88]);
    let mut d = hpack::Decoder::new(4096);
    d.set_limit(0);
    let mut n = 0;
    d.decode(&f[0].payload, |_| n += 1).unwrap();
    assert_eq!(n, 2);
}

/// CVE-2025-8671 ("MadeYouReset"): a client makes the server reset its
/// streams (here with WINDOW_UPDATE 0) right after opening them. Their
/// requests were decided with nobody to answer, past every stream bound;
/// now they are dropped before they are handed out, and count against
/// the pending-reset bound.
#[test]
fn requests_on_streams_reset_for_errors_are_never_handed_out() {
    let mut c = open(Config::default());
    let mut b = Vec::new();
    for i in 0..10u32 {
        b.extend(get(2 * i + 1, "/", true));
        b.extend(frame(WINDOW_UPDATE, 0, 2 * i + 1, &[0; 4]));
    }
    c.receive(&b, t0()).unwrap();
    assert!(
        c.next_event().is_none(),
        "a reset stream's request came out"
    );
    assert_eq!(resets(&mut c).len(), 10);
    assert_eq!(c.dropped_requests(), 10);
    // In one read, past the pending-reset bound: the connection ends, and
    // nothing of it is handed out.
    let mut c = open(Config::default());
    let mut b = Vec::new();
    for i in 0..200u32 {
        b.extend(get(2 * i + 1, "/", true));
        b.extend(frame(WINDOW_UPDATE, 0, 2 * i + 1, &[0; 4]));
    }
    assert!(c.receive(&b, t0()).is_err());
    assert!(c.next_event().is_none());
    assert_eq!(goaway(&mut c), ENHANCE_YOUR_CALM);
    assert!(c.dropped_requests() <= 21);
}

#[test]
fn a_connection_error_drops_the_requests_not_handed_out() {
    let mut c = open(Config::default());
    let mut b = get(1, "/a", true);
    b.extend(get(3, "/b", true));
    b.extend(frame(PING, 0, 1, &[0; 8]));
    assert!(c.receive(&b, t0()).is_err());
    assert!(c.next_event().is_none());
    assert_eq!(c.dropped_requests(), 2);
    assert_eq!(goaway(&mut c), PROTOCOL_ERROR);
}

/// A client trickling a frame one octet at a time is cut off
/// `header_read_timeout` after the frame began, however often it sends.
#[test]
fn an_incomplete_frame_or_header_block_ends_within_the_header_timeout() {
    let secs = Duration::from_secs;
    let cfg = Config {
        header_read_timeout: secs(10),
        ..Config::default()
    };
    let mut c = open(cfg.clone());
    let f = get(1, "/trickle", true);
    for (i, b) in f.iter().take(9).enumerate() {
        let now = t0() + secs(i as u64);
        c.receive(&[*b], now).unwrap();
        assert_eq!(c.handle_timeout(now), None);
    }
    assert!(c.poll_timeout().unwrap() <= t0() + secs(10));
    assert_eq!(c.handle_timeout(t0() + secs(10)), Some(Expired::HeaderRead));
    assert!(c.is_done());
    assert_eq!(goaway(&mut c), 0);
    // Whole CONTINUATIONs, one a second, of a block that never ends.
    let mut c = open(cfg.clone());
    c.receive(&frame(HEADERS, 0x1, 1, &block("/", &[])), t0())
        .unwrap();
    for i in 1..10 {
        let now = t0() + secs(i);
        c.receive(&frame(CONTINUATION, 0, 1, &[0x00, 1, b'x', 1, b'y']), now)
            .unwrap();
        assert_eq!(c.handle_timeout(now), None);
    }
    assert_eq!(c.handle_timeout(t0() + secs(10)), Some(Expired::HeaderRead));
    // Whole frames that keep coming are not a partial one, even when
    // every read ends inside the next.
    let mut c = open(cfg);
    let mut stream = Vec::new();
    for i in 0..30u32 {
        stream.extend(get(2 * i + 1, "/", true));
    }
    for (i, piece) in stream.chunks(25).enumerate() {
        let now = t0() + secs(i as u64);
        c.receive(piece, now).unwrap();
        while let Some(Event::Request(r)) = c.next_event() {
            answer(&mut c, r, b"x");
        }
        assert_eq!(c.handle_timeout(now), None, "cut at {i}s");
    }
}

/// PINGs and SETTINGS do not keep an idle connection; requests do; a
/// connection ends after `max_requests` and `max_age`, its last answers
/// given.
#[test]
fn idle_age_and_request_bounds_send_goaway() {
    let secs = Duration::from_secs;
    let cfg = Config {
        idle_timeout: secs(60),
        max_age: secs(3600),
        max_requests: 3,
        ..Config::default()
    };
    let mut c = open(cfg.clone());
    for i in 1..6 {
        let now = t0() + secs(10 * i);
        c.receive(&frame(PING, 0, 0, &[0; 8]), now).unwrap();
        assert_eq!(c.handle_timeout(now), None);
    }
    assert_eq!(c.handle_timeout(t0() + secs(60)), Some(Expired::Idle));
    assert!(c.is_done());
    // A request in the middle moves the deadline, once it is answered.
    let mut c = open(cfg.clone());
    c.receive(&get(1, "/", true), t0() + secs(50)).unwrap();
    let r = request(&mut c);
    assert_eq!(c.handle_timeout(t0() + secs(70)), None, "busy");
    answer(&mut c, r, b"x");
    assert_eq!(c.handle_timeout(t0() + secs(80)), None);
    assert_eq!(c.handle_timeout(t0() + secs(139)), None);
    assert_eq!(c.handle_timeout(t0() + secs(140)), Some(Expired::Idle));
    // The third request is the last: GOAWAY names it, and it is answered.
    let mut c = open(cfg.clone());
    let mut b = Vec::new();
    for id in [1, 3, 5, 7] {
        b.extend(get(id, "/", true));
    }
    c.receive(&b, t0()).unwrap();
    let f = frames(&mut c);
    let g = f.iter().find(|f| f.kind == GOAWAY).expect("GOAWAY");
    assert_eq!((g.code(), &g.payload[..4]), (0, &5u32.to_be_bytes()[..]));
    let served: Vec<u32> = std::iter::from_fn(|| match c.next_event() {
        Some(Event::Request(r)) => Some(r.stream()),
        _ => None,
    })
    .collect();
    assert_eq!(served, [1, 3, 5]);
    // Age: GOAWAY, the stream in flight still answered.
    let mut c = open(cfg);
    c.receive(&get(1, "/", true), t0() + secs(3599)).unwrap();
    let r = request(&mut c);
    assert_eq!(c.handle_timeout(t0() + secs(3600)), Some(Expired::MaxAge));
    assert!(!c.is_done());
    answer(&mut c, r, b"x");
    assert!(c.is_done());
}

/// Empty and all-padding DATA frames are free frames: paid for, and a
/// draining stream's padding counts toward its drain, whose window comes
/// back in steps rather than one WINDOW_UPDATE per frame.
#[test]
fn padding_is_paid_for_and_drained_windows_come_back_in_steps() {
    let mut c = open(Config::default());
    c.receive(&frame(SETTINGS, 1, 0, &[]), t0()).unwrap();
    c.receive(&get(1, "/", false), t0()).unwrap();
    let r = request(&mut c);
    answer(&mut c, r, b"x");
    frames(&mut c);
    let mut flood = Vec::new();
    for _ in 0..2000 {
        flood.extend(frame(DATA, 0x8, 1, &[255; 256]));
    }
    assert!(c.receive(&flood, t0()).is_err());
    assert_eq!(goaway(&mut c), ENHANCE_YOUR_CALM);
    // Frames with a body: 64 KiB padding included, then reset; few
    // updates.
    let mut c = open(Config::default());
    c.receive(&frame(SETTINGS, 1, 0, &[]), t0()).unwrap();
    c.receive(&get(1, "/", false), t0()).unwrap();
    let r = request(&mut c);
    answer(&mut c, r, b"x");
    frames(&mut c);
    let mut body = vec![200u8];
    body.extend_from_slice(&[7; 1000]);
    body.extend_from_slice(&[0; 200]);
    let mut sent = 0;
    let mut out = Vec::new();
    while sent <= 64 * 1024 {
        c.receive(&frame(DATA, 0x8, 1, &body), t0()).unwrap();
        sent += body.len();
        out.extend(frames(&mut c));
    }
    let updates = out
        .iter()
        .filter(|f| f.kind == WINDOW_UPDATE && f.stream == 1)
        .count();
    assert!(updates <= 5, "{updates} stream WINDOW_UPDATEs");
    assert!(out
        .iter()
        .any(|f| f.kind == RST_STREAM && f.stream == 1 && f.code() == 0));
}

/// One SETTINGS frame's initial window is applied once, as its last
/// value: a frame of 2730 entries is one walk of the streams, and an
/// intermediate value does not count.
#[test]
fn a_settings_frame_applies_its_last_initial_window() {
    let mut c = open(Config::default());
    c.receive(&get(1, "/", true), t0()).unwrap();
    let r = request(&mut c);
    c.receive(&frame(WINDOW_UPDATE, 0, 1, &[0, 0, 0x10, 0]), t0())
        .unwrap();
    let mut p = Vec::new();
    for _ in 0..1365 {
        p.extend_from_slice(&[0, 4, 0x7f, 0xff, 0xff, 0xff]);
        p.extend_from_slice(&[0, 4, 0, 0, 0, 100]);
    }
    c.receive(&frame(SETTINGS, 0, 0, &p), t0()).unwrap();
    assert!(c.send_headers(1, false, |b| {
        b.status(200);
    }));
    assert_eq!(c.window(1), 100 + 0x1000);
    c.recycle(r);
}

#[test]
fn frames_for_idle_even_streams_are_connection_errors() {
    // Stream 2 is below the last opened (3) but even: never opened.
    for f in [
        frame(DATA, 0, 2, b"x"),
        frame(RST_STREAM, 0, 2, &[0, 0, 0, 8]),
        frame(WINDOW_UPDATE, 0, 2, &[0, 0, 0, 1]),
    ] {
        let mut b = get(3, "/", true);
        b.extend(f);
        assert_eq!(conn_error(&b), PROTOCOL_ERROR);
    }
}

/// A stream refused (past the limit) or reset for a malformed head is
/// closed: its trailers are a stream error, not a connection error.
#[test]
fn refused_and_malformed_streams_are_remembered_as_closed() {
    let mut c = open(Config {
        max_concurrent_streams: 1,
        ..Config::default()
    });
    c.receive(&get(1, "/", false), t0()).unwrap();
    c.receive(&get(3, "/", false), t0()).unwrap();
    c.receive(&frame(HEADERS, 0x4, 5, &block("/", &[("Bad", "x")])), t0())
        .unwrap();
    assert_eq!(resets(&mut c), [(3, REFUSED_STREAM), (5, PROTOCOL_ERROR)]);
    for id in [3, 5] {
        c.receive(&frame(HEADERS, 0x5, id, &[0x40, 1, b't', 1, b'1']), t0())
            .unwrap();
        assert_eq!(resets(&mut c), [(id, STREAM_CLOSED)]);
    }
    assert!(!c.is_done());
}

#[test]
fn trailers_are_checked_and_end_a_body_of_its_length() {
    let trailer = |name: &[u8]| {
        let mut t = vec![0x00, name.len() as u8];
        t.extend_from_slice(name);
        t.extend_from_slice(&[1, b'1']);
        t
    };
    // A pseudo-header field, or an uppercase name, in trailers.
    for name in [&b":path"[..], b"X-Up"] {
        let mut c = open(Config::default());
        c.receive(&get(1, "/", false), t0()).unwrap();
        let r = request(&mut c);
        c.receive(&frame(HEADERS, 0x5, 1, &trailer(name)), t0())
            .unwrap();
        assert_eq!(resets(&mut c), [(1, PROTOCOL_ERROR)]);
        c.recycle(r);
    }
    // Trailers that end a body shorter than its content-length.
    let mut c = open(Config::default());
    c.receive(&frame(SETTINGS, 1, 0, &[]), t0()).unwrap();
    let hdr = block("/", &[("content-length", "5")]);
    c.receive(&frame(HEADERS, 0x4, 1, &hdr), t0()).unwrap();
    let r = request(&mut c);
    c.receive(&frame(DATA, 0, 1, b"abc"), t0()).unwrap();
    c.receive(&frame(HEADERS, 0x5, 1, &trailer(b"x-t")), t0())
        .unwrap();
    assert_eq!(resets(&mut c), [(1, PROTOCOL_ERROR)]);
    c.recycle(r);
    // The right length: the stream's receive side ends quietly.
    let mut c = open(Config::default());
    c.receive(&frame(HEADERS, 0x4, 1, &hdr), t0()).unwrap();
    let r = request(&mut c);
    c.receive(&frame(DATA, 0, 1, b"abcde"), t0()).unwrap();
    c.receive(&frame(HEADERS, 0x5, 1, &trailer(b"x-t")), t0())
        .unwrap();
    assert!(resets(&mut c).is_empty());
    c.recycle(r);
}

#[test]
fn a_method_that_is_not_a_token_is_malformed() {
    let mut c = open(Config::default());
    // :method as a literal: `GET / HTTP/1.1" 200 -`.
    let bad = b"GET / \"200";
    let mut blk = vec![0x02, bad.len() as u8];
    blk.extend_from_slice(bad);
    blk.extend_from_slice(&[0x87, 0x01, 0x01, b'a', 0x84]);
    c.receive(&frame(HEADERS, 0x5, 1, &blk), t0()).unwrap();
    assert!(c.next_event().is_none());
    assert_eq!(resets(&mut c), [(1, PROTOCOL_ERROR)]);
}
