//! HTTP/1.1 rendering of a [`Plan`]: the one place each response header
//! line is written. Integers are written without `fmt`, the status line
//! is a pre-rendered constant, and nothing allocates beyond `out`.

use crate::date::{fmt_http_date, HTTP_DATE_LEN};
use crate::plan::{push_range, push_u64, write_message, Body, ContentRange, ContentType, Plan};
use crate::status::status_line;

/// How the connection a response goes out on is framed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Framing {
    /// The connection stays open after this response.
    pub keep_alive: bool,
    /// The request's HTTP/1.x minor version (1.0 needs `keep-alive` said).
    pub minor_version: u8,
}

/// Appends the head of `plan` (status line through the blank line), with
/// `Date: date` and the `Connection` header `framing` needs. A
/// [`Body::Message`] is appended too (it is part of the plan, not of a
/// file); every other body is the caller's to send.
pub fn encode_head(
    plan: &Plan<'_>,
    framing: Framing,
    date: &[u8; HTTP_DATE_LEN],
    out: &mut Vec<u8>,
) {
    let h = &plan.headers;
    out.extend_from_slice(status_line(plan.status));
    out.extend_from_slice(b"Server: fileserver\r\nDate: ");
    out.extend_from_slice(date);
    out.extend_from_slice(b"\r\n");
    if let Some(loc) = h.location {
        out.extend_from_slice(b"Location: /");
        push_encoded_path(out, loc.path);
        out.push(b'/');
        out.extend_from_slice(loc.query);
        out.extend_from_slice(b"\r\n");
    }
    if let Some(allow) = h.allow {
        line(out, b"Allow", allow.as_bytes());
    }
    if let Some(secs) = h.retry_after {
        out.extend_from_slice(b"Retry-After: ");
        push_u64(out, u64::from(secs));
        out.extend_from_slice(b"\r\n");
    }
    match h.content_type {
        Some(ContentType::Media(m)) => {
            out.extend_from_slice(b"Content-Type: ");
            out.extend_from_slice(m.essence.as_bytes());
            if m.utf8 {
                out.extend_from_slice(b"; charset=utf-8");
            }
            out.extend_from_slice(b"\r\n");
        }
        Some(ContentType::Multipart(boundary)) => {
            out.extend_from_slice(b"Content-Type: multipart/byteranges; boundary=");
            out.extend_from_slice(&boundary);
            out.extend_from_slice(b"\r\n");
        }
        None => {}
    }
    match h.content_range {
        Some(ContentRange::Bytes { range, size }) => {
            out.extend_from_slice(b"Content-Range: bytes ");
            push_range(out, range, size);
            out.extend_from_slice(b"\r\n");
        }
        Some(ContentRange::Unsatisfied { size }) => {
            out.extend_from_slice(b"Content-Range: bytes */");
            push_u64(out, size);
            out.extend_from_slice(b"\r\n");
        }
        None => {}
    }
    if let Some(len) = h.content_length {
        out.extend_from_slice(b"Content-Length: ");
        push_u64(out, len);
        out.extend_from_slice(b"\r\n");
    }
    if h.accept_ranges {
        out.extend_from_slice(b"Accept-Ranges: bytes\r\n");
    }
    if let Some(secs) = h.last_modified {
        let mut lm = [0u8; HTTP_DATE_LEN];
        fmt_http_date(secs, &mut lm);
        line(out, b"Last-Modified", &lm);
    }
    if let Some(etag) = h.etag {
        line(out, b"ETag", etag.as_bytes());
    }
    if let Some(cc) = h.cache_control {
        line(out, b"Cache-Control", cc.as_bytes());
    }
    if let Some(coding) = h.content_encoding {
        line(out, b"Content-Encoding", coding.token().as_bytes());
    }
    if let Some(vary) = h.vary {
        line(out, b"Vary", vary.as_str().as_bytes());
    }
    if h.sandbox {
        out.extend_from_slice(
            b"Content-Security-Policy: default-src 'none'; style-src 'unsafe-inline'\r\n\
              X-Content-Type-Options: nosniff\r\n",
        );
    }
    if let Some(n) = h.listing_truncated {
        out.extend_from_slice(b"Listing-Truncated: ");
        push_u64(out, n);
        out.extend_from_slice(b"\r\n");
    }
    if !framing.keep_alive {
        out.extend_from_slice(b"Connection: close\r\n");
    } else if framing.minor_version == 0 {
        out.extend_from_slice(b"Connection: keep-alive\r\n");
    }
    out.extend_from_slice(b"\r\n");
    if let Body::Message(detail) = plan.body {
        write_message(plan.status, detail, out);
    }
}

fn line(out: &mut Vec<u8>, name: &[u8], value: &[u8]) {
    out.extend_from_slice(name);
    out.extend_from_slice(b": ");
    out.extend_from_slice(value);
    out.extend_from_slice(b"\r\n");
}

/// Appends `path` percent-encoded for a `Location` (RFC 3986 `pchar` and
/// `/` stay; everything else, `%` `?` `#` and controls included, is escaped).
pub fn push_encoded_path(out: &mut Vec<u8>, path: &str) {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    for &b in path.as_bytes() {
        if b.is_ascii_alphanumeric() || b"-._~/!$&'()*+,;=:@".contains(&b) {
            out.push(b);
        } else {
            out.extend_from_slice(&[b'%', HEX[(b >> 4) as usize], HEX[(b & 15) as usize]]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::head::Method;
    use crate::plan::error;

    #[test]
    fn ints_and_paths() {
        let mut b = Vec::new();
        push_u64(&mut b, 0);
        b.push(b' ');
        push_u64(&mut b, u64::MAX);
        assert_eq!(b, b"0 18446744073709551615");
        let mut b = Vec::new();
        push_encoded_path(&mut b, "a b/%?#\r\n");
        assert_eq!(b, b"a%20b/%25%3F%23%0D%0A");
    }

    #[test]
    fn an_error_head_and_body() {
        let mut out = Vec::new();
        let framing = Framing {
            keep_alive: true,
            minor_version: 0,
        };
        let date = *b"Thu, 01 Jan 1970 00:00:00 GMT";
        encode_head(&error(Method::Get, 404, ""), framing, &date, &mut out);
        assert_eq!(
            std::str::from_utf8(&out).unwrap(),
            "HTTP/1.1 404 Not Found\r\nServer: fileserver\r\n\
             Date: Thu, 01 Jan 1970 00:00:00 GMT\r\n\
             Content-Type: text/plain; charset=utf-8\r\nContent-Length: 14\r\n\
             Connection: keep-alive\r\n\r\n404 Not Found\n"
        );
    }
}
