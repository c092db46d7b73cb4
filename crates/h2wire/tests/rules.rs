//! RFC 9113's rules, one client misstep at a time: the frames go in as
//! bytes, and what the connection wrote comes out as frames (the stream
//! reset or the connection's GOAWAY, with the RFC's code), or as events.

mod support;

use h2wire::{Config, Connection, Event, Request};
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
    assert!(c.receive(bytes).is_err(), "no connection error");
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
    let mut c = Connection::new(cfg);
    let f = frames(&mut c);
    assert_eq!(f[0].kind, SETTINGS);
    assert!(f[0].payload.chunks(6).any(|s| s == [0, 3, 0, 0, 0, 7]));
    assert_eq!(f[1].kind, WINDOW_UPDATE);
    assert_eq!(f[1].payload, ((1u32 << 20) - 65535).to_be_bytes());
    c.receive(&hello()).unwrap();
    let f = frames(&mut c);
    assert_eq!((f[0].kind, f[0].flags), (SETTINGS, 1));
}

#[test]
fn a_bad_preface_or_first_frame_ends_the_connection() {
    let mut c = Connection::new(Config::default());
    frames(&mut c);
    assert!(c.receive(b"GET / HTTP/1.1\r\n\r\n").is_err());
    assert_eq!(goaway(&mut c), PROTOCOL_ERROR);
    let mut c = Connection::new(Config::default());
    frames(&mut c);
    let mut b = h2wire::PREFACE.to_vec();
    b.extend(frame(PING, 0, 0, &[0; 8]));
    assert!(c.receive(&b).is_err());
    assert_eq!(goaway(&mut c), PROTOCOL_ERROR);
}

#[test]
fn a_request_is_answered_in_frames_the_client_decodes() {
    let mut c = open(Config::default());
    c.receive(&get(1, "/index.html", true)).unwrap();
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
    let mut c = Connection::new(Config::default());
    let mut all = hello();
    all.extend(get(1, "/a", true));
    all.extend(frame(HEADERS, 0x1, 3, &block("/b", &[("accept", "*/*")])));
    all.extend(frame(CONTINUATION, 0x4, 3, &[]));
    for b in all {
        c.receive(&[b]).unwrap();
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
    c.receive(&b).unwrap();
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
    c.receive(&get(1, "/", true)).unwrap();
    let r = request(&mut c);
    answer(&mut c, r, b"x");
    frames(&mut c);
    c.receive(&get(1, "/", true)).unwrap();
    assert_eq!(resets(&mut c), [(1, STREAM_CLOSED)]);
    c.receive(&get(3, "/", true)).unwrap();
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
    c.receive(&frame(HEADERS, 0x5, 1, &blk)).unwrap();
    assert!(c.next_event().is_none());
    assert_eq!(resets(&mut c), [(1, PROTOCOL_ERROR)]);
    // Index 62 is "x-a: 1": the rejected block's addition counted.
    let mut blk = block("/b", &[]);
    blk.push(0xbe);
    c.receive(&frame(HEADERS, 0x5, 3, &blk)).unwrap();
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
    c.receive(&frame(HEADERS, 0x5, 1, &block("/", &[("cookie", &big)])))
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
        c.receive(&get(id, "/", true)).unwrap();
    }
    assert_eq!(resets(&mut c), [(5, REFUSED_STREAM)]);
    let r = request(&mut c);
    answer(&mut c, r, b"");
    c.receive(&get(7, "/", true)).unwrap();
    assert!(resets(&mut c).is_empty());
}

#[test]
fn answers_stay_within_the_clients_windows() {
    let mut c = open(Config::default());
    c.receive(&frame(SETTINGS, 0, 0, &[0, 4, 0, 0, 0, 10]))
        .unwrap();
    c.receive(&get(1, "/", true)).unwrap();
    let r = request(&mut c);
    assert!(c.send_headers(1, false, |b| {
        b.status(200);
    }));
    assert_eq!(c.window(1), 10);
    c.send_data(1, b"0123456789", false);
    assert_eq!(c.window(1), 0);
    c.receive(&frame(WINDOW_UPDATE, 0, 1, &[0, 0, 0, 5]))
        .unwrap();
    assert_eq!(c.window(1), 5);
    // A lower initial window applies to open streams, below zero too.
    c.receive(&frame(SETTINGS, 0, 0, &[0, 4, 0, 0, 0, 0]))
        .unwrap();
    assert_eq!(c.window(1), 0);
    c.receive(&frame(SETTINGS, 0, 0, &[0, 4, 0, 1, 0, 0]))
        .unwrap();
    // The connection's window (65535) bounds every stream.
    assert_eq!(c.window(1), 65535 - 10);
    c.send_data(1, &[], true);
    c.recycle(r);
    assert_eq!(c.window(1), 0, "ended");
    // WINDOW_UPDATE of 0 on a stream, or past 2^31-1.
    c.receive(&get(3, "/", true)).unwrap();
    c.receive(&frame(WINDOW_UPDATE, 0, 3, &[0; 4])).unwrap();
    assert_eq!(
        c.next_event().map(|e| matches!(e, Event::Request(_))),
        Some(true)
    );
    assert!(matches!(c.next_event(), Some(Event::Reset(3))));
    assert_eq!(resets(&mut c), [(3, PROTOCOL_ERROR)]);
}

#[test]
fn large_heads_are_split_into_continuations() {
    let mut c = open(Config::default());
    c.receive(&get(1, "/", true)).unwrap();
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
    c.receive(&frame(SETTINGS, 1, 0, &[])).unwrap();
    // Past the stream's window.
    c.receive(&get(1, "/", false)).unwrap();
    c.receive(&frame(DATA, 0, 1, &[0; 101])).unwrap();
    assert_eq!(resets(&mut c), [(1, FLOW_CONTROL_ERROR)]);
    // A body longer than its content-length.
    let hdr = block("/", &[("content-length", "3")]);
    c.receive(&frame(HEADERS, 0x4, 3, &hdr)).unwrap();
    c.receive(&frame(DATA, 0, 3, b"abcd")).unwrap();
    assert_eq!(resets(&mut c), [(3, PROTOCOL_ERROR)]);
    // A body read out after the answer: its window comes back.
    let mut c = open(Config {
        initial_stream_window: 100,
        ..Config::default()
    });
    c.receive(&frame(SETTINGS, 1, 0, &[])).unwrap();
    c.receive(&get(1, "/", false)).unwrap();
    c.receive(&frame(DATA, 0, 1, &[0; 60])).unwrap();
    let r = request(&mut c);
    answer(&mut c, r, b"done");
    let f = frames(&mut c);
    let update = f.iter().find(|f| f.kind == WINDOW_UPDATE && f.stream == 1);
    assert_eq!(
        update.map(|f| &f.payload[..]),
        Some(&60u32.to_be_bytes()[..])
    );
    c.receive(&frame(DATA, 1, 1, &[0; 10])).unwrap();
    assert_eq!(c.open_streams(), 0, "the body ended: the stream is closed");
    // One that goes on is reset at the second tick.
    c.receive(&get(3, "/", false)).unwrap();
    let r = request(&mut c);
    answer(&mut c, r, b"");
    c.tick();
    assert!(resets(&mut c).is_empty());
    c.tick();
    assert_eq!(resets(&mut c), [(3, 0)]);
    // Trailers must end the stream.
    c.receive(&get(5, "/", false)).unwrap();
    c.receive(&frame(HEADERS, 0x4, 5, &[0x40, 1, b't', 1, b'1']))
        .unwrap();
    assert_eq!(resets(&mut c), [(5, PROTOCOL_ERROR)]);
}

#[test]
fn a_reset_from_the_client_stops_the_answer() {
    let mut c = open(Config::default());
    c.receive(&get(1, "/", true)).unwrap();
    let r = request(&mut c);
    c.receive(&frame(RST_STREAM, 0, 1, &[0, 0, 0, 8])).unwrap();
    assert!(matches!(c.next_event(), Some(Event::Reset(1))));
    assert!(!c.send_headers(1, true, |b| {
        b.status(200);
    }));
    assert_eq!(c.window(1), 0);
    c.recycle(r);
    // DATA after it: a tiny reset, not a connection error.
    c.receive(&frame(DATA, 0, 1, b"x")).unwrap();
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
    assert!(c.receive(&flood).is_err());
    assert_eq!(goaway(&mut c), ENHANCE_YOUR_CALM);
    // A browser's pings and window updates beside its requests.
    let mut c = open(cfg.clone());
    for i in 0..500u32 {
        let mut b = get(2 * i + 1, "/", true);
        b.extend(frame(PING, 0, 0, &[0; 8]));
        b.extend(frame(WINDOW_UPDATE, 0, 0, &[0, 0, 1, 0]));
        c.receive(&b).unwrap();
        let r = request(&mut c);
        answer(&mut c, r, b"x");
    }
    // Streams opened, handed out, and reset before their answer.
    let mut c = open(cfg);
    for i in 0..200u32 {
        if c.receive(&get(2 * i + 1, "/", true)).is_err() {
            break;
        }
        request(&mut c);
        if c.receive(&frame(RST_STREAM, 0, 2 * i + 1, &[0, 0, 0, 8]))
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
    c.receive(&b).unwrap();
    assert_eq!(request(&mut c).path(), Some(&b"/kept"[..]));
    assert!(
        c.next_event().is_none(),
        "the reset ones are never handed out"
    );
    // The count starts again once the queue was emptied ...
    c.receive(&b[..0]).unwrap();
    let mut b = Vec::new();
    for i in 6..11u32 {
        b.extend(get(2 * i + 1, "/", true));
        b.extend(frame(RST_STREAM, 0, 2 * i + 1, &[0, 0, 0, 8]));
    }
    c.receive(&b).unwrap();
    // ... and one more than the bound in one read ends the connection.
    let mut c = open(cfg);
    let mut b = Vec::new();
    for i in 0..6u32 {
        b.extend(get(2 * i + 1, "/", true));
        b.extend(frame(RST_STREAM, 0, 2 * i + 1, &[0, 0, 0, 8]));
    }
    assert!(c.receive(&b).is_err());
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
        c.receive(&frame(HEADERS, 0x5, id, &bad)).unwrap();
    }
    assert!(c.receive(&frame(HEADERS, 0x5, 7, &bad)).is_err());
    assert_eq!(goaway(&mut c), ENHANCE_YOUR_CALM);
}

#[test]
fn shutdown_answers_what_was_asked_then_is_done() {
    let mut c = open(Config::default());
    c.receive(&get(1, "/", true)).unwrap();
    c.shutdown();
    let f = frames(&mut c);
    assert_eq!((f[0].kind, f[0].code()), (GOAWAY, 0));
    assert_eq!(&f[0].payload[..4], &1u32.to_be_bytes());
    c.receive(&get(3, "/", true)).unwrap();
    let r = request(&mut c);
    assert_eq!(r.stream(), 1);
    assert!(c.next_event().is_none(), "stream 3 came after GOAWAY");
    assert!(!c.is_done());
    answer(&mut c, r, b"x");
    assert!(c.is_done());
    // The client's GOAWAY: done once its streams are answered.
    let mut c = open(Config::default());
    c.receive(&get(1, "/", true)).unwrap();
    c.receive(&frame(GOAWAY, 0, 0, &[0; 8])).unwrap();
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
    c.receive(&frame(HEADERS, 0x4 | 0x8 | 0x20, 1, &p)).unwrap();
    let r = request(&mut c);
    assert_eq!(r.path(), Some(&b"/p"[..]));
    c.receive(&frame(DATA, 0x8 | 0x1, 1, &[2, b'x', 0, 0]))
        .unwrap();
    // Padding as long as the frame.
    assert_eq!(conn_error(&frame(DATA, 0x8, 1, &[1])), PROTOCOL_ERROR);
    // A stream that depends on itself.
    let mut c = open(Config::default());
    c.receive(&frame(PRIORITY, 0, 1, &[0, 0, 0, 1, 16]))
        .unwrap();
    assert_eq!(resets(&mut c), [(1, PROTOCOL_ERROR)]);
}

#[test]
fn the_clients_header_table_size_reaches_the_encoder() {
    let mut c = open(Config::default());
    c.receive(&frame(SETTINGS, 0, 0, &[0, 1, 0, 0, 0, 0]))
        .unwrap();
    frames(&mut c);
    c.receive(&get(1, "/", true)).unwrap();
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
