//! `httpfile`: the HTTP semantics of serving a file, as pure functions.
//!
//! A server hands the planner a borrowed view of the request head
//! ([`RequestHead`]) and what its filesystem stage resolved (a file's size,
//! time, tag and type, a directory, a listing, nothing); the planner
//! returns a [`Plan`]: the status, the set of headers, and where the body
//! comes from (nothing, a message, rendered bytes, one range of the file,
//! a multipart sequence). Every RFC 9110 decision lives here:
//! preconditions in order (13.2.2), ranges and their limits (14),
//! multipart/byteranges, `Vary`, HEAD, the contents of 304/412/416, and
//! errors with their `Allow`/`Retry-After`; so do the derived validators
//! and types ([`EntityTag`], [`mime`]). [`encode::encode_head`] renders
//! a plan as an HTTP/1.1 head; other protocols render the same plan.
//!
//! No I/O and no HTTP library types: everything borrows the caller's
//! buffers, so each function is reachable by a fuzzer.
//!
//! ```
//! use httpfile::plan::{self, Body, FileInfo, MediaType, Policy};
//! use httpfile::{ByteRange, Method, RequestHead};
//!
//! let req = RequestHead {
//!     method: Method::Get,
//!     target: b"/a.txt",
//!     range: Some(b"bytes=-10"),
//!     ..RequestHead::default()
//! };
//! let info = FileInfo {
//!     size: 100,
//!     mtime_secs: 1_700_000_000,
//!     etag: "\"64-6553f100\"",
//!     media_type: MediaType::of("text/plain"),
//!     coding: None,
//!     vary: false,
//! };
//! let policy = Policy { cache_control: None, max_ranges: 16, dotfiles: false };
//! let mut ranges = Vec::new();
//! let p = plan::file(&req, &info, &policy, 1_700_000_100, &mut ranges, || [b'0'; 32]);
//! assert_eq!(p.status, 206);
//! assert_eq!(p.body, Body::File(ByteRange { start: 90, end: 100 }));
//!
//! let mut head = Vec::new();
//! let framing = httpfile::encode::Framing { keep_alive: true, minor_version: 1 };
//! httpfile::encode::encode_head(&p, framing, b"Tue, 14 Nov 2023 22:15:00 GMT", &mut head);
//! assert!(head.starts_with(b"HTTP/1.1 206 Partial Content\r\n"));
//! assert!(head.windows(27).any(|w| w == b"Content-Range: bytes 90-99/"));
//! ```
#![deny(missing_docs)]

pub mod conditional;
pub mod date;
pub mod encode;
pub mod etag;
pub mod field;
pub mod head;
pub mod listing;
pub mod mime;
pub mod path;
pub mod plan;
pub mod range;
pub mod status;
pub mod text;

pub use etag::EntityTag;
pub use head::{Method, RequestHead};
pub use plan::Plan;
pub use range::ByteRange;

/// Strips optional whitespace (RFC 9110 OWS: spaces and tabs) from both ends
/// of a header value or list element.
pub fn trim_ows(v: &[u8]) -> &[u8] {
    let start = v
        .iter()
        .position(|b| !matches!(b, b' ' | b'\t'))
        .unwrap_or(v.len());
    let end = v
        .iter()
        .rposition(|b| !matches!(b, b' ' | b'\t'))
        .map_or(start, |p| p + 1);
    &v[start..end]
}
