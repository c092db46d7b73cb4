//! HTTP/2 on the worker's thread over the h2 crate, without hyper: each
//! stream is answered inside the connection's own future, so a request
//! whose answer is ready at once (cached bytes, a 304, an error) costs no
//! task, no wake-up and no hand-off. Answers come from the same
//! [`Responder`] as every other listener (servedir, decide, the file
//! manager), and are counted and logged when their body ends or drops.
//!
//! ```text
//! io (Watched: guard, coalesce) -> h2::server::Connection ([http2] limits)
//!   poll_accept -> Stream::poll at once: Responder::call -> HEADERS
//!                    -> DATA while the window allows  -> done: dropped
//!               `-> not done (a file read, no window): kept in `streams`,
//!                   polled when it is woken, with the connection
//! ```
//!
//! What hyper's HTTP/2 server did around h2 is done here the same way:
//! `Date` when the answer has none, `Content-Length` from an exact body
//! size, connection-specific fields removed (RFC 9113 8.2.2), a body
//! polled for its next chunk only once the stream has window (so a client
//! that opens none holds one chunk), a request cancelled by the client's
//! RST_STREAM while it is being answered, and INTERNAL_ERROR for a body
//! that fails mid-send. A request body no answer reads is read out
//! (bounded) after the answer instead of reset. Against hyper's per-stream task: 0.82x the CPU
//! per request for cached 1 KiB files over TLS (h2load `-m 10`; the
//! command is in benches/README.md, "HTTP/2 without hyper").

use crate::responder::{Logged, Responder, ResponseFuture};
use bytes::Bytes;
use futures_util::stream::{FuturesUnordered, StreamExt as _};
use h2::server::SendResponse;
use h2::SendStream;
use http::header::{self, HeaderMap, HeaderValue};
use http::{Request, Response};
use http_body::Body as _;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{ready, Context, Poll};

/// An h2 server connection with the streams it is answering: a future
/// that ends when the connection does.
pub(crate) struct Connection<I> {
    state: State<I>,
    responder: Rc<Responder>,
    /// Streams whose answer or body was not done when first polled.
    streams: FuturesUnordered<Stream>,
    /// Shutdown asked for during the handshake: GOAWAY once it is done.
    close_pending: bool,
    date: DateCache,
}

enum State<I> {
    Handshaking(h2::server::Handshake<I, Bytes>),
    Serving(h2::server::Connection<I, Bytes>),
}

impl<I> std::fmt::Debug for Connection<I> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("h2conn::Connection")
            .field("streams", &self.streams.len())
            .finish_non_exhaustive()
    }
}

impl<I> Connection<I>
where
    I: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    /// Starts the HTTP/2 handshake on `io` with `[http2]`'s limits.
    pub(crate) fn new(
        io: I,
        h: &crate::config::Http2Settings,
        responder: Responder,
    ) -> Connection<I> {
        let mut b = h2::server::Builder::new();
        b.max_concurrent_streams(h.max_concurrent_streams)
            .max_header_list_size(h.max_header_list_size)
            .initial_window_size(h.initial_stream_window)
            .initial_connection_window_size(h.initial_connection_window)
            .max_pending_accept_reset_streams(h.max_pending_reset_streams)
            .max_local_error_reset_streams(Some(h.max_local_error_resets))
            .max_send_buffer_size(h.max_send_buffer);
        Connection {
            state: State::Handshaking(b.handshake(io)),
            responder: Rc::new(responder),
            streams: FuturesUnordered::new(),
            close_pending: false,
            date: DateCache::new(),
        }
    }

    /// GOAWAY: the streams the client opened so far are answered, then
    /// the connection ends.
    pub(crate) fn graceful_shutdown(&mut self) {
        match &mut self.state {
            State::Handshaking(_) => self.close_pending = true,
            State::Serving(conn) => conn.graceful_shutdown(),
        }
    }

    /// Starts answering a stream; keeps it only if it is not done at once.
    fn accept(
        &mut self,
        cx: &mut Context<'_>,
        req: Request<h2::RecvStream>,
        reply: SendResponse<Bytes>,
    ) {
        let (parts, body) = req.into_parts();
        let mut stream = Stream {
            state: StreamState::Answering(self.responder.call(Request::from_parts(parts, ()))),
            reply,
            date: self.date.get(),
            upload: (!body.is_end_stream()).then_some(Upload {
                body,
                read: 0,
                deadline: None,
            }),
        };
        if Pin::new(&mut stream).poll(cx).is_pending() {
            self.streams.push(stream);
        }
    }
}

impl<I> Future for Connection<I>
where
    I: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    type Output = Result<(), h2::Error>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        if let State::Handshaking(hs) = &mut this.state {
            let mut conn = ready!(Pin::new(hs).poll(cx))?;
            if this.close_pending {
                conn.graceful_shutdown();
            }
            this.state = State::Serving(conn);
        }
        loop {
            // The streams first: what they send, the connection's next
            // poll writes.
            while let Poll::Ready(Some(())) = this.streams.poll_next_unpin(cx) {}
            let State::Serving(conn) = &mut this.state else {
                unreachable!("serving once the handshake is done");
            };
            match conn.poll_accept(cx) {
                Poll::Ready(Some(Ok((req, reply)))) => this.accept(cx, req, reply),
                Poll::Ready(Some(Err(e))) => return Poll::Ready(Err(e)),
                // GOAWAY done and every stream closed, or the client left.
                Poll::Ready(None) => return Poll::Ready(Ok(())),
                Poll::Pending => return Poll::Pending,
            }
        }
    }
}

/// One stream's answer: the responder's future, then its body, then
/// what is left of the request's body.
struct Stream {
    state: StreamState,
    reply: SendResponse<Bytes>,
    date: HeaderValue,
    /// A request body no answer reads (a POST to a file gets 405).
    upload: Option<Upload>,
}

// The body inline, not boxed: a stream is answered on the connection's
// stack, or kept in the connection's set (one allocation already); a box
// per response cost 1.01x the instructions (callgrind, h2load -m10).
#[allow(clippy::large_enum_variant)]
enum StreamState {
    Answering(ResponseFuture),
    Sending(SendStream<Bytes>, Logged),
    /// The answer is handed to h2: the request's body is read out.
    Draining,
    Done,
}

/// A request body being read and dropped after the answer.
struct Upload {
    body: h2::RecvStream,
    read: usize,
    /// Set when the reading out starts.
    deadline: Option<Pin<Box<tokio::time::Sleep>>>,
}

/// Request body bytes read out after the answer, at most, and for how
/// long; past either the stream is reset (NO_ERROR, RFC 9113 8.1) as when
/// the body is dropped unread. Reading it out spares the clients that take
/// that reset as a failure and drop the answer (curl 7.88, Debian 12's)
/// for the common short bodies; the bounds keep a slow or endless upload
/// from holding the stream, or a draining connection, open.
const DRAIN_MAX: usize = 64 * 1024;
const DRAIN_FOR: std::time::Duration = std::time::Duration::from_secs(1);

impl Upload {
    /// Ready when the body ended, failed, or passed a bound.
    fn poll_drain(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        let deadline = self
            .deadline
            .get_or_insert_with(|| Box::pin(tokio::time::sleep(DRAIN_FOR)));
        if deadline.as_mut().poll(cx).is_ready() {
            return Poll::Ready(());
        }
        loop {
            match ready!(self.body.poll_data(cx)) {
                Some(Ok(data)) => {
                    // Give the window back, or the client stalls.
                    let _ = self.body.flow_control().release_capacity(data.len());
                    self.read += data.len();
                    if self.read > DRAIN_MAX {
                        return Poll::Ready(());
                    }
                }
                Some(Err(_)) | None => return Poll::Ready(()),
            }
        }
    }
}

impl Future for Stream {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = self.get_mut();
        loop {
            match &mut this.state {
                StreamState::Answering(fut) => {
                    let response = match fut.as_mut().poll(cx) {
                        Poll::Ready(r) => r,
                        Poll::Pending => {
                            // The client may cancel what it asked for.
                            if this.reply.poll_reset(cx).is_ready() {
                                this.state = StreamState::Done;
                                return Poll::Ready(());
                            }
                            return Poll::Pending;
                        }
                    };
                    let (mut parts, body) = response.into_parts();
                    complete_head(&mut parts.headers, &body, &this.date);
                    let end = body.is_end_stream();
                    let head = Response::from_parts(parts, ());
                    match this.reply.send_response(head, end) {
                        Ok(_) if end => this.state = StreamState::Draining,
                        Ok(tx) => this.state = StreamState::Sending(tx, body),
                        Err(e) => {
                            tracing::debug!("HTTP/2 response head not sent: {e}");
                            this.reply.send_reset(h2::Reason::INTERNAL_ERROR);
                            this.state = StreamState::Done;
                            return Poll::Ready(());
                        }
                    }
                }
                StreamState::Sending(tx, body) => {
                    ready!(send_body(cx, tx, Pin::new(body)));
                    // Dropping the body counts and logs the response.
                    this.state = StreamState::Draining;
                }
                StreamState::Draining => {
                    if let Some(upload) = &mut this.upload {
                        ready!(upload.poll_drain(cx));
                    }
                    this.upload = None;
                    this.state = StreamState::Done;
                }
                StreamState::Done => return Poll::Ready(()),
            }
        }
    }
}

/// Moves `body` to the stream as the client's window allows: the next
/// chunk is polled only once the stream has window (hyper's rule), so a
/// client that opens none makes the server read no further. Ready when
/// the body is sent, failed (the stream is reset) or the stream is gone.
fn send_body(
    cx: &mut Context<'_>,
    tx: &mut SendStream<Bytes>,
    mut body: Pin<&mut Logged>,
) -> Poll<()> {
    loop {
        tx.reserve_capacity(1);
        if tx.capacity() == 0 {
            loop {
                match ready!(tx.poll_capacity(cx)) {
                    Some(Ok(0)) => {}
                    Some(Ok(_)) => break,
                    // Reset by the client, or the connection ended.
                    Some(Err(_)) | None => return Poll::Ready(()),
                }
            }
        } else if tx.poll_reset(cx).is_ready() {
            return Poll::Ready(());
        }
        match ready!(body.as_mut().poll_frame(cx)) {
            Some(Ok(frame)) => {
                let Ok(data) = frame.into_data() else {
                    // Trailers: none are sent.
                    continue;
                };
                let end = body.is_end_stream();
                if tx.send_data(data, end).is_err() || end {
                    return Poll::Ready(());
                }
            }
            Some(Err(e)) => {
                // The file changed or failed mid-send: the stream ends
                // short, as the other engines end theirs.
                tracing::debug!("HTTP/2 body ended early: {e}");
                tx.send_reset(h2::Reason::INTERNAL_ERROR);
                return Poll::Ready(());
            }
            None => {
                let _ = tx.send_data(Bytes::new(), true);
                return Poll::Ready(());
            }
        }
    }
}

/// What the head needs before h2 takes it: no connection-specific field
/// (RFC 9113 8.2.2; h2 refuses a head with one), `Date`, and
/// `Content-Length` when the body's size is known and the head has none.
/// The head is read in one pass, and changed only where it must be: a
/// lookup per rule hashed eight names per response.
fn complete_head(headers: &mut HeaderMap, body: &Logged, date: &HeaderValue) {
    let (mut strip, mut has_date, mut has_length) = (false, false, false);
    for name in headers.keys() {
        match name.as_str() {
            "connection" | "transfer-encoding" | "upgrade" | "keep-alive" | "proxy-connection"
            | "te" => strip = true,
            "date" => has_date = true,
            "content-length" => has_length = true,
            _ => {}
        }
    }
    if strip {
        for name in [
            header::CONNECTION,
            header::TRANSFER_ENCODING,
            header::UPGRADE,
            header::HeaderName::from_static("keep-alive"),
            header::HeaderName::from_static("proxy-connection"),
        ] {
            headers.remove(name);
        }
        if headers.get(header::TE).is_some_and(|te| te != "trailers") {
            headers.remove(header::TE);
        }
    }
    if !has_date {
        headers.insert(header::DATE, date.clone());
    }
    if !has_length && !body.is_end_stream() {
        if let Some(len) = body.size_hint().exact() {
            headers.insert(header::CONTENT_LENGTH, HeaderValue::from(len));
        }
    }
}

/// The `Date` value, rendered once a second for the connection.
struct DateCache {
    secs: u64,
    value: HeaderValue,
}

impl DateCache {
    fn new() -> DateCache {
        DateCache {
            secs: u64::MAX,
            value: HeaderValue::from_static(""),
        }
    }

    fn get(&mut self) -> HeaderValue {
        httpfile::date::with_now(|secs, text| {
            if self.secs != secs {
                if let Ok(v) = HeaderValue::from_bytes(text) {
                    self.secs = secs;
                    self.value = v;
                }
            }
            self.value.clone()
        })
    }
}
