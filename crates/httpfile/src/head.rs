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
}

impl RequestHead<'_> {
    /// Whether the response carries headers only.
    pub fn is_head(&self) -> bool {
        self.method == Method::Head
    }
}
