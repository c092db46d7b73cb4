//! The servers the HTTP semantics tests run against: the daemon (a child
//! process, `common::Daemon`) in plaintext, or over HTTPS with an HTTP/2
//! or an HTTP/1.1 client, or over HTTP/3, or the `servedir` crate's axum
//! example app (in this process, on its own multi-threaded runtime), each
//! on a free loopback port and configured by the same `--set key=value`
//! arguments; and the client and response every test uses, whichever
//! speaks (reqwest, or [`h3_client`] for HTTP/3).
#![allow(dead_code)]

mod h3_client;

#[path = "../../../../crates/servedir/examples/axum.rs"]
mod axum_example;

use crate::common::tls::TestCa;
use crate::common::Daemon;
use std::io::Read;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;

/// Which server a test runs against.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ServerKind {
    /// The `fileserver` binary.
    Daemon,
    /// The binary's HTTPS listener, the client speaking HTTP/2 (raw
    /// HTTP/1.1 bytes go over TLS with ALPN `http/1.1`).
    DaemonHttps2,
    /// The binary's HTTPS listener, the client speaking HTTP/1.1.
    DaemonHttps1,
    /// The binary's HTTP/3 (QUIC on the HTTPS listener's port), the
    /// client [`h3_client`] (raw HTTP/1.1 bytes go over TLS with ALPN
    /// `http/1.1`, as for the other HTTPS kinds).
    DaemonHttp3,
    /// `crates/servedir/examples/axum.rs`, mounted at `/`.
    AxumExample,
}

/// A running server; stopped on drop.
pub(crate) struct Server {
    pub http: SocketAddr,
    tls: Option<(TestCa, bool)>,
    /// HTTP/3: the connection every client of this server shares.
    h3: Option<std::sync::OnceLock<Arc<h3_client::H3Client>>>,
    _running: Running,
}

enum Running {
    Daemon(Box<Daemon>),
    Embedded(Embedded),
}

/// The example's runtime, shut down without waiting for its connections.
struct Embedded(Option<tokio::runtime::Runtime>);

impl Drop for Embedded {
    fn drop(&mut self) {
        if let Some(rt) = self.0.take() {
            rt.shutdown_background();
        }
    }
}

impl Server {
    /// Starts `kind` serving `root` with `extra` daemon arguments (only
    /// `--set key=value` and `--config FILE` for the example).
    pub(crate) fn start(kind: ServerKind, root: &Path, extra: &[&str]) -> Server {
        match kind {
            ServerKind::Daemon => {
                let d = Daemon::start(root, extra);
                Server {
                    http: d.http,
                    tls: None,
                    h3: None,
                    _running: Running::Daemon(Box::new(d)),
                }
            }
            ServerKind::DaemonHttps2 | ServerKind::DaemonHttps1 | ServerKind::DaemonHttp3 => {
                let ca = TestCa::new();
                let mut args = ca.args();
                let http3 = kind == ServerKind::DaemonHttp3;
                if http3 {
                    args.extend(["--set".into(), "http3.enabled=true".into()]);
                }
                args.extend(extra.iter().map(|a| a.to_string()));
                let args: Vec<&str> = args.iter().map(String::as_str).collect();
                let d = Daemon::start(root, &args);
                Server {
                    http: d.start.https.expect("an https= address in the start line"),
                    tls: Some((ca, kind == ServerKind::DaemonHttps2)),
                    h3: http3.then(std::sync::OnceLock::new),
                    _running: Running::Daemon(Box::new(d)),
                }
            }
            ServerKind::AxumExample => {
                // The daemon's own parser reads the `--set` pairs: one
                // definition of each setting for both servers.
                let mut flags = Vec::new();
                let mut file = None;
                let mut args = extra.iter();
                while let Some(a) = args.next() {
                    let value = args.next().expect("a value after each flag");
                    match *a {
                        "--config" => file = Some(std::path::PathBuf::from(value)),
                        "--set" => {
                            let (k, v) = value.split_once('=').expect("key=value");
                            flags.push((k.to_string(), v.to_string()));
                        }
                        _ => panic!("the example takes only --set and --config: {extra:?}"),
                    }
                }
                let sources = fileserver::config::Sources {
                    file,
                    flags,
                    ..Default::default()
                };
                let (_, settings) = fileserver::config::load(&sources).expect("valid --set pairs");
                let budget = settings
                    .serve
                    .compression
                    .is_some()
                    .then_some(settings.cache.variant_budget);
                let rt = tokio::runtime::Builder::new_multi_thread()
                    .worker_threads(2)
                    .enable_all()
                    .build()
                    .expect("runtime");
                let listener = rt
                    .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
                    .expect("bind");
                let http = listener.local_addr().expect("local addr");
                let app = rt
                    .block_on(async { axum_example::app_at(root, "/", settings.serve, budget) })
                    .expect("the example app");
                rt.spawn(async move {
                    let _ = axum::serve(listener, app).await;
                });
                Server {
                    http,
                    tls: None,
                    h3: None,
                    _running: Running::Embedded(Embedded(Some(rt))),
                }
            }
        }
    }

    /// The daemon's `/metrics` (`None`: the example has no admin listener).
    pub(crate) fn metrics(&self) -> Option<String> {
        match &self._running {
            Running::Daemon(d) => Some(d.metrics()),
            Running::Embedded(_) => None,
        }
    }

    pub(crate) fn url(&self, path: &str) -> String {
        let scheme = if self.tls.is_some() { "https" } else { "http" };
        format!("{scheme}://{}{}", self.http, path)
    }

    /// A client for this server (trusting its test CA, speaking its protocol).
    pub(crate) fn client(&self) -> Client {
        match (&self.tls, &self.h3) {
            (Some((ca, _)), Some(h3)) => Client::H3(
                h3.get_or_init(|| Arc::new(h3_client::H3Client::connect(self.http, &ca.ca_pem)))
                    .clone(),
            ),
            (Some((ca, http2)), None) => Client::Reqwest(ca.client(*http2)),
            (None, _) => Client::Reqwest(crate::common::client()),
        }
    }

    /// The HTTP version its client speaks.
    pub(crate) fn version(&self) -> reqwest::Version {
        match &self.tls {
            _ if self.h3.is_some() => reqwest::Version::HTTP_3,
            Some((_, true)) => reqwest::Version::HTTP_2,
            _ => reqwest::Version::HTTP_11,
        }
    }

    /// Sends raw HTTP/1.1 bytes (over TLS for an HTTPS server) and reads
    /// until the server closes or `timeout`.
    pub(crate) fn raw(&self, req: &[u8], timeout: std::time::Duration) -> Vec<u8> {
        match &self.tls {
            Some((ca, _)) => ca.raw(self.http, req, timeout),
            None => crate::common::raw(self.http, req, timeout),
        }
    }
}

type Error = Box<dyn std::error::Error + Send + Sync>;

/// A client of the suite: reqwest's blocking one, or HTTP/3's.
pub(crate) enum Client {
    Reqwest(reqwest::blocking::Client),
    H3(Arc<h3_client::H3Client>),
}

impl Client {
    pub(crate) fn get(&self, url: impl Into<String>) -> RequestBuilder {
        self.request(http::Method::GET, url)
    }

    pub(crate) fn head(&self, url: impl Into<String>) -> RequestBuilder {
        self.request(http::Method::HEAD, url)
    }

    pub(crate) fn request(&self, method: http::Method, url: impl Into<String>) -> RequestBuilder {
        let url = url.into();
        match self {
            Client::Reqwest(c) => RequestBuilder::Reqwest(c.request(method, url)),
            Client::H3(c) => RequestBuilder::H3 {
                client: c.clone(),
                req: http::Request::builder().method(method).uri(url),
            },
        }
    }
}

/// A request being built, as reqwest's builder builds one.
pub(crate) enum RequestBuilder {
    Reqwest(reqwest::blocking::RequestBuilder),
    H3 {
        client: Arc<h3_client::H3Client>,
        req: http::request::Builder,
    },
}

impl RequestBuilder {
    pub(crate) fn header(self, name: impl AsRef<str>, value: impl AsRef<str>) -> RequestBuilder {
        let (name, value) = (name.as_ref(), value.as_ref());
        match self {
            RequestBuilder::Reqwest(b) => RequestBuilder::Reqwest(b.header(name, value)),
            RequestBuilder::H3 { client, req } => RequestBuilder::H3 {
                client,
                req: req.header(name, value),
            },
        }
    }

    pub(crate) fn send(self) -> Result<Response, Error> {
        match self {
            RequestBuilder::Reqwest(b) => {
                let r = b.send()?;
                Ok(Response {
                    status: r.status(),
                    headers: r.headers().clone(),
                    version: r.version(),
                    body: Box::new(r),
                })
            }
            RequestBuilder::H3 { client, req } => client.send(req.body(())?),
        }
    }
}

/// A response as the tests read it: status, header fields, version, and
/// the body, read as it arrives (`Read`) or whole.
pub(crate) struct Response {
    status: http::StatusCode,
    headers: http::HeaderMap,
    version: http::Version,
    body: Box<dyn Read + Send>,
}

impl Response {
    pub(crate) fn status(&self) -> http::StatusCode {
        self.status
    }

    pub(crate) fn headers(&self) -> &http::HeaderMap {
        &self.headers
    }

    pub(crate) fn version(&self) -> http::Version {
        self.version
    }

    /// The whole body; an error when it ended short.
    pub(crate) fn bytes(mut self) -> Result<Vec<u8>, Error> {
        let mut body = Vec::new();
        self.body.read_to_end(&mut body)?;
        Ok(body)
    }

    pub(crate) fn text(self) -> Result<String, Error> {
        Ok(String::from_utf8(self.bytes()?)?)
    }

    pub(crate) fn json<T: serde::de::DeserializeOwned>(self) -> Result<T, Error> {
        Ok(serde_json::from_slice(&self.bytes()?)?)
    }
}

impl Read for Response {
    fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
        self.body.read(out)
    }
}
