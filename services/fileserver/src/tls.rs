//! The HTTPS listener's TLS: the certificate and key (read and checked
//! against each other at start and at each SIGHUP), the rustls server
//! configuration, the handshake with its deadline, and what the start line
//! and `/metrics` say about kernel offload. It knows nothing of the
//! connection after the handshake, which belongs to `hyperconn`.
//!
//! ```text
//! accept -> timeout(tls_handshake_timeout, rustls handshake) -> ALPN h2 | http/1.1
//!             | garbage, stall, bad version: counted, closed; no one else waits
//!             v
//!           hyperconn::serve_tls (servedir's Service, counted and logged)
//! ```
//!
//! The provider is `ring`: it builds with a C compiler alone, where
//! `aws-lc-rs` wants cmake as well, and on x86-64 both run BoringSSL-derived
//! assembly for AES-GCM and ChaCha20-Poly1305. What `ring` lacks is the
//! post-quantum hybrid key exchange (X25519MLKEM768); clients then agree on
//! X25519.

use crate::config::TlsSettings;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::ServerConfig;
use std::net::SocketAddr;
use std::sync::{Arc, RwLock};
use std::time::Duration;
use tokio::net::TcpStream;
use tokio_rustls::server::TlsStream;

/// The certificate in force; a reload swaps it for new handshakes while
/// connections already established keep theirs.
#[derive(Debug)]
pub struct Certs {
    config: RwLock<Arc<ServerConfig>>,
}

impl Certs {
    /// Reads and checks `s.cert` and `s.key`.
    pub fn load(s: &TlsSettings) -> Result<Certs, String> {
        Ok(Certs {
            config: RwLock::new(load_pair(s)?),
        })
    }

    /// Takes a pair [`load_pair`] checked for the next handshakes.
    pub fn replace(&self, pair: Arc<ServerConfig>) {
        *self.config.write().unwrap_or_else(|e| e.into_inner()) = pair;
    }

    fn current(&self) -> Arc<ServerConfig> {
        self.config
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}

/// A rustls configuration for the pair in `s`: TLS 1.2 and 1.3, ALPN `h2`
/// then `http/1.1`, no client certificates. The error names the key and
/// file at fault: unreadable, no certificate, no key, or a key that is not
/// the certificate's.
pub fn load_pair(s: &TlsSettings) -> Result<Arc<ServerConfig>, String> {
    let read = |key: &str, path: &std::path::Path| {
        std::fs::read(path).map_err(|e| format!("{key}: cannot read {}: {e}", path.display()))
    };
    let cert_pem = read("tls_cert", &s.cert)?;
    let key_pem = read("tls_key", &s.key)?;
    let chain = CertificateDer::pem_slice_iter(&cert_pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("tls_cert: {}: {e}", s.cert.display()))?;
    if chain.is_empty() {
        return Err(format!(
            "tls_cert: {} holds no PEM certificate",
            s.cert.display()
        ));
    }
    let key = PrivateKeyDer::from_pem_slice(&key_pem).map_err(|e| {
        format!(
            "tls_key: {} holds no usable PEM private key: {e}",
            s.key.display()
        )
    })?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])
        .map_err(|e| format!("tls: {e}"))?
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .map_err(|e| match e {
            rustls::Error::InconsistentKeys(_) => format!(
                "tls_key: {} is not the key of the certificate in {}",
                s.key.display(),
                s.cert.display()
            ),
            e => format!("tls_cert/tls_key: {e}"),
        })?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// Why TLS records are sealed in user space, for the start line and the
/// `fileserver_tls_offload_info` metric (one word, so the start line stays
/// `key=value` pairs): kernel TLS (kTLS) would let `sendfile` run under
/// TLS, but it is not wired in (docs/ARCHITECTURE.md says how it would
/// be), and on a kernel without the `tls` ULP it could not be.
pub fn offload_reason() -> &'static str {
    let ulps = std::fs::read_to_string("/proc/sys/net/ipv4/tcp_available_ulp").unwrap_or_default();
    if ulps.split_whitespace().any(|u| u == "tls") {
        "ktls_not_implemented"
    } else {
        "no_tls_ulp_in_kernel"
    }
}

/// Registers the TLS metrics' help texts and the offload gauge.
pub fn describe() {
    metrics::describe_counter!(
        "fileserver_tls_handshakes_total",
        "TLS handshakes on the HTTPS listener by result (ok, error, timeout)."
    );
    metrics::describe_counter!(
        "fileserver_tls_connections_total",
        "HTTPS connections after the handshake, by the protocol ALPN chose (h2, http/1.1)."
    );
    metrics::describe_gauge!(
        "fileserver_tls_offload_info",
        "Always 1 while an HTTPS listener runs; `mode` says where records are sealed \
         (userspace: rustls) and `reason` why not in the kernel."
    );
}

/// Performs the handshake within `timeout` (`tls_handshake_timeout`);
/// `None` when it failed or stalled (counted and logged at debug here).
/// The stream comes back with whether ALPN chose `h2`. A client that
/// stalls or sends garbage costs its own task a timer and a buffer,
/// nothing else.
pub async fn handshake(
    certs: &Certs,
    stream: TcpStream,
    timeout: Duration,
    peer: SocketAddr,
) -> Option<(TlsStream<TcpStream>, bool)> {
    let acceptor = tokio_rustls::TlsAcceptor::from(certs.current());
    let stream = match tokio::time::timeout(timeout, acceptor.accept(stream)).await {
        Ok(Ok(stream)) => stream,
        Ok(Err(e)) => {
            metrics::counter!("fileserver_tls_handshakes_total", "result" => "error").increment(1);
            tracing::debug!(%peer, "TLS handshake failed: {e}");
            return None;
        }
        Err(_) => {
            metrics::counter!("fileserver_tls_handshakes_total", "result" => "timeout")
                .increment(1);
            tracing::debug!(%peer, "TLS handshake timed out");
            return None;
        }
    };
    metrics::counter!("fileserver_tls_handshakes_total", "result" => "ok").increment(1);
    let h2 = stream.get_ref().1.alpn_protocol() == Some(b"h2");
    let alpn = if h2 { "h2" } else { "http/1.1" };
    metrics::counter!("fileserver_tls_connections_total", "alpn" => alpn).increment(1);
    Some((stream, h2))
}
