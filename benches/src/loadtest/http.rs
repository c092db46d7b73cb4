//! A minimal blocking HTTP/1.1 client for the pre-timing checks, and
//! [`Client`], which sends the TLS and compressed checks through curl.
//!
//! The plain client sends one request with `Connection: close` and reads to
//! EOF, which is all verification needs, and it sees the raw status and
//! headers exactly as the server wrote them (no redirects, no
//! decompression, no retries; a chunked body is put together, as Caddy
//! sends a precompressed sibling).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use anyhow::{bail, ensure, Context, Result};

use crate::loadtest::scenario::Protocol;

/// A parsed response.
#[derive(Debug, Clone)]
pub struct Response {
    /// The status line's version (`HTTP/1.1`, `HTTP/2`).
    pub version: String,
    /// Status code.
    pub status: u16,
    /// Header names (lower-cased) and values, in order.
    pub headers: Vec<(String, String)>,
    /// Everything after the blank line.
    pub body: Vec<u8>,
}

impl Response {
    /// The first header named `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        let name = name.to_ascii_lowercase();
        self.headers
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// Sends `GET path` with `headers` to `addr` and returns the response.
pub fn get(addr: SocketAddr, path: &str, headers: &[(&str, &str)]) -> Result<Response> {
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(5))
        .with_context(|| format!("connect to {addr}"))?;
    stream.set_read_timeout(Some(Duration::from_secs(10)))?;
    stream.set_write_timeout(Some(Duration::from_secs(10)))?;
    let mut request = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n");
    for (name, value) in headers {
        request.push_str(&format!("{name}: {value}\r\n"));
    }
    request.push_str("\r\n");
    stream.write_all(request.as_bytes())?;
    let mut raw = Vec::new();
    stream
        .read_to_end(&mut raw)
        .with_context(|| format!("read response to GET {path} from {addr}"))?;
    parse_wire_response(&raw).with_context(|| format!("response to GET {path} from {addr}"))
}

/// [`parse_response`] of a response as it came off the socket: a body sent
/// with `Transfer-Encoding: chunked` is put together first.
pub fn parse_wire_response(raw: &[u8]) -> Result<Response> {
    let mut response = parse_head_and_body(raw)?;
    let chunked = response
        .header("transfer-encoding")
        .is_some_and(|te| te.to_ascii_lowercase().contains("chunked"));
    if !chunked {
        return parse_response(raw);
    }
    response.body = dechunk(&response.body)?;
    Ok(response)
}

/// The body of a chunked message (trailers dropped); fails on a malformed
/// or cut-off one.
fn dechunk(mut rest: &[u8]) -> Result<Vec<u8>> {
    let mut body = Vec::new();
    loop {
        let line_end = rest
            .windows(2)
            .position(|w| w == b"\r\n")
            .context("chunk size line without CRLF")?;
        let line = std::str::from_utf8(&rest[..line_end]).context("chunk size is not text")?;
        let hex = line.split(';').next().unwrap_or_default().trim();
        let size =
            usize::from_str_radix(hex, 16).with_context(|| format!("bad chunk size {line:?}"))?;
        rest = &rest[line_end + 2..];
        if size == 0 {
            return Ok(body);
        }
        ensure!(
            rest.len() >= size + 2 && &rest[size..size + 2] == b"\r\n",
            "chunk of {size} bytes cut off or not followed by CRLF"
        );
        body.extend_from_slice(&rest[..size]);
        rest = &rest[size + 2..];
    }
}

/// Parses a complete `Connection: close` response and checks that the body
/// length agrees with `Content-Length` when one is given.
pub fn parse_response(raw: &[u8]) -> Result<Response> {
    let response = parse_head_and_body(raw)?;
    if let Some(length) = response.header("content-length") {
        let length: usize = length.parse().context("bad Content-Length")?;
        // 304 and HEAD carry the length of the representation, not a body.
        if response.status != 304 && response.body.len() != length {
            bail!(
                "Content-Length {length} but {} body bytes",
                response.body.len()
            );
        }
    }
    Ok(response)
}

/// Parses the status line and headers; everything after them is the body.
fn parse_head_and_body(raw: &[u8]) -> Result<Response> {
    let head_end = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .context("no end of headers")?;
    let head = std::str::from_utf8(&raw[..head_end]).context("headers are not UTF-8")?;
    let mut lines = head.split("\r\n");
    let status_line = lines.next().unwrap_or_default();
    let mut parts = status_line.splitn(3, ' ');
    let version = parts.next().unwrap_or_default();
    if !version.starts_with("HTTP/1.") && version != "HTTP/2" {
        bail!("bad status line {status_line:?}");
    }
    let status: u16 = parts
        .next()
        .and_then(|s| s.parse().ok())
        .with_context(|| format!("bad status line {status_line:?}"))?;
    let mut headers = Vec::new();
    for line in lines {
        let (name, value) = line
            .split_once(':')
            .with_context(|| format!("bad header line {line:?}"))?;
        headers.push((name.trim().to_ascii_lowercase(), value.trim().to_string()));
    }
    let response = Response {
        version: version.to_string(),
        status,
        headers,
        body: raw[head_end + 4..].to_vec(),
    };
    Ok(response)
}

/// How the checks reach a server: the plain client above for plaintext
/// HTTP/1.1, curl for HTTPS (trusting only the test CA; HTTP/2 by ALPN) and
/// for compressed responses, which curl decodes (gzip, deflate, br, zstd).
#[derive(Debug, Clone, Copy)]
pub struct Client<'a> {
    /// How requests travel.
    pub protocol: Protocol,
    /// The CA certificate HTTPS responses must chain to.
    pub ca: Option<&'a Path>,
    /// Decode the body by its `Content-Encoding` (the request's own
    /// `Accept-Encoding` header says which codings are acceptable).
    pub decode: bool,
}

impl Client<'_> {
    /// The plain client: HTTP/1.1 over TCP, raw bodies.
    pub const PLAIN: Client<'static> = Client {
        protocol: Protocol::Http1,
        ca: None,
        decode: false,
    };

    /// Sends `GET path` with `headers` to `addr`. Over [`Protocol::Https2`]
    /// a response that did not come over HTTP/2 is an error.
    pub fn get(&self, addr: SocketAddr, path: &str, headers: &[(&str, &str)]) -> Result<Response> {
        if self.protocol == Protocol::Http1 && !self.decode {
            return get(addr, path, headers);
        }
        let url = format!("{}://{addr}{path}", self.protocol.scheme());
        let mut curl = Command::new("curl");
        curl.args(["--silent", "--show-error", "--include", "--max-time", "10"]);
        curl.arg(match self.protocol {
            Protocol::Http1 | Protocol::Https1 => "--http1.1",
            // curl here has no HTTP/3: the HTTP/3 scenarios' checks ask
            // the same server over HTTP/2.
            Protocol::Https2 | Protocol::Https3 => "--http2",
        });
        if let Some(ca) = self.ca {
            curl.arg("--cacert").arg(ca);
        }
        if self.decode {
            curl.arg("--compressed");
        }
        for (name, value) in headers {
            curl.arg("--header").arg(format!("{name}: {value}"));
        }
        let out = curl
            .arg(&url)
            .stdin(Stdio::null())
            .output()
            .context("run curl (apt-get install curl)")?;
        ensure!(
            out.status.success(),
            "curl {url}: {}: {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        );
        // curl has checked the framing (it fails on a short body); a decoded
        // body is not Content-Length long, so only the head is parsed here.
        let response = if self.decode {
            parse_head_and_body(&out.stdout)
        } else {
            parse_response(&out.stdout)
        }
        .with_context(|| format!("response to GET {url}"))?;
        if matches!(self.protocol, Protocol::Https2 | Protocol::Https3) {
            ensure!(
                response.version == "HTTP/2",
                "GET {url}: answered over {} where HTTP/2 was offered",
                response.version
            );
        }
        Ok(response)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_status_headers_and_body() {
        let raw = b"HTTP/1.1 206 Partial Content\r\nContent-Range: bytes 0-3/10\r\nContent-Length: 4\r\nETag: \"a\"\r\n\r\nabcd";
        let r = parse_response(raw).unwrap();
        assert_eq!((r.version.as_str(), r.status), ("HTTP/1.1", 206));
        assert_eq!(r.header("Content-Range"), Some("bytes 0-3/10"));
        assert_eq!(r.header("etag"), Some("\"a\""));
        assert_eq!(r.body, b"abcd");
    }

    #[test]
    fn parses_curl_s_http2_head() {
        let raw = b"HTTP/2 200 \r\ncontent-length: 2\r\ncontent-encoding: gzip\r\n\r\nok";
        let r = parse_response(raw).unwrap();
        assert_eq!((r.version.as_str(), r.status), ("HTTP/2", 200));
        assert_eq!(r.header("Content-Encoding"), Some("gzip"));
        // A decoded body is longer than the Content-Length on the wire.
        let raw = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\ndecoded";
        assert!(parse_response(raw).is_err());
        assert_eq!(parse_head_and_body(raw).unwrap().body, b"decoded");
    }

    #[test]
    fn puts_a_chunked_body_together() {
        let raw = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n4\r\nabcd\r\n3;x=y\r\nefg\r\n0\r\n\r\n";
        let r = parse_wire_response(raw).unwrap();
        assert_eq!(r.body, b"abcdefg");
        // Cut off, or a size that is not hex.
        let cut = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n9\r\nabcd\r\n0\r\n\r\n";
        assert!(parse_wire_response(cut).is_err());
        let bad = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n";
        assert!(parse_wire_response(bad).is_err());
        // Not chunked: as parse_response.
        let plain = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
        assert_eq!(parse_wire_response(plain).unwrap().body, b"ok");
        assert!(parse_wire_response(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nok").is_err());
    }

    #[test]
    fn rejects_a_body_shorter_than_its_content_length() {
        let raw = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nabc";
        assert!(parse_response(raw).is_err());
        assert!(parse_response(b"garbage").is_err());
    }

    #[test]
    fn not_modified_keeps_its_content_length_without_a_body() {
        let raw = b"HTTP/1.1 304 Not Modified\r\nContent-Length: 1024\r\n\r\n";
        assert_eq!(parse_response(raw).unwrap().status, 304);
    }
}
