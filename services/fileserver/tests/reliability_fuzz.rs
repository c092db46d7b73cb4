//! Property-based fuzzing of the daemon's HTTP/1.1 request-head parser (a
//! bounded number of cases per target, so it runs in the normal test run).
//! No input may panic; outputs obey their invariants; a rendered head parses
//! back to what was rendered. The file semantics (paths, ranges, dates,
//! entity-tags, the planner) are fuzzed in `crates/httpfile/tests/fuzz.rs`.
//!
//! Crash or property failures found here are kept as explicit regression
//! inputs in `tests/corpus/fuzz_regressions.txt` (run by
//! `fuzz_regression_corpus`), so they never depend on proptest's seed.

#[path = "../../../crates/httpfile/tests/support/mod.rs"]
mod fuzz_support;
mod reliability_support;

use fileserver::http::request::{parse_request, parse_request_uninit, Method};
use proptest::prelude::*;
use reliability_support::summary;
use std::path::Path;

// ------------------------------------------------------------- invariants --

/// Checks every invariant of a request-head parse of `buf`.
fn check_request(buf: &[u8], max_head: usize, nheaders: usize) -> Result<(), TestCaseError> {
    let mut headers = vec![httparse::EMPTY_HEADER; nheaders.max(1)];
    let parsed = parse_request(buf, &mut headers, max_head);
    // The connection's parse (header slots left uninitialized) agrees.
    let mut slots = vec![std::mem::MaybeUninit::uninit(); nheaders.max(1)];
    let uninit = parse_request_uninit(buf, &mut slots, max_head);
    prop_assert_eq!(format!("{parsed:?}"), format!("{uninit:?}"));
    match parsed {
        Ok(Some(r)) => {
            prop_assert!(r.head_len <= buf.len(), "head_len past the buffer");
            prop_assert!(
                r.head_len <= max_head,
                "head_len {} > max_head {max_head}",
                r.head_len
            );
            prop_assert!(
                buf[..r.head_len].ends_with(b"\n"),
                "head does not end a line"
            );
            let (b0, b1) = (buf.as_ptr() as usize, buf.as_ptr() as usize + buf.len());
            let t = r.target().as_ptr() as usize;
            prop_assert!(r.target().is_empty() || (t >= b0 && t + r.target().len() <= b1));
            prop_assert!(r.minor_version <= 1);
            if r.minor_version == 1 {
                prop_assert!(r.head.host.is_some(), "HTTP/1.1 accepted without Host");
            }
            let _ = r.method();
        }
        Ok(None) => prop_assert!(buf.len() < max_head, "incomplete head at/over the limit"),
        Err(e) => prop_assert!(matches!(e.status(), 400 | 414 | 431)),
    }
    Ok(())
}

// ---------------------------------------------------------------- targets --

#[test]
fn fuzz_request_parser_arbitrary_bytes() {
    let mut r = fuzz_support::runner();
    // Raw bytes, and bytes glued onto a plausible request start, so both
    // the request line and the header section get exercised.
    let strat = (
        prop_oneof![
            prop::collection::vec(any::<u8>(), 0..600),
            prop::collection::vec(any::<u8>(), 0..400).prop_map(|tail| {
                let mut v = b"GET /a HTTP/1.1\r\nHost: x\r\n".to_vec();
                v.extend(tail);
                v.extend_from_slice(b"\r\n\r\n");
                v
            }),
        ],
        16usize..2048,
        1usize..40,
    );
    r.run(&strat, |(buf, max_head, n)| {
        check_request(&buf, max_head, n)
    })
    .unwrap();
    summary(&format!(
        "reliability fuzz request_parser_bytes: cases={} failures=0",
        fuzz_support::cases()
    ));
}

fn token() -> impl Strategy<Value = String> {
    "[A-Za-z0-9!#$%&'*+.^_`|~-]{1,12}"
}

#[test]
fn fuzz_request_parser_render_round_trip() {
    let mut r = fuzz_support::runner();
    let strat = (
        prop_oneof![
            Just("GET"),
            Just("HEAD"),
            Just("OPTIONS"),
            Just("DELETE"),
            Just("PURGE")
        ],
        "/[A-Za-z0-9._~%/!$&'()*+,;=:@-]{0,60}",
        0u8..2,
        // Valid authorities (RFC 3986 reg-name, optional port); invalid Host
        // values get 400 (`http::request` unit tests).
        "[A-Za-z0-9.-]{1,16}(:[0-9]{0,5})?",
        prop::option::of("bytes=[0-9]{1,4}-[0-9]{0,4}"),
        prop::option::of("\"[a-z0-9-]{1,16}\""),
        prop::option::of(prop_oneof![
            Just("close"),
            Just("keep-alive"),
            Just("Upgrade, close")
        ]),
        prop::collection::vec((token(), "[!-~]([ -~]{0,30}[!-~])?"), 0..12),
        prop::collection::vec(any::<u8>(), 0..40),
    );
    r.run(
        &strat,
        |(method, target, minor, host, range, inm, conn, extra, trailing)| {
            let mut head = format!("{method} {target} HTTP/1.{minor}\r\nHost: {host}\r\n");
            if let Some(v) = &range {
                head.push_str(&format!("Range: {v}\r\n"));
            }
            if let Some(v) = &inm {
                head.push_str(&format!("If-None-Match: {v}\r\n"));
            }
            if let Some(v) = conn {
                head.push_str(&format!("Connection: {v}\r\n"));
            }
            let known = [
                "host",
                "range",
                "if-none-match",
                "connection",
                "content-length",
                "transfer-encoding",
                "if-match",
                "if-range",
                "if-modified-since",
                "if-unmodified-since",
                "accept",
                "accept-encoding",
                "user-agent",
                "referer",
            ];
            for (name, value) in &extra {
                if !known.contains(&name.to_ascii_lowercase().as_str()) {
                    head.push_str(&format!("{name}: {value}\r\n"));
                }
            }
            head.push_str("\r\n");
            let mut buf = head.clone().into_bytes();
            // Pipelined bytes after the head must not change its parse.
            buf.extend_from_slice(&trailing);
            let mut headers = vec![httparse::EMPTY_HEADER; 64];
            let req = parse_request(&buf, &mut headers, 8192);
            let req = match req {
                Ok(Some(req)) => req,
                other => return Err(TestCaseError::fail(format!("{head:?} -> {other:?}"))),
            };
            prop_assert_eq!(req.head_len, head.len());
            prop_assert_eq!(req.method_raw, method);
            prop_assert_eq!(
                req.method(),
                match method {
                    "GET" => Method::Get,
                    "HEAD" => Method::Head,
                    "OPTIONS" => Method::Options,
                    _ => Method::Other,
                }
            );
            prop_assert_eq!(req.target(), target.as_bytes());
            prop_assert_eq!(req.minor_version, minor);
            prop_assert_eq!(req.head.host, Some(host.as_bytes()));
            prop_assert_eq!(req.head.range, range.as_deref().map(str::as_bytes));
            prop_assert_eq!(req.head.if_none_match, inm.as_deref().map(str::as_bytes));
            let want_keep = match conn {
                Some(c) if c.contains("close") => false,
                Some("keep-alive") => true,
                _ => minor == 1,
            };
            prop_assert_eq!(req.keep_alive, want_keep);
            prop_assert!(!req.head.has_body);
            Ok(())
        },
    )
    .unwrap();
    summary(&format!(
        "reliability fuzz request_round_trip: cases={} failures=0",
        fuzz_support::cases()
    ));
}

// ------------------------------------------------------------- regressions --

#[test]
fn fuzz_regression_corpus() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/corpus/fuzz_regressions.txt");
    let n = fuzz_support::check_corpus(&path, |kind, bytes| match kind {
        "request" => check_request(bytes, 8192, 64),
        other => panic!("unknown corpus kind {other:?}"),
    });
    summary(&format!(
        "reliability fuzz regressions: inputs={n} failures=0"
    ));
}
