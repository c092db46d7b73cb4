//! The load harness's HTTP/3 load generator: h2load's shape over QUIC.
//!
//! ```text
//! h3load https://127.0.0.1:PORT --connections 16 --streams 10 --duration 3 \
//!        --input-file paths.txt [PATH...] [--header 'name: value'] [--requests N]
//! ```
//!
//! It keeps `--connections` QUIC connections open, each with `--streams`
//! requests in flight, each connection going through the paths in turn
//! (as h2load goes through its `-i` list), reads every response body to
//! its end, and after `--duration` seconds (or `--requests` requests)
//! prints one JSON object, [`H3loadSummary`], on stdout: requests by
//! status class, errors, body bytes, latency percentiles.
//!
//! Why its own: oha sends one request at a time per connection, so each
//! HTTP/3 request paid its own packets both ways where h2load multiplexes
//! HTTP/2, and oha's client stalled against Caddy; h2load here has no
//! QUIC. Built on quinn, h3 and h3-quinn (rustls with ring), it runs
//! against the daemon's quinn and Caddy's quic-go alike.
//!
//! One thread (a current-thread tokio runtime), as the harness runs wrk
//! and h2load with `-t1`, so the client's CPU share is the same for every
//! server. One UDP socket per connection, so the kernel spreads the
//! connections over a server's `SO_REUSEPORT` sockets as it spreads TCP
//! connections. The server's certificate is not checked against any root
//! (the harness's checks verify the chain before the load); the TLS 1.3
//! handshake signature still is. A connection that ends while the load
//! runs is counted and replaced.

use std::cell::Cell;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, ToSocketAddrs};
use std::path::PathBuf;
use std::process::ExitCode;
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{ensure, Context, Result};
use bytes::{Buf, Bytes};
use clap::Parser;
use http::header::{HeaderMap, HeaderName, HeaderValue};
use http::Uri;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, SignatureScheme};

use benches::loadtest::loadgen::{H3loadErrors, H3loadSummary, StatusClasses};

/// Drive an HTTP/3 server with many concurrent requests per connection and
/// print one JSON summary.
#[derive(Debug, Parser)]
#[command(version, about)]
struct Args {
    /// The server, `https://HOST:PORT`.
    target: String,
    /// Paths to request in turn, after those of --input-file.
    paths: Vec<String>,
    /// A file of paths to request in turn, one a line.
    #[arg(short = 'i', long, value_name = "FILE")]
    input_file: Option<PathBuf>,
    /// Connections open at once.
    #[arg(short = 'c', long, default_value_t = 1)]
    connections: usize,
    /// Requests in flight on each connection.
    #[arg(short = 'm', long, default_value_t = 1)]
    streams: usize,
    /// Seconds the load runs.
    #[arg(short = 'D', long, value_name = "SECS")]
    duration: f64,
    /// Stop after this many requests, if the duration has not run out first.
    #[arg(short = 'n', long)]
    requests: Option<u64>,
    /// A header on every request, `name: value` (repeatable).
    #[arg(short = 'H', long = "header", value_name = "NAME:VALUE")]
    headers: Vec<String>,
    /// Seconds a request (or a connection's handshake) may take before it
    /// counts as timed out.
    #[arg(long, value_name = "SECS", default_value_t = 10.0)]
    timeout: f64,
}

fn main() -> ExitCode {
    let args = Args::parse();
    match run(&args).and_then(|summary| Ok(serde_json::to_string(&summary)?)) {
        Ok(json) => {
            println!("{json}");
            ExitCode::SUCCESS
        }
        Err(err) => {
            eprintln!("h3load: {err:#}");
            ExitCode::FAILURE
        }
    }
}

fn run(args: &Args) -> Result<H3loadSummary> {
    let load = Load::from_args(args)?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("start the tokio runtime")?;
    // Rc and Cell for what the tasks share: they all run on this thread.
    let tasks = tokio::task::LocalSet::new();
    let (tally, elapsed) = tasks.block_on(&runtime, drive(Rc::new(load), args.connections))?;
    Ok(tally.summary(elapsed, args.connections, args.streams))
}

/// What every connection of a run shares.
struct Load {
    addr: SocketAddr,
    /// The TLS server name (no SNI is sent for an IP address).
    server_name: String,
    tls: quinn::ClientConfig,
    /// One URI per path, with the target's scheme and authority.
    uris: Vec<Uri>,
    headers: HeaderMap,
    streams: usize,
    timeout: Duration,
    duration: Duration,
    /// When the load stops: set when it starts.
    deadline: Cell<Instant>,
    /// The request cap, and the requests started so far.
    cap: Option<u64>,
    started: Cell<u64>,
}

impl Load {
    fn from_args(args: &Args) -> Result<Self> {
        ensure!(args.connections > 0, "--connections must be at least 1");
        ensure!(args.streams > 0, "--streams must be at least 1");
        let duration = seconds("--duration", args.duration)?;
        let timeout = seconds("--timeout", args.timeout)?;
        let target: Uri = args.target.parse().context("target is not a URL")?;
        ensure!(
            target.scheme_str() == Some("https"),
            "target must be https://HOST:PORT, not {}",
            args.target
        );
        ensure!(
            matches!(target.path(), "" | "/") && target.query().is_none(),
            "target takes no path (give paths as arguments or with --input-file): {}",
            args.target
        );
        let authority = target.authority().context("target has no host")?.clone();
        let port = authority.port_u16().unwrap_or(443);
        let host = authority
            .host()
            .trim_start_matches('[')
            .trim_end_matches(']');
        let addr = (host, port)
            .to_socket_addrs()
            .with_context(|| format!("resolve {authority}"))?
            .next()
            .with_context(|| format!("{authority} resolves to no address"))?;

        let mut paths = Vec::new();
        if let Some(file) = &args.input_file {
            let text = std::fs::read_to_string(file)
                .with_context(|| format!("read {}", file.display()))?;
            paths.extend(
                text.lines()
                    .map(str::trim)
                    .filter(|l| !l.is_empty())
                    .map(String::from),
            );
        }
        paths.extend(args.paths.iter().cloned());
        if paths.is_empty() {
            paths.push("/".to_string());
        }
        let uris = paths
            .iter()
            .map(|path| {
                ensure!(path.starts_with('/'), "a path starts with '/': {path:?}");
                format!("https://{authority}{path}")
                    .parse()
                    .with_context(|| format!("bad path {path:?}"))
            })
            .collect::<Result<Vec<Uri>>>()?;

        let mut headers = HeaderMap::new();
        for header in &args.headers {
            let (name, value) = header
                .split_once(':')
                .with_context(|| format!("a header is NAME:VALUE, not {header:?}"))?;
            headers.append(
                HeaderName::from_bytes(name.trim().to_ascii_lowercase().as_bytes())
                    .with_context(|| format!("bad header name in {header:?}"))?,
                HeaderValue::from_str(value.trim())
                    .with_context(|| format!("bad header value in {header:?}"))?,
            );
        }

        Ok(Load {
            addr,
            server_name: host.to_string(),
            tls: client_config()?,
            uris,
            headers,
            streams: args.streams,
            timeout,
            duration,
            deadline: Cell::new(Instant::now()),
            cap: args.requests,
            started: Cell::new(0),
        })
    }

    /// Whether the load still runs.
    fn running(&self) -> bool {
        Instant::now() < self.deadline.get() && self.cap.is_none_or(|cap| self.started.get() < cap)
    }

    /// When something begun at `start` times out, or the load's end if
    /// that comes first.
    fn give_up(&self, start: Instant) -> tokio::time::Instant {
        (start + self.timeout).min(self.deadline.get()).into()
    }

    /// Claims the next request, if the load still runs.
    fn start_request(&self) -> bool {
        let go = self.running();
        if go {
            self.started.set(self.started.get() + 1);
        }
        go
    }
}

/// A positive, finite number of seconds.
fn seconds(option: &str, value: f64) -> Result<Duration> {
    ensure!(
        value.is_finite() && value > 0.0,
        "{option} must be a positive number of seconds, not {value}"
    );
    Ok(Duration::from_secs_f64(value))
}

/// TLS 1.3, ALPN h3, ring, no root to check the certificate against.
fn client_config() -> Result<quinn::ClientConfig> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut tls = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(&[&rustls::version::TLS13])?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(AnyCertificate(provider)))
        .with_no_client_auth();
    tls.alpn_protocols = vec![b"h3".to_vec()];
    let crypto = quinn::crypto::rustls::QuicClientConfig::try_from(tls)?;
    Ok(quinn::ClientConfig::new(Arc::new(crypto)))
}

/// Takes any certificate, as h2load and oha with `--insecure` do, but
/// checks the handshake's signature with it (the server does the work a
/// real client makes it do).
#[derive(Debug)]
struct AnyCertificate(Arc<rustls::crypto::CryptoProvider>);

impl ServerCertVerifier for AnyCertificate {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> std::result::Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        _message: &[u8],
        _cert: &CertificateDer<'_>,
        _dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        // QUIC is TLS 1.3 only.
        Err(rustls::Error::General("TLS 1.2 over QUIC".into()))
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// Runs `connections` connections until the load stops: their tallies
/// summed, and the time from the first connection attempt to the end.
async fn drive(load: Rc<Load>, connections: usize) -> Result<(Tally, Duration)> {
    let start = Instant::now();
    load.deadline.set(start + load.duration);
    let mut slots = tokio::task::JoinSet::new();
    for _ in 0..connections {
        let endpoint = quinn::Endpoint::client(match load.addr {
            SocketAddr::V4(_) => (Ipv4Addr::UNSPECIFIED, 0).into(),
            SocketAddr::V6(_) => (Ipv6Addr::UNSPECIFIED, 0).into(),
        })
        .context("open a UDP socket")?;
        slots.spawn_local(connection_slot(load.clone(), endpoint));
    }
    let mut tally = Tally::default();
    let mut endpoints = Vec::with_capacity(connections);
    while let Some(joined) = slots.join_next().await {
        let (slot_tally, endpoint) = joined.context("a connection's task failed")?;
        tally.add(slot_tally);
        endpoints.push(endpoint);
    }
    let elapsed = start.elapsed();
    // The connections are closed; let the CONNECTION_CLOSE frames out, so
    // the server does not keep them until its idle timeout.
    let mut closing = tokio::task::JoinSet::new();
    for endpoint in endpoints {
        closing.spawn_local(async move { endpoint.wait_idle().await });
    }
    let _ = tokio::time::timeout(CLOSE_GRACE, closing.join_all()).await;
    Ok((tally, elapsed))
}

/// How long the end waits for the connections' closes to go out.
const CLOSE_GRACE: Duration = Duration::from_millis(200);

/// How long a connection slot waits after a failed connection attempt
/// before the next, so a server that refuses does not make it spin.
const RECONNECT_PAUSE: Duration = Duration::from_millis(50);

type SendRequest = h3::client::SendRequest<h3_quinn::OpenStreams, Bytes>;

/// One connection of the run on its own endpoint: connects, keeps
/// `load.streams` requests in flight on it, and opens a new connection
/// when it ends before the load does.
async fn connection_slot(load: Rc<Load>, endpoint: quinn::Endpoint) -> (Tally, quinn::Endpoint) {
    let mut tally = Tally::default();
    // Where this connection is in the paths, kept across reconnections.
    let next_path = Rc::new(Cell::new(0usize));
    while load.running() {
        let (quic, send, mut driver) = match connect(&load, &endpoint).await {
            Ok(connected) => connected,
            // Cut short by the load's end: not an error.
            Err(_) if !load.running() => break,
            Err(err) => {
                tally.errors.connect += 1;
                if tally.errors.connect == 1 {
                    eprintln!("h3load: connecting to {}: {err:#}", load.addr);
                }
                tokio::time::sleep(RECONNECT_PAUSE).await;
                continue;
            }
        };
        // h3 reads the server's control stream (SETTINGS, GOAWAY) only
        // while this is polled.
        let control = tokio::task::spawn_local(async move {
            std::future::poll_fn(|cx| driver.poll_close(cx)).await
        });
        let mut streams = tokio::task::JoinSet::new();
        for _ in 0..load.streams {
            streams.spawn_local(request_loop(
                load.clone(),
                send.clone(),
                quic.clone(),
                next_path.clone(),
            ));
        }
        drop(send);
        while let Some(joined) = streams.join_next().await {
            match joined {
                Ok(stream_tally) => tally.add(stream_tally),
                // A bug: no summary rather than one short of its counts.
                Err(err) => std::panic::resume_unwind(err.into_panic()),
            }
        }
        if load.running() {
            tally.errors.connection += 1;
            if tally.errors.connection == 1 {
                let why = quic.close_reason().map_or_else(
                    || "no more requests accepted".to_string(),
                    |reason| reason.to_string(),
                );
                eprintln!("h3load: a connection to {} ended: {why}", load.addr);
            }
        }
        quic.close(0u32.into(), b"done");
        control.abort();
    }
    (tally, endpoint)
}

/// A QUIC connection with HTTP/3 set up on it, within the timeout and
/// before the load's end.
async fn connect(
    load: &Load,
    endpoint: &quinn::Endpoint,
) -> Result<(
    quinn::Connection,
    SendRequest,
    h3::client::Connection<h3_quinn::Connection, Bytes>,
)> {
    let give_up = load.give_up(Instant::now());
    let connecting = endpoint.connect_with(load.tls.clone(), load.addr, &load.server_name)?;
    let quic = tokio::time::timeout_at(give_up, connecting)
        .await
        .context("QUIC handshake timed out")?
        .context("QUIC handshake")?;
    let (driver, send) = tokio::time::timeout_at(
        give_up,
        h3::client::new(h3_quinn::Connection::new(quic.clone())),
    )
    .await
    .context("HTTP/3 setup timed out")?
    .context("HTTP/3 setup")?;
    Ok((quic, send, driver))
}

/// One stream's worth of requests: one at a time, back to back, until the
/// load stops or the connection takes no more.
async fn request_loop(
    load: Rc<Load>,
    mut send: SendRequest,
    quic: quinn::Connection,
    next_path: Rc<Cell<usize>>,
) -> Tally {
    let mut tally = Tally::default();
    while load.start_request() {
        let i = next_path.get();
        next_path.set(i + 1);
        let mut request = http::Request::get(load.uris[i % load.uris.len()].clone())
            .body(())
            .expect("a GET of a parsed URI");
        *request.headers_mut() = load.headers.clone();
        let started = Instant::now();
        let give_up = load.give_up(started);
        match tokio::time::timeout_at(give_up, exchange(&mut send, request)).await {
            Ok(Ok((status, body_bytes))) => tally.response(status, body_bytes, started.elapsed()),
            // Refused before it was sent: the connection takes no more.
            Ok(Err(Failure::NotSent)) => return tally,
            Ok(Err(Failure::Stream)) => {
                tally.errors.stream += 1;
                if quic.close_reason().is_some() {
                    return tally;
                }
            }
            // Still in flight when the time ran out: not counted.
            Err(_) if Instant::now() >= load.deadline.get() => return tally,
            Err(_) => tally.errors.timeout += 1,
        }
    }
    tally
}

/// Why a request got no whole response.
enum Failure {
    /// The connection would not open a stream for it (closed, or going away).
    NotSent,
    /// Its stream failed: reset, a malformed response, the connection lost.
    Stream,
}

/// Sends `request` and reads the response to its end: its status and the
/// length of its body.
async fn exchange(
    send: &mut SendRequest,
    request: http::Request<()>,
) -> std::result::Result<(http::StatusCode, u64), Failure> {
    let mut stream = send
        .send_request(request)
        .await
        .map_err(|_| Failure::NotSent)?;
    // The daemon asks for no more of a request once its head is in
    // (STOP_SENDING H3_NO_ERROR): the FIN may find the stream stopped,
    // and the response still comes (RFC 9114 4.1).
    let _ = stream.finish().await;
    let head = stream.recv_response().await.map_err(|_| Failure::Stream)?;
    let mut body_bytes = 0u64;
    while let Some(mut chunk) = stream.recv_data().await.map_err(|_| Failure::Stream)? {
        let n = chunk.remaining();
        body_bytes += n as u64;
        chunk.advance(n);
    }
    Ok((head.status(), body_bytes))
}

/// Counts of one request loop, a connection, or the run.
#[derive(Debug, Default)]
struct Tally {
    status: StatusClasses,
    errors: H3loadErrors,
    body_bytes: u64,
    /// Each response's time from its request to its body's end, in µs.
    latencies_us: Vec<u32>,
}

impl Tally {
    fn response(&mut self, status: http::StatusCode, body_bytes: u64, took: Duration) {
        let class = match status.as_u16() / 100 {
            2 => &mut self.status.success,
            3 => &mut self.status.redirection,
            4 => &mut self.status.client_error,
            5 => &mut self.status.server_error,
            // h3 hands over final responses only.
            _ => {
                self.errors.stream += 1;
                return;
            }
        };
        *class += 1;
        self.body_bytes += body_bytes;
        self.latencies_us
            .push(u32::try_from(took.as_micros()).unwrap_or(u32::MAX));
    }

    fn add(&mut self, other: Tally) {
        self.status.success += other.status.success;
        self.status.redirection += other.status.redirection;
        self.status.client_error += other.status.client_error;
        self.status.server_error += other.status.server_error;
        self.errors.connect += other.errors.connect;
        self.errors.connection += other.errors.connection;
        self.errors.stream += other.errors.stream;
        self.errors.timeout += other.errors.timeout;
        self.body_bytes += other.body_bytes;
        self.latencies_us.extend(other.latencies_us);
    }

    fn summary(mut self, elapsed: Duration, connections: usize, streams: usize) -> H3loadSummary {
        self.latencies_us.sort_unstable();
        let percentile = |p: usize| -> u64 {
            // Nearest rank.
            let n = self.latencies_us.len();
            match n {
                0 => 0,
                _ => self.latencies_us[(n * p).div_ceil(100).max(1) - 1].into(),
            }
        };
        H3loadSummary {
            duration_us: u64::try_from(elapsed.as_micros()).unwrap_or(u64::MAX),
            connections,
            streams,
            requests: self.latencies_us.len() as u64,
            status: self.status,
            errors: self.errors,
            body_bytes: self.body_bytes,
            p50_us: percentile(50),
            p99_us: percentile(99),
            max_us: self.latencies_us.last().copied().unwrap_or(0).into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(extra: &[&str]) -> Args {
        let mut argv = vec!["h3load", "https://127.0.0.1:8443", "--duration", "1"];
        argv.extend(extra);
        Args::parse_from(argv)
    }

    #[test]
    fn paths_become_uris_on_the_target_and_headers_are_parsed() {
        let load =
            Load::from_args(&args(&["/a.bin", "/b/c.bin", "-H", "Accept-Encoding: br"])).unwrap();
        assert_eq!(load.addr, "127.0.0.1:8443".parse().unwrap());
        assert_eq!(load.server_name, "127.0.0.1");
        let uris: Vec<String> = load.uris.iter().map(Uri::to_string).collect();
        assert_eq!(
            uris,
            [
                "https://127.0.0.1:8443/a.bin",
                "https://127.0.0.1:8443/b/c.bin"
            ]
        );
        assert_eq!(load.headers["accept-encoding"], "br");
        let root = Load::from_args(&args(&[])).unwrap();
        assert_eq!(root.uris[0].to_string(), "https://127.0.0.1:8443/");
    }

    #[test]
    fn bad_arguments_are_refused() {
        for bad in [
            &["no-slash"][..],
            &["--streams", "0"],
            &["--connections", "0"],
            &["-H", "no colon"],
            &["--timeout", "0"],
        ] {
            assert!(Load::from_args(&args(bad)).is_err(), "{bad:?}");
        }
        let http = Args::parse_from(["h3load", "http://127.0.0.1:80", "--duration", "1"]);
        assert!(Load::from_args(&http).is_err());
        let with_path = Args::parse_from(["h3load", "https://127.0.0.1:1/x", "--duration", "1"]);
        assert!(Load::from_args(&with_path).is_err());
    }

    #[test]
    fn the_summary_counts_classes_bytes_and_nearest_rank_percentiles() {
        let mut tally = Tally::default();
        for ms in 1..=100 {
            tally.response(http::StatusCode::OK, 1024, Duration::from_millis(ms));
        }
        let mut other = Tally::default();
        other.response(http::StatusCode::NOT_FOUND, 10, Duration::from_millis(200));
        other.errors.stream = 2;
        tally.add(other);
        let s = tally.summary(Duration::from_secs(2), 4, 10);
        assert_eq!(
            (s.requests, s.status.success, s.status.client_error),
            (101, 100, 1)
        );
        assert_eq!(s.body_bytes, 100 * 1024 + 10);
        assert_eq!((s.p50_us, s.p99_us, s.max_us), (51_000, 100_000, 200_000));
        assert_eq!((s.errors.stream, s.duration_us), (2, 2_000_000));
        assert_eq!((s.connections, s.streams), (4, 10));
    }
}
