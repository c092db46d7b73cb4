//! The planner's view of a request head: the method and the header values
//! the file semantics read, each borrowed from wherever the caller keeps
//! the head (an HTTP/1.1 read buffer, an `http::Request`).

/// Request methods the planner distinguishes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Method {
    /// GET
    #[default]
    Get,
    /// HEAD: a GET's headers without its body.
    Head,
    /// OPTIONS
    Options,
    /// Anything else (answered with 405 and `Allow`).
    Other,
}

impl Method {
    /// The method named by `token` (case-sensitive, RFC 9110 9.1).
    pub fn from_token(token: &[u8]) -> Method {
        match token {
            b"GET" => Method::Get,
            b"HEAD" => Method::Head,
            b"OPTIONS" => Method::Options,
            _ => Method::Other,
        }
    }
}

/// A request head as the planner reads it. Values are trimmed of optional
/// whitespace; a header sent more than once keeps its last line.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RequestHead<'a> {
    /// The method.
    pub method: Method,
    /// The request target as sent (origin-form, absolute-form or `*`).
    pub target: &'a [u8],
    /// The request declares a body (Content-Length > 0 or Transfer-Encoding).
    pub has_body: bool,
    /// `Host` (HTTP/1.x), or `:authority` (HTTP/2).
    pub host: Option<&'a [u8]>,
    /// `If-Match`.
    pub if_match: Option<&'a [u8]>,
    /// `If-None-Match`.
    pub if_none_match: Option<&'a [u8]>,
    /// `If-Modified-Since`.
    pub if_modified_since: Option<&'a [u8]>,
    /// `If-Unmodified-Since`.
    pub if_unmodified_since: Option<&'a [u8]>,
    /// `If-Range`.
    pub if_range: Option<&'a [u8]>,
    /// `Range`.
    pub range: Option<&'a [u8]>,
    /// `Accept-Encoding`.
    pub accept_encoding: Option<&'a [u8]>,
    /// `Accept` (directory listings: HTML or JSON).
    pub accept: Option<&'a [u8]>,
    /// `Authorization` (a site rule's basic auth).
    pub authorization: Option<&'a [u8]>,
    /// `Origin` (CORS).
    pub origin: Option<&'a [u8]>,
    /// `Access-Control-Request-Method` (a CORS preflight).
    pub access_control_request_method: Option<&'a [u8]>,
    /// `Access-Control-Request-Headers` (a CORS preflight).
    pub access_control_request_headers: Option<&'a [u8]>,
    /// The client the request is judged as coming from: the socket peer,
    /// or the client a trusted proxy names (`None`: not known, as for a
    /// service that was not told; an `allow` rule then refuses).
    pub client: Option<std::net::IpAddr>,
    /// The request came over TLS (a site rule's `scheme`).
    pub tls: bool,
}

impl<'a> RequestHead<'a> {
    /// Whether the response carries headers only.
    pub fn is_head(&self) -> bool {
        self.method == Method::Head
    }

    /// Keeps `value` (trimmed of optional whitespace) as the field `name`
    /// (any case) if it is one the planner reads other than `Host`, over
    /// any earlier line of it; false for every other name (`Host`,
    /// framing, and whatever the caller reads itself). The one table of
    /// which request field feeds which member, for every engine: each
    /// reads its fields in one pass over the head, where a lookup per
    /// member cost HTTP/2 about ten hashed lookups a request.
    ///
    /// ```
    /// let mut head = httpfile::RequestHead::default();
    /// assert!(head.take_field(b"If-None-Match", b" \"a\" "));
    /// assert!(head.take_field(b"range", b"bytes=0-1"));
    /// assert!(!head.take_field(b"host", b"example.com"));
    /// assert_eq!(head.if_none_match, Some(&b"\"a\""[..]));
    /// assert_eq!(head.range, Some(&b"bytes=0-1"[..]));
    /// ```
    #[inline]
    pub fn take_field(&mut self, name: &[u8], value: &'a [u8]) -> bool {
        let is = |n: &[u8]| name.eq_ignore_ascii_case(n);
        let member = match name.len() {
            5 if is(b"range") => &mut self.range,
            6 if is(b"accept") => &mut self.accept,
            6 if is(b"origin") => &mut self.origin,
            8 if is(b"if-match") => &mut self.if_match,
            8 if is(b"if-range") => &mut self.if_range,
            13 if is(b"if-none-match") => &mut self.if_none_match,
            13 if is(b"authorization") => &mut self.authorization,
            15 if is(b"accept-encoding") => &mut self.accept_encoding,
            17 if is(b"if-modified-since") => &mut self.if_modified_since,
            19 if is(b"if-unmodified-since") => &mut self.if_unmodified_since,
            29 if is(b"access-control-request-method") => &mut self.access_control_request_method,
            30 if is(b"access-control-request-headers") => &mut self.access_control_request_headers,
            _ => return false,
        };
        *member = Some(crate::trim_ows(value));
        true
    }
}

/// The authority rule every engine applies before a request is decided
/// (RFC 9112 3.2, RFC 9113 8.3.1): an HTTP/1.1 request names exactly one
/// `Host`, and a `Host` or `:authority` that is sent is valid. `hosts` is
/// how many `Host` lines came; `host` the one that counts (HTTP/2: the
/// `:authority`, else `Host`). The error is the 400's reason.
///
/// ```
/// use httpfile::head::check_host;
/// assert_eq!(check_host(true, 0, None), Err("HTTP/1.1 request without Host"));
/// assert_eq!(check_host(false, 2, Some(b"a")), Err("more than one Host"));
/// assert_eq!(check_host(true, 1, Some(b"a b")), Err("invalid Host"));
/// assert_eq!(check_host(false, 0, None), Ok(()));
/// ```
pub fn check_host(http11: bool, hosts: usize, host: Option<&[u8]>) -> Result<(), &'static str> {
    if hosts > 1 {
        return Err("more than one Host");
    }
    if http11 && host.is_none() {
        return Err("HTTP/1.1 request without Host");
    }
    if host.is_some_and(|h| !is_valid_host(h)) {
        return Err("invalid Host");
    }
    Ok(())
}

/// Whether a request head declares a body (RFC 9112 6.3): a
/// `Transfer-Encoding`, or a `Content-Length` above zero.
pub fn declares_body(content_length: Option<u64>, transfer_encoding: bool) -> bool {
    transfer_encoding || content_length.unwrap_or(0) > 0
}

/// RFC 3986 unreserved / sub-delims: the bytes a reg-name may hold besides
/// `%XX`, as a table: a `Host` is checked on every request. With the
/// one-pass split in [`is_valid_host`], the check of `127.0.0.1:8080`
/// went from about 400 instructions to about 250 (callgrind); the table
/// alone, with the old split, saved little.
fn is_reg_name_byte(b: u8) -> bool {
    const TABLE: [bool; 256] = {
        let mut t = [false; 256];
        let mut i = 0;
        while i < 256 {
            let b = i as u8;
            t[i] = b.is_ascii_alphanumeric();
            i += 1;
        }
        let extra = b"-._~!$&'()*+,;=";
        let mut j = 0;
        while j < extra.len() {
            t[extra[j] as usize] = true;
            j += 1;
        }
        t
    };
    TABLE[b as usize]
}

/// Whether `v` is a valid `Host` value (RFC 9110 7.2: `uri-host [ ":" port ]`,
/// RFC 3986 3.2.2). Empty is valid: a client sends it when the target URI
/// has no authority (RFC 9112 3.2). An IP-literal is checked for its
/// alphabet, not parsed: the server routes nothing by Host.
pub fn is_valid_host(v: &[u8]) -> bool {
    let (host, port) = if let Some(rest) = v.strip_prefix(b"[") {
        let Some(close) = rest.iter().position(|&b| b == b']') else {
            return false;
        };
        let literal = &rest[..close];
        let literal_ok =
            !literal.is_empty() && literal.iter().all(|&b| b == b':' || is_reg_name_byte(b));
        match &rest[close + 1..] {
            [] => return literal_ok,
            [b':', port @ ..] if literal_ok => (&[][..], port),
            _ => return false,
        }
    } else {
        match v.iter().position(|&b| !is_reg_name_byte(b)) {
            // The common case, in one pass: a name or an IPv4 address, and
            // perhaps a port.
            None => return true,
            Some(i) if v[i] == b':' => return v[i + 1..].iter().all(u8::is_ascii_digit),
            // `%XX` or a byte no host may hold.
            Some(_) => match v.iter().position(|&b| b == b':') {
                Some(colon) => (&v[..colon], &v[colon + 1..]),
                None => (v, &[][..]),
            },
        }
    };
    is_reg_name(host) && port.iter().all(u8::is_ascii_digit)
}

/// RFC 3986 reg-name: unreserved, sub-delims and `%XX`.
fn is_reg_name(host: &[u8]) -> bool {
    let mut i = 0;
    while i < host.len() {
        match host[i] {
            b'%' if host.len() > i + 2
                && host[i + 1].is_ascii_hexdigit()
                && host[i + 2].is_ascii_hexdigit() =>
            {
                i += 3
            }
            b if is_reg_name_byte(b) => i += 1,
            _ => return false,
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The split-then-scan reading of RFC 3986 the one-pass check must
    /// agree with.
    fn reference_host(v: &[u8]) -> bool {
        let (host, port) = if let Some(rest) = v.strip_prefix(b"[") {
            let Some(close) = rest.iter().position(|&b| b == b']') else {
                return false;
            };
            let literal = &rest[..close];
            let ok =
                !literal.is_empty() && literal.iter().all(|&b| b == b':' || is_reg_name_byte(b));
            match &rest[close + 1..] {
                [] => return ok,
                [b':', port @ ..] if ok => (&[][..], port),
                _ => return false,
            }
        } else {
            match v.iter().position(|&b| b == b':') {
                Some(colon) => (&v[..colon], &v[colon + 1..]),
                None => (v, &[][..]),
            }
        };
        is_reg_name(host) && port.iter().all(u8::is_ascii_digit)
    }

    #[test]
    fn host_check_agrees_with_the_reference_on_every_short_value() {
        let alphabet = b"a1.:%[]2f /";
        let mut v = Vec::new();
        fn each(v: &mut Vec<u8>, alphabet: &[u8], depth: usize) {
            assert_eq!(
                is_valid_host(v),
                reference_host(v),
                "{:?}",
                String::from_utf8_lossy(v)
            );
            if depth == 0 {
                return;
            }
            for &b in alphabet {
                v.push(b);
                each(v, alphabet, depth - 1);
                v.pop();
            }
        }
        each(&mut v, alphabet, 5);
    }

    #[test]
    fn host_values() {
        for ok in [
            "",
            "a",
            "a.b:80",
            "a:",
            "[::1]",
            "[::1]:8080",
            "[v1.x]",
            "a%20b",
            "a%20b:80",
            "127.0.0.1:8080",
            "a,b",
            "xn--x.y",
        ] {
            assert!(is_valid_host(ok.as_bytes()), "{ok:?}");
        }
        for bad in [
            "a b", "a/b", "a@b", "a:b", "a:1:2", "[::1", "[]", "[::1]x", "[::1]:x", "a?b", "%2",
            "%zz", "a\\b", "\"", "a%2:80", "a b:80", "a%20b:8x", ":80x",
        ] {
            assert!(!is_valid_host(bad.as_bytes()), "{bad:?}");
        }
    }
}
