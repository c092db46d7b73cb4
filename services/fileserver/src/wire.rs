//! The engines' transport: a TCP socket, or rustls over one. It owns the
//! socket and the TLS session and nothing of HTTP: `conn` reads request
//! bytes through it and `send` writes responses through it (HTTP/1.1);
//! `h2conn` reads and writes through it without waiting, on readiness.
//!
//! ```text
//! Plain: send / writev / sendfile straight on the socket (send.rs)
//! Tls:   socket -> read_tls -> process -> plaintext -> conn's rbuf
//!        wbuf (+ body) -> seal (rustls' buffer) -> writev -> socket
//!        file bodies: read into wbuf first (no kTLS: sendfile cannot seal)
//! ```

use rustls::ServerConnection;
use std::io::{self, IoSlice, Read, Write};
use tokio::net::TcpStream;

/// How much of a file body is read, sealed and written at a time over TLS;
/// the session's buffer takes a window and what was batched before it, so
/// each window leaves in one `writev`.
pub(crate) const SEAL_WINDOW: usize = 128 * 1024;

/// A connection's byte stream.
pub(crate) enum Wire {
    /// Plaintext HTTP/1.1, or h2c (`h2conn`).
    Plain(TcpStream),
    /// HTTPS (ALPN `h2`, `http/1.1` or none). Boxed: a session is large, and
    /// only a `Wire` that is one pays for it.
    Tls(Box<Tls>),
}

/// A TLS session after its handshake, and its socket.
pub(crate) struct Tls {
    tcp: TcpStream,
    session: ServerConnection,
}

impl Wire {
    /// A connection whose handshake `tls::handshake` completed.
    pub(crate) fn tls(stream: tokio_rustls::server::TlsStream<TcpStream>) -> Wire {
        let (tcp, mut session) = stream.into_inner();
        // rustls takes at most its limit of plaintext per write; 64 KiB of
        // batched responses ride ahead of a window.
        session.set_buffer_limit(Some(SEAL_WINDOW + 64 * 1024));
        Wire::Tls(Box::new(Tls { tcp, session }))
    }

    /// Whether requests come over TLS (what a rule's `scheme` matches).
    pub(crate) fn is_tls(&self) -> bool {
        matches!(self, Wire::Tls(_))
    }

    /// Reads request bytes into `buf`: `Ok(0)` at the end of input (a TCP
    /// FIN, or a TLS `close_notify`). Cancel-safe: every byte taken from
    /// the socket is kept in the session until read.
    pub(crate) async fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Wire::Plain(tcp) => tokio::io::AsyncReadExt::read(tcp, buf).await,
            Wire::Tls(t) => t.read(buf).await,
        }
    }

    /// Waits until a [`read`](Self::read) has something to return (bytes,
    /// the end, or an error): a connection waiting for its next request
    /// needs no read buffer until then. Cancel-safe, and may return early
    /// (the read then waits).
    pub(crate) async fn readable(&mut self) -> io::Result<()> {
        match self {
            Wire::Plain(tcp) => read_ready(tcp).await,
            Wire::Tls(t) => {
                let pending = t.session.process_new_packets().map_or(true, |state| {
                    state.plaintext_bytes_to_read() > 0 || state.peer_has_closed()
                });
                if !pending {
                    read_ready(&t.tcp).await?;
                }
                Ok(())
            }
        }
    }

    /// Ends the write side: a TLS session sends `close_notify` first, if
    /// the socket takes it now (so the client can tell the end from a cut;
    /// a client that reads nothing more does not hold the close).
    pub(crate) async fn shutdown(&mut self) -> io::Result<()> {
        self.close_notify();
        let tcp = match self {
            Wire::Plain(tcp) => tcp,
            Wire::Tls(t) => &mut t.tcp,
        };
        tokio::io::AsyncWriteExt::shutdown(tcp).await
    }

    /// The socket beneath.
    pub(crate) fn tcp(&self) -> &TcpStream {
        match self {
            Wire::Plain(tcp) => tcp,
            Wire::Tls(t) => &t.tcp,
        }
    }

    /// Reads what is there without waiting: `Ok(None)` when nothing is,
    /// `Ok(Some(0))` at the end of input. A TLS session first hands out
    /// what it already decrypted.
    pub(crate) fn try_read(&mut self, buf: &mut [u8]) -> io::Result<Option<usize>> {
        let t = match self {
            Wire::Plain(tcp) => {
                return match tcp.try_read(buf) {
                    Ok(n) => Ok(Some(n)),
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(None),
                    Err(e) => Err(e),
                }
            }
            Wire::Tls(t) => t,
        };
        loop {
            match t.session.reader().read(buf) {
                Ok(n) => return Ok(Some(n)),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(Some(0)),
                Err(e) => return Err(e),
            }
            match t.session.read_tls(&mut Socket(&t.tcp)) {
                Ok(0) => continue,
                Ok(_) => {
                    if let Err(e) = t.session.process_new_packets() {
                        let _ = t.try_flush();
                        return Err(io::Error::new(io::ErrorKind::InvalidData, e));
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(None),
                Err(e) => return Err(e),
            }
        }
    }

    /// Whether a TLS session holds decrypted bytes a read returns at once.
    pub(crate) fn has_buffered_input(&mut self) -> bool {
        match self {
            Wire::Plain(_) => false,
            Wire::Tls(t) => t
                .session
                .process_new_packets()
                .is_ok_and(|state| state.plaintext_bytes_to_read() > 0 || state.peer_has_closed()),
        }
    }

    /// Writes what the socket takes of `buf` now (over TLS: sealed, and
    /// what was sealed before written first); the bytes taken.
    pub(crate) fn try_write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Wire::Plain(tcp) => match tcp.try_write(buf) {
                Ok(n) => Ok(n),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(0),
                Err(e) => Err(e),
            },
            Wire::Tls(t) => {
                t.try_flush()?;
                let n = if buf.is_empty() { 0 } else { t.seal(buf, &[])? };
                t.try_flush()?;
                Ok(n)
            }
        }
    }

    /// Whether sealed bytes still wait for the socket.
    pub(crate) fn wants_flush(&self) -> bool {
        match self {
            Wire::Plain(_) => false,
            Wire::Tls(t) => t.session.wants_write(),
        }
    }

    /// A TLS session's `close_notify` (RFC 8446 6.1), before the socket is
    /// dropped, if the socket takes it now.
    pub(crate) fn close_notify(&mut self) {
        if let Wire::Tls(t) = self {
            t.session.send_close_notify();
            let _ = t.try_flush();
        }
    }
}

impl Tls {
    async fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            match self.session.reader().read(buf) {
                Ok(n) => return Ok(n),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                // A TCP end without close_notify: an end all the same,
                // as most clients close (HTTP/1.1 delimits its messages).
                Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(0),
                Err(e) => return Err(e),
            }
            match self.session.read_tls(&mut Socket(&self.tcp)) {
                Ok(0) => continue, // rustls saw the end: the read above says how.
                Ok(_) => {
                    if let Err(e) = self.session.process_new_packets() {
                        // Its alert goes out if the socket takes it now.
                        let _ = self.try_flush();
                        return Err(io::Error::new(io::ErrorKind::InvalidData, e));
                    }
                    // A key update or a ticket to answer: it leaves with
                    // the next response.
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => self.tcp.readable().await?,
                Err(e) => return Err(e),
            }
        }
    }

    /// Seals as much of `a` then `b` as the session takes (up to its
    /// buffer limit); returns how many bytes it took.
    pub(crate) fn seal(&mut self, a: &[u8], b: &[u8]) -> io::Result<usize> {
        let mut w = self.session.writer();
        match (a.is_empty(), b.is_empty()) {
            (_, true) => w.write(a),
            (true, false) => w.write(b),
            // One record for a head and its body where they fit in one.
            (false, false) => w.write_vectored(&[IoSlice::new(a), IoSlice::new(b)]),
        }
    }

    /// Writes sealed bytes until none are left (`Ok(true)`) or the socket
    /// would block (`Ok(false)`).
    pub(crate) fn try_flush(&mut self) -> io::Result<bool> {
        while self.session.wants_write() {
            match self.session.write_tls(&mut Socket(&self.tcp)) {
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(false),
                Err(e) => return Err(e),
            }
        }
        Ok(true)
    }

    /// The socket beneath.
    pub(crate) fn tcp(&self) -> &TcpStream {
        &self.tcp
    }
}

/// Waits until `tcp` is readable, through the same waker slot a read
/// uses: `TcpStream::readable` queues a waiter under the socket's lock
/// instead, which cost an idle connection's wait 600 instructions
/// (arena_h1_64, callgrind).
async fn read_ready(tcp: &TcpStream) -> io::Result<()> {
    std::future::poll_fn(|cx| tcp.poll_read_ready(cx)).await
}

/// The socket as rustls reads and writes it: non-blocking, a `WouldBlock`
/// clearing tokio's readiness.
struct Socket<'a>(&'a TcpStream);

impl Read for Socket<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.0.try_read(buf)
    }
}

impl Write for Socket<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.try_write(buf)
    }

    fn write_vectored(&mut self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
        self.0.try_write_vectored(bufs)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}
