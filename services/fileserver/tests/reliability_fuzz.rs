//! Property-based fuzzing of the daemon's pure HTTP pieces (a bounded number
//! of cases per target, so it runs in the normal test run): the request-head
//! parser, the path normalizer, the range parser, and the HTTP-date
//! formatter/parser. No input may panic; outputs obey their invariants; where
//! a value can be rendered, parse(render(x)) == x.
//!
//! Crash or property failures found here are kept as explicit regression
//! inputs in `tests/corpus/fuzz_regressions.txt` (run by
//! `fuzz_regression_corpus`), so they never depend on proptest's seed.

mod reliability_support;

use fileserver::http::request::{parse_request, Method};
use httpfile::conditional::{etag_list_matches, parse_date};
use httpfile::date::{fmt_http_date, HTTP_DATE_LEN};
use httpfile::encode::push_encoded_path;
use httpfile::path::normalize_path;
use httpfile::range::{parse_range, RangeOutcome};
use proptest::prelude::*;
use proptest::test_runner::{Config, FileFailurePersistence, TestRunner};
use reliability_support::summary;
use std::path::Path;

/// Cases per property; the suite stays well under a second per target in a
/// debug build. Raise with `RELIABILITY_FUZZ_CASES` for a longer run.
fn cases() -> u32 {
    std::env::var("RELIABILITY_FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1000)
}

fn runner() -> TestRunner {
    TestRunner::new(Config {
        cases: cases(),
        // Failures are kept by hand in tests/corpus, not in a side file.
        failure_persistence: Some(Box::new(FileFailurePersistence::Off)),
        ..Config::default()
    })
}

// ------------------------------------------------------------- invariants --

/// Checks every invariant of a request-head parse of `buf`.
fn check_request(buf: &[u8], max_head: usize, nheaders: usize) -> Result<(), TestCaseError> {
    let mut headers = vec![httparse::EMPTY_HEADER; nheaders.max(1)];
    match parse_request(buf, &mut headers, max_head) {
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
                prop_assert!(r.host.is_some(), "HTTP/1.1 accepted without Host");
            }
            let _ = r.method();
        }
        Ok(None) => prop_assert!(buf.len() < max_head, "incomplete head at/over the limit"),
        Err(e) => prop_assert!(matches!(e.status(), 400 | 431)),
    }
    Ok(())
}

fn is_bad_segment(s: &str) -> bool {
    s.is_empty() || s == "." || s == ".."
}

/// Checks every invariant of a normalization of `target`, and idempotence.
fn check_path(target: &[u8]) -> Result<(), TestCaseError> {
    let mut out = Vec::new();
    let Ok(p) = normalize_path(target, &mut out) else {
        return Ok(());
    };
    let rel = p.rel.to_string();
    prop_assert!(!rel.starts_with('/'), "{rel:?} starts with /");
    prop_assert!(!rel.contains('\0'), "{rel:?} contains NUL");
    if !rel.is_empty() {
        prop_assert!(
            !rel.split('/').any(is_bad_segment),
            "{rel:?} has an empty, . or .. segment (from {:?})",
            String::from_utf8_lossy(target)
        );
    }
    // Re-encoding the result and normalizing again gives the same path.
    let mut enc = b"/".to_vec();
    push_encoded_path(&mut enc, &rel);
    let mut out2 = Vec::new();
    let again = normalize_path(&enc, &mut out2);
    prop_assert!(
        again.as_ref().map(|q| q.rel) == Ok(rel.as_str()),
        "normalize(encode({rel:?})) = {again:?}"
    );
    Ok(())
}

/// Checks every invariant of a range evaluation.
fn check_range(header: &[u8], len: u64, max: usize) -> Result<(), TestCaseError> {
    let mut out = Vec::new();
    match parse_range(header, len, max, &mut out) {
        RangeOutcome::Partial => {
            prop_assert!(
                !out.is_empty() && out.len() <= max,
                "{} ranges, max {max}",
                out.len()
            );
            for r in &out {
                prop_assert!(
                    r.start < r.end && r.end <= len,
                    "range {r:?} outside 0..{len}"
                );
            }
            if out.len() > 1 {
                let total = out.iter().fold(0u64, |t, r| t.saturating_add(r.len()));
                prop_assert!(total <= len, "multipart ranges add up to {total} > {len}");
            }
        }
        RangeOutcome::Unsatisfiable | RangeOutcome::Full => prop_assert!(out.is_empty()),
    }
    Ok(())
}

// ---------------------------------------------------------------- targets --

#[test]
fn fuzz_request_parser_arbitrary_bytes() {
    let mut r = runner();
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
        cases()
    ));
}

fn token() -> impl Strategy<Value = String> {
    "[A-Za-z0-9!#$%&'*+.^_`|~-]{1,12}"
}

#[test]
fn fuzz_request_parser_render_round_trip() {
    let mut r = runner();
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
            prop_assert_eq!(req.host, Some(host.as_bytes()));
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
        cases()
    ));
}

#[test]
fn fuzz_path_normalizer() {
    let mut r = runner();
    // Arbitrary bytes behind a "/", and sequences of traversal-ish pieces
    // (random bytes rarely form valid escapes of dots and slashes).
    let piece = prop_oneof![
        Just("/"),
        Just(".."),
        Just("."),
        Just("%2e"),
        Just("%2E"),
        Just("%2f"),
        Just("%2F"),
        Just("%5c"),
        Just("\\"),
        Just("%00"),
        Just(";"),
        Just("%25"),
        Just("%252e"),
        Just("a"),
        Just("%c0%ae"),
        Just("%ff"),
        Just("?"),
        Just("#"),
        Just("%3f"),
        Just(".well-known"),
        Just("%"),
        Just("%2"),
        Just("http://h"),
        Just("//"),
    ];
    let strat = prop_oneof![
        prop::collection::vec(any::<u8>(), 0..200).prop_map(|v| {
            let mut t = b"/".to_vec();
            t.extend(v);
            t
        }),
        prop::collection::vec(any::<u8>(), 0..100),
        prop::collection::vec(piece, 0..24).prop_map(|ps| ps.concat().into_bytes()),
        prop::collection::vec(piece_free_segment(), 1..8)
            .prop_map(|s| format!("/{}", s.join("/")).into_bytes()),
    ];
    r.run(&strat, |t| check_path(&t)).unwrap();
    // Plain segments normalize to themselves.
    let mut r2 = runner();
    r2.run(&prop::collection::vec(piece_free_segment(), 1..8), |segs| {
        let joined = segs.join("/");
        let mut out = Vec::new();
        let p = normalize_path(format!("/{joined}").as_bytes(), &mut out);
        prop_assert_eq!(p.map(|p| p.rel.to_string()), Ok(joined));
        Ok(())
    })
    .unwrap();
    summary(&format!(
        "reliability fuzz path_normalizer: cases={} failures=0",
        2 * cases()
    ));
}

/// A segment that is not `.`/`..`, has no `/`, `%`, `?`, `#` or NUL.
fn piece_free_segment() -> impl Strategy<Value = String> {
    "[A-Za-z0-9_~-][A-Za-z0-9._~-]{0,11}"
}

#[test]
fn fuzz_range_parser() {
    let mut r = runner();
    let strat = (
        prop_oneof![
            prop::collection::vec(any::<u8>(), 0..80),
            "bytes=[0-9, -]{0,40}".prop_map(String::into_bytes),
            "(bytes|BYTES|items)=([0-9]{0,20}-[0-9]{0,20},? ?){0,20}".prop_map(String::into_bytes),
        ],
        prop_oneof![Just(0u64), Just(1), 0u64..5000, any::<u64>()],
        1usize..32,
    );
    r.run(&strat, |(h, len, max)| check_range(&h, len, max))
        .unwrap();
    // parse(render(ranges)) == ranges for valid, non-overlapping-past-length specs.
    let mut r2 = runner();
    let strat2 = (1u64..100_000)
        .prop_flat_map(|len| (Just(len), prop::collection::vec((0..len, 0..len), 1..6)));
    r2.run(&strat2, |(len, pairs)| {
        let specs: Vec<(u64, u64)> = pairs.iter().map(|&(a, b)| (a.min(b), a.max(b))).collect();
        let header = format!(
            "bytes={}",
            specs
                .iter()
                .map(|(a, b)| format!("{a}-{b}"))
                .collect::<Vec<_>>()
                .join(", ")
        );
        let mut out = Vec::new();
        let outcome = parse_range(header.as_bytes(), len, 16, &mut out);
        let total: u64 = specs.iter().map(|(a, b)| b - a + 1).sum();
        if specs.len() > 1 && total > len {
            prop_assert_eq!(outcome, RangeOutcome::Full);
        } else {
            prop_assert_eq!(outcome, RangeOutcome::Partial);
            let got: Vec<(u64, u64)> = out.iter().map(|r| (r.start, r.end - 1)).collect();
            prop_assert_eq!(got, specs);
        }
        // Suffix form: the last n bytes.
        let n = pairs[0].0 + 1;
        let o = parse_range(format!("bytes=-{n}").as_bytes(), len, 16, &mut out);
        prop_assert_eq!(o, RangeOutcome::Partial);
        prop_assert_eq!((out[0].start, out[0].end), (len - n.min(len), len));
        Ok(())
    })
    .unwrap();
    summary(&format!(
        "reliability fuzz range_parser: cases={} failures=0",
        2 * cases()
    ));
}

#[test]
fn fuzz_http_date_and_etag_lists() {
    let mut r = runner();
    // Up to 9999-12-31T23:59:59Z, the last date IMF-fixdate can carry.
    r.run(&(0u64..=253_402_300_799), |secs| {
        let mut buf = [0u8; HTTP_DATE_LEN];
        fmt_http_date(secs, &mut buf);
        prop_assert_eq!(
            parse_date(&buf),
            Some(secs),
            "{}",
            String::from_utf8_lossy(&buf)
        );
        Ok(())
    })
    .unwrap();
    let mut r2 = runner();
    r2.run(
        &(
            prop::collection::vec(any::<u8>(), 0..80),
            "\"[!#-~]{0,20}\"",
            any::<bool>(),
        ),
        |(list, etag, strong)| {
            // No panic on arbitrary lists and dates.
            let _ = etag_list_matches(&list, etag.as_bytes(), strong);
            let _ = parse_date(&list);
            // A strong tag matches itself in any comparison, also at the end
            // of a list; its weak form matches only the weak comparison.
            let mut with = b"\"zz-not-it\", W/\"other\", ".to_vec();
            with.extend_from_slice(etag.as_bytes());
            prop_assert!(etag_list_matches(etag.as_bytes(), etag.as_bytes(), strong));
            prop_assert!(
                etag_list_matches(&with, etag.as_bytes(), strong)
                    || etag == "\"zz-not-it\""
                    || etag == "\"other\""
            );
            let weak = format!("W/{etag}");
            prop_assert!(etag_list_matches(weak.as_bytes(), etag.as_bytes(), false));
            prop_assert!(!etag_list_matches(weak.as_bytes(), etag.as_bytes(), true));
            Ok(())
        },
    )
    .unwrap();
    summary(&format!(
        "reliability fuzz date_etag: cases={} failures=0",
        2 * cases()
    ));
}

// ------------------------------------------------------------- regressions --

/// Decodes a corpus line: `\xNN` is a raw byte, `\\` a backslash.
fn unescape(line: &str) -> Vec<u8> {
    let b = line.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\' && i + 1 < b.len() {
            if b[i + 1] == b'\\' {
                out.push(b'\\');
                i += 2;
                continue;
            }
            if b[i + 1] == b'x' && i + 3 < b.len() {
                if let Ok(v) = u8::from_str_radix(&line[i + 2..i + 4], 16) {
                    out.push(v);
                    i += 4;
                    continue;
                }
            }
        }
        out.push(b[i]);
        i += 1;
    }
    out
}

#[test]
fn fuzz_regression_corpus() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/corpus/fuzz_regressions.txt");
    let text = std::fs::read_to_string(&path).expect("tests/corpus/fuzz_regressions.txt");
    let mut n = 0;
    for line in text
        .lines()
        .filter(|l| !l.is_empty() && !l.starts_with("# "))
    {
        let (kind, input) = line.split_once(' ').unwrap_or((line, ""));
        let bytes = unescape(input);
        let r = match kind {
            "request" => check_request(&bytes, 8192, 64),
            "path" => check_path(&bytes),
            "range" => (0..4u64)
                .map(|k| [0, 1, 100, u64::MAX][k as usize])
                .try_for_each(|len| check_range(&bytes, len, 16)),
            other => panic!("unknown corpus kind {other:?} in {line:?}"),
        };
        if let Err(e) = r {
            panic!("regression input {line:?}: {e}");
        }
        n += 1;
    }
    assert!(n > 0, "empty regression corpus");
    summary(&format!(
        "reliability fuzz regressions: inputs={n} failures=0"
    ));
}
