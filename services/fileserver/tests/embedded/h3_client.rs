//! A small blocking HTTP/3 client for the semantics suite, on quinn, h3
//! and h3-quinn: another HTTP/3 than the daemon's `h3wire` (reqwest's wants a
//! `--cfg reqwest_unstable` build of everything). It trusts only the
//! test CA, keeps one QUIC connection (on a runtime of its own) for all
//! its requests, and hands a body over as it arrives, through a bounded
//! channel, so a test reads it as it would read reqwest's.

use bytes::{Buf, Bytes};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::CertificateDer;
use std::io::Read;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

/// How long a request's head, or the next piece of its body, may take.
const TIMEOUT: Duration = Duration::from_secs(20);

type Error = Box<dyn std::error::Error + Send + Sync>;

/// One HTTP/3 connection to a server.
pub(crate) struct H3Client {
    rt: tokio::runtime::Runtime,
    endpoint: quinn::Endpoint,
    send: h3::client::SendRequest<h3_quinn::OpenStreams, Bytes>,
}

impl H3Client {
    /// Connects to `addr` (UDP), trusting the CA of `ca_pem`, for the
    /// name `localhost`.
    pub(crate) fn connect(addr: SocketAddr, ca_pem: &str) -> H3Client {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .expect("a runtime");
        let (endpoint, send) = rt.block_on(async {
            let mut roots = rustls::RootCertStore::empty();
            roots
                .add(CertificateDer::from_pem_slice(ca_pem.as_bytes()).unwrap())
                .unwrap();
            let provider = Arc::new(rustls::crypto::ring::default_provider());
            let mut tls = rustls::ClientConfig::builder_with_provider(provider)
                .with_protocol_versions(&[&rustls::version::TLS13])
                .unwrap()
                .with_root_certificates(roots)
                .with_no_client_auth();
            tls.alpn_protocols = vec![b"h3".to_vec()];
            let crypto = quinn::crypto::rustls::QuicClientConfig::try_from(tls).unwrap();
            let mut endpoint = quinn::Endpoint::client("127.0.0.1:0".parse().unwrap()).unwrap();
            endpoint.set_default_client_config(quinn::ClientConfig::new(Arc::new(crypto)));
            let connecting = endpoint.connect(addr, "localhost").unwrap();
            let conn = tokio::time::timeout(TIMEOUT, connecting)
                .await
                .expect("QUIC handshake in time")
                .expect("QUIC handshake");
            let (mut driver, send) = h3::client::new(h3_quinn::Connection::new(conn))
                .await
                .expect("HTTP/3 connection");
            tokio::spawn(async move {
                let _ = std::future::poll_fn(|cx| driver.poll_close(cx)).await;
            });
            (endpoint, send)
        });
        H3Client { rt, endpoint, send }
    }

    /// Sends `req` (no body) and waits for the response head; the body
    /// comes as it is read.
    pub(crate) fn send(&self, req: http::Request<()>) -> Result<super::Response, Error> {
        let mut send = self.send.clone();
        let exchange = async move {
            let mut stream = send.send_request(req).await?;
            // The daemon asks for no more of a request once its head is in
            // (STOP_SENDING H3_NO_ERROR): the FIN may find the stream
            // stopped, and the response still comes (RFC 9114 4.1).
            let _ = stream.finish().await;
            let head = stream.recv_response().await?;
            // A few chunks ahead of the reader, as a socket buffer would
            // be: the server's window closes behind an unread body.
            let (tx, rx) = tokio::sync::mpsc::channel(4);
            tokio::spawn(async move {
                loop {
                    let next = match stream.recv_data().await {
                        Ok(Some(mut chunk)) => Ok(chunk.copy_to_bytes(chunk.remaining())),
                        Ok(None) => break,
                        Err(e) => Err(e.to_string()),
                    };
                    let failed = next.is_err();
                    if tx.send(next).await.is_err() || failed {
                        break;
                    }
                }
            });
            Ok::<_, Error>((head, rx))
        };
        let (head, rx) = self
            .rt
            .block_on(async { tokio::time::timeout(TIMEOUT, exchange).await })
            .map_err(|_| "no response head in time")??;
        let (parts, ()) = head.into_parts();
        let body = Body {
            rt: self.rt.handle().clone(),
            rx,
            buf: Bytes::new(),
        };
        Ok(super::Response {
            status: parts.status,
            headers: parts.headers,
            version: parts.version,
            body: Box::new(body),
        })
    }
}

impl Drop for H3Client {
    fn drop(&mut self) {
        // CONNECTION_CLOSE, so the daemon does not keep the connection
        // until its idle timeout.
        self.endpoint.close(0u32.into(), b"done");
        let idle = self.endpoint.wait_idle();
        let _ = self
            .rt
            .block_on(async { tokio::time::timeout(Duration::from_millis(200), idle).await });
    }
}

/// A response body as it arrives; an error when the stream was reset.
struct Body {
    rt: tokio::runtime::Handle,
    rx: tokio::sync::mpsc::Receiver<Result<Bytes, String>>,
    buf: Bytes,
}

impl Read for Body {
    fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
        while self.buf.is_empty() {
            let next = self
                .rt
                .block_on(async { tokio::time::timeout(TIMEOUT, self.rx.recv()).await });
            match next {
                Ok(Some(Ok(b))) => self.buf = b,
                Ok(Some(Err(e))) => return Err(std::io::Error::other(e)),
                Ok(None) => return Ok(0),
                Err(_) => return Err(std::io::Error::other("no body bytes in time")),
            }
        }
        let n = out.len().min(self.buf.len());
        out[..n].copy_from_slice(&self.buf[..n]);
        self.buf.advance(n);
        Ok(n)
    }
}
