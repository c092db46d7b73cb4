//! HTTP/3: QUIC (quinn) on `tls_listen`'s port, UDP, one endpoint per
//! worker on its own SO_REUSEPORT socket. Each request is answered by the
//! HTTPS listener's `Responder` (`servedir::ServeDir`, the decide stage,
//! the file manager), so HTTP/3 gives the same answers and every response
//! is counted and logged (`HTTP/3.0` in the access log) like the others.
//! QUIC itself enforces the idle timeout, the stream limit and flow
//! control (`[http3]`); a request's body is sent as the responder yields
//! it, each chunk after QUIC took the one before.
//!
//! ```text
//! UDP socket (worker i) -> quinn Endpoint -> Incoming
//!   -> timeout(tls_handshake_timeout, QUIC + TLS 1.3 handshake, ALPN h3)
//!   -> h3 Connection: accept request streams until GOAWAY / close
//!        each: Responder::call -> send_response, send_data.., finish
//! shutdown: GOAWAY; requests in flight finish; then the connection closes
//! ```
//!
//! Connection migration is off: a client whose address changes may land
//! on another worker's socket, which does not know the connection.

use crate::config::Http3Settings;
use crate::responder::Responder;
use crate::state::ConnContext;
use bytes::Bytes;
use std::net::SocketAddr;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

/// The worker's QUIC endpoint on `socket`, with `[http3]`'s limits and
/// the HTTPS listener's certificates.
pub(crate) fn endpoint(
    socket: std::net::UdpSocket,
    certs: &crate::tls::Certs,
    s: &Http3Settings,
) -> std::io::Result<quinn::Endpoint> {
    let crypto = certs.quic().map_err(std::io::Error::other)?;
    let mut server = quinn::ServerConfig::with_crypto(Arc::new(crypto));
    let transport = s.transport()?;
    server.transport_config(Arc::new(transport));
    server.migration(false);
    quinn::Endpoint::new(
        quinn::EndpointConfig::default(),
        Some(server),
        socket,
        Arc::new(quinn::TokioRuntime),
    )
}

/// Serves one QUIC connection until the client closes it, it idles out,
/// or shutdown drains it.
pub(crate) async fn serve(ctx: Rc<ConnContext>, incoming: quinn::Incoming) {
    let peer = incoming.remote_address();
    let (timeout, settings) = {
        let live = ctx.live().0;
        let timeout = live
            .s
            .tls
            .as_ref()
            .map_or(Duration::from_secs(10), |t| t.handshake_timeout);
        match live.s.http3.clone() {
            Some(h) => (timeout, h),
            None => return,
        }
    };
    let conn = match tokio::time::timeout(timeout, incoming).await {
        Ok(Ok(conn)) => conn,
        Ok(Err(e)) => {
            metrics::counter!("fileserver_tls_handshakes_total", "result" => "error").increment(1);
            tracing::debug!(%peer, "QUIC handshake failed: {e}");
            return;
        }
        Err(_) => {
            metrics::counter!("fileserver_tls_handshakes_total", "result" => "timeout")
                .increment(1);
            tracing::debug!(%peer, "QUIC handshake timed out");
            return;
        }
    };
    metrics::counter!("fileserver_tls_handshakes_total", "result" => "ok").increment(1);
    metrics::counter!("fileserver_tls_connections_total", "alpn" => "h3").increment(1);
    let quic = conn.clone();
    let mut h3 = match h3::server::builder()
        .max_field_section_size(settings.max_field_section_size)
        .build::<_, Bytes>(h3_quinn::Connection::new(conn))
        .await
    {
        Ok(h3) => h3,
        Err(e) => {
            tracing::debug!(%peer, "HTTP/3 connection setup failed: {e}");
            return;
        }
    };
    let responder = Rc::new(Responder::for_http3(ctx.clone(), peer));
    let mut requests = tokio::task::JoinSet::new();
    let mut stop = ctx.stopping.waiter();
    let mut stop_seen = ctx.stopping.get() || *ctx.shutdown.borrow();
    if stop_seen {
        let _ = h3.shutdown(0).await;
    }
    loop {
        // After GOAWAY, once the requests before it are answered: h3
        // would wait for the client's own GOAWAY, which may never come.
        if stop_seen && requests.is_empty() {
            break;
        }
        tokio::select! {
            accepted = h3.accept() => match accepted {
                Ok(Some(resolver)) => {
                    requests.spawn_local(respond(responder.clone(), resolver, peer));
                }
                // GOAWAY sent and every request before it accepted, or
                // the client closed.
                Ok(None) => break,
                Err(e) => {
                    tracing::debug!(%peer, "HTTP/3 connection ended: {e}");
                    break;
                }
            },
            Some(_) = requests.join_next(), if !requests.is_empty() => {}
            () = stop.wait(), if !stop_seen => {
                stop_seen = true;
                let _ = h3.shutdown(0).await;
            }
        }
    }
    // The connection stays open while its responses finish.
    while requests.join_next().await.is_some() {}
    if stop_seen {
        close_when_delivered(&quic).await;
    }
}

/// How long a draining connection must move no datagram either way before
/// it is closed.
const QUIET: Duration = Duration::from_millis(300);

/// Closes a drained connection once what its responses handed to QUIC has
/// been delivered, or when the client closes it first. A response is done
/// for h3 when QUIC has taken its last bytes, not when the client has them;
/// a close then would discard what is still unacknowledged. While data is
/// in flight the client acknowledges it (and QUIC resends what was lost),
/// so datagrams move both ways; when none has moved for [`QUIET`], nothing
/// is left to deliver.
async fn close_when_delivered(quic: &quinn::Connection) {
    let moved = |q: &quinn::Connection| {
        let s = q.stats();
        (s.udp_tx.datagrams, s.udp_rx.datagrams)
    };
    let mut last = moved(quic);
    loop {
        tokio::select! {
            _ = quic.closed() => return,
            _ = tokio::time::sleep(QUIET) => {}
        }
        let now = moved(quic);
        if now == last {
            break;
        }
        last = now;
    }
    quic.close(H3_NO_ERROR.into(), b"shutting down");
}

/// HTTP/3's code for a connection closed with nothing wrong (RFC 9114 8.1).
const H3_NO_ERROR: u32 = 0x100;

/// Answers one request stream.
async fn respond(
    responder: Rc<Responder>,
    resolver: h3::server::RequestResolver<h3_quinn::Connection, Bytes>,
    peer: SocketAddr,
) {
    let (req, mut stream) = match resolver.resolve_request().await {
        Ok(r) => r,
        Err(e) => {
            tracing::debug!(%peer, "HTTP/3 request refused: {e}");
            return;
        }
    };
    let response = responder.call(req).await;
    let pace = responder.pace();
    let (parts, body) = response.into_parts();
    // Dropped on every path below: the response is counted and logged
    // with the bytes QUIC took, complete or not.
    let mut body = Box::pin(body);
    if let Err(e) = stream
        .send_response(http::Response::from_parts(parts, ()))
        .await
    {
        tracing::debug!(%peer, "HTTP/3 response head not sent: {e}");
        return;
    }
    let mut sent = 0u64;
    while let Some(frame) = next_frame(body.as_mut()).await {
        let mut data = match frame.map(|f| f.into_data()) {
            Ok(Ok(data)) => data,
            // Trailers: none are sent.
            Ok(Err(_)) => continue,
            Err(e) => {
                // The file changed or failed mid-send: end the stream
                // short, as the other engines close theirs.
                tracing::debug!(%peer, "HTTP/3 body ended early: {e}");
                stream.stop_stream(h3::error::Code::H3_INTERNAL_ERROR);
                return;
            }
        };
        // Paced (`limit_rate`): this stream sleeps; the others go on.
        while !data.is_empty() {
            let n = match &pace {
                Some(p) => p.wait(sent, data.len() as u64).await as usize,
                None => data.len(),
            };
            if let Err(e) = stream.send_data(data.split_to(n)).await {
                tracing::debug!(%peer, "HTTP/3 client went away: {e}");
                return;
            }
            sent += n as u64;
        }
    }
    if let Err(e) = stream.finish().await {
        tracing::debug!(%peer, "HTTP/3 stream not finished: {e}");
    }
}

async fn next_frame<B: http_body::Body>(
    mut body: Pin<&mut B>,
) -> Option<Result<http_body::Frame<B::Data>, B::Error>> {
    std::future::poll_fn(|cx| body.as_mut().poll_frame(cx)).await
}
