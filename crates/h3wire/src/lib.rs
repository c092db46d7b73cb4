//! `h3wire`: HTTP/3's framing (RFC 9114) and a QPACK without a dynamic
//! table (RFC 9204), for a server, without I/O. The QUIC streams are the
//! caller's (quinn's, in the daemon); this crate turns a request stream's
//! bytes into a checked request head and a response into frames.
//!
//! - `varint`: QUIC's variable-length integers.
//! - `frame`: the frame and stream types and error codes; the control
//!   stream's preface and GOAWAY; [`HeadReader`] (a request stream up to
//!   its HEADERS) and [`ControlReader`] (the client's control stream).
//! - `qpack`: a request's field section into an [`h2wire::Request`], whose
//!   checks are HTTP/2's (RFC 9114 4.2-4.3 repeats RFC 9113 8.2-8.3); a
//!   response's field section from static references and plain literals.
//!
//! Why not the `h3` crate: it answers through `http` types and a task per
//! stream's frames, and its QPACK Huffman-codes every literal with two
//! allocations a field: in the daemon, 15% of an HTTP/3 request's
//! instructions went to that coder alone.
//!
//! ```
//! use h3wire::{frame, qpack, Head, HeadReader};
//!
//! // A client's request stream: HEADERS with :method GET, :scheme https,
//! // :path /index.html (static references and a plain literal).
//! let mut section = vec![0x00, 0x00, 0xd1, 0xd7, 0x51, 0x0b];
//! section.extend_from_slice(b"/index.html");
//! let mut stream = Vec::new();
//! frame::write_header(frame::HEADERS, section.len() as u64, &mut stream);
//! stream.extend_from_slice(&section);
//!
//! let mut reader = HeadReader::default();
//! let Ok(Head::Section(got)) = reader.receive(&stream, 16 << 10) else { panic!() };
//! let mut req = h2wire::Request::default();
//! req.begin(false, 16 << 10);
//! qpack::decode(got, &mut req, &mut Vec::new()).unwrap();
//! req.finish();
//! assert_eq!((req.method(), req.path()), (&b"GET"[..], Some(&b"/index.html"[..])));
//!
//! // The response head.
//! let mut head = Vec::new();
//! qpack::begin(&mut head);
//! qpack::status(200, &mut head);
//! qpack::field(b"content-length", b"5", &mut head);
//! assert_eq!(head, [0x00, 0x00, 0xd9, 0x54, 0x01, b'5']);
//! ```

pub mod frame;
pub mod qpack;
pub mod varint;

pub use frame::{Code, ControlReader, Head, HeadReader};
