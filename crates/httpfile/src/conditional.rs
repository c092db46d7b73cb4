//! Conditional request evaluation in the order of RFC 9110 section 13.2.2.

use crate::head::RequestHead;

/// What the preconditions decide.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Precondition {
    /// Continue; `use_range` says whether a Range header may be honoured
    /// (false when If-Range does not match).
    Proceed {
        /// Range may be applied.
        use_range: bool,
    },
    /// 304 Not Modified.
    NotModified,
    /// 412 Precondition Failed.
    Failed,
}

/// One entity-tag from a list.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Tag<'a> {
    weak: bool,
    opaque: &'a [u8],
}

/// Parses a quoted entity-tag (`"x"` or `W/"x"`) at the start of `s`.
fn parse_tag(s: &[u8]) -> Option<(Tag<'_>, &[u8])> {
    let (weak, s) = match s.strip_prefix(b"W/") {
        Some(rest) => (true, rest),
        None => (false, s),
    };
    let s = s.strip_prefix(b"\"")?;
    let end = s.iter().position(|&b| b == b'"')?;
    Some((
        Tag {
            weak,
            opaque: &s[..end],
        },
        &s[end + 1..],
    ))
}

/// Whether a list header (`*` or entity-tags) matches `etag` (strong, quoted).
/// Malformed lists match nothing.
pub fn etag_list_matches(list: &[u8], etag: &[u8], strong: bool) -> bool {
    let Some((ours, _)) = parse_tag(etag) else {
        return false;
    };
    let mut s = list;
    loop {
        while let Some((&b, rest)) = s.split_first() {
            if matches!(b, b' ' | b'\t' | b',') {
                s = rest;
            } else {
                break;
            }
        }
        if s.is_empty() {
            return false;
        }
        if s[0] == b'*' {
            return true;
        }
        let Some((tag, rest)) = parse_tag(s) else {
            return false;
        };
        let matched = if strong {
            !tag.weak && !ours.weak && tag.opaque == ours.opaque
        } else {
            tag.opaque == ours.opaque
        };
        if matched {
            return true;
        }
        s = rest;
    }
}

/// Parses an HTTP-date to Unix seconds (None if invalid: the header is then ignored).
pub fn parse_date(v: &[u8]) -> Option<u64> {
    let s = std::str::from_utf8(v).ok()?;
    let t = httpdate::parse_http_date(s.trim()).ok()?;
    Some(t.duration_since(std::time::UNIX_EPOCH).ok()?.as_secs())
}

/// Evaluates If-Match, If-Unmodified-Since, If-None-Match, If-Modified-Since
/// and If-Range for a GET or HEAD (`req.method`) of a representation with `etag` (strong,
/// quoted) and `last_modified` (Unix seconds, already clamped to now).
pub fn evaluate(req: &RequestHead<'_>, etag: &[u8], last_modified: u64) -> Precondition {
    let is_get = req.method == crate::head::Method::Get;
    // 1. If-Match (strong), else 2. If-Unmodified-Since.
    if let Some(im) = req.if_match {
        if !etag_list_matches(im, etag, true) {
            return Precondition::Failed;
        }
    } else if let Some(ius) = req.if_unmodified_since.and_then(parse_date) {
        if last_modified > ius {
            return Precondition::Failed;
        }
    }
    // 3. If-None-Match (weak), else 4. If-Modified-Since (GET/HEAD only here).
    if let Some(inm) = req.if_none_match {
        if etag_list_matches(inm, etag, false) {
            return Precondition::NotModified;
        }
    } else if let Some(ims) = req.if_modified_since.and_then(parse_date) {
        if last_modified <= ims {
            return Precondition::NotModified;
        }
    }
    // 5. If-Range: only meaningful with Range on GET.
    let use_range = is_get
        && req.range.is_some()
        && match req.if_range {
            None => true,
            Some(v) if v.starts_with(b"\"") || v.starts_with(b"W/") => {
                etag_list_matches(v, etag, true) && !v.starts_with(b"*")
            }
            Some(v) => parse_date(v) == Some(last_modified),
        };
    Precondition::Proceed { use_range }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn etag_lists() {
        let e = b"\"abc\"";
        assert!(etag_list_matches(b"\"abc\"", e, true));
        assert!(etag_list_matches(b"\"x\", \"abc\"", e, true));
        assert!(!etag_list_matches(b"W/\"abc\"", e, true));
        assert!(etag_list_matches(b"W/\"abc\"", e, false));
        assert!(etag_list_matches(b"*", e, false));
        assert!(!etag_list_matches(b"\"abcd\"", e, false));
        assert!(!etag_list_matches(b"abc", e, false));
    }

    #[test]
    fn order() {
        let mut r = RequestHead {
            method: crate::head::Method::Get,
            if_match: Some(b"\"nope\""),
            if_none_match: Some(b"\"abc\""),
            ..RequestHead::default()
        };
        assert_eq!(evaluate(&r, b"\"abc\"", 100), Precondition::Failed);
        r.if_match = None;
        assert_eq!(evaluate(&r, b"\"abc\"", 100), Precondition::NotModified);
        r.if_none_match = Some(b"\"zzz\"");
        r.if_modified_since = Some(b"Thu, 01 Jan 1970 00:10:00 GMT");
        // If-Modified-Since is ignored when If-None-Match is present.
        assert_eq!(
            evaluate(&r, b"\"abc\"", 100),
            Precondition::Proceed { use_range: false }
        );
        r.if_none_match = None;
        assert_eq!(evaluate(&r, b"\"abc\"", 100), Precondition::NotModified);
        assert_eq!(
            evaluate(&r, b"\"abc\"", 601),
            Precondition::Proceed { use_range: false }
        );
    }
}
