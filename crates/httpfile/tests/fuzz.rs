//! Property-based fuzzing of the file semantics (a bounded number of cases
//! per target, so it runs in the normal test run): the path normalizer, the
//! range parser, the HTTP-date formatter/parser, entity-tag lists, and the
//! planner. No input may panic; outputs obey their invariants; where a
//! value can be rendered, parse(render(x)) == x; a plan's `Content-Length`
//! is the length of the body it describes.
//!
//! Crash or property failures found here are kept as explicit regression
//! inputs in `tests/corpus/fuzz_regressions.txt` (run by
//! `fuzz_regression_corpus`), so they never depend on proptest's seed.

mod support;

use httpfile::conditional::{etag_list_matches, parse_date};
use httpfile::date::{fmt_http_date, HTTP_DATE_LEN};
use httpfile::encode::{encode_head, Framing};
use httpfile::path::normalize_path;
use httpfile::plan::{self, Body, FileInfo, MediaType, Policy};
use httpfile::range::{parse_range, RangeOutcome};
use httpfile::text::push_encoded_path;
use httpfile::{Method, RequestHead};
use proptest::prelude::*;
use std::path::Path;

/// Prints a target's one-line summary where a CI log shows it.
fn summary(line: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr().lock(), "{line}");
}

// ------------------------------------------------------------- invariants --

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
fn fuzz_path_normalizer() {
    let mut r = support::runner();
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
    r.run(&strat, |t| check_path(t.as_slice())).unwrap();
    // Plain segments normalize to themselves.
    let mut r2 = support::runner();
    r2.run(&prop::collection::vec(piece_free_segment(), 1..8), |segs| {
        let joined = segs.join("/");
        let mut out = Vec::new();
        let p = normalize_path(format!("/{joined}").as_bytes(), &mut out);
        prop_assert_eq!(p.map(|p| p.rel.to_string()), Ok(joined));
        Ok(())
    })
    .unwrap();
    summary(&format!(
        "httpfile fuzz path_normalizer: cases={} failures=0",
        2 * support::cases()
    ));
}

/// A segment that is not `.`/`..`, has no `/`, `%`, `?`, `#` or NUL.
fn piece_free_segment() -> impl Strategy<Value = String> {
    "[A-Za-z0-9_~-][A-Za-z0-9._~-]{0,11}"
}

#[test]
fn fuzz_range_parser() {
    let mut r = support::runner();
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
    let mut r2 = support::runner();
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
        "httpfile fuzz range_parser: cases={} failures=0",
        2 * support::cases()
    ));
}

#[test]
fn fuzz_http_date_and_etag_lists() {
    let mut r = support::runner();
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
    let mut r2 = support::runner();
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
        "httpfile fuzz date_etag: cases={} failures=0",
        2 * support::cases()
    ));
}

/// One `Accept-Encoding` element: a coding (known, unknown, `*`,
/// `identity`) with an optional weight, well-formed or not.
fn accept_element() -> impl Strategy<Value = String> {
    let name = prop::sample::select(vec![
        "gzip", "GZip", "x-gzip", "br", "zstd", "deflate", "identity", "*", "",
    ]);
    let q = prop::option::of(prop::sample::select(vec![
        "0", "0.0", "0.000", "0.001", "0.5", "1", "1.0", "1.000", "2", "abc", "0.0001", " 0 ",
    ]));
    (name, q).prop_map(|(n, q)| match q {
        Some(q) => format!("{n};q={q}"),
        None => n.to_string(),
    })
}

#[test]
fn fuzz_accept_encoding_never_picks_a_refused_coding() {
    use httpfile::mime::{AcceptEncoding, ContentCoding};
    let mut r = support::runner();
    let offers =
        prop::sample::subsequence(ContentCoding::PREFERENCE.to_vec(), 0..=3).prop_shuffle();
    r.run(
        &(
            prop::collection::vec(accept_element(), 0..6),
            offers,
            prop::collection::vec(any::<u8>(), 0..40),
        ),
        |(elements, offered, noise)| {
            let _ = AcceptEncoding::parse(&noise).choose(&offered);
            let field = elements.join(", ");
            let a = AcceptEncoding::parse(field.as_bytes());
            match a.choose(&offered) {
                Some(c) => {
                    prop_assert!(offered.contains(&c));
                    prop_assert!(a.q(c) > 0, "{field:?} chose {c:?} with q=0");
                    // Nothing offered weighs more, nor does identity.
                    prop_assert!(offered.iter().all(|&o| a.q(o) <= a.q(c)), "{field:?}");
                    prop_assert!(
                        a.identity_weight().is_none_or(|id| id <= a.q(c)),
                        "{field:?}"
                    );
                }
                None => prop_assert!(
                    offered
                        .iter()
                        .all(|&o| a.q(o) == 0 || a.identity_weight().is_some_and(|id| a.q(o) < id)),
                    "{field:?} chose identity over an acceptable coding"
                ),
            }
            Ok(())
        },
    )
    .unwrap();
    summary(&format!(
        "httpfile fuzz accept_encoding: cases={} failures=0",
        support::cases()
    ));
}

/// A header value (present in 3 requests of 10): random bytes, or one of
/// the shapes the planner reads.
fn header_value() -> impl Strategy<Value = Option<Vec<u8>>> {
    prop::option::weighted(
        0.3,
        prop_oneof![
            prop::collection::vec(any::<u8>(), 0..40),
            "bytes=([0-9]{0,5}-[0-9]{0,5}, ?){1,5}".prop_map(String::into_bytes),
            "(W/)?\"[a-z0-9-]{0,8}\"(, ?\"[a-z0-9]{0,4}\")?".prop_map(String::into_bytes),
            Just(b"*".to_vec()),
            (0u64..2_000_000_000).prop_map(|secs| {
                let mut d = [0u8; HTTP_DATE_LEN];
                fmt_http_date(secs, &mut d);
                d.to_vec()
            }),
        ],
    )
}

#[test]
fn fuzz_planner() {
    let mut r = support::runner();
    let multipart = std::cell::Cell::new(0u32);
    let strat = (
        prop_oneof![3 => Just(Method::Get), 1 => Just(Method::Head)],
        // Mostly well-formed ranges, so multipart answers are common.
        prop::option::weighted(
            0.9,
            prop_oneof![
                4 => prop::collection::vec((0u64..200, 0u64..50), 1..6).prop_map(|specs| {
                    let specs: Vec<String> =
                        specs.iter().map(|(a, n)| format!("{a}-{}", a + n)).collect();
                    format!("bytes={}", specs.join(",")).into_bytes()
                }),
                1 => prop::collection::vec(any::<u8>(), 0..40),
            ],
        ),
        prop::collection::vec(header_value(), 5),
        prop_oneof![Just(0u64), 1u64..300, 0u64..10_000_000],
        0u64..2_000_000_000,
        "\"[a-z0-9-]{1,8}\"",
        1usize..20,
        any::<bool>(),
    );
    r.run(
        &strat,
        |(method, range, values, size, mtime_secs, etag, max_ranges, vary)| {
            let v = |i: usize| values[i].as_deref();
            let req = RequestHead {
                method,
                target: b"/f",
                range: range.as_deref(),
                if_match: v(0),
                if_none_match: v(1),
                if_modified_since: v(2),
                if_unmodified_since: v(3),
                if_range: v(4),
                ..RequestHead::default()
            };
            let info = FileInfo {
                size,
                mtime_secs,
                etag: &etag,
                media_type: MediaType::of("text/plain"),
                coding: None,
                vary,
            };
            let policy = Policy {
                cache_control: Some("max-age=60"),
                max_ranges,
                dotfiles: false,
            };
            let mut ranges = Vec::new();
            let p = plan::file(&req, &info, &policy, 2_000_000_000, &mut ranges, || {
                [b'b'; 32]
            });
            prop_assert!(
                matches!(p.status, 200 | 206 | 304 | 412 | 416),
                "{}",
                p.status
            );
            let len = p.headers.content_length;
            prop_assert_eq!(len.is_none(), p.status == 304);
            match p.body {
                Body::File(r) => {
                    prop_assert!(r.start <= r.end && r.end <= size);
                    prop_assert_eq!(len, Some(r.len()));
                }
                Body::Multipart(m) => {
                    multipart.set(multipart.get() + 1);
                    let mut body = Vec::new();
                    for (i, r) in m.ranges.iter().enumerate() {
                        prop_assert!(r.start < r.end && r.end <= size);
                        m.write_part_head(i, &mut body);
                        body.resize(body.len() + r.len() as usize, 0);
                    }
                    m.write_closing(&mut body);
                    prop_assert_eq!(len, Some(body.len() as u64));
                }
                Body::Message(detail) => {
                    prop_assert_eq!(len, Some(plan::message_len(p.status, detail)));
                }
                Body::Empty => prop_assert!(
                    method == Method::Head || matches!(p.status, 304 | 416),
                    "a GET {} without a body",
                    p.status
                ),
                Body::Bytes(_) => prop_assert!(false, "a file plan with rendered bytes"),
            }
            // The head is well-formed HTTP/1.1 and says what the plan says.
            let mut head = Vec::new();
            let framing = Framing {
                keep_alive: true,
                minor_version: 1,
            };
            encode_head(&p, framing, b"Tue, 14 Nov 2023 22:13:20 GMT", &mut head);
            let mut headers = [httparse::EMPTY_HEADER; 32];
            let mut resp = httparse::Response::new(&mut headers);
            let parsed = resp.parse(&head);
            prop_assert!(
                matches!(parsed, Ok(httparse::Status::Complete(n)) if n <= head.len()),
                "{parsed:?}: {}",
                String::from_utf8_lossy(&head)
            );
            prop_assert_eq!(resp.code, Some(p.status));
            let cl = resp
                .headers
                .iter()
                .find(|h| h.name == "Content-Length")
                .map(|h| {
                    std::str::from_utf8(h.value)
                        .unwrap()
                        .parse::<u64>()
                        .unwrap()
                });
            prop_assert_eq!(cl, len);
            Ok(())
        },
    )
    .unwrap();
    summary(&format!(
        "httpfile fuzz planner: cases={} multipart={} failures=0",
        support::cases(),
        multipart.get()
    ));
    assert!(
        multipart.get() > support::cases() / 50,
        "too few multipart plans to test them"
    );
}

// ------------------------------------------------------------- regressions --

#[test]
fn fuzz_regression_corpus() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/corpus/fuzz_regressions.txt");
    let n = support::check_corpus(&path, |kind, bytes| match kind {
        "path" => check_path(bytes),
        "range" => (0..4u64)
            .map(|k| [0, 1, 100, u64::MAX][k as usize])
            .try_for_each(|len| check_range(bytes, len, 16)),
        other => panic!("unknown corpus kind {other:?}"),
    });
    summary(&format!("httpfile fuzz regressions: inputs={n} failures=0"));
}
