//! HTTP/1.1 rendering of a [`Plan`]: the status line (a pre-rendered
//! constant), the framing headers, and each of the plan's fields as
//! `name: value` (the names spelled by [`crate::field::Name`], the values
//! rendered by [`crate::plan::FieldValue::write`], their one rendering).
//! Integers are written without `fmt`, and nothing allocates beyond `out`.

use crate::date::HTTP_DATE_LEN;
use crate::field::Name;
use crate::plan::{write_message, Body, Plan};
use crate::status::status_line;

/// The `Server` field every engine sends, HTTP/1.1 and HTTP/2 alike.
pub const SERVER: &str = "fileserver";

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
    encode_head_with(plan, framing, date, b"", out);
}

/// [`encode_head`] with `fields`, header lines the connection adds to every
/// response (each `name: value\r\n`; e.g. `Alt-Svc` on an HTTPS
/// listener), after the plan's.
///
/// ```
/// use httpfile::encode::{encode_head_with, Framing};
/// use httpfile::head::Method;
/// let framing = Framing { keep_alive: true, minor_version: 1 };
/// let date = *b"Thu, 01 Jan 1970 00:00:00 GMT";
/// let mut out = Vec::new();
/// let plan = httpfile::plan::error(Method::Head, 404, "");
/// encode_head_with(&plan, framing, &date, b"Alt-Svc: h3=\":443\"\r\n", &mut out);
/// assert!(out.ends_with(b"Content-Length: 14\r\nAlt-Svc: h3=\":443\"\r\n\r\n"));
/// ```
pub fn encode_head_with(
    plan: &Plan<'_>,
    framing: Framing,
    date: &[u8; HTTP_DATE_LEN],
    fields: &[u8],
    out: &mut Vec<u8>,
) {
    out.extend_from_slice(status_line(plan.status));
    out.extend_from_slice(Name::Server.http1_line().as_bytes());
    out.extend_from_slice(SERVER.as_bytes());
    out.extend_from_slice(b"\r\n");
    out.extend_from_slice(Name::Date.http1_line().as_bytes());
    out.extend_from_slice(date);
    out.extend_from_slice(b"\r\n");
    plan.headers.for_each_field(|field| {
        field.name.push_http1(out);
        field.value.write(out);
        out.extend_from_slice(b"\r\n");
    });
    out.extend_from_slice(fields);
    let connection = if !framing.keep_alive {
        "close"
    } else if framing.minor_version == 0 {
        "keep-alive"
    } else {
        ""
    };
    if !connection.is_empty() {
        out.extend_from_slice(Name::Connection.http1_line().as_bytes());
        out.extend_from_slice(connection.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"\r\n");
    if let Body::Message(detail) = plan.body {
        write_message(plan.status, detail, out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::head::Method;
    use crate::plan::error;

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
