//! The daemon's HTTP/1.1 request-head parser,
//! `fileserver::http::request::parse_request` (public: the crate's lib
//! exposes `http` for fuzzers), and its uninitialized-slots twin, with
//! the access log's client address (`http::forwarded::client_addr`) read
//! from what it parsed.
//!
//! Input: one octet choosing the head limit and the number of header
//! slots, then the bytes of the read buffer.
//!
//! Checked:
//! - never a panic, and an error's status is 400, 414 or 431;
//! - a parsed head's fields (method, target, every header value kept)
//!   are slices of the input, inside the head (`head_len`), and the head
//!   is within the limit;
//! - both entry points agree;
//! - the head read in pieces gives the same answer: every shorter prefix
//!   of a complete head is "read more", never an error (a client whose
//!   head arrives in two reads is not refused), and the head alone parses
//!   the same.
#![no_main]

use fileserver::http::forwarded::{client_addr, IpNet};
use fileserver::http::request::{parse_request, parse_request_uninit, ParseError, Request};
use libfuzzer_sys::fuzz_target;
use std::mem::MaybeUninit;
use std::net::IpAddr;

const LIMITS: [usize; 4] = [8192, 64, 1024, 100_000];

fn parse<'b>(
    buf: &'b [u8],
    slots: usize,
    max_head: usize,
) -> Result<Option<Request<'b>>, ParseError> {
    let mut headers = vec![httparse::EMPTY_HEADER; slots];
    // The request borrows only `buf`: the slots are scratch.
    parse_request(buf, &mut headers, max_head)
}

fn parse_uninit<'b>(
    buf: &'b [u8],
    slots: usize,
    max_head: usize,
) -> Result<Option<Request<'b>>, ParseError> {
    let mut headers: Vec<MaybeUninit<httparse::Header<'b>>> =
        (0..slots).map(|_| MaybeUninit::uninit()).collect();
    parse_request_uninit(buf, &mut headers, max_head)
}

/// Every slice the request keeps.
fn slices<'b>(r: &Request<'b>) -> Vec<&'b [u8]> {
    let h = &r.head;
    let mut v = vec![r.method_raw.as_bytes(), h.target];
    v.extend(
        [
            h.host,
            h.if_match,
            h.if_none_match,
            h.if_modified_since,
            h.if_unmodified_since,
            h.if_range,
            h.range,
            h.accept_encoding,
            h.accept,
            h.authorization,
            h.origin,
            h.access_control_request_method,
            h.access_control_request_headers,
            r.user_agent,
            r.referer,
            r.forwarded,
            r.x_forwarded_for,
        ]
        .into_iter()
        .flatten(),
    );
    v
}

/// The request as a comparable value.
fn summary(r: &Request<'_>) -> String {
    format!("{r:?}")
}

fn within(outer: &[u8], inner: &[u8]) -> bool {
    let (o, i) = (outer.as_ptr() as usize, inner.as_ptr() as usize);
    i >= o && i + inner.len() <= o + outer.len()
}

fuzz_target!(|data: &[u8]| {
    let Some((&first, buf)) = data.split_first() else {
        return;
    };
    let max_head = LIMITS[usize::from(first & 3)];
    let slots = usize::from(first >> 2) + 1;
    let got = parse(buf, slots, max_head);
    let twin = parse_uninit(buf, slots, max_head);
    match (&got, &twin) {
        (Ok(a), Ok(b)) => assert_eq!(a.as_ref().map(summary), b.as_ref().map(summary)),
        (Err(a), Err(b)) => assert_eq!(a, b),
        _ => panic!("the entry points disagree: {got:?} / {twin:?}"),
    }
    let req = match got {
        Err(e) => {
            assert!(matches!(e.status(), 400 | 414 | 431), "{e:?}");
            if matches!(e, ParseError::UriTooLong | ParseError::HeadTooLarge) {
                assert!(
                    buf.len() >= max_head,
                    "too large at {} of {max_head}",
                    buf.len()
                );
            }
            if e == ParseError::UriTooLong {
                assert!(
                    !buf[..max_head].contains(&b'\n'),
                    "414 for a request line that ends"
                );
            }
            return;
        }
        Ok(None) => {
            assert!(
                buf.len() < max_head,
                "read more, with {} of {max_head}",
                buf.len()
            );
            return;
        }
        Ok(Some(r)) => r,
    };
    assert!(req.head_len <= buf.len() && req.head_len <= max_head);
    assert!(req.minor_version <= 1);
    let head = &buf[..req.head_len];
    for s in slices(&req) {
        assert!(within(head, s), "a field outside the head");
    }
    // The head alone parses the same.
    let alone = parse(head, slots, max_head)
        .expect("the head alone")
        .expect("complete");
    assert_eq!(summary(&alone), summary(&req));
    // Shorter reads of it: "read more". All of them for a short head, a
    // spread of them for a long one (the check is quadratic).
    let step = (req.head_len / 64).max(1);
    for k in (0..req.head_len).step_by(step) {
        match parse(&buf[..k], slots, max_head) {
            Ok(None) => {}
            other => panic!("{k} octets of a {}-octet head: {other:?}", req.head_len),
        }
    }
    // The access log's client address behind trusted proxies.
    let peer: IpAddr = [10, 0, 0, 1].into();
    let trusted = [
        IpNet::parse("10.0.0.0/8").unwrap(),
        IpNet::parse("::1").unwrap(),
    ];
    let client = client_addr(peer, &trusted, req.forwarded, req.x_forwarded_for);
    if req.forwarded.is_none() && req.x_forwarded_for.is_none() {
        assert_eq!(client, peer);
    }
    let _ = client_addr(peer, &[], req.forwarded, req.x_forwarded_for);
});
