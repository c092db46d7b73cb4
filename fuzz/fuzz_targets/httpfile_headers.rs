//! httpfile's readings of the request fields a client controls: `Range`
//! (`range::parse_range`, `single_range`), the preconditions
//! (`conditional::parse_date`, `etag_list_matches`, `evaluate` on a
//! `RequestHead` built from the input), `Accept-Encoding`
//! (`mime::AcceptEncoding`, `accepted_encodings`), and the file plan and
//! HTTP/1.1 head that follow from them (`plan::file`, `encode::encode_head`).
//!
//! Input: 16 octets of parameters (the representation's length, the
//! method, `max_ranges`, which fields are present, the file's time), then
//! the field values one per line (`\n`): Range, If-Match, If-None-Match,
//! If-Modified-Since, If-Unmodified-Since, If-Range, Accept-Encoding, and
//! the opaque part of the file's entity-tag.
//!
//! Checked:
//! - ranges: the one-pass parser agrees with a split-and-search reading of
//!   RFC 9110 14.1.1 written here; every range is non-empty and inside the
//!   length; at most `max_ranges`; several add up to at most the length;
//!   `single_range` is `parse_range`'s one range;
//! - dates: a parsed date formats back (`fmt_http_date`) to one that parses
//!   to the same second, and the file's time does too;
//! - entity-tags: a tag matches itself (strong and weak), `*` matches, a
//!   strong match is a weak one, a weak tag matches only weakly;
//! - `evaluate` follows RFC 9110 13.2.2 step by step;
//! - Accept-Encoding: weights within 0..=1000, `accepted()` is "weight
//!   above 0", `choose` picks an offered coding of the highest weight (the
//!   first offered among equals) and never one identity outranks;
//! - the plan: 412 / 304 / 416 / 206 / 200 as the preconditions and the
//!   ranges say, a file body inside the file, a multipart length equal to
//!   what its parts write, and a head whose Content-Length is the plan's.
#![no_main]

use httpfile::conditional::{etag_list_matches, evaluate, parse_date, Precondition};
use httpfile::date::{fmt_http_date, HTTP_DATE_LEN};
use httpfile::mime::{accepted_encodings, AcceptEncoding, ContentCoding};
use httpfile::plan::{self, Body, FileInfo, MediaType, Policy};
use httpfile::range::oracle::reference;
use httpfile::range::{parse_range, single_range, RangeOutcome};
use httpfile::{Method, RequestHead};
use libfuzzer_sys::fuzz_target;

fn check_ranges(header: &[u8], len: u64, max_ranges: usize) {
    let (mut got, mut want) = (Vec::new(), Vec::new());
    let outcome = parse_range(header, len, max_ranges, &mut got);
    let expected = reference(header, len, max_ranges, &mut want);
    assert_eq!(
        (outcome, &got),
        (expected, &want),
        "len {len} max {max_ranges}"
    );
    if outcome != RangeOutcome::Partial {
        assert!(got.is_empty());
    } else {
        assert!(!got.is_empty() && got.len() <= max_ranges);
    }
    let mut total = 0u64;
    for r in &got {
        assert!(r.start < r.end && r.end <= len, "{r:?} of {len}");
        assert!(!r.is_empty());
        total += r.len();
    }
    if got.len() > 1 {
        assert!(total <= len, "{total} in parts of {len}");
    }
    let one = (outcome == RangeOutcome::Partial && got.len() == 1).then(|| got[0]);
    assert_eq!(single_range(header, len, max_ranges), one);
}

fn date_of(secs: u64) -> [u8; HTTP_DATE_LEN] {
    let mut out = [0; HTTP_DATE_LEN];
    fmt_http_date(secs, &mut out);
    out
}

/// The last second an IMF-fixdate can name (9999-12-31T23:59:59).
const LAST_DATE: u64 = 253_402_300_799;

fn check_date(v: &[u8]) {
    if let Some(t) = parse_date(v) {
        assert!(t <= LAST_DATE);
        assert_eq!(
            parse_date(&date_of(t)),
            Some(t),
            "{t} formatted and read back"
        );
    }
}

fn check_etags(list: &[u8], etag: &[u8]) {
    assert!(etag_list_matches(etag, etag, true), "a tag matches itself");
    assert!(etag_list_matches(etag, etag, false));
    assert!(etag_list_matches(b"*", etag, true));
    let mut weak = b"W/".to_vec();
    weak.extend_from_slice(etag);
    assert!(etag_list_matches(&weak, etag, false));
    assert!(
        !etag_list_matches(&weak, etag, true),
        "a weak tag matches strongly"
    );
    if etag_list_matches(list, etag, true) {
        assert!(etag_list_matches(list, etag, false), "strong but not weak");
    }
    // Whatever a list holds, a well-formed tag after it is not read past.
    let _ = etag_list_matches(list, list, false);
}

fn check_evaluate(req: &RequestHead<'_>, etag: &[u8], last_modified: u64) {
    let got = evaluate(req, etag, last_modified);
    // RFC 9110 13.2.2, step by step.
    let step1_2 = match req.if_match {
        Some(im) => etag_list_matches(im, etag, true),
        None => req
            .if_unmodified_since
            .and_then(parse_date)
            .is_none_or(|ius| last_modified <= ius),
    };
    if !step1_2 {
        assert_eq!(got, Precondition::Failed);
        return;
    }
    let not_modified = match req.if_none_match {
        Some(inm) => etag_list_matches(inm, etag, false),
        None => req
            .if_modified_since
            .and_then(parse_date)
            .is_some_and(|ims| last_modified <= ims),
    };
    if not_modified {
        assert_eq!(got, Precondition::NotModified);
        return;
    }
    let Precondition::Proceed { use_range } = got else {
        panic!("{got:?} where every precondition holds");
    };
    if use_range {
        assert!(req.method == Method::Get && req.range.is_some());
        if let Some(ir) = req.if_range {
            let by_tag = etag_list_matches(ir, etag, true) && !ir.starts_with(b"*");
            let by_date = parse_date(ir) == Some(last_modified);
            assert!(by_tag || by_date, "If-Range matched nothing");
        }
    } else if req.method == Method::Get && req.range.is_some() {
        assert!(
            req.if_range.is_some(),
            "a Range on GET without If-Range, not used"
        );
    }
}

fn check_accept_encoding(v: &[u8]) {
    let a = AcceptEncoding::parse(v);
    let accepted = a.accepted();
    assert_eq!(accepted_encodings(v), accepted);
    for c in ContentCoding::PREFERENCE {
        assert!(a.q(c) <= 1000);
        assert_eq!(accepted.accepts(c), a.q(c) > 0);
        assert_eq!(a.accepts(c), a.q(c) > 0);
    }
    assert!(a.identity_q() <= 1000);
    let [br, zstd, gzip] = ContentCoding::PREFERENCE;
    let offers: [&[ContentCoding]; 10] = [
        &[],
        &[br],
        &[zstd],
        &[gzip],
        &[br, zstd, gzip],
        &[gzip, zstd, br],
        &[zstd, gzip],
        &[gzip, br],
        &[br, gzip],
        &[gzip, gzip, br],
    ];
    for offered in offers {
        let best = offered.iter().map(|&c| a.q(c)).max().unwrap_or(0);
        match a.choose(offered) {
            Some(c) => {
                assert!(offered.contains(&c));
                assert!(
                    a.q(c) > 0 && a.q(c) == best,
                    "{c:?} is not of the best weight"
                );
                let first = offered.iter().find(|&&o| a.q(o) == best);
                assert_eq!(first, Some(&c), "not the first offered of the best weight");
                if let Some(id) = a.identity_weight() {
                    assert!(a.q(c) >= id, "identity outranks {c:?}");
                }
            }
            None => {
                let identity_wins = a.identity_weight().is_some_and(|id| best < id);
                assert!(best == 0 || identity_wins, "nothing chosen of {offered:?}");
            }
        }
    }
}

/// The plan of a GET or HEAD of the file, checked against what the
/// preconditions and the ranges said.
fn check_plan(req: &RequestHead<'_>, info: &FileInfo<'_>, max_ranges: usize, now: u64) {
    let policy = Policy {
        cache_control: Some("max-age=60"),
        max_ranges,
        dotfiles: false,
    };
    let mut ranges = Vec::new();
    let p = plan::file(req, info, &policy, now, &mut ranges, || [b'b'; 32]);
    let pre = evaluate(req, info.etag.as_bytes(), info.mtime_secs.min(now));
    let expected_status = match pre {
        Precondition::Failed => 412,
        Precondition::NotModified => 304,
        Precondition::Proceed { use_range: false } => 200,
        Precondition::Proceed { use_range: true } => {
            let mut r = Vec::new();
            match parse_range(req.range.unwrap_or_default(), info.size, max_ranges, &mut r) {
                RangeOutcome::Full => 200,
                RangeOutcome::Unsatisfiable => 416,
                RangeOutcome::Partial => 206,
            }
        }
    };
    assert_eq!(p.status, expected_status);
    match p.body {
        Body::File(r) => {
            assert!(!req.is_head());
            assert!(
                r.start <= r.end && r.end <= info.size,
                "{r:?} of {}",
                info.size
            );
            assert_eq!(p.headers.content_length, Some(r.len()));
        }
        Body::Multipart(m) => {
            assert!(!req.is_head());
            let mut written = 0u64;
            let mut out = Vec::new();
            for (i, r) in m.ranges.iter().enumerate() {
                out.clear();
                m.write_part_head(i, &mut out);
                // Saturating, as the plan's length is near u64::MAX.
                written = written
                    .saturating_add(out.len() as u64)
                    .saturating_add(r.len());
            }
            out.clear();
            m.write_closing(&mut out);
            written = written.saturating_add(out.len() as u64);
            assert_eq!(
                m.len(),
                written,
                "the multipart length is not what it writes"
            );
            assert_eq!(p.headers.content_length, Some(written));
        }
        Body::Empty | Body::Message(_) | Body::Bytes(_) => {}
    }
    let mut head = Vec::new();
    let framing = httpfile::encode::Framing {
        keep_alive: true,
        minor_version: 1,
    };
    httpfile::encode::encode_head(&p, framing, &date_of(now), &mut head);
    assert!(head.ends_with(b"\r\n\r\n") || matches!(p.body, Body::Message(_)));
    if let Some(n) = p.headers.content_length {
        let line = format!("\r\nContent-Length: {n}\r\n");
        assert!(
            head.windows(line.len()).any(|w| w == line.as_bytes()),
            "no {line:?} in the head"
        );
    }
}

fuzz_target!(|data: &[u8]| {
    let mut params = [0u8; 16];
    let n = data.len().min(16);
    params[..n].copy_from_slice(&data[..n]);
    let text = &data[n..];
    let raw_len = u64::from_le_bytes(params[..8].try_into().unwrap());
    let len = if params[8] & 0x80 != 0 {
        raw_len
    } else {
        raw_len % 2001
    };
    let max_ranges = usize::from(params[9] % 33);
    let method =
        [Method::Get, Method::Head, Method::Options, Method::Other][usize::from(params[10] & 3)];
    let present = u16::from_le_bytes([params[11], params[12]]);
    let mut lines = text.split(|&b| b == b'\n');
    let mut field = |i: u32| {
        let line = lines.next();
        line.filter(|_| present & (1 << i) != 0)
    };
    let range = field(0);
    let if_match = field(1);
    let if_none_match = field(2);
    let if_modified_since = field(3);
    let if_unmodified_since = field(4);
    let if_range = field(5);
    let accept_encoding = field(6);
    let opaque: Vec<u8> = field(7)
        .unwrap_or(b"64-6553f100")
        .iter()
        .copied()
        .filter(|&b| b != b'"')
        .collect();
    let mut etag = b"\"".to_vec();
    etag.extend_from_slice(&opaque);
    etag.push(b'"');

    // The file's time: near a date the request names, so that the
    // comparisons go both ways.
    let delta = i64::from(params[13] as i8);
    let base = match params[14] & 3 {
        0 => if_modified_since.and_then(parse_date),
        1 => if_unmodified_since.and_then(parse_date),
        2 => if_range.and_then(parse_date),
        _ => None,
    }
    .unwrap_or(u64::from(u32::from_le_bytes([params[13], params[14], params[15], 0])) * 256);
    let last_modified = base.saturating_add_signed(delta).min(LAST_DATE);

    for (i, v) in [
        range,
        if_match,
        if_none_match,
        if_modified_since,
        if_unmodified_since,
        if_range,
        accept_encoding,
    ]
    .into_iter()
    .enumerate()
    {
        let Some(v) = v else { continue };
        match i {
            0 => check_ranges(v, len, max_ranges),
            1 | 2 | 5 => check_etags(v, &etag),
            3 | 4 => check_date(v),
            _ => check_accept_encoding(v),
        }
        check_date(v);
    }
    check_date(&date_of(last_modified));
    assert_eq!(parse_date(&date_of(last_modified)), Some(last_modified));

    let req = RequestHead {
        method,
        target: b"/f",
        range,
        if_match,
        if_none_match,
        if_modified_since,
        if_unmodified_since,
        if_range,
        accept_encoding,
        ..RequestHead::default()
    };
    check_evaluate(&req, &etag, last_modified);
    // Every size, u64::MAX included (httpfile-1 in
    // fuzz/regressions/README.md: a multipart length once overflowed).
    let plan_size = len;
    if matches!(method, Method::Get | Method::Head) {
        let etag = String::from_utf8_lossy(&etag).into_owned();
        let info = FileInfo {
            size: plan_size,
            mtime_secs: last_modified,
            etag: &etag,
            media_type: MediaType::of(if params[15] & 1 == 0 {
                "text/plain"
            } else {
                "image/png"
            }),
            coding: None,
            vary: params[15] & 2 != 0,
        };
        let now = last_modified.saturating_add(u64::from(params[15] >> 2));
        check_plan(&req, &info, max_ranges, now);
    }
});
