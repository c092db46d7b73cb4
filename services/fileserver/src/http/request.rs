//! Request-head parsing on top of `httparse`, plus the framing rules httparse
//! leaves to the server (RFC 9112: Host, Content-Length vs Transfer-Encoding,
//! keep-alive). Pure and allocation-free: everything borrows the read buffer.

use httpfile::head::{check_host, declares_body};
pub use httpfile::Method;
use httpfile::{trim_ows, RequestHead};
use std::mem::MaybeUninit;

/// A parsed request head; slices borrow the connection's read buffer.
/// `head` is what the planner reads; the rest frames the connection and
/// feeds the access log.
#[derive(Clone, Debug, Default)]
pub struct Request<'b> {
    /// Method, target and the headers of the file semantics.
    pub head: RequestHead<'b>,
    /// Method as sent.
    pub method_raw: &'b str,
    /// 0 for HTTP/1.0, 1 for HTTP/1.1.
    pub minor_version: u8,
    /// Bytes of the head including the final CRLFCRLF.
    pub head_len: usize,
    /// Whether the client allows the connection to stay open.
    pub keep_alive: bool,
    /// `User-Agent` (access log).
    pub user_agent: Option<&'b [u8]>,
    /// `Referer` (access log).
    pub referer: Option<&'b [u8]>,
    /// `Forwarded` (access log, behind trusted proxies; the last line).
    pub forwarded: Option<&'b [u8]>,
    /// `X-Forwarded-For` (likewise).
    pub x_forwarded_for: Option<&'b [u8]>,
}

impl Request<'_> {
    /// The method as an enum.
    pub fn method(&self) -> Method {
        self.head.method
    }

    /// The request target as sent.
    pub fn target(&self) -> &[u8] {
        self.head.target
    }
}

/// Why a request head was rejected.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ParseError {
    /// Malformed; the string says which rule (400, connection closes).
    Bad(&'static str),
    /// The request line alone is longer than the head's limit (414: RFC
    /// 9112 says a target longer than the server will parse gets 414).
    UriTooLong,
    /// The head is larger than the limit (431).
    HeadTooLarge,
    /// More header fields than the limit (431).
    TooManyHeaders,
}

impl ParseError {
    /// The status code answered for this error.
    pub fn status(self) -> u16 {
        match self {
            ParseError::Bad(_) => 400,
            ParseError::UriTooLong => 414,
            ParseError::HeadTooLarge | ParseError::TooManyHeaders => 431,
        }
    }
}

fn eq_ci(a: &[u8], b: &[u8]) -> bool {
    a.eq_ignore_ascii_case(b)
}

fn has_token(list: &[u8], token: &[u8]) -> bool {
    list.split(|&b| b == b',')
        .any(|t| eq_ci(trim_ows(t), token))
}

/// Parses one request head from the start of `buf`.
///
/// `Ok(None)`: incomplete, read more (only while `buf.len() < max_head`).
/// `headers` is scratch space whose length is the header-count limit.
pub fn parse_request<'b>(
    buf: &'b [u8],
    headers: &mut [httparse::Header<'b>],
    max_head: usize,
) -> Result<Option<Request<'b>>, ParseError> {
    let mut req = httparse::Request::new(headers);
    let parsed = req.parse(buf);
    from_parsed(&req, parsed, buf, max_head)
}

/// [`parse_request`] into header slots that need no initializing: the
/// connection's 128 slots on the stack, which `EMPTY_HEADER`s cost 4 KiB
/// of stores per request to fill (2.4% of a range request's user time
/// in `perf record`).
pub fn parse_request_uninit<'b>(
    buf: &'b [u8],
    headers: &mut [MaybeUninit<httparse::Header<'b>>],
    max_head: usize,
) -> Result<Option<Request<'b>>, ParseError> {
    let mut req = httparse::Request::new(&mut []);
    let parsed = req.parse_with_uninit_headers(buf, headers);
    from_parsed(&req, parsed, buf, max_head)
}

/// A head past `max_head`: 414 when its request line does not end within
/// it (the target is what is long), else 431.
fn too_large(buf: &[u8], max_head: usize) -> ParseError {
    if buf[..max_head.min(buf.len())].contains(&b'\n') {
        ParseError::HeadTooLarge
    } else {
        ParseError::UriTooLong
    }
}

fn from_parsed<'b>(
    req: &httparse::Request<'_, 'b>,
    parsed: httparse::Result<usize>,
    buf: &'b [u8],
    max_head: usize,
) -> Result<Option<Request<'b>>, ParseError> {
    let head_len = match parsed {
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) => {
            if buf.len() >= max_head {
                return Err(too_large(buf, max_head));
            }
            return Ok(None);
        }
        Err(httparse::Error::TooManyHeaders) => return Err(ParseError::TooManyHeaders),
        Err(httparse::Error::Version) => return Err(ParseError::Bad("unsupported HTTP version")),
        Err(httparse::Error::HeaderName) => {
            return Err(ParseError::Bad("invalid header name (obs-fold?)"))
        }
        Err(httparse::Error::HeaderValue) => return Err(ParseError::Bad("invalid header value")),
        Err(httparse::Error::Token) | Err(httparse::Error::Status) => {
            return Err(ParseError::Bad("invalid request line"))
        }
        Err(_) => return Err(ParseError::Bad("malformed request")),
    };
    if head_len > max_head {
        return Err(too_large(buf, max_head));
    }
    let minor_version = req.version.unwrap_or(1);
    let method_raw = req.method.unwrap_or("");
    let mut r = Request {
        head: RequestHead {
            method: Method::from_token(method_raw.as_bytes()),
            target: req.path.unwrap_or("").as_bytes(),
            ..RequestHead::default()
        },
        method_raw,
        minor_version,
        head_len,
        keep_alive: minor_version == 1,
        ..Request::default()
    };
    let mut content_length: Option<u64> = None;
    let mut transfer_encoding = false;
    let mut hosts = 0;
    for h in req.headers.iter() {
        let name = h.name.as_bytes();
        if r.head.take_field(name, h.value) {
            continue;
        }
        let v = trim_ows(h.value);
        match name.len() {
            4 if eq_ci(name, b"host") => {
                hosts += 1;
                r.head.host = Some(v);
            }
            7 if eq_ci(name, b"referer") => r.referer = Some(v),
            9 if eq_ci(name, b"forwarded") => r.forwarded = Some(v),
            10 if eq_ci(name, b"connection") => {
                if has_token(v, b"close") {
                    r.keep_alive = false;
                } else if has_token(v, b"keep-alive") {
                    r.keep_alive = true;
                }
            }
            10 if eq_ci(name, b"user-agent") => r.user_agent = Some(v),
            14 if eq_ci(name, b"content-length") => {
                if v.is_empty() || !v.iter().all(u8::is_ascii_digit) || v.len() > 18 {
                    return Err(ParseError::Bad("invalid Content-Length"));
                }
                let n: u64 = v.iter().fold(0, |a, d| a * 10 + u64::from(d - b'0'));
                if content_length.is_some_and(|c| c != n) {
                    return Err(ParseError::Bad("conflicting Content-Length"));
                }
                content_length = Some(n);
            }
            15 if eq_ci(name, b"x-forwarded-for") => r.x_forwarded_for = Some(v),
            17 if eq_ci(name, b"transfer-encoding") => transfer_encoding = true,
            _ => {}
        }
    }
    if transfer_encoding && content_length.is_some() {
        return Err(ParseError::Bad("both Transfer-Encoding and Content-Length"));
    }
    check_host(minor_version == 1, hosts, r.head.host).map_err(ParseError::Bad)?;
    r.head.has_body = declares_body(content_length, transfer_encoding);
    Ok(Some(r))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &'static str) -> Result<Option<Request<'static>>, ParseError> {
        let h = Box::leak(Box::new([httparse::EMPTY_HEADER; 16]));
        parse_request(s.as_bytes(), h, 8192)
    }

    #[test]
    fn basic_and_pipelined() {
        let r = parse("GET /a HTTP/1.1\r\nHost: x\r\n\r\nGET /b")
            .unwrap()
            .unwrap();
        assert_eq!(r.target(), b"/a");
        assert_eq!(r.method(), Method::Get);
        assert!(r.keep_alive);
        assert_eq!(r.head_len, 28);
        assert!(parse("GET /a HTTP/1.1\r\nHost: x\r\n").unwrap().is_none());
    }

    /// A head past the limit is 414 when the request line is what is
    /// long (RFC 9112 section 3: a target longer than the server parses
    /// MUST get 414), whether or not the rest has arrived, else 431.
    #[test]
    fn a_long_target_is_414_and_a_long_head_431() {
        fn err(buf: &str) -> ParseError {
            let h = &mut [httparse::EMPTY_HEADER; 16];
            parse_request(buf.as_bytes(), h, 64)
                .map(|_| ())
                .unwrap_err()
        }
        let target = format!("GET /{} HTTP/1.1\r\nHost: x\r\n\r\n", "a".repeat(100));
        assert_eq!(err(&target), ParseError::UriTooLong);
        assert_eq!(err(&target[..80]), ParseError::UriTooLong);
        assert_eq!(ParseError::UriTooLong.status(), 414);
        let header = format!(
            "GET / HTTP/1.1\r\nHost: x\r\nX: {}\r\n\r\n",
            "a".repeat(100)
        );
        assert_eq!(err(&header), ParseError::HeadTooLarge);
        assert_eq!(err(&header[..80]), ParseError::HeadTooLarge);
        assert_eq!(ParseError::HeadTooLarge.status(), 431);
    }

    #[test]
    fn framing_rules() {
        assert!(parse("GET / HTTP/1.1\r\n\r\n").is_err());
        assert!(parse(
            "GET / HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n"
        )
        .is_err());
        assert!(parse("GET / HTTP/1.1\r\nHost: a\r\nX: a\r\n b\r\n\r\n").is_err());
        assert!(parse("GET / HTTP/1.1\r\nHost: a\r\nContent-Length: 1x\r\n\r\n").is_err());
        let r = parse("GET / HTTP/1.0\r\n\r\n").unwrap().unwrap();
        assert!(!r.keep_alive);
        assert_eq!(
            parse("GET / HTTP/1.1\r\nHost: a b\r\n\r\n").unwrap_err(),
            ParseError::Bad("invalid Host")
        );
        let r = parse("GET / HTTP/1.1\r\nHost: a\r\nConnection: Close\r\n\r\n")
            .unwrap()
            .unwrap();
        assert!(!r.keep_alive);
    }
}
