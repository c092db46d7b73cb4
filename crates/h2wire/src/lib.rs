//! `h2wire`: the server side of HTTP/2 (RFC 9113) without I/O.
//!
//! A [`Connection`] takes the bytes a client sent and gives back
//! [`Event`]s (a request head, a stream the client gave up) and the bytes
//! to write; the caller answers each request with
//! [`Connection::send_headers`] and [`Connection::send_data`] within the
//! windows the connection reports. No task, header map or body type per
//! stream: a request answered at once from cached bytes costs its HPACK
//! decode, one copy of its fields, the response's HPACK encode and the
//! frames' headers. Header compression is the `hpack` crate's.
//!
//! Everything a client controls is checked and bounded: frame sizes and
//! lengths, the preface and first SETTINGS, stream identifiers and states,
//! both directions' flow control, header blocks (size, CONTINUATION
//! order, HPACK errors), the request head's rules (RFC 9113 8.2-8.3),
//! concurrent streams, and a credit for the frames a client sends for
//! free (see [`conn`](Connection)). An error a client causes on one
//! stream resets that stream; one on the connection ends it with GOAWAY
//! and the RFC's code.
//!
//! The modules, each using only those above it:
//! - `frame`: the wire: frame types, flags, settings, error codes; a frame
//!   read into a typed `Frame`; the frames this side writes.
//! - `request`: a request head, checked as it is decoded.
//! - `stream`: one stream's state, the flow-control windows, the streams
//!   a connection has open and the ids it closed.
//! - `conn`: the [`Connection`]: what each frame does, the events, the
//!   answers, the timers.
//!
//! ```
//! use h2wire::{Config, Connection, Event};
//!
//! let now = std::time::Instant::now();
//! let mut conn = Connection::new(Config::default(), now);
//! let mut client = h2wire::PREFACE.to_vec();
//! client.extend_from_slice(&[0, 0, 0, 4, 0, 0, 0, 0, 0]); // SETTINGS
//! // HEADERS, stream 1, END_STREAM | END_HEADERS: GET https://a/x
//! client.extend_from_slice(&[0, 0, 6, 1, 5, 0, 0, 0, 1, 0x82, 0x87, 0x01, 0x01, b'a', 0x84]);
//! conn.receive(&client, now).unwrap();
//! let Some(Event::Request(req)) = conn.next_event() else { panic!() };
//! assert_eq!((req.method(), req.path()), (&b"GET"[..], Some(&b"/"[..])));
//! conn.send_headers(req.stream(), false, |b| {
//!     b.status(200).field(b"content-type", b"text/plain");
//! });
//! conn.send_data(req.stream(), b"hello", true);
//! conn.recycle(req);
//! assert!(conn.output().ends_with(b"hello"));
//! ```

mod conn;
mod frame;
mod request;
mod stream;

pub use conn::{Config, Connection, DataFrame, Event, Expired};
pub use frame::{Reason, PREFACE};
pub use request::Request;
