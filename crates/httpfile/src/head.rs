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

impl RequestHead<'_> {
    /// Whether the response carries headers only.
    pub fn is_head(&self) -> bool {
        self.method == Method::Head
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
/// `%XX`.
fn is_reg_name_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"-._~!$&'()*+,;=".contains(&b)
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
        match v.iter().position(|&b| b == b':') {
            Some(colon) => (&v[..colon], &v[colon + 1..]),
            None => (v, &[][..]),
        }
    };
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
    port.iter().all(u8::is_ascii_digit)
}

#[cfg(test)]
mod tests {
    use super::*;

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
            "a,b",
            "xn--x.y",
        ] {
            assert!(is_valid_host(ok.as_bytes()), "{ok:?}");
        }
        for bad in [
            "a b", "a/b", "a@b", "a:b", "a:1:2", "[::1", "[]", "[::1]x", "[::1]:x", "a?b", "%2",
            "%zz", "a\\b", "\"",
        ] {
            assert!(!is_valid_host(bad.as_bytes()), "{bad:?}");
        }
    }
}
