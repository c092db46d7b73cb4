//! A request head as decoded from one header block, checked against RFC
//! 9113 8.2-8.3 while it is decoded: the fields are copied once into one
//! buffer the connection reuses, and a head that breaks a rule is marked
//! malformed (the stream is reset) without storing more.

use std::ops::Range;

/// One request's head: the pseudo-header fields, then the others in the
/// order they came. Returned to the connection with
/// [`Connection::recycle`](crate::Connection::recycle) once answered, so
/// its buffers serve the next request.
#[derive(Debug, Default)]
pub struct Request {
    pub(crate) stream: u32,
    pub(crate) end_stream: bool,
    buf: Vec<u8>,
    fields: Vec<(Range<u32>, Range<u32>)>,
    method: Option<Range<u32>>,
    scheme: Option<Range<u32>>,
    authority: Option<Range<u32>>,
    path: Option<Range<u32>>,
    /// The first `host` field's value, to hold against `:authority`.
    host: Option<Range<u32>>,
    pub(crate) content_length: Option<u64>,
    /// Sum of the fields' sizes (RFC 9113 6.5.2: octets + 32 each).
    list_size: usize,
    max_list_size: usize,
    regular_seen: bool,
    pub(crate) malformed: Option<&'static str>,
}

impl Request {
    /// The stream it came on.
    pub fn stream(&self) -> u32 {
        self.stream
    }

    /// No body follows (the HEADERS frame ended the stream).
    pub fn end_stream(&self) -> bool {
        self.end_stream
    }

    /// The header list was over the size this side announced
    /// (`SETTINGS_MAX_HEADER_LIST_SIZE`): answer 431 (RFC 6585), nothing
    /// else of it was kept.
    pub fn too_large(&self) -> bool {
        self.list_size > self.max_list_size
    }

    pub fn method(&self) -> &[u8] {
        self.get(&self.method).unwrap_or_default()
    }

    pub fn scheme(&self) -> Option<&[u8]> {
        self.get(&self.scheme)
    }

    pub fn authority(&self) -> Option<&[u8]> {
        self.get(&self.authority)
    }

    pub fn path(&self) -> Option<&[u8]> {
        self.get(&self.path)
    }

    /// The fields other than the pseudo-header fields, in order.
    pub fn fields(&self) -> impl Iterator<Item = (&[u8], &[u8])> + '_ {
        self.fields
            .iter()
            .map(|(n, v)| (self.slice(n), self.slice(v)))
    }

    fn slice(&self, r: &Range<u32>) -> &[u8] {
        &self.buf[r.start as usize..r.end as usize]
    }

    fn get(&self, r: &Option<Range<u32>>) -> Option<&[u8]> {
        r.as_ref().map(|r| self.slice(r))
    }

    /// Why the head breaks the request rules (RFC 9113 8.2-8.3, which
    /// RFC 9114 4.2-4.3 repeats for HTTP/3), if it does.
    pub fn malformed(&self) -> Option<&'static str> {
        self.malformed
    }

    /// Empties it for a head another protocol decodes (HTTP/3's QPACK):
    /// then [`push`](Self::push) each field as it comes and
    /// [`finish`](Self::finish). `end_stream`: no body follows;
    /// `max_list_size`: over it, [`too_large`](Self::too_large).
    pub fn begin(&mut self, end_stream: bool, max_list_size: usize) {
        self.reset(0, end_stream, max_list_size);
    }

    /// Bytes its buffers hold, used or not: what keeping it for the next
    /// head costs.
    pub fn capacity(&self) -> usize {
        self.buf.capacity()
            + self.fields.capacity() * std::mem::size_of::<(Range<u32>, Range<u32>)>()
    }

    /// Empties it for the block of `stream`.
    pub(crate) fn reset(&mut self, stream: u32, end_stream: bool, max_list_size: usize) {
        self.stream = stream;
        self.end_stream = end_stream;
        self.buf.clear();
        self.fields.clear();
        self.method = None;
        self.scheme = None;
        self.authority = None;
        self.path = None;
        self.host = None;
        self.content_length = None;
        self.list_size = 0;
        self.max_list_size = max_list_size;
        self.regular_seen = false;
        self.malformed = None;
    }

    /// Adds one decoded field, checking it.
    pub fn push(&mut self, name: &[u8], value: &[u8]) {
        self.list_size += name.len() + value.len() + 32;
        if self.malformed.is_some() || self.too_large() {
            return;
        }
        if let Err(why) = self.check(name, value) {
            self.malformed = Some(why);
        }
    }

    fn check(&mut self, name: &[u8], value: &[u8]) -> Result<(), &'static str> {
        if value.iter().any(|&b| b == 0 || b == b'\r' || b == b'\n') {
            return Err("NUL, CR or LF in a field value");
        }
        let store = |buf: &mut Vec<u8>, s: &[u8]| {
            let start = buf.len() as u32;
            buf.extend_from_slice(s);
            start..buf.len() as u32
        };
        if let Some(pseudo) = name.strip_prefix(b":") {
            if self.regular_seen {
                return Err("a pseudo-header field after a regular one");
            }
            let slot = match pseudo {
                b"method" => &mut self.method,
                b"scheme" => &mut self.scheme,
                b"authority" => &mut self.authority,
                b"path" => &mut self.path,
                _ => return Err("an unknown or response pseudo-header field"),
            };
            if slot.is_some() {
                return Err("a pseudo-header field twice");
            }
            *slot = Some(store(&mut self.buf, value));
            return Ok(());
        }
        self.regular_seen = true;
        if name.is_empty() || !name.iter().all(|&b| is_lower_token(b)) {
            return Err("a field name that is empty, uppercase or not a token");
        }
        if let (Some(&first), Some(&last)) = (value.first(), value.last()) {
            if matches!(first, b' ' | b'\t') || matches!(last, b' ' | b'\t') {
                return Err("white space around a field value");
            }
        }
        match name {
            b"connection" | b"keep-alive" | b"proxy-connection" | b"transfer-encoding"
            | b"upgrade" => return Err("a connection-specific field"),
            b"te" if value != b"trailers" => return Err("TE other than trailers"),
            b"content-length" => {
                let n = parse_length(value).ok_or("a content-length that is no number")?;
                if self.content_length.is_some_and(|m| m != n) {
                    return Err("two different content-lengths");
                }
                self.content_length = Some(n);
            }
            _ => {}
        }
        let n = store(&mut self.buf, name);
        let v = store(&mut self.buf, value);
        if name == b"host" && self.host.is_none() {
            self.host = Some(v.clone());
        }
        self.fields.push((n, v));
        Ok(())
    }

    /// The checks that need the whole head (RFC 9113 8.3.1, 8.1.1).
    pub fn finish(&mut self) {
        if self.malformed.is_some() || self.too_large() {
            return;
        }
        let host_differs = match (self.authority(), self.get(&self.host)) {
            (Some(a), Some(h)) => !a.eq_ignore_ascii_case(h),
            _ => false,
        };
        let path_form = self
            .path()
            .is_some_and(|p| p.starts_with(b"/") || (p == b"*" && self.method() == b"OPTIONS"));
        let why = if self.method.is_none() {
            Some(":method missing")
        } else if !is_token(self.method()) {
            // It reaches logs beside other fields: a token only (RFC 9110
            // 9.1), so it cannot forge them.
            Some(":method that is not a token")
        } else if self.scheme().is_some_and(|s| !is_scheme(s)) {
            Some(":scheme that is not a URI scheme")
        } else if host_differs {
            // RFC 9113 8.3.1: a Host naming another origin than :authority.
            Some("Host differs from :authority")
        } else if self.method() == b"CONNECT" {
            (self.scheme.is_some() || self.path.is_some() || self.authority.is_none())
                .then_some("CONNECT with :scheme or :path, or without :authority")
        } else if self.scheme.is_none() || self.path().is_none_or(<[u8]>::is_empty) {
            Some(":scheme or :path missing, or :path empty")
        } else if !path_form {
            // Origin form, or `*` for OPTIONS (RFC 9113 8.3.1).
            Some(":path neither absolute nor * for OPTIONS")
        } else if self.end_stream && self.content_length.is_some_and(|n| n > 0) {
            Some("a content-length with no body")
        } else {
            None
        };
        self.malformed = why;
    }
}

/// A token (RFC 9110 5.6.2), as a method must be.
fn is_token(s: &[u8]) -> bool {
    !s.is_empty()
        && s.iter()
            .all(|&b| is_lower_token(b) || b.is_ascii_uppercase())
}

/// `ALPHA *( ALPHA / DIGIT / "+" / "-" / "." )` (RFC 3986 3.1).
fn is_scheme(s: &[u8]) -> bool {
    s.first().is_some_and(u8::is_ascii_alphabetic)
        && s.iter()
            .all(|&b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'-' | b'.'))
}

pub(crate) fn is_lower_token(b: u8) -> bool {
    matches!(b,
        b'a'..=b'z' | b'0'..=b'9' | b'!' | b'#' | b'$' | b'%' | b'&' | b'\'' | b'*'
        | b'+' | b'-' | b'.' | b'^' | b'_' | b'`' | b'|' | b'~')
}

fn parse_length(v: &[u8]) -> Option<u64> {
    if v.is_empty() || v.len() > 19 || !v.iter().all(u8::is_ascii_digit) {
        return None;
    }
    Some(v.iter().fold(0u64, |n, &d| n * 10 + u64::from(d - b'0')))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn head(fields: &[(&str, &str)], end_stream: bool) -> Request {
        let mut r = Request::default();
        r.reset(1, end_stream, 16 * 1024);
        for (n, v) in fields {
            r.push(n.as_bytes(), v.as_bytes());
        }
        r.finish();
        r
    }

    const GET: [(&str, &str); 4] = [
        (":method", "GET"),
        (":scheme", "https"),
        (":authority", "example.com"),
        (":path", "/a"),
    ];

    #[test]
    fn a_plain_get_is_kept_whole() {
        let mut f = GET.to_vec();
        f.push(("accept", "*/*"));
        f.push(("te", "trailers"));
        let r = head(&f, true);
        assert_eq!(r.malformed, None);
        assert_eq!(r.method(), b"GET");
        assert_eq!(r.path(), Some(&b"/a"[..]));
        assert_eq!(r.authority(), Some(&b"example.com"[..]));
        let fields: Vec<_> = r.fields().collect();
        assert_eq!(
            fields,
            [(&b"accept"[..], &b"*/*"[..]), (b"te", b"trailers")]
        );
    }

    /// A request may carry none of the fields the server's answers drop
    /// (`httpfile::field::CONNECTION_SPECIFIC`, one list), but `te:
    /// trailers`.
    #[test]
    fn the_connection_specific_fields_are_the_servers() {
        for name in httpfile::field::CONNECTION_SPECIFIC {
            let mut f = GET.to_vec();
            f.push((name, "x"));
            assert!(head(&f, true).malformed.is_some(), "{name}");
        }
    }

    #[test]
    fn each_rule_marks_the_head_malformed() {
        let with = |extra: (&'static str, &'static str)| {
            let mut f = GET.to_vec();
            f.push(extra);
            head(&f, true).malformed
        };
        assert!(with(("Accept", "x")).is_some(), "uppercase");
        assert!(with(("a b", "x")).is_some(), "not a token");
        assert!(with(("connection", "close")).is_some());
        assert!(with(("te", "gzip")).is_some());
        assert!(with(("x", "a\nb")).is_some());
        assert!(with(("x", " a")).is_some());
        assert!(with(("content-length", "5")).is_some(), "no body follows");
        assert!(with((":method", "GET")).is_some(), "pseudo after regular");
        assert!(with((":status", "200")).is_some());
        let mut twice = GET.to_vec();
        twice.insert(1, (":path", "/b"));
        assert!(head(&twice, true).malformed.is_some());
        assert!(head(&GET[1..], true).malformed.is_some(), "no :method");
        assert!(head(&[GET[0], GET[1], GET[2], (":path", "")], true)
            .malformed
            .is_some());
        assert!(
            with(("host", "other.example")).is_some(),
            "Host vs :authority"
        );
        assert_eq!(with(("host", "Example.COM")), None, "the same host");
        let method = |m: &'static str| head(&[(":method", m), GET[1], GET[2], GET[3]], true);
        assert!(method("GET /x HTTP/1.1\" 200").malformed.is_some());
        assert!(method("G\x1bT").malformed.is_some());
        assert_eq!(method("PROPFIND").malformed, None);
        let scheme = |s: &'static str| head(&[GET[0], (":scheme", s), GET[2], GET[3]], true);
        assert!(scheme("ht tp").malformed.is_some());
        assert!(scheme("1http").malformed.is_some());
        assert_eq!(scheme("https").malformed, None);
        let path = |m: &'static str, p: &'static str| {
            head(&[(":method", m), GET[1], GET[2], (":path", p)], true).malformed
        };
        assert!(path("GET", "a/b").is_some());
        assert!(path("GET", "*").is_some());
        assert_eq!(path("OPTIONS", "*"), None);
        let connect = [(":method", "CONNECT"), (":authority", "example.com:443")];
        assert_eq!(head(&connect, false).malformed, None);
        assert!(head(&[connect[0]], false).malformed.is_some());
    }

    #[test]
    fn an_oversized_list_keeps_nothing_more_and_says_so() {
        let mut r = Request::default();
        r.reset(1, true, 200);
        for (n, v) in GET {
            r.push(n.as_bytes(), v.as_bytes());
        }
        r.push(b"cookie", &[b'x'; 200]);
        r.push(b"accept", b"*/*");
        r.finish();
        assert!(r.too_large());
        assert_eq!(r.fields().count(), 0);
    }
}
