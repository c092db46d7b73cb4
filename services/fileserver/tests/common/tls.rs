//! A test certificate authority and the TLS clients the tests use: a leaf
//! for `localhost` and `127.0.0.1` signed by a CA made for the test run
//! (ECDSA P-256, rcgen), files for `--tls-cert` / `--tls-key`, reqwest
//! clients that trust only that CA, and a blocking rustls client for raw
//! HTTP/1.1 bytes and for reading which certificate the server presents.

use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, KeyPair};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use std::io::Write;
use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// The first certificate of a PEM file.
pub(crate) fn cert_in(path: &std::path::Path) -> CertificateDer<'static> {
    CertificateDer::from_pem_file(path).unwrap()
}

/// A CA, its PEM, and one leaf on disk.
pub(crate) struct TestCa {
    pub dir: tempfile::TempDir,
    pub ca_pem: String,
    ca_params: CertificateParams,
    ca_key: KeyPair,
    /// The leaf's PEM chain and key.
    pub cert: PathBuf,
    pub key: PathBuf,
}

impl TestCa {
    pub(crate) fn new() -> TestCa {
        let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca_params
            .distinguished_name
            .push(DnType::CommonName, "fileserver test CA");
        let ca_key = KeyPair::generate().unwrap();
        let ca_pem = ca_params.clone().self_signed(&ca_key).unwrap().pem();
        let dir = tempfile::tempdir().unwrap();
        let mut ca = TestCa {
            cert: dir.path().join("cert.pem"),
            key: dir.path().join("key.pem"),
            dir,
            ca_pem,
            ca_params,
            ca_key,
        };
        let (cert, key) = ca.leaf("leaf");
        ca.cert = cert;
        ca.key = key;
        ca
    }

    /// Writes a new leaf (`NAME.cert.pem`, `NAME.key.pem`) signed by the CA.
    pub(crate) fn leaf(&self, name: &str) -> (PathBuf, PathBuf) {
        let mut params =
            CertificateParams::new(vec!["localhost".to_string(), "127.0.0.1".to_string()]).unwrap();
        params.distinguished_name.push(DnType::CommonName, name);
        let key = KeyPair::generate().unwrap();
        let issuer = rcgen::Issuer::from_params(&self.ca_params, &self.ca_key);
        let cert = params.signed_by(&key, &issuer).unwrap();
        let cert_path = self.dir.path().join(format!("{name}.cert.pem"));
        let key_path = self.dir.path().join(format!("{name}.key.pem"));
        std::fs::write(&cert_path, cert.pem()).unwrap();
        std::fs::write(&key_path, key.serialize_pem()).unwrap();
        (cert_path, key_path)
    }

    /// Daemon arguments for an HTTPS listener on a free port with the leaf.
    pub(crate) fn args(&self) -> Vec<String> {
        vec![
            "--tls-listen".into(),
            "127.0.0.1:0".into(),
            "--tls-cert".into(),
            self.cert.display().to_string(),
            "--tls-key".into(),
            self.key.display().to_string(),
        ]
    }

    /// The CA's PEM as a file (for curl's `--cacert`, a Python client).
    pub(crate) fn ca_file(&self) -> PathBuf {
        let path = self.dir.path().join("ca.pem");
        std::fs::write(&path, &self.ca_pem).unwrap();
        path
    }

    /// The daemon serving `root` on HTTP and on HTTPS with the leaf, with
    /// a JSON access log on stdout and `extra` arguments; and its HTTPS
    /// address.
    pub(crate) fn https_daemon(
        &self,
        root: &std::path::Path,
        extra: &[&str],
    ) -> (super::Daemon, SocketAddr) {
        let mut args = self.args();
        args.extend(
            ["--access-log", "stdout", "--set", "access_log_format=json"]
                .iter()
                .chain(extra)
                .map(|s| s.to_string()),
        );
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let d = super::Daemon::start(root, &args);
        let https = d.start.https.expect("https= in the start line");
        (d, https)
    }

    /// A reqwest client trusting only this CA, speaking HTTP/2 (ALPN h2
    /// only) or HTTP/1.1; no redirects, compression or proxies.
    pub(crate) fn client(&self, http2: bool) -> reqwest::blocking::Client {
        let b = reqwest::blocking::Client::builder()
            .use_rustls_tls()
            .tls_built_in_root_certs(false)
            .add_root_certificate(reqwest::Certificate::from_pem(self.ca_pem.as_bytes()).unwrap())
            .redirect(reqwest::redirect::Policy::none())
            .no_proxy()
            .timeout(Duration::from_secs(20));
        let b = if http2 {
            b.http2_prior_knowledge()
        } else {
            b.http1_only()
        };
        b.build().unwrap()
    }

    fn client_config(&self, alpn: &[&[u8]]) -> Arc<rustls::ClientConfig> {
        let mut roots = rustls::RootCertStore::empty();
        roots
            .add(CertificateDer::from_pem_slice(self.ca_pem.as_bytes()).unwrap())
            .unwrap();
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth();
        config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
        Arc::new(config)
    }

    /// A TLS connection to `addr` (ALPN `http/1.1`), handshake done.
    pub(crate) fn connect(
        &self,
        addr: SocketAddr,
    ) -> rustls::StreamOwned<rustls::ClientConnection, TcpStream> {
        self.connect_over(TcpStream::connect(addr).unwrap())
    }

    /// An HTTP/1.1 TLS session over `tcp` (after what was already sent on it).
    pub(crate) fn connect_over(
        &self,
        tcp: TcpStream,
    ) -> rustls::StreamOwned<rustls::ClientConnection, TcpStream> {
        let name = ServerName::try_from("localhost").unwrap();
        let conn = rustls::ClientConnection::new(self.client_config(&[b"http/1.1"]), name).unwrap();
        tcp.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let mut s = rustls::StreamOwned::new(conn, tcp);
        while s.conn.is_handshaking() {
            s.conn.complete_io(&mut s.sock).unwrap();
        }
        s
    }

    /// The leaf certificate `addr` presents to a new connection.
    pub(crate) fn served_cert(&self, addr: SocketAddr) -> CertificateDer<'static> {
        let s = self.connect(addr);
        s.conn.peer_certificates().unwrap()[0].clone().into_owned()
    }

    /// Sends raw HTTP/1.1 bytes over TLS and reads until the server closes
    /// (or `timeout`).
    pub(crate) fn raw(&self, addr: SocketAddr, req: &[u8], timeout: Duration) -> Vec<u8> {
        let mut s = self.connect(addr);
        s.sock.set_read_timeout(Some(timeout)).unwrap();
        s.write_all(req).unwrap();
        s.flush().unwrap();
        super::read_until_close(&mut s)
    }
}

/// One HTTP/1.0 request over `openssl s_client`, saving the session to
/// `out` or resuming it from `resume`: whether the handshake was a
/// resumption.
pub(crate) fn s_client(
    addr: SocketAddr,
    ca: &std::path::Path,
    resume: Option<&std::path::Path>,
    out: Option<&std::path::Path>,
) -> bool {
    let mut c = std::process::Command::new("openssl");
    c.args([
        "s_client",
        "-connect",
        &addr.to_string(),
        "-servername",
        "localhost",
    ])
    .arg("-CAfile")
    .arg(ca)
    .args(["-tls1_3", "-ign_eof"]);
    if let Some(p) = resume {
        c.arg("-sess_in").arg(p);
    }
    if let Some(p) = out {
        c.arg("-sess_out").arg(p);
    }
    let mut child = c
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("openssl");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"GET /a.txt HTTP/1.0\r\nHost: localhost\r\n\r\n")
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("HTTP/1.0 200") || text.contains("HTTP/1.1 200"),
        "{text}"
    );
    text.contains("Reused, TLSv1.3")
}
