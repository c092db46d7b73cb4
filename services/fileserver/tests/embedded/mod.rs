//! The servers the HTTP semantics tests run against: the daemon (a child
//! process, `common::Daemon`) in plaintext, or over HTTPS with an HTTP/2
//! or an HTTP/1.1 client, or the `servedir` crate's axum example app (in
//! this process, on its own multi-threaded runtime), each on a free
//! loopback port and configured by the same `--set key=value` arguments.
#![allow(dead_code)]

#[path = "../../../../crates/servedir/examples/axum.rs"]
mod axum_example;

use crate::common::tls::TestCa;
use crate::common::Daemon;
use std::net::SocketAddr;
use std::path::Path;

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
    /// `crates/servedir/examples/axum.rs`, mounted at `/`.
    AxumExample,
}

/// A running server; stopped on drop.
pub(crate) struct Server {
    pub http: SocketAddr,
    tls: Option<(TestCa, bool)>,
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
                    _running: Running::Daemon(Box::new(d)),
                }
            }
            ServerKind::DaemonHttps2 | ServerKind::DaemonHttps1 => {
                let ca = TestCa::new();
                let mut args = ca.args();
                args.extend(extra.iter().map(|a| a.to_string()));
                let args: Vec<&str> = args.iter().map(String::as_str).collect();
                let d = Daemon::start(root, &args);
                Server {
                    http: d.start.https.expect("an https= address in the start line"),
                    tls: Some((ca, kind == ServerKind::DaemonHttps2)),
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
    pub(crate) fn client(&self) -> reqwest::blocking::Client {
        match &self.tls {
            Some((ca, http2)) => ca.client(*http2),
            None => crate::common::client(),
        }
    }

    /// The HTTP version its client speaks.
    pub(crate) fn version(&self) -> reqwest::Version {
        match &self.tls {
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
