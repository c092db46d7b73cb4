//! The HTTPS listener's TLS: which certificate a handshake gets (by SNI:
//! one `acme` installed for the name, else the `tls_cert` pair, read and
//! checked against its key at start and at each SIGHUP; a tls-alpn-01
//! handshake gets its challenge certificate), the rustls configurations
//! (TCP, and QUIC's for HTTP/3, sharing that choice; the cipher order,
//! AES-128-GCM first unless the client puts ChaCha20 first), the handshake with
//! its deadline, and what the start line and `/metrics` say about kernel
//! offload. It knows nothing of the connection after the handshake, which
//! belongs to `conn` or `h2conn` (and `h3conn`).
//!
//! ```text
//! accept -> timeout(tls_handshake_timeout, ClientHello -> cipher order -> rustls
//!           handshake) -> ALPN h2 | http/1.1
//!             | garbage, stall, bad version: counted, closed; no one else waits
//!             | ALPN acme-tls/1 (a CA's tls-alpn-01 check): counted, closed
//!             v
//!           server::serve_tls: h2conn (HTTP/2) or conn over wire::Tls (HTTP/1.1)
//! ```
//!
//! The provider is `ring`: it builds with a C compiler alone, where
//! `aws-lc-rs` wants cmake as well, and on x86-64 both run BoringSSL-derived
//! assembly for AES-GCM and ChaCha20-Poly1305. What `ring` lacks is the
//! post-quantum hybrid key exchange (X25519MLKEM768); clients then agree on
//! X25519.

use crate::config::{CertFiles, TlsSettings};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use rustls::ServerConfig;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, RwLock};
use std::time::Duration;
use tokio::net::TcpStream;
use tokio_rustls::server::TlsStream;

/// The ALPN protocol of the tls-alpn-01 challenge (RFC 8737).
pub(crate) const ACME_TLS_ALPN: &[u8] = b"acme-tls/1";

/// Where a tls-alpn-01 handshake's certificate comes from (`acme`'s
/// pending challenges): the certificate for `name`, if one is pending.
pub(crate) trait AlpnChallenges: Send + Sync + std::fmt::Debug {
    /// The challenge certificate for `name`.
    fn certificate(&self, name: &str) -> Option<Arc<CertifiedKey>>;
}

/// The certificates in force, chosen per handshake by the name the client
/// asks for (SNI): one ACME issued for it, else the `tls_cert` pair. A
/// reload or a renewal swaps them for new handshakes while connections
/// already established keep theirs.
#[derive(Debug)]
pub(crate) struct Certs {
    /// The server's cipher order ([`provider`]): most clients.
    config: Arc<ServerConfig>,
    /// The client's order: a client that puts ChaCha20-Poly1305 before
    /// AES-GCM (one without AES instructions) gets what it asked for.
    client_order: Arc<ServerConfig>,
    chosen: Arc<Chooser>,
    /// `tls_ticket_keys`: tickets any replica with the file opens.
    tickets: Option<Arc<crate::tickets::TicketKeys>>,
}

#[derive(Debug)]
struct Chooser {
    manual: RwLock<Option<Arc<CertifiedKey>>>,
    issued: RwLock<HashMap<String, Arc<CertifiedKey>>>,
    challenges: Option<Arc<dyn AlpnChallenges>>,
}

impl ResolvesServerCert for Chooser {
    fn resolve(&self, hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        let name = hello.server_name();
        if let Some(challenges) = &self.challenges {
            // Only a CA validating a name offers acme-tls/1 (RFC 8737 3).
            if hello
                .alpn()
                .is_some_and(|mut protocols| protocols.any(|p| p == ACME_TLS_ALPN))
            {
                return challenges.certificate(name?);
            }
        }
        if let Some(name) = name {
            let issued = self.issued.read().unwrap_or_else(|e| e.into_inner());
            // Names are kept lowercase; DNS names compare without case.
            let found = if name.bytes().any(|b| b.is_ascii_uppercase()) {
                issued.get(&name.to_ascii_lowercase())
            } else {
                issued.get(name)
            };
            if let Some(key) = found {
                return Some(key.clone());
            }
        }
        self.manual
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}

impl Certs {
    /// Reads and checks the `tls_cert` pair of `s`, if any; `challenges`
    /// (with `[acme]`) answers tls-alpn-01 handshakes.
    pub(crate) fn load(
        s: &TlsSettings,
        challenges: Option<Arc<dyn AlpnChallenges>>,
    ) -> Result<Certs, String> {
        let manual = s.manual.as_ref().map(load_pair).transpose()?;
        // `http/1.0` as nginx offers it: `curl --http1.0` asks for it
        // alone, and the HTTP/1.1 engine answers 1.0 requests.
        let mut alpn = vec![b"h2".to_vec(), b"http/1.1".to_vec(), b"http/1.0".to_vec()];
        if challenges.is_some() {
            alpn.push(ACME_TLS_ALPN.to_vec());
        }
        let chosen = Arc::new(Chooser {
            manual: RwLock::new(manual),
            issued: RwLock::new(HashMap::new()),
            challenges,
        });
        let tickets = s
            .ticket_keys
            .as_deref()
            .map(crate::tickets::TicketKeys::load)
            .transpose()?
            .map(Arc::new);
        let mut config = ServerConfig::builder_with_provider(provider())
            .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])
            .map_err(|e| format!("tls: {e}"))?
            .with_no_client_auth()
            .with_cert_resolver(chosen.clone());
        config.alpn_protocols = alpn;
        if let Some(t) = &tickets {
            config.ticketer = t.clone();
        }
        let client_order = Arc::new(config.clone());
        config.ignore_client_order = true;
        Ok(Certs {
            config: Arc::new(config),
            client_order,
            chosen,
            tickets,
        })
    }

    /// The TLS configuration of HTTP/3: TLS 1.3 only (QUIC requires it),
    /// ALPN `h3`, no 0-RTT (a replayed request must not reach the file
    /// layer twice), and the same certificates as the TCP listener, so a
    /// reload or a renewal applies to both.
    pub(crate) fn quic(&self) -> Result<quinn::crypto::rustls::QuicServerConfig, String> {
        let mut config = ServerConfig::builder_with_provider(provider())
            .with_protocol_versions(&[&rustls::version::TLS13])
            .map_err(|e| format!("tls: {e}"))?
            .with_no_client_auth()
            .with_cert_resolver(self.chosen.clone());
        config.alpn_protocols = vec![b"h3".to_vec()];
        config.max_early_data_size = 0;
        if let Some(t) = &self.tickets {
            config.ticketer = t.clone();
        }
        quinn::crypto::rustls::QuicServerConfig::try_from(config).map_err(|e| format!("http3: {e}"))
    }

    /// Takes a `tls_cert` pair [`load_pair`] checked for the next handshakes.
    pub(crate) fn replace(&self, pair: Arc<CertifiedKey>) {
        *self
            .chosen
            .manual
            .write()
            .unwrap_or_else(|e| e.into_inner()) = Some(pair);
    }

    /// Reads `tls_ticket_keys` again (a reload); an error keeps the keys
    /// in force and rejects the reload.
    pub(crate) fn reload_ticket_keys(&self) -> Result<(), String> {
        self.tickets.as_ref().map_or(Ok(()), |t| t.reload())
    }

    /// Reads `tls_ticket_keys` again if the file changed (a rotation by
    /// another host, a mounted Secret updated); errors are logged.
    pub(crate) fn refresh_ticket_keys(&self) {
        if let Some(t) = &self.tickets {
            match t.reload_if_changed() {
                Ok(true) => tracing::info!("tls_ticket_keys: the key file changed; keys reloaded"),
                Ok(false) => {}
                Err(e) => tracing::error!("tls_ticket_keys: keeping the keys in force: {e}"),
            }
        }
    }

    /// Serves `key` for each of `names` from the next handshake on.
    pub(crate) fn install(&self, names: &[String], key: Arc<CertifiedKey>) {
        let mut issued = self
            .chosen
            .issued
            .write()
            .unwrap_or_else(|e| e.into_inner());
        for name in names {
            issued.insert(name.clone(), key.clone());
        }
    }

    /// The configuration for the client that sent `hello`: the server's
    /// cipher order unless the client lists ChaCha20-Poly1305 before any
    /// AES-GCM suite (Go's crypto/tls rule, which Caddy follows: such a
    /// client most likely has no AES instructions).
    fn config_for(&self, hello: &ClientHello<'_>) -> Arc<ServerConfig> {
        let chacha_first = hello
            .cipher_suites()
            .iter()
            .find_map(|&s| match cipher_rank(s) {
                Cipher::Aes128 | Cipher::Aes256 => Some(false),
                Cipher::ChaCha20 => Some(true),
                Cipher::Other => None,
            });
        if chacha_first == Some(true) {
            self.client_order.clone()
        } else {
            self.config.clone()
        }
    }
}

/// The bulk ciphers, in the order the server prefers them.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Cipher {
    Aes128,
    ChaCha20,
    Aes256,
    Other,
}

fn cipher_rank(s: rustls::CipherSuite) -> Cipher {
    use rustls::CipherSuite as S;
    match s {
        S::TLS13_AES_128_GCM_SHA256
        | S::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256
        | S::TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256 => Cipher::Aes128,
        S::TLS13_CHACHA20_POLY1305_SHA256
        | S::TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256
        | S::TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256 => Cipher::ChaCha20,
        S::TLS13_AES_256_GCM_SHA384
        | S::TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384
        | S::TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384 => Cipher::Aes256,
        _ => Cipher::Other,
    }
}

/// `ring`'s suites with AES-128-GCM first, then ChaCha20-Poly1305, then
/// AES-256-GCM (TLS 1.3 before 1.2 within each), the order h2o and Go's
/// crypto/tls use: AES-128 seals a byte for about three quarters of
/// AES-256's work (10 rounds against 14), which a file server pays on
/// every byte it sends. 128-bit keys are what every current TLS profile
/// accepts; a client that offers only AES-256 still gets it.
fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    let mut p = rustls::crypto::ring::default_provider();
    p.cipher_suites.sort_by_key(|s| {
        let tls12 = matches!(s, rustls::SupportedCipherSuite::Tls12(_));
        (cipher_rank(s.suite()), tls12)
    });
    Arc::new(p)
}

/// A certificate chain (leaf first) and its key from PEM text, checked
/// against each other; the error says which part is at fault, naming the
/// files `cert` and `key` (`tls_cert: PATH` when `label`).
pub(crate) fn certified_key(
    cert_pem: &[u8],
    key_pem: &[u8],
    cert: &std::path::Path,
    key: &std::path::Path,
    label: bool,
) -> Result<CertifiedKey, String> {
    let (c, k) = (cert.display(), key.display());
    let (cl, kl) = if label {
        ("tls_cert: ", "tls_key: ")
    } else {
        ("", "")
    };
    let chain = CertificateDer::pem_slice_iter(cert_pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("{cl}{c}: {e}"))?;
    if chain.is_empty() {
        return Err(format!("{cl}{c} holds no PEM certificate"));
    }
    let private = PrivateKeyDer::from_pem_slice(key_pem)
        .map_err(|e| format!("{kl}{k} holds no usable PEM private key: {e}"))?;
    CertifiedKey::from_der(chain, private, &provider()).map_err(|e| match e {
        rustls::Error::InconsistentKeys(_) => {
            format!("{kl}{k} is not the key of the certificate in {c}")
        }
        e => format!("{cl}{c}, {kl}{k}: {e}"),
    })
}

/// The `tls_cert` pair for TLS 1.2 and 1.3 with ALPN `h2` then
/// `http/1.1`. The error names the key and file at fault: unreadable, no
/// certificate, no key, or a key that is not the certificate's.
pub(crate) fn load_pair(files: &CertFiles) -> Result<Arc<CertifiedKey>, String> {
    let read = |key: &str, path: &std::path::Path| {
        std::fs::read(path).map_err(|e| format!("{key}: cannot read {}: {e}", path.display()))
    };
    let cert_pem = read("tls_cert", &files.cert)?;
    let key_pem = read("tls_key", &files.key)?;
    certified_key(&cert_pem, &key_pem, &files.cert, &files.key, true).map(Arc::new)
}

/// Why TLS records are sealed in user space, for the start line and the
/// `fileserver_tls_offload_info` metric (one word, so the start line stays
/// `key=value` pairs): kernel TLS (kTLS) would let `sendfile` run under
/// TLS, but it is not wired in (docs/ARCHITECTURE.md says how it would
/// be), and on a kernel without the `tls` ULP it could not be.
pub(crate) fn offload_reason() -> &'static str {
    let ulps = std::fs::read_to_string("/proc/sys/net/ipv4/tcp_available_ulp").unwrap_or_default();
    if ulps.split_whitespace().any(|u| u == "tls") {
        "ktls_not_implemented"
    } else {
        "no_tls_ulp_in_kernel"
    }
}

/// Registers the TLS metrics' help texts and the offload gauge.
pub(crate) fn describe() {
    metrics::describe_counter!(
        "fileserver_tls_handshakes_total",
        "TLS handshakes on the HTTPS listener by result (ok, error, timeout, acme_challenge)."
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
    // Every series from the start, at 0: a rate() or an alert on errors
    // has a series to read before the first error.
    for result in ["ok", "error", "timeout"] {
        metrics::counter!("fileserver_tls_handshakes_total", "result" => result).absolute(0);
    }
}

/// Performs the handshake within `timeout` (`tls_handshake_timeout`);
/// `None` when it failed or stalled (counted and logged at debug here).
/// The stream comes back with whether ALPN chose `h2`. A client that
/// stalls or sends garbage costs its own task a timer and a buffer,
/// nothing else.
pub(crate) async fn handshake(
    certs: &Certs,
    stream: TcpStream,
    timeout: Duration,
    peer: SocketAddr,
) -> Option<(TlsStream<TcpStream>, bool)> {
    // Every socket a failed or stalled handshake holds is dropped only
    // after its outcome is counted, so a client that sees the close finds
    // it in /metrics: the acceptor (which keeps the socket on error) and
    // the handshake are pinned here rather than moved into the timeout,
    // and the handshake's own failure hands the socket back.
    let mut acceptor = std::pin::pin!(tokio_rustls::LazyConfigAcceptor::new(
        Default::default(),
        stream
    ));
    let accept = async {
        let start = acceptor.as_mut().await.map_err(|e| (e, None))?;
        let config = certs.config_for(&start.client_hello());
        match start.into_stream(config).into_fallible().await {
            Ok(stream) => Ok(stream),
            Err((e, tcp)) => Err((e, Some(tcp))),
        }
    };
    let mut accept = std::pin::pin!(accept);
    let stream = match tokio::time::timeout(timeout, &mut accept).await {
        Ok(Ok(stream)) => stream,
        Ok(Err((e, tcp))) => {
            metrics::counter!("fileserver_tls_handshakes_total", "result" => "error").increment(1);
            tracing::debug!(%peer, "TLS handshake failed: {e}");
            drop(tcp);
            return None;
        }
        Err(_) => {
            metrics::counter!("fileserver_tls_handshakes_total", "result" => "timeout")
                .increment(1);
            tracing::debug!(%peer, "TLS handshake timed out");
            return None;
        }
    };
    if stream.get_ref().1.alpn_protocol() == Some(ACME_TLS_ALPN) {
        // A CA saw the challenge certificate; nothing is served here.
        metrics::counter!("fileserver_tls_handshakes_total", "result" => "acme_challenge")
            .increment(1);
        tracing::info!(%peer, "acme: tls-alpn-01 handshake answered");
        return None;
    }
    metrics::counter!("fileserver_tls_handshakes_total", "result" => "ok").increment(1);
    let (h2, alpn) = match stream.get_ref().1.alpn_protocol() {
        Some(b"h2") => (true, "h2"),
        Some(b"http/1.0") => (false, "http/1.0"),
        _ => (false, "http/1.1"),
    };
    metrics::counter!("fileserver_tls_connections_total", "alpn" => alpn).increment(1);
    Some((stream, h2))
}
