//! A minimal blocking HTTP/1.1 client for the pre-timing checks.
//!
//! It sends one request with `Connection: close` and reads to EOF, which is
//! all verification needs, and it sees the raw status and headers exactly as
//! the server wrote them (no redirects, no decompression, no retries).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use anyhow::{bail, Context, Result};

/// A parsed response.
#[derive(Debug, Clone)]
pub struct Response {
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
    parse_response(&raw).with_context(|| format!("response to GET {path} from {addr}"))
}

/// Parses a complete `Connection: close` response and checks that the body
/// length agrees with `Content-Length` when one is given.
pub fn parse_response(raw: &[u8]) -> Result<Response> {
    let head_end = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .context("no end of headers")?;
    let head = std::str::from_utf8(&raw[..head_end]).context("headers are not UTF-8")?;
    let mut lines = head.split("\r\n");
    let status_line = lines.next().unwrap_or_default();
    let mut parts = status_line.splitn(3, ' ');
    let version = parts.next().unwrap_or_default();
    if !version.starts_with("HTTP/1.") {
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
        status,
        headers,
        body: raw[head_end + 4..].to_vec(),
    };
    if let Some(length) = response.header("content-length") {
        let length: usize = length.parse().context("bad Content-Length")?;
        // 304 and HEAD carry the length of the representation, not a body.
        if status != 304 && response.body.len() != length {
            bail!(
                "Content-Length {length} but {} body bytes",
                response.body.len()
            );
        }
    }
    Ok(response)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_status_headers_and_body() {
        let raw = b"HTTP/1.1 206 Partial Content\r\nContent-Range: bytes 0-3/10\r\nContent-Length: 4\r\nETag: \"a\"\r\n\r\nabcd";
        let r = parse_response(raw).unwrap();
        assert_eq!(r.status, 206);
        assert_eq!(r.header("Content-Range"), Some("bytes 0-3/10"));
        assert_eq!(r.header("etag"), Some("\"a\""));
        assert_eq!(r.body, b"abcd");
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
